"""Prompt builders for every role in protocol A, written for this project.

Each function returns the chat messages for one call. Prompts are kept short and explicit so the
embedded 0.5B/1.5B models can follow them: one job per prompt, the reasoning field first, an
example of the expected JSON, and nothing the role should not see (the assistant never sees the
hidden bank; the critic sees only the task statement; the judge never sees the memory).
"""

from __future__ import annotations

from collections.abc import Sequence

from memprobe_engine.llm.types import ChatMessage
from memprobe_engine.recovery.inputs import CATEGORY_DISPLAY, BankEntry, PersonaProfile, PoolDimension, SimUser

Turn = tuple[str, str]  # (speaker "user"|"assistant", text)

AGENT_SYSTEM = (
    "You are a capable personal assistant helping one user with everyday tasks. Answer the user's "
    "request directly and concretely, in the form it calls for. If one fact about the person would "
    "change your answer, end with one short question about it.\n\n"
    "Notes from your memory of this user (may be empty or only partly relevant):\n{memory}"
)


def agent_messages(memory_block: str, history: Sequence[Turn]) -> list[ChatMessage]:
    """The assistant scaffold, identical for every memory system: system prompt + memory block,
    then the dialogue of the current task only."""
    messages = [ChatMessage(role="system", content=AGENT_SYSTEM.format(memory=memory_block or "(nothing)"))]
    messages += [ChatMessage(role=speaker, content=text) for speaker, text in history]  # type: ignore[arg-type]
    return messages


def _profile_lines(profile: PersonaProfile) -> str:
    return (f"{profile.name}, {profile.age}, {profile.gender}, {profile.location}. {profile.occupation}.\n"
            f"Background: {profile.background}\nValues: {', '.join(profile.values)}\n"
            f"How you talk: {profile.communication_style}")


def _transcript(history: Sequence[Turn]) -> str:
    return "\n".join(f"{'YOU' if s == 'user' else 'ASSISTANT'}: {t}" for s, t in history)


SIMULATOR_SYSTEM = (
    "You play one specific real person chatting with an AI assistant. Stay in character: speak as "
    "that person would, in plain first person, one to three sentences. Never say you are simulated, "
    "never list your traits, and never state a trait outright unless the conversation makes it "
    "natural. Let your habits, knowledge and preferences show through how you react. If the current "
    "request reminds you of a past experience of yours, mention it briefly the way a person would. "
    "A first answer rarely fits a real person's situation: say what does not fit yours, with one "
    "concrete detail from your life. Once the help fits you, thank the assistant briefly and finish."
)


def simulator_messages(user: SimUser, target: BankEntry, history: Sequence[Turn]) -> list[ChatMessage]:
    """The persona-conditioned simulator. It holds the whole hidden bank (short phrases), the full
    explanation of the dimension this task is about, and the transcript in one user message."""
    bank_lines = "\n".join(f"- {CATEGORY_DISPLAY[e.category]} / {e.dimension}: {e.short}" for e in user.bank.entries)
    body = (
        f"WHO YOU ARE\n{_profile_lines(user.profile)}\n\n"
        f"THINGS TRUE ABOUT YOU (private; reveal only through natural conversation)\n{bank_lines}\n\n"
        f"ESPECIALLY RELEVANT TO THIS REQUEST\n{target.dimension}: {target.short}. {target.explanation}\n\n"
        f"CONVERSATION SO FAR\n{_transcript(history)}\n\n"
        "Write YOUR next message to the assistant, in your own voice, reacting to its last reply. Reply "
        "with JSON only, in this shape:\n"
        '{"feedback_type": "<followup, clarify, correction or satisfied>", "text": "<your message>", '
        '"is_done": <true or false>}\n'
        "Use satisfied with is_done true once the help is usable for you; otherwise is_done false."
    )
    return [ChatMessage(role="system", content=SIMULATOR_SYSTEM), ChatMessage(role="user", content=body)]


PREFERENCE_SYSTEM = (
    "You rate how well an assistant's reply suits one user's stated interaction preferences. For each "
    "preference give a score from 1 (ignores it) to 5 (fits it well), or null when the reply gives no "
    "occasion to judge that preference."
)


def preference_messages(preferences: Sequence[BankEntry], reply: str) -> list[ChatMessage]:
    prefs = "\n".join(f"- {p.dimension}: {p.short}" for p in preferences)
    shape = ", ".join(f'{{"dimension": "{p.dimension}", "score": <1-5 or null>}}' for p in preferences)
    body = (f"USER PREFERENCES\n{prefs}\n\nASSISTANT REPLY\n{reply}\n\n"
            f"Reply with JSON only: a short reason, then one rating per preference, in this shape:\n"
            f'{{"reason": "<one sentence>", "ratings": [{shape}]}}')
    return [ChatMessage(role="system", content=PREFERENCE_SYSTEM), ChatMessage(role="user", content=body)]


