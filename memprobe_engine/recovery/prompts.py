"""Prompt builders for every role in protocol A, written for this project.

Each function returns the chat messages for one call. What each role sees, and the rules it is
given, follow the recovery paper's released runner (its prompts are the reference for content;
the wording here is our own — see docs/protocol-a.md for the parameter-by-parameter comparison):

* the assistant sees its memory block, the current task and its dialogue, never the hidden bank;
* the simulator sees the whole persona and the whole bank with every explanation, and the task —
  but not which dimension the task targets;
* the slot-filler sees the memory, the category with its boundary guide and the dimension name —
  never the explanation or an example answer;
* the judge sees the dimension's explanation, the true value and the prediction, never the memory;
* the attribution stages see the target (short and full) with the task (stage 0) or the task's
  transcript (stages 1 and 2).

Layout: every prompt puts what is fixed first (system prompt, persona, bank, store) and what
varies last, so a llama.cpp server can reuse its prompt cache across calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from memprobe_engine.llm.types import ChatMessage
from memprobe_engine.recovery.input_rules import Category
from memprobe_engine.recovery.inputs import BankEntry, SimUser

Turn = tuple[str, str]  # (speaker "user"|"assistant", text)

# ----------------------------------------------------------------------------------- assistant

AGENT_SYSTEM = (
    "You are a personalised AI assistant in an ongoing conversation with one particular user. "
    "Aim to fit your replies to this person.\n\n{memory}Answer the user's message directly and concisely."
)
MEMORY_FRAME = "=== What your memory returned about this user ===\n{lines}\n=== end of memory ===\n\n"


def agent_messages(memory_block: str, history: Sequence[Turn],
                   prior_dialogue: Sequence[Turn] = ()) -> list[ChatMessage]:
    """The assistant scaffold, the same for every memory system: system prompt with the memory
    block (left out when the memory returned nothing), then ``prior_dialogue`` (earlier tasks
    replayed verbatim, for systems whose memory *is* the transcript), then the current task's
    dialogue."""
    memory = MEMORY_FRAME.format(lines=memory_block) if memory_block.strip() else ""
    messages = [ChatMessage(role="system", content=AGENT_SYSTEM.format(memory=memory))]
    messages += [ChatMessage(role=speaker, content=text) for speaker, text in (*prior_dialogue, *history)]
    return messages


# ----------------------------------------------------------------------------------- simulator

#: The release's seven reaction labels; only ``satisfied`` ends an episode.
FEEDBACK_TYPES: tuple[str, ...] = ("correction", "add_context", "too_deep", "too_shallow", "followup",
                                   "expose_gap", "satisfied")

SIMULATOR_SYSTEM = """\
You play one particular real person talking to an AI assistant. Answer exactly as this person \
would, not as an ideal, polite test user.

1. BE THE PERSON. Study the profile and the memory bank below. Before you write, work out how this \
person really talks (formal or casual, wordy or brief, which languages they mix), which moods their \
past events and self-image give them, and what would annoy, please or confuse them given what they \
can and cannot do. Use their speech habits and cultural background.
Rules against sounding like a machine: do not open every turn by thanking the assistant; vary your \
sentence shapes from turn to turn; fragments, hedges and run-on sentences are fine when the person \
talks that way; do not be positive all the time — show impatience, confusion, irritation or real \
pleasure when the moment calls for it; let vocabulary, references and indirectness show who they are.
Telling your own stories: when the assistant's situation closely matches a specific event in your \
episodic memory, bring it up briefly and unprompted, the way people do ("something like this \
happened to me when ..."), in your own voice, never as a copy of the entry, and only when it truly fits.

2. NAME YOUR REACTION with exactly one feedback_type:
- correction: the assistant stated a checkable fact that your knowledge says is wrong
- add_context: the assistant is off track because it lacks something about you; supply it (not for \
preferences it already knows)
- too_deep: the content is beyond your skills or knowledge
- too_shallow: the content is far below your level, obvious or condescending
- followup: the direction is right and you want more depth or a related sub-question
- expose_gap: the reply touches something you do not understand
- satisfied: you HAVE the concrete result you asked for, it meets your standards, and nothing is \
left worth following up

