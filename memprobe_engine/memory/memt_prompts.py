"""Prompts of ``memt``'s three policy calls: formation, update, ReAct retrieval.

Written for this project (see :mod:`memprobe_engine.memory.memt`). The write side uses the format
Mem-T-4B was trained on, as the recovery release ran it: the tools' JSON schemas in the system
prompt and ``<tool_call>{...}</tool_call>`` blocks in the reply; the content of the tools and
rules follows the release's ``Mem-T/memory_formation.py`` and ``memory_update.py``. Existing
entries are shown to the update call under small integer ids, so a policy can never name an item
that was not shown.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_engine.llm.types import ChatMessage

#: The ReAct loop's step budget (the paper's ``max_tool_steps``).
MAX_TOOL_STEPS = 6
#: Characters of one entry shown to a policy; the full text stays in the store.
SHOWN_CHARS = 400


#: The formation call's tools, in the shape Mem-T-4B was trained on (name, description, JSON-schema
#: parameters). The content of each description follows the release's ``Mem-T/memory_formation.py``.
FORMATION_TOOLS: list[dict[str, Any]] = [
    {"name": "create_fact",
     "description": ("Record a Factual Memory: a concrete, checkable statement of WHAT is the case or happened. "
                     "Scan every entity in the turn (objects, places, other people), not only the user, and keep "
                     "time information, including relative times such as 'yesterday'. Two kinds: facts about the "
                     "user (events they went through, identity, preferences, possessions, constraints) and facts "
                     "about the world (states of things, properties, document knowledge, tool states)."),
     "parameters": {"type": "object", "properties": {
         "fact": {"type": "string", "description": "One short self-contained declarative statement."},
         "start_time": {"type": "string", "description": "When it happened or became true; empty if unknown."},
         "end_time": {"type": "string", "description": "When it ended or stops being true; empty if unknown."}},
         "required": ["fact", "start_time", "end_time"]}},
    {"name": "create_experience",
     "description": ("Record an Experiential Memory: an actionable lesson, pattern or HOW-TO. Strategies "
                     "(reusable heuristics or workflows: 'for X, method Y works best'), cases (a success or "
                     "failure worth repeating or avoiding: 'doing A under B led to C') or skills (procedures the "
                     "agent can carry out)."),
     "parameters": {"type": "object", "properties": {
         "experience": {"type": "string", "description": "The lesson as a rule, a cause and effect, or a "
                                                          "guideline for what to do next time."},
         "start_time": {"type": "string", "description": "When it happened or became true; empty if unknown."},
         "end_time": {"type": "string", "description": "When it ended or stops being true; empty if unknown."}},
         "required": ["experience", "start_time", "end_time"]}},
    {"name": "update_persona",
     "description": ("When the turn brings new, important information about a person (hobbies, projects, "
                     "significant events), write that person's whole profile again with it included."),
     "parameters": {"type": "object", "properties": {
         "name": {"type": "string", "description": "The person's name, or 'User' when none is given."},
         "profile": {"type": "string", "description": "The complete, concise, updated profile."}},
         "required": ["name", "profile"]}},
    {"name": "update_summary",
     "description": "When the turn brings new information, write the running summary of the sessions again.",
     "parameters": {"type": "object", "properties": {
         "content": {"type": "string", "description": "The complete, concise, updated summary."}},
         "required": ["content"]}},
]

FORMATION_SYSTEM = """You are the analyser of a memory system. Compare the [Current Turn] with the memory as it stands and call tools to extract what it holds.

[Tools]
{tools}

[Rules]
1. Summary and personas: when the previous summary and personas are empty you must call update_summary or update_persona to start them. They keep every key point of the old and the new, and stay concise.
2. Facts and experiences come from the current turn only, not from the previous summary or personas. Capture the attributes of, and the relations between, all entities in the turn, also minor ones.
3. Times: keep the turn's own date and time format. For relative times, say 'the week (weekend, Friday) before <absolute date>' rather than computing a date for last week, a weekend or a weekday; for yesterday, last month or last year, compute the absolute day, month or year.
4. Keep the original wording rather than paraphrasing.
5. Numbers: keep digits as digits and words as words; a count you make yourself is written in words.
6. No speech acts: state the information itself, never "the user said / asked / replied ..." or "they discussed ..." (bad: "The user said they are vegetarian."; good: "The user is vegetarian.").

