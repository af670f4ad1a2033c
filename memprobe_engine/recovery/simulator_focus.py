"""What of the simulated user's bank bears on the moment: the embedded framing's focus.

The release's simulator sees the whole bank (31 dimensions with their explanations) and is told to
bring a fitting memory up unprompted; a strong model finds the fitting entries itself. The embedded
1.5B does not: with the whole bank in its system prompt it writes lines in the user's voice that
carry nothing of the user (docs/protocol-a.md, "Framing for small models"). So under that framing
each user line opens on what the moment brings to mind: the few bank entries closest to the moment
(the opening request and the assistant's latest reply, by cosine similarity of the run's own
embeddings) are shown to the model, which picks one or none with the user's reaction and first
words (:func:`choose_focus`), and the log model finishes the line from there
(``NAME (label): first words``, :class:`~.prompts_embedded.SimulatorLog`).

The ranking reads only what the simulator already sees (its bank, the dialogue), never which
dimension the task targets, so the leak control stays as the release has it: a task whose target
the conversation does not touch gets no help from the focus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memprobe_engine.llm.types import SamplingParams
from memprobe_engine.recovery import prompts_embedded
from memprobe_engine.recovery.inputs import BankEntry, SimUser
from memprobe_engine.recovery.prompts import Turn
from memprobe_engine.recovery.simulator_voice import copied_run, out_of_role_reason

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.embeddings import TextEmbedder

#: How many bank entries the focus names (of the release users' 31).
FOCUS_SIZE = 4
#: The assistant's reply is cut here before it is embedded: MiniLM reads 256 word pieces, and the
#: opening of a reply says what it is about.
REPLY_CHARS = 600
#: The pick's reply cap: a one-sentence reason, the memory, the label and one sentence.
CHOICE_MAX_TOKENS = 160


def entry_text(entry: BankEntry) -> str:
    """How a bank entry is embedded and shown: its short value, then its explanation."""
    return f"{entry.short}. {entry.explanation}"


def moment_text(task_text: str, history: Sequence[Turn]) -> str:
    """The moment the user reacts to: the opening request and the assistant's latest reply."""
    latest = next((text for speaker, text in reversed(history) if speaker == "assistant"), "")
    return f"{task_text}\n{latest[:REPLY_CHARS]}"


async def focus_entries(embedder: TextEmbedder, user: SimUser, task_text: str, history: Sequence[Turn],
                        size: int = FOCUS_SIZE) -> list[BankEntry]:
    """The ``size`` bank entries most similar to the moment, most similar first (ties in bank order).
    One embedding call per moment; the bank's own vectors come from the embedder's cache after the
    first."""
    entries = list(user.bank.entries)
    if not entries or size <= 0:
        return []
    vectors = await embedder.embed([moment_text(task_text, history), *(entry_text(e) for e in entries)])
    similarity = np.asarray(vectors[1:]) @ np.asarray(vectors[0])
    order = sorted(range(len(entries)), key=lambda index: (-float(similarity[index]), index))
    return [entries[index] for index in order[:size]]


async def choose_focus(chat: ChatClient, user: SimUser, task_text: str, history: Sequence[Turn],
                       focus: Sequence[BankEntry]) -> prompts_embedded.FocusPick | None:
    """What the assistant's last message brings to the user's mind, as the model picks it among
    ``focus`` (temperature 0; one short recorded, cached call): the entry, the reaction and the first
    words of the line, or None when it picks nothing, writes no opening, writes one that is not the
    user's own (:func:`opening_problem`), or its answer stays unusable — the line is then written
    from the log alone."""
    if not focus:
        return None
    messages = prompts_embedded.focus_choice_messages(user, task_text, history, focus)
    outcome = await chat.chat("simulator", messages,
                              params=SamplingParams(temperature=0.0, max_tokens=CHOICE_MAX_TOKENS),
                              json_schema=prompts_embedded.focus_choice_schema(focus))
    answer = outcome.parsed if isinstance(outcome.parsed, dict) else {}
    entry = next((entry for entry in focus if entry.dimension == answer.get("memory")), None)
    opening = str(answer.get("opening") or "").strip()
    if entry is None or not opening or opening_problem(opening, user, history, messages[-1].content) is not None:
        return None
    return prompts_embedded.FocusPick(entry=entry, feedback_type=str(answer["feedback_type"]), opening=opening)


def opening_problem(opening: str, user: SimUser, history: Sequence[Turn], instructions: str = "") -> str | None:
    """Why a picked opening is not the user's own words, or None: it speaks as the assistant, repeats
    the assistant's last message, copies a bank entry, or repeats the pick's own ``instructions``.
    Each was a real pick on the live quick job: "I hope this message finds you well." (the first line
    of the note the assistant had drafted), "I remember when I was eight, a pan caught fire in my
    family's kitchen in Springfield…" (a bank explanation, word for word), "RENEE types back, in the
    first person and RENEE's own casual words…" (the pick's instruction)."""
    latest = next((text for speaker, text in reversed(history) if speaker == "assistant"), "")
    if (reason := out_of_role_reason(opening)) is not None:
        return reason
    if (run := copied_run(opening, latest)) is not None:
        return f"repeats the assistant's message ({run!r})"
    for entry in user.bank.entries:
        if (run := copied_run(opening, f"{entry.short}. {entry.explanation}")) is not None:
            return f"copies the bank entry {entry.dimension} ({run!r})"
    if (run := copied_run(opening, instructions)) is not None:
        return f"repeats its instructions ({run!r})"
    return None
