"""``memt``'s read side: a ReAct loop in which the policy model calls memory tools as text.

Each step the policy (role ``reader``) writes one or more
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks; the loop runs them, feeds the
results back inside ``<tool_response>`` tags and asks again, for at most
:data:`~memprobe_engine.memory.memt_prompts.MAX_TOOL_STEPS` steps. Every surfaced item is kept,
de-duplicated by id at its best score, and the caller takes the top k. A reply that cannot be read
(no tool call, malformed JSON, unknown tool, bad arguments) ends the loop with what was surfaced so
far and is reported through ``on_error``, so a weak policy model degrades a search, never a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.memory.base import ScoredItem
from memprobe_engine.memory.memt_prompts import MAX_TOOL_STEPS, react_messages, shorten, tool_response

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient

#: Tool name -> the collection it searches (``None``: takes no query).
SEARCH_TOOLS: dict[str, str] = {"search_turns": "turns", "search_facts": "facts",
                                "search_experiences": "experiences", "search_personas": "personas"}
SUMMARY_TOOLS = ("get_summary", "search_summary")  # the paper's appendix calls it search_summary
FINISH = "finish"
DEFAULT_K = 5
MAX_K = 10
REACT_PARAMS = SamplingParams(temperature=0.0, max_tokens=400)

_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)

StopReason = Literal["finish", "budget", "unparseable", "no_tool_call", "empty"]


@dataclass(frozen=True)
class ToolCall:
    """One validated tool call: a known tool name and its normalised arguments."""

    name: str
    query: str = ""
    k: int = DEFAULT_K


class ToolCallError(ValueError):
    """A reply whose tool calls cannot be run; ``error_type`` tells a missing call from a bad one."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass
class ReactResult:
    """What a loop surfaced (by id, best score kept, in first-seen order) and why it stopped."""

    hits: dict[str, ScoredItem] = field(default_factory=dict)
    steps: int = 0
    stop: StopReason = "empty"

    def add(self, hit: ScoredItem) -> None:
        known = self.hits.get(hit.id)
        if known is None or (hit.score or 0.0) > (known.score or 0.0):
            self.hits[hit.id] = hit

    def top(self, k: int) -> list[ScoredItem]:
        """The ``k`` best hits by score; ties keep the order in which they were surfaced."""
        order = {item_id: position for position, item_id in enumerate(self.hits)}
        ranked = sorted(self.hits.values(), key=lambda hit: (-(hit.score or 0.0), order[hit.id]))
        return ranked[:k]


def parse_tool_calls(text: str) -> list[ToolCall]:
    """The tool calls in a policy reply (reasoning in ``<think>`` tags is ignored).

    Raises :class:`ToolCallError` when there is none or one cannot be run as written.
    """
    blocks = _CALL.findall(_THINK.sub("", text))
    if not blocks:
        raise ToolCallError("MemTNoToolCall", f"the reply has no <tool_call> block: {shorten(text.strip(), 160)!r}")
    return [_tool_call(block.strip()) for block in blocks]


def _tool_call(block: str) -> ToolCall:
    try:
        data = json.loads(block)
    except json.JSONDecodeError as err:
        raise ToolCallError("MemTToolCallUnparseable",
                            f"tool call is not JSON ({err.msg}): {shorten(block, 160)!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ToolCallError("MemTToolCallUnparseable", f"tool call lacks a string name: {shorten(block, 160)!r}")
    name, arguments = data["name"].strip(), data.get("arguments", {})
    if isinstance(arguments, str):  # some chat templates double-encode the arguments
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        raise ToolCallError("MemTToolCallUnparseable", f"arguments of {name!r} are not an object")
    if name == FINISH or name in SUMMARY_TOOLS:
        return ToolCall(name=name)
    if name not in SEARCH_TOOLS:
        known = ", ".join([*SEARCH_TOOLS, *SUMMARY_TOOLS, FINISH])
        raise ToolCallError("MemTUnknownTool", f"unknown tool {name!r}; known: {known}")
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolCallError("MemTToolCallUnparseable", f"{name} needs a non-empty string query")
    k = arguments.get("k", DEFAULT_K)
    if isinstance(k, str) and k.strip().isdigit():
        k = int(k)
    if not isinstance(k, int) or isinstance(k, bool):
        raise ToolCallError("MemTToolCallUnparseable", f"{name}: k must be an integer, got {k!r}")
    return ToolCall(name=name, query=query.strip(), k=max(1, min(MAX_K, k)))


RunTool = Callable[[ToolCall], Awaitable[list[ScoredItem]]]
OnError = Callable[[str, str], None]


def describe_hits(call: ToolCall, hits: list[ScoredItem]) -> str:
    """How one tool's results are shown to the policy: id, collection, time and a shortened text."""
    head = f"{call.name}({call.query!r})" if call.query else f"{call.name}()"
    if not hits:
        return f"{head}: no results"
    lines = []
    for hit in hits:
        metadata = hit.item.get("metadata", {})
        text = metadata.get("memory_content") or hit.item.get("content", "")
        lines.append(f"- [{hit.id}] ({hit.item.get('category')}, {hit.item.get('timestamp')}) {shorten(str(text))}")
    return head + ":\n" + "\n".join(lines)


async def react_search(chat: ChatClient, query: str, run_tool: RunTool, on_error: OnError, *, role: str = "reader",
                       max_steps: int = MAX_TOOL_STEPS, params: SamplingParams = REACT_PARAMS) -> ReactResult:
    """Run the loop for ``query``; at most ``max_steps`` policy calls."""
    result = ReactResult()
    messages: list[ChatMessage] = react_messages(query, max_steps)
    for step in range(1, max_steps + 1):
        outcome = await chat.chat(role, messages, params=params)
        result.steps = step
        try:
            calls = parse_tool_calls(outcome.text)
        except ToolCallError as err:
            on_error(err.error_type, f"ReAct step {step} for {shorten(query, 80)!r}: {err}; search stopped with "
                                     f"{len(result.hits)} item(s) surfaced")
            result.stop = "no_tool_call" if err.error_type == "MemTNoToolCall" else "unparseable"
            return result
        observations = []
        for call in calls:
            if call.name == FINISH:
                continue
            hits = await run_tool(call)
            for hit in hits:
                result.add(hit)
            observations.append(describe_hits(call, hits))
        if any(call.name == FINISH for call in calls):
            result.stop = "finish"
            return result
        messages = [*messages, ChatMessage(role="assistant", content=outcome.text),
                    tool_response("\n\n".join(observations))]
    result.stop = "budget"
    return result