3. WHEN THE ASSISTANT IS WAITING ON YOU. If your request mentioned material the assistant needs (a \
draft, a message, a letter, an error text, a photo, a file, a price, a date) and it asks for it, \
invent a short version that fits you and give it in your reply (add_context). Do not answer "go \
ahead" or "ok" while it is blocked on you.

4. THE BAR FOR satisfied IS HIGH. Use it only when all three hold: the assistant actually \
delivered the thing itself (not a promise, not an offer "if you paste X", not an outline of what it \
will do); it meets your standards of correctness, detail and tone; and nothing in your profile \
calls for a follow-up, caveat or refinement. Otherwise pick one of the other six types. Being \
satisfied on the first turn is rare: real help conversations take two to five turns.

Reply with one JSON object only, no markdown and no other keys:
{"feedback_type": "<one of the seven types>", "text": "<what this person says next>"}"""


def persona_block(user: SimUser) -> str:
    """The simulator's picture of the user: the full profile (every field, including the free-form
    extras such as interests and coping style) and the full bank with every explanation."""
    profile = user.profile.model_dump(mode="json", exclude={"extra"})
    profile.update(user.profile.extra)
    bank: dict[str, list[dict[str, Any]]] = {}
    for entry in user.bank.entries:
        bank.setdefault(entry.category.value, []).append(
            {"dimension": entry.dimension, "short": entry.short, "explanation": entry.explanation})
    return orjson.dumps({"base_profile": profile, "memory_bank": bank}, option=orjson.OPT_INDENT_2).decode()


def _exchanges(history: Sequence[Turn]) -> list[tuple[str, str]]:
    """(assistant reply, user answer) pairs after the task opening; an unanswered reply ends it."""
    body = list(history[1:]) if history and history[0][0] == "user" else list(history)
    pairs: list[tuple[str, str]] = []
    for index in range(0, len(body), 2):
        reply = body[index][1] if body[index][0] == "assistant" else ""
        answer = body[index + 1][1] if index + 1 < len(body) else ""
        pairs.append((reply, answer))
    return pairs


def simulator_messages(user: SimUser, task_text: str, history: Sequence[Turn]) -> list[ChatMessage]:
    """The persona-conditioned simulator after the assistant's latest reply (the last turn of
    ``history``): profile and bank, the task, the earlier exchanges, the user's last few answers
    (so it does not repeat itself), then the reply to react to."""
    pairs = _exchanges(history)
    latest = pairs[-1][0] if pairs else ""
    earlier = pairs[:-1]
    conversation = "\n".join(f"Assistant: {a}\nYou: {u}" for a, u in earlier) or "(nothing yet)"
    recent = [u for _, u in earlier[-3:]]
    repeat_note = ("Your last replies, for reference (do not reuse their opening or sentence shape):\n"
                   + "\n".join(f"  - {u}" for u in recent) + "\n\n") if recent else ""
    body = (f"YOUR PROFILE AND MEMORY BANK\n{persona_block(user)}\n\n"
            f"THE REQUEST YOU OPENED WITH\n{task_text}\n\n"
            f"CONVERSATION SO FAR\n{conversation}\n\n{repeat_note}"
            f"TURN {len(pairs)}: THE ASSISTANT JUST SAID\n{latest}\n\nReply as this person.")
    return [ChatMessage(role="system", content=SIMULATOR_SYSTEM), ChatMessage(role="user", content=body)]


# ----------------------------------------------------------------------------------- preference judge

PREFERENCE_SYSTEM = """\
You judge how well one reply of an AI assistant fits a particular user's interaction preferences.
For every numbered preference give a score from 1 to 5, or null when it does not apply:
5 = clearly and actively honours the preference, with concrete evidence in the reply
4 = mostly honours it, with small gaps
3 = the preference is touched but the evidence is mixed, partial or weak
2 = partly goes against the preference
1 = clearly and substantially violates it
null = the preference structurally cannot show in this reply (for example a tone preference on a \
one-line factual answer). Use null rarely; weak or uncertain evidence is a 3, not null.
Calibration: not violating a preference is not enough for 4 or 5 — you need positive evidence. \
Give 1 or 2 when you see real violations rather than hedging to 3 or 4. Quote the reply in your reasons.
Return exactly one rating per preference."""


def preference_messages(preferences: Sequence[BankEntry], task_text: str, reply: str) -> list[ChatMessage]:
    """The preference judge: the user's preferences with their explanations, the task, one reply."""
    prefs = "\n".join(f"{i}. [{p.dimension}] {p.short} — {p.explanation}" for i, p in enumerate(preferences, 1))
    shape = ", ".join(f'{{"dimension": "{p.dimension}", "reason": "<evidence>", "score": <1-5 or null>}}'
                      for p in preferences)
    body = (f"THE USER'S PREFERENCES\n{prefs}\n\nTHE TASK\n{task_text}\n\nTHE ASSISTANT'S REPLY\n{reply}\n\n"
            f"Rate each of the {len(preferences)} preferences. Reply with JSON only, in this shape:\n"
            f'{{"reason": "<one sentence overall>", "ratings": [{shape}]}}')
    return [ChatMessage(role="system", content=PREFERENCE_SYSTEM), ChatMessage(role="user", content=body)]