[Reply format]
<tool_call> {{"name": "<tool>", "arguments": {{"<argument>": "<value>"}}}} </tool_call>
Each <tool_call> block holds one JSON object. Use as many blocks as the turn calls for."""

#: The update call's tools: add, rewrite, delete or ignore, against the numbered existing memories.
UPDATE_TOOLS: list[dict[str, Any]] = [
    {"name": "add_item", "description": "Add the new memory as an item of its own.",
     "parameters": {"type": "object", "properties": {
         "document": {"type": "string", "description": "The item's text."}}, "required": ["document"]}},
    {"name": "update_item", "description": "Rewrite an existing item.",
     "parameters": {"type": "object", "properties": {
         "id": {"type": "string", "description": "The id of the existing item to rewrite."},
         "document": {"type": "string", "description": "The enriched text, with updated counts or frequencies; "
                                                       "keep the time information of the old item in it."}},
         "required": ["id", "document"]}},
    {"name": "delete_item", "description": "Delete an existing item that the new memory explicitly negates or "
                                           "shows to be wrong.",
     "parameters": {"type": "object", "properties": {
         "id": {"type": "string", "description": "The id of the item to delete."}}, "required": ["id"]}},
    {"name": "ignore_item", "description": "Do nothing: the new memory is fully redundant, in meaning and in time.",
     "parameters": {"type": "object", "properties": {
         "reason": {"type": "string", "description": "Why it is redundant."}}, "required": ["reason"]}},
]

UPDATE_SYSTEM = """You administer one collection of a memory database ({kind} items). Decide what to do with a new memory given the existing items most similar to it.

[Tools]
{tools}

[Decision]
Memories are atomic: each holds one brief piece of information.
1. Contradiction: the new memory says an existing one is plainly wrong -> delete_item (that one).
2. Identity: the new memory is the same as an existing one, content and time -> ignore_item.
3. Atomic update: the new memory overwrites one changeable value of the same thing (a count, a quantity, a status, a yes/no, a time) unambiguously and completely (e.g. "I have 4 models" then "bought one more" -> "I have 5 models") -> update_item. Only for a refinement, correction or state change that makes the old text obsolete; never to join two separate pieces of information. Keep the old item's time information in the rewritten text.
4. Otherwise add_item: a recurrence at another time, another person or a new topic, or significant new detail (a new event, a particular instance of a habit, a new reason). Separate occurrences of a similar habit are separate items. When in doubt, add.

[Reply format]
<tool_call> {{"name": "<tool>", "arguments": {{"<argument>": "<value>"}}}} </tool_call>"""


@dataclass(frozen=True)
class PolicyCall:
    """One tool call of a write-side reply: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any]


_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


def parse_policy_calls(text: str) -> tuple[list[PolicyCall], list[str]]:
    """The tool calls in a write-side reply, in order, and a description of each block that could
    not be read (such blocks are skipped, as Mem-T's own runner skips them)."""
    calls: list[PolicyCall] = []
    problems: list[str] = []
    for block in _CALL_BLOCK.findall(text or ""):
        try:
            data = json.loads(block.strip())
        except json.JSONDecodeError as err:
            problems.append(f"a <tool_call> block is not JSON ({err.msg}): {shorten(block.strip(), 80)!r}")
            continue
        for entry in data if isinstance(data, list) else [data]:
            arguments = entry.get("arguments") if isinstance(entry, dict) else None
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    arguments = None
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(arguments, dict):
                problems.append(f"a tool call lacks a name or an arguments object: {shorten(str(entry), 80)!r}")
                continue
            calls.append(PolicyCall(entry["name"], arguments))
    return calls, problems


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


@functools.cache
def _system_prompt(kind: str | None) -> str:
    """The formation prompt (``kind`` None) or the update prompt for ``kind``, with its tool list.
    Built once: the tool lists are constants, and serializing them with the pure-Python indenting
    encoder on every memt write call cost about a twentieth of a protocol-B run's CPU."""
    if kind is None:
        return FORMATION_SYSTEM.format(tools=json.dumps(FORMATION_TOOLS, indent=2))
    return UPDATE_SYSTEM.format(kind=kind, tools=json.dumps(UPDATE_TOOLS, indent=2))


def formation_messages(summary: str, personas: Sequence[tuple[str, str]], turn: str) -> list[ChatMessage]:
    """The formation call for one turn: the running summary, the personas (name and profile) and the
    turn itself (``user said: ...``)."""
    profiles = "\n".join(f"Name: {name}, Profile: {profile}" for name, profile in personas)
    system = _system_prompt(None)
    user = f"[Inputs]\nPrevious Summary: {summary}\nPrevious Personas: {profiles}\nCurrent Turn: {turn}"
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


def update_messages(kind: str, new_memory: dict[str, Any], neighbours: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    """The update call for one new ``kind`` (``fact`` or ``experience``) against its neighbours, each
    shown under an index as its ``id`` so a reply can only name an item that was shown."""
    system = _system_prompt(kind)
    user = (f"[New memory]\n{json.dumps(new_memory, ensure_ascii=False, indent=2)}\n\n"
            f"[Existing memories]\n{json.dumps(list(neighbours), ensure_ascii=False, indent=2)}")
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


def react_messages(query: str, steps: int = MAX_TOOL_STEPS) -> list[ChatMessage]:
    """The opening of a ReAct retrieval: the tool list and the request to look up."""
    return [ChatMessage(role="system", content=REACT_SYSTEM.format(steps=steps)),
            ChatMessage(role="user", content=f"REQUEST:\n{query}")]


def tool_response(text: str) -> ChatMessage:
    """One step's observations, fed back as the next user message."""
    return ChatMessage(role="user", content=f"<tool_response>\n{text}\n</tool_response>")
