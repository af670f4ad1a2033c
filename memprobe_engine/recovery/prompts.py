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
    "You are a capable personal assistant helping one user with everyday tasks. Give concrete, "
    "practical help. When knowing more about the person would clearly improve your help, ask one "
    "short question about their situation, habits or preferences.\n\n"
    "What your memory returned about this user (it may be empty or only partly relevant):\n{memory}"
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
    "When the assistant's help is good enough for you, say so and finish."
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
        "Write your next message to the assistant. Reply with JSON only, for example:\n"
        '{"feedback_type": "followup", "text": "That helps, but I usually ...", "is_done": false}\n'
        "feedback_type is one of followup, clarify, correction, satisfied; set is_done true (and "
        "feedback_type satisfied) only when you are content with the help."
    )
    return [ChatMessage(role="system", content=SIMULATOR_SYSTEM), ChatMessage(role="user", content=body)]


PREFERENCE_SYSTEM = (
    "You rate how well an assistant's reply suits one user's stated interaction preferences. For each "
    "preference give a score from 1 (ignores it) to 5 (fits it well), or null when the reply gives no "
    "occasion to judge that preference."
)


def preference_messages(preferences: Sequence[BankEntry], reply: str) -> list[ChatMessage]:
    prefs = "\n".join(f"- {p.dimension}: {p.short}" for p in preferences)
    example = ", ".join(f'{{"dimension": "{p.dimension}", "score": 4}}' for p in preferences[:2])
    body = (f"USER PREFERENCES\n{prefs}\n\nASSISTANT REPLY\n{reply}\n\n"
            f"Reply with JSON only: a short reason, then one rating per preference, e.g.\n"
            f'{{"reason": "...", "ratings": [{example}]}}')
    return [ChatMessage(role="system", content=PREFERENCE_SYSTEM), ChatMessage(role="user", content=body)]


SLOT_FILL_SYSTEM = (
    "You reconstruct one fact about a user from an assistant's memory. Use only the memory given. "
    "If it holds no evidence for the asked dimension, answer with the label \"unknown\"."
)


def slot_fill_messages(dimension: str, pool_entry: PoolDimension | None, category: str,
                       memory_json: str) -> list[ChatMessage]:
    axis = f"\nWhat it asks: {pool_entry.axis}\nTypical answers: {', '.join(pool_entry.answer_space)}" \
        if pool_entry else ""
    body = (f"DIMENSION: {dimension} ({category}){axis}\n\nMEMORY\n{memory_json}\n\n"
            "Reply with JSON only: first the evidence you used, then a short label (at most 12 words) "
            "describing this user on the dimension, e.g.\n"
            '{"reason": "In two tasks the user asked for ...", "label": "prefers step-by-step plans"}')
    return [ChatMessage(role="system", content=SLOT_FILL_SYSTEM), ChatMessage(role="user", content=body)]


JUDGE_SYSTEM = (
    "You grade a reconstructed description of a user against the true one, on this scale:\n"
    "0 = no match to the target; 0.25 = same topic but the central value is missing or wrong;\n"
    "0.5 = partly right, with important omissions or the wrong level of abstraction;\n"
    "0.75 = mostly right, minor detail missing or different wording; 1 = correct at the intended level.\n"
    "A prediction of \"unknown\" scores 0."
)


def judge_messages(target: BankEntry, predicted: str) -> list[ChatMessage]:
    body = (f"DIMENSION: {target.dimension}\nTRUE VALUE: {target.short}\nEXPLANATION: {target.explanation}\n"
            f"PREDICTION: {predicted}\n\n"
            'Reply with JSON only, reason first, e.g. {"reason": "Both say ... but the prediction misses ...", '
            '"score": 0.5}')
    return [ChatMessage(role="system", content=JUDGE_SYSTEM), ChatMessage(role="user", content=body)]


def task_design_messages(task: str, target: BankEntry) -> list[ChatMessage]:
    """Stage 0 oracle: from the task statement and the target alone."""
    body = (f"A user opens a conversation with this request:\n\"{task}\"\n\n"
            f"Hidden fact about the user ({target.dimension}): {target.short}. {target.explanation}\n\n"
            "Could an ordinary conversation about this request plausibly lead the user to reveal evidence "
            "of the hidden fact? Reply with JSON only, e.g. "
            '{"reason": "Planning a budget invites talk about ...", "can_invite": true}')
    return [ChatMessage(role="system", content="You audit whether a benchmark task gives a hidden user "
                        "trait a fair chance to come up."), ChatMessage(role="user", content=body)]


def disclosure_messages(history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    """Stage 1: did the dialogue carry enough evidence to reconstruct the target?"""
    body = (f"TRANSCRIPT\n{_transcript(history)}\n\nHidden fact ({target.dimension}): {target.short}. "
            f"{target.explanation}\n\nDid the user's messages reveal enough to reconstruct the hidden fact? "
            "Quote the most telling words (or \"\" if none). Reply with JSON only, e.g. "
            '{"evidence": "I always ...", "reason": "...", "disclosed": true}')
    return [ChatMessage(role="system", content="You check whether a conversation disclosed a fact about "
                        "the user."), ChatMessage(role="user", content=body)]


def elicitation_messages(history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    """Stage 2: the assistant never approached the topic, or the user did not elaborate?"""
    body = (f"TRANSCRIPT\n{_transcript(history)}\n\nHidden fact ({target.dimension}): {target.short}.\n\n"
            "The fact was not disclosed. If the assistant never asked or steered toward this topic, answer "
            "agent_elicitation_failure. If the topic did come up but the user gave too little, answer "
            'simulator_too_strict. Reply with JSON only, e.g. {"reason": "...", "label": '
            '"agent_elicitation_failure"}')
    return [ChatMessage(role="system", content="You find out why a conversation did not disclose a fact "
                        "about the user."), ChatMessage(role="user", content=body)]