# ----------------------------------------------------------------------------------- slot-fill and judge

SLOT_FILL_SYSTEM = (
    "An AI assistant talked with one user over many conversations and kept the memory notes you are "
    "given, each in the memory system's own fields. From those notes alone you fill in one dimension "
    "about the user. When no note supports a concrete answer, the label is \"unknown\"."
)
SLOT_FILL_RULES = (
    "Stay strictly on this dimension inside this category and do not drift into another one: for "
    "skill_memory say what the person can DO, not what they like or believe; for assistance_preference "
    "describe how they want help delivered, not their skills or knowledge; the same holds for the other "
    "categories — the \"not\" parts of the category's meaning are binding.\n"
    "label: at most 15 words, plain and declarative, no \"The user ...\" opening and no hedging such as "
    "\"seems to\" (good: \"struggles with algebra, relies on calculators\"; too wordy: \"The user seems to "
    "have some trouble with algebra and appears to use a calculator\"; wrong category for a skill: "
    "\"prefers step-by-step explanations\").\n"
    "reason: one short sentence naming the memory evidence you used, for the audit; without evidence, "
    "say so and answer unknown."
)


def slot_fill_messages(dimension: str, category: Category, category_guide: str, memory_json: str) -> list[ChatMessage]:
    """The slot-filler: the memory (fixed per store, first), then the category, its boundary guide and
    the dimension name as the bank spells it. No explanation, no example answers."""
    body = (f"MEMORY NOTES (JSON array)\n{memory_json}\n\n"
            f"CATEGORY: {category.value}\nWHAT THE CATEGORY MEANS: {category_guide}\n"
            f"DIMENSION: {dimension}\n\n{SLOT_FILL_RULES}\n\n"
            'Reply with JSON only, in this shape: {"reason": "<one sentence of evidence>", "label": "<terse value>"}')
    return [ChatMessage(role="system", content=SLOT_FILL_SYSTEM), ChatMessage(role="user", content=body)]


JUDGE_SYSTEM = (
    "You compare two short descriptions of the same person on the same dimension: the true one and a "
    "predicted one. Scale:\n"
    "1 = exact: the same meaning in full, nothing contradicted or left out;\n"
    "0.75 = close: the same core meaning, small aspects missing or loosely put;\n"
    "0.5 = partial: some overlap, but key elements missing or slightly off;\n"
    "0.25 = weak: marginal overlap, mostly misses the point;\n"
    "0 = wrong: contradicts the truth, is unrelated, or the prediction is \"unknown\"."
)


def judge_messages(target: BankEntry, predicted: str) -> list[ChatMessage]:
    body = (f"DIMENSION: {target.dimension}\nWHAT THE DIMENSION ASKS ABOUT: {target.explanation}\n"
            f"TRUE VALUE: {target.short}\nPREDICTION: {predicted}\n\n"
            'Reply with JSON only, in this shape: {"reason": "<one sentence>", "score": <0, 0.25, 0.5, 0.75 or 1>}')
    return [ChatMessage(role="system", content=JUDGE_SYSTEM), ChatMessage(role="user", content=body)]


# ----------------------------------------------------------------------------------- attribution

