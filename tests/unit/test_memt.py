"""``memt``: per-turn formation with tool calls into typed collections, the neighbour update step, the ReAct read loop,
recoverable handling of bad policy output, and the store rebuilt from its recorded patches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory.base import MemoryServices, Observation, SimClock
from memprobe_engine.memory.memt import SOURCE_MARK, MemT
from memprobe_engine.memory.memt_prompts import MAX_TOOL_STEPS
from memprobe_engine.memory.memt_react import ToolCall, ToolCallError, parse_tool_calls
from memprobe_engine.memory.registry import load_system_class
from memprobe_engine.memory.timeline import store_at
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, read_events, temp_recording

USER = "u1"


def WordEmbedder() -> BagOfWordsEmbedder:  # noqa: N802 (kept as the tests' name for it)
    return BagOfWordsEmbedder(64, hashed=True)


class Policy:
    """Scripted policy model: answers each memt prompt from its own queue (empty: a do-nothing reply)."""

    def __init__(self) -> None:
        self.formations: list[str] = []
        self.updates: list[str] = []
        self.react: Callable[[ChatRequest], str] = lambda request: _call("finish", {})
        self.seen: list[tuple[str, ChatRequest]] = []

    def __call__(self, request: ChatRequest) -> str:
        system = request.messages[0].content
        if system.startswith("You are the analyser of a memory system"):
            self.seen.append(("formation", request))
            return self.formations.pop(0) if self.formations else ""
        if system.startswith("You administer one collection"):
            self.seen.append(("update", request))
            return self.updates.pop(0) if self.updates else _call("add_item", {"document": "(unused)"})
        if system.startswith("You look up a user's long-term memory"):
            self.seen.append(("react", request))
            return self.react(request)
        raise AssertionError(f"unexpected prompt {system[:60]!r}")

    def count(self, kind: str) -> int:
        return sum(1 for seen, _ in self.seen if seen == kind)


def formation(facts: Sequence[str] = (), experiences: Sequence[str] = (), persona: str = "",
              summary: str = "", name: str = "User") -> str:
    """A formation reply: one tool call per new memory, then persona and summary when given."""
    calls = [_call("create_fact", {"fact": f, "start_time": "", "end_time": ""}) for f in facts]
    calls += [_call("create_experience", {"experience": e, "start_time": "", "end_time": ""}) for e in experiences]
    if persona:
        calls.append(_call("update_persona", {"name": name, "profile": persona}))
    if summary:
        calls.append(_call("update_summary", {"content": summary}))
    return "\n".join(calls)


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f'<tool_call>{orjson.dumps({"name": name, "arguments": arguments}).decode()}</tool_call>'


@pytest.fixture
def rec(tmp_path: Path) -> Iterator[tuple[Recorder, Path]]:
    with temp_recording(tmp_path / "rec") as recorder:
        yield recorder, tmp_path / "rec"


def make(recorder: Recorder, policy: Policy) -> MemT:
    backend = ScriptedBackend(policy)
    chat = ChatClient(LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")}),
                      recorder=recorder, backend_factory=lambda spec: backend)
    return MemT(MemoryServices(recorder=recorder, clock=SimClock(), seed=3, chat=chat, embedder=WordEmbedder()))


def obs(kind: str, text: str, task: int = 0, turn: int = 0) -> Observation:
    return Observation(kind=kind, text=text, task_index=task, turn=turn,  # type: ignore[arg-type]
                       timestamp=f"2026-01-0{task + 1}T09:{turn:02d}:00")


TASK0 = [obs("task", "Plan my gardening week.", 0), obs("assistant", "Water on Monday and weed on Friday.", 0, 1),
         obs("user", "I drink green tea every morning and like short lists.", 0, 1),
         obs("assistant", "Noted, short lists it is.", 0, 2), obs("user", "My allotment is small.", 0, 2),
         obs("user", "And I only have weekends.", 0, 3)]
TASK1 = [obs("task", "Suggest a dinner recipe.", 1), obs("assistant", "Lentil soup with cumin.", 1, 1),
         obs("user", "Last spring I burned a pan of lentils and the smoke alarm woke my baby.", 1, 1),
         obs("assistant", "Then a slow cooker version may suit you.", 1, 2),
         obs("user", "Yes, a slow cooker sounds safer.", 1, 2), obs("user", "I also want it vegetarian.", 1, 3)]
TASK2 = [obs("task", "Help me pick running shoes.", 2), obs("assistant", "What distance do you run?", 2, 1),
         obs("user", "Ten kilometres on weekends.", 2, 1), obs("user", "Mostly on trails.", 2, 2),
         obs("user", "Budget is tight.", 2, 3)]


async def feed(system: MemT, observations: list[Observation]) -> None:
    with system.services.recorder.scope(user_id=USER, system="memt"):
        for observation in observations:
            await system.observe(observation)


def errors(directory: Path) -> list[dict[str, Any]]:
    return read_events(directory, "error")


def read_errors(directory: Path) -> list[dict[str, Any]]:
    """Errors of the read side only (a formation reply that keeps nothing is noted too)."""
    return [e for e in errors(directory) if not e["message"].startswith("formation for")]


# -- write side -----------------------------------------------------------------------------------
GREEN_TEA = "User drinks green tea every morning."
PLAIN = ["", ""]  # formation replies that call no tool (the task opening and a turn with nothing to keep)


async def test_every_user_turn_is_formed_once_with_tool_calls(rec: Any) -> None:
    recorder, directory = rec
    policy = Policy()
    policy.formations += [formation(summary="Gardening week being planned.", persona="Gardens."),
                          formation(facts=[GREEN_TEA], experiences=["Short lists work best for this user."],
                                    persona="Gardens; likes short lists.")]
    system = make(recorder, policy)
    await system.reset(USER)
    await feed(system, TASK0[:3])
    assert policy.count("formation") == 2  # the opening and the user reply; the assistant turn is not memory
    dump = {item["id"]: item for item in system.dump()}
    assert list(dump) == ["t0001", "p0001", "s0001", "t0002", "f0001", "e0001"]
    assert dump["t0001"]["content"] == "user said: Plan my gardening week."
    fact = dump["f0001"]
    assert fact["content"] == GREEN_TEA + SOURCE_MARK + dump["t0002"]["content"]
    assert fact["metadata"]["source_turn_ids"] == [["t0002"]] and fact["metadata"]["col_name"] == f"{USER}_facts"
    assert dump["e0001"]["category"] == "experiences"
    persona = dump["p0001"]["metadata"]
    assert persona["memory_content"] == "Gardens; likes short lists." and persona["name"] == "User"
    assert persona["source_turn_ids"] == [["t0001"], ["t0002"]]
    # what the formation call saw: the tools in the trained format, the memory so far, one turn
    second = policy.seen[1][1]
    system_prompt, inputs = second.messages[0].content, second.messages[1].content
    assert all(f'"name": "{tool}"' in system_prompt for tool in ("create_fact", "create_experience",
                                                                 "update_persona", "update_summary"))
    assert "<tool_call>" in system_prompt and "actionable lesson" in system_prompt
    assert "Previous Summary: Gardening week being planned." in inputs
    assert "Previous Personas: Name: User, Profile: Gardens." in inputs
    assert inputs.endswith("Current Turn: user said: I drink green tea every morning and like short lists.")
    assert "Water on Monday" not in inputs and not errors(directory)


async def test_update_delete_removes_the_neighbour(rec: Any) -> None:
    recorder, directory = rec
    policy = Policy()
    policy.formations += ["", formation(facts=[GREEN_TEA]), "", formation(facts=["User drinks coffee now."])]
    policy.updates.append(_call("delete_item", {"id": "0"}) + _call("add_item", {"document": "User drinks coffee."}))
    system = make(recorder, policy)
    await system.reset(USER)
    await feed(system, TASK0[:3] + TASK1[:3])
    facts = [item for item in system.dump() if item["category"] == "facts"]
    assert [f["metadata"]["memory_content"] for f in facts] == ["User drinks coffee."]
    update_prompt = policy.seen[-1][1].messages[1].content
    assert f'"document": "{GREEN_TEA}"' in update_prompt and '"id": "0"' in update_prompt
    ops = [(op["op"], op["item_ids"]) for op in read_events(directory, "memory_op")]
    assert ("delete", ["f0001"]) in ops


async def test_update_rewrites_the_target_and_merges_its_sources(rec: Any) -> None:
    recorder, _ = rec
    policy = Policy()
    policy.formations += ["", formation(facts=[GREEN_TEA]), "", formation(facts=["User drinks green tea with honey."])]
    merged = "User drinks green tea with honey every morning."
    policy.updates.append(_call("update_item", {"id": "0", "document": merged}))
    system = make(recorder, policy)
    await system.reset(USER)
    await feed(system, TASK0[:3] + TASK1[:3])
    facts = [item for item in system.dump() if item["category"] == "facts"]
    assert len(facts) == 1 and facts[0]["id"] == "f0001"
    metadata = facts[0]["metadata"]
    assert metadata["memory_content"] == merged
    assert metadata["source_turn_ids"] == [["t0002"], ["t0004"]]
    assert facts[0]["content"].count("user said:") == 2 and "updated_time" in metadata


async def test_bad_policy_output_is_recorded_and_skipped(rec: Any) -> None:
    recorder, directory = rec
    policy = Policy()
    policy.formations += ["", formation(facts=[GREEN_TEA]), "no tool call at all",
                          '<tool_call>{"name": "create_fact", "arguments": {</tool_call>' + formation(facts=["User has a baby."]),
                          _call("drop_table", {})]
    policy.updates += [_call("update_item", {"id": "7", "document": "invented"}) + _call("ignore_item", {"reason": "x"})]
    system = make(recorder, policy)
    await system.reset(USER)
    await feed(system, TASK0[:3] + TASK1[:3] + TASK2[:1])
    facts = {item["id"]: item["metadata"]["memory_content"] for item in system.dump() if item["category"] == "facts"}
    assert facts == {"f0001": GREEN_TEA}  # the invented id is rejected; ignore keeps the store
    kinds = [e["error_type"] for e in errors(directory)]
    assert kinds == ["MemTNoToolCall", "MemTNoToolCall", "MemTToolCallUnparseable", "MemTInvalidTarget",
                     "MemTUnknownTool"]
    ignore = [op for op in read_events(directory, "memory_op") if op["op"] == "ignore"]
    assert ignore and ignore[0]["patch"] == []
    assert sum(1 for item in system.dump() if item["category"] == "turns") == 5  # every user-side turn kept raw


async def test_recorded_patches_rebuild_the_final_dump_and_calls_use_their_roles(rec: Any) -> None:
    recorder, directory = rec
    policy = Policy()
    policy.formations += [formation(persona="Likes short lists.", summary="Gardening."), formation(facts=[GREEN_TEA]),
                          formation(summary="Gardening, then dinner.", persona="Has a baby.", name="Mia"),
                          formation(facts=["User drinks green tea with honey."],
                                    experiences=["A burned pan of lentils set off the alarm: cook lentils slowly."])]
    policy.updates.append(_call("update_item", {"id": "0", "document": "User drinks green tea with honey."}))
    system = make(recorder, policy)
    await system.reset(USER)
    await feed(system, TASK0[:3] + TASK1[:3])
    with recorder.scope(user_id=USER, system="memt"):
        await system.search("what does the user drink", 5)
    with open_recording(directory) as reader:
        rebuilt = store_at(reader, unit=USER, system="memt", upto_seq=10**9)
        roles = {(e.role, e.model) for e in reader.iter_events(kinds=["llm_call"])}
    assert list(rebuilt.values()) == system.dump()
    assert roles == {("memory_writer", "scripted"), ("reader", "scripted")}
    personas = {item["metadata"]["name"]: item for item in system.dump() if item["category"] == "personas"}
    assert set(personas) == {"User", "Mia"}  # one profile per named person


# -- read side ------------------------------------------------------------------------------------
async def test_react_loop_stops_at_the_step_budget_and_deduplicates(rec: Any) -> None:
    recorder, directory = rec
    policy = Policy()
    policy.formations += ["", formation(facts=[GREEN_TEA, "User likes short lists."])]
    policy.react = lambda request: (_call("search_facts", {"query": "tea", "k": 5}) +
                                    _call("search_turns", {"query": "green tea morning", "k": 2}))
    system = make(recorder, policy)
    await system.reset(USER)
    await feed(system, TASK0)
    hits = await system.search("what does the user drink", 3)
    assert policy.count("react") == MAX_TOOL_STEPS
    assert len(hits) == 3 and len({hit.id for hit in hits}) == 3
    # as the release's memt search: the memory text only, not the source turns appended in the store
    assert all(SOURCE_MARK not in hit.item["content"] for hit in hits)
    assert set(hits[0].item) == {"id", "content", "category", "timestamp"}
    assert hits[0].score is not None and all((hits[i].score or 0) >= (hits[i + 1].score or 0) for i in range(2))
    last = policy.seen[-1][1].messages
    assert len(last) == 2 + 2 * (MAX_TOOL_STEPS - 1) and last[-1].content.startswith("<tool_response>")
    assert "[f0001]" in last[-1].content and not read_errors(directory)
    assert len(await system.search("what does the user drink", 10)) == 4  # 2 facts + 2 distinct turns


async def test_react_finish_summary_and_parse_failures(rec: Any) -> None:
    recorder, directory = rec
    policy = Policy()
    policy.formations += ["", formation(facts=[GREEN_TEA], summary="The user planned a gardening week.")]
    replies = iter(["<think>look at the summary</think>" + _call("get_summary", {}),
                    _call("search_experiences", {"query": "garden"}) + "\n" + _call("finish", {}),
                    _call("search_facts", {"query": "tea"}), '<tool_call>{"name": "search_facts", "arguments": {',
                    "The user drinks tea."])
    policy.react = lambda request: next(replies)
    system = make(recorder, policy)
    await system.reset(USER)
    await feed(system, TASK0)
    hits = await system.search("gardening plans", 5)
    assert [hit.id for hit in hits] == ["s0001"] and policy.count("react") == 2
    hits = await system.search("drinks", 5)  # a good step, then a truncated call: the loop ends with what it had
    assert [hit.id for hit in hits] == ["f0001"]
    assert await system.search("anything", 5) == []  # no tool call at all
    assert [e["error_type"] for e in read_errors(directory)] == ["MemTToolCallUnparseable", "MemTNoToolCall"]
    assert await system.search("anything", 0) == []


def test_parse_tool_calls_reads_the_usual_variants() -> None:
    assert parse_tool_calls('<tool_call>\n{"name": "search_turns", "arguments": "{\\"query\\": \\"tea\\", '
                            '\\"k\\": \\"3\\"}"}\n</tool_call>') == [ToolCall("search_turns", "tea", 3)]
    assert parse_tool_calls('<tool_call>{"name": "search_facts", "arguments": {"query": "x", "k": 99}}') == [
        ToolCall("search_facts", "x", 10)]
    assert parse_tool_calls('<tool_call>{"name": "search_summary"}</tool_call>') == [ToolCall("search_summary")]
    for text, error_type in [("no call here", "MemTNoToolCall"),
                             ('<tool_call>{"name": "drop_table", "arguments": {}}</tool_call>', "MemTUnknownTool"),
                             ('<tool_call>{"name": "search_facts", "arguments": {}}</tool_call>',
                              "MemTToolCallUnparseable"),
                             ('<think><tool_call>{"name": "finish"}</tool_call></think>', "MemTNoToolCall")]:
        with pytest.raises(ToolCallError) as err:
            parse_tool_calls(text)
        assert err.value.error_type == error_type


# -- wiring ---------------------------------------------------------------------------------------
def test_memt_is_registered_and_needs_chat_and_embedder() -> None:
    assert load_system_class("memt") is MemT
    with pytest.raises(ConfigError, match=r"needs a chat client \(role memory_writer\) and an embedder"):
        MemT(MemoryServices(recorder=Recorder(None), clock=SimClock()))
