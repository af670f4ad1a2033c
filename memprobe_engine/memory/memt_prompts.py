"""Prompts and output schemas of ``memt``'s three policy calls: formation, update, ReAct retrieval.

Written for this project (see :mod:`memprobe_engine.memory.memt`): short instructions with a shape
template of the expected reply and no example values a model could copy into memory. Stored
entries and batch turns are always shown under small integer indexes, and replies refer back to
those indexes only, so a policy can never invent an item id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from memprobe_engine.llm.types import ChatMessage

#: The ReAct loop's step budget (the paper's ``max_tool_steps``).
MAX_TOOL_STEPS = 6
#: Characters of one entry shown to a policy; the full text stays in the store.
SHOWN_CHARS = 400


class FormedMemory(BaseModel):
    """One new fact or experience, resting on turns of the batch (their indexes)."""

    content: str
    source_turns: list[int]


class Formation(BaseModel):
    """The formation call's reply: new typed memories plus the rewritten profile and summary."""

    facts: list[FormedMemory]
    experiences: list[FormedMemory]
    persona: str
    summary: str


class UpdateDecision(BaseModel):
    """The update call's reply for one new memory against its stored neighbours."""

    action: Literal["add", "update", "delete", "ignore"]
    target: int | None = Field(description="index of the stored entry acted on (update, delete)")
    content: str | None = Field(description="merged text for update; null otherwise")


FORMATION_SYSTEM = """\
You keep an assistant's long-term memory of one user. You get the user's current profile, the \
running summary, and the user's newest messages to the assistant, each with an index and a time.
Write down what is worth remembering from the new turns:
- facts: self-contained statements about the user (preferences, constraints, skills, knowledge, \
circumstances, views of themselves);
- experiences: things the user went through or how a piece of help turned out, stating what \
happened, when, and what came of it.
Each entry lists the indexes of the turns it rests on. Leave out small talk. Then rewrite the \
profile and the summary so they take the new turns into account; return them unchanged when \
nothing new bears on them.
Reply with one JSON object of this shape:
{"facts": [{"content": "<statement>", "source_turns": [<index>]}], \
"experiences": [{"content": "<event and its consequence>", "source_turns": [<index>]}], \
"persona": "<whole updated profile>", "summary": "<whole updated summary>"}"""

UPDATE_SYSTEM = """\
You keep one collection of an assistant's memory free of duplicates and contradictions. You get \
a new {kind} and the stored entries most similar to it, each with an index. Choose one action:
- add: the new entry says something no stored entry says;
- update: the new entry refines or extends stored entry <target>; give the merged text as content;
- delete: the new entry shows stored entry <target> is wrong or out of date; that entry is \
removed and the new one kept;
- ignore: a stored entry already says the same.
Reply with one JSON object of this shape:
{{"action": "<add|update|delete|ignore>", "target": <index or null>, "content": "<merged text or null>"}}"""

REACT_SYSTEM = """\
You look up a user's long-term memory to answer a request. Each step, call one tool by writing
<tool_call>{{"name": "<tool>", "arguments": {{<arguments>}}}}</tool_call>
Tools:
- search_facts(query: string, k: integer): statements about the user
- search_experiences(query: string, k: integer): events the user went through and how they turned out
- search_turns(query: string, k: integer): the user's own messages, word for word
- search_personas(query: string, k: integer): the user's profile
- get_summary(): the running summary of all conversations
- finish(): stop searching once the results cover the request
Results come back inside <tool_response> tags. Rephrase the query when a search misses. You have at \
most {steps} steps."""


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def numbered(lines: Sequence[str]) -> str:
    """Lines under their indexes, ``[0] …``, the form every policy call refers back to."""
    return "\n".join(f"[{index}] {line}" for index, line in enumerate(lines)) or "(none)"


def formation_messages(persona: str, summary: str, turns: Sequence[str]) -> list[ChatMessage]:
    """The formation call: profile, summary and the batch's turns (already prefixed with their time)."""
    user = (f"PROFILE:\n{persona or '(empty)'}\n\nSUMMARY:\n{summary or '(empty)'}\n\n"
            f"NEW TURNS:\n{numbered(turns)}")
    return [ChatMessage(role="system", content=FORMATION_SYSTEM), ChatMessage(role="user", content=user)]


def update_messages(kind: str, new_content: str, neighbours: Sequence[str]) -> list[ChatMessage]:
    """The update call for one new ``kind`` (``fact`` or ``experience``) against its neighbours."""
    user = f"NEW {kind.upper()}:\n{new_content}\n\nSTORED ENTRIES:\n{numbered([shorten(n) for n in neighbours])}"
    return [ChatMessage(role="system", content=UPDATE_SYSTEM.format(kind=kind)),
            ChatMessage(role="user", content=user)]


def react_messages(query: str, steps: int = MAX_TOOL_STEPS) -> list[ChatMessage]:
    """The opening of a ReAct retrieval: the tool list and the request to look up."""
    return [ChatMessage(role="system", content=REACT_SYSTEM.format(steps=steps)),
            ChatMessage(role="user", content=f"REQUEST:\n{query}")]


def tool_response(text: str) -> ChatMessage:
    """One step's observations, fed back as the next user message."""
    return ChatMessage(role="user", content=f"<tool_response>\n{text}\n</tool_response>")