SLOT_FILL_SYSTEM = (
    "You read an assistant's memory of one user and answer one question about that user. Use only "
    "the memory given. If it holds no evidence for the question, the answer is \"unknown\"."
)


def slot_fill_messages(dimension: str, pool_entry: PoolDimension | None, category: str,
                       memory_json: str) -> list[ChatMessage]:
    question = pool_entry.axis if pool_entry else f"What is the user's {dimension.replace('_', ' ')}?"
    typical = f"\nAnswers might look like: {'; '.join(pool_entry.answer_space)}" if pool_entry else ""
    body = (f"MEMORY\n{memory_json}\n\n"
            f"QUESTION about the user ({category}: {dimension.replace('_', ' ')}): {question}{typical}\n\n"
            "Reply with JSON only: first the memory evidence you used, then your answer as a short phrase "
            "about this user (at most 12 words), in this shape:\n"
            '{"reason": "<the evidence from the memory>", "label": "<short answer about the user, or unknown>"}')
    return [ChatMessage(role="system", content=SLOT_FILL_SYSTEM), ChatMessage(role="user", content=body)]


JUDGE_SYSTEM = (
    "You grade a predicted description of a user against the true one. Judge meaning, not wording: "
    "the same idea in other words is correct. Scale:\n"
    "1 = same meaning as the true value;\n"
    "0.75 = mostly the same, a minor detail missing;\n"
    "0.5 = partly right: an important part missing, or too general / too specific;\n"
    "0.25 = same topic, but the central point is missing or wrong;\n"
    "0 = unrelated, contradicting, or \"unknown\"."
)


def judge_messages(target: BankEntry, predicted: str) -> list[ChatMessage]:
    body = (f"DIMENSION: {target.dimension.replace('_', ' ')}\nTRUE VALUE: {target.short}\n"
            f"EXPLANATION: {target.explanation}\nPREDICTION: {predicted}\n\n"
            'Reply with JSON only, reason first, in this shape: {"reason": "<what matches and what is missing>", '
            '"score": <0, 0.25, 0.5, 0.75 or 1>}')
    return [ChatMessage(role="system", content=JUDGE_SYSTEM), ChatMessage(role="user", content=body)]


def task_design_messages(task: str, target: BankEntry) -> list[ChatMessage]:
    """Stage 0 oracle: from the task statement and the target alone."""
    body = (f"A user opens a conversation with this request:\n\"{task}\"\n\n"
            f"Hidden fact about the user ({target.dimension}): {target.short}. {target.explanation}\n\n"
            "Could an ordinary conversation about this request plausibly lead the user to reveal evidence "
            "of the hidden fact? Reply with JSON only, in this shape: "
            '{"reason": "<why or why not>", "can_invite": <true or false>}')
    return [ChatMessage(role="system", content="You audit whether a benchmark task gives a hidden user "
                        "trait a fair chance to come up."), ChatMessage(role="user", content=body)]


def disclosure_messages(history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    """Stage 1: did the dialogue carry enough evidence to reconstruct the target?"""
    body = (f"TRANSCRIPT\n{_transcript(history)}\n\nHidden fact ({target.dimension}): {target.short}. "
            f"{target.explanation}\n\nDid the user's messages reveal enough to reconstruct the hidden fact? "
            "Quote the user's most telling words (or \"\" if none). Reply with JSON only, in this shape: "
            '{"evidence": "<quote>", "reason": "<why>", "disclosed": <true or false>}')
    return [ChatMessage(role="system", content="You check whether a conversation disclosed a fact about "
                        "the user."), ChatMessage(role="user", content=body)]


def elicitation_messages(history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    """Stage 2: the assistant never approached the topic, or the user did not elaborate?"""
    body = (f"TRANSCRIPT\n{_transcript(history)}\n\nHidden fact ({target.dimension}): {target.short}.\n\n"
            "The fact was not disclosed. If the assistant never asked or steered toward this topic, answer "
            "agent_elicitation_failure. If the topic did come up but the user gave too little, answer "
            'simulator_too_strict. Reply with JSON only, in this shape: {"reason": "<why>", "label": '
            '"<agent_elicitation_failure or simulator_too_strict>"}')
    return [ChatMessage(role="system", content="You find out why a conversation did not disclose a fact "
                        "about the user."), ChatMessage(role="user", content=body)]