def target_lines(target: BankEntry) -> str:
    return (f"TARGET DIMENSION: {target.dimension}\nTRUE VALUE (short): {target.short}\n"
            f"TRUE VALUE (full): {target.explanation}")


def episode_transcript(task_text: str, history: Sequence[Turn]) -> str:
    """The task and its dialogue as the attribution judges read it."""
    lines = [f"{'User' if s == 'user' else 'Agent'}: {t}" for s, t in history[1:] if t]
    return f"TASK: {task_text or '(unknown task)'}\n\n" + ("\n".join(lines) or "(empty)")


STAGE0_SYSTEM = (
    "You decide whether one task could ever naturally lead a user to reveal information about a target "
    "dimension. Assume a perfectly probing assistant and a perfectly cooperative simulated user. You see "
    "no conversation: judge from the task statement and the dimension alone."
)


def task_design_messages(task: str, target: BankEntry) -> list[ChatMessage]:
    """Stage 0 oracle: from the task statement and the target alone."""
    body = (f"{target_lines(target)}\n\nTASK\n{task}\n\n"
            "Could this task plausibly lead, through reasonable follow-up questions and natural elaboration, "
            "to a moment where the user reveals their value on the target dimension? Reply with JSON only, in "
            'this shape: {"reason": "<one sentence>", "can_invite": <true or false>}')
    return [ChatMessage(role="system", content=STAGE0_SYSTEM), ChatMessage(role="user", content=body)]


STAGE1_SYSTEM = (
    "You check whether one episode of dialogue holds enough information about a target dimension that a "
    "competent memory system, having read it, could later infer the user's value on that dimension."
)


def disclosure_messages(task_text: str, history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    """Stage 1: did the dialogue carry enough evidence to reconstruct the target? Lenient: indirect
    signals count, as in the release."""
    body = (f"{target_lines(target)}\n\nThe episode is a multi-turn help dialogue between an Agent and a User "
            "simulator playing a fixed persona. Did the User (or the Agent quoting the user) reveal enough about "
            "the target dimension that a competent memory system could plausibly arrive at the user's value?\n"
            "- The literal wording of the true value need not appear.\n"
            "- Indirect signals count: behavioural hints, mentions in context, preferences voiced in passing, "
            "what follows from what the user said.\n"
            "- If a reasonable reader of the dialogue would conclude something close to the true value, even "
            "loosely worded, the answer is true.\n"
            "- Answer false only when the dialogue offers essentially nothing a reader could anchor on.\n\n"
            f"EPISODE\n=====\n{episode_transcript(task_text, history)}\n=====\n\n"
            'Reply with JSON only, in this shape: {"evidence": "<short quote or none>", "reason": "<one sentence>", '
            '"disclosed": <true or false>}')
    return [ChatMessage(role="system", content=STAGE1_SYSTEM), ChatMessage(role="user", content=body)]


STAGE2_SYSTEM = (
    "A dialogue failed to disclose a target dimension. The task has already been found able to invite "
    "this dimension under perfect conditions, so the failure lies in how the conversation went. You "
    "decide which side is responsible."
)


def elicitation_messages(task_text: str, history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    """Stage 2: the assistant never approached the topic, or the user did not elaborate?"""
    body = (f"{target_lines(target)}\n\nPick exactly one:\n"
            "agent_elicitation_failure — the agent never came near this dimension: the conversation stayed on "
            "other ground and the agent did not even roughly steer toward the dimension's topic.\n"
            "simulator_too_strict — the agent did roughly steer toward the topic (a pinpoint question is not "
            "needed), but the user did not disclose enough: shallow or noncommittal answers, a change of "
            "direction, satisfied too early, or no elaboration while the topic was open.\n"
            "Rule of thumb: \"the topic came up, the user just said little\" is simulator_too_strict; \"the "
            "agent never raised anything like it\" is agent_elicitation_failure.\n\n"
            f"EPISODE\n=====\n{episode_transcript(task_text, history)}\n=====\n\n"
            'Reply with JSON only, in this shape: {"reason": "<one sentence>", "evidence": "<short quote>", '
            '"label": "<agent_elicitation_failure or simulator_too_strict>"}')
    return [ChatMessage(role="system", content=STAGE2_SYSTEM), ChatMessage(role="user", content=body)]
