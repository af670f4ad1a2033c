"""The mem0ai, langmem and graphiti adapters over their real libraries, with a scripted model behind the proxy.

Fast (no embedded model): the library's own code runs, its requests cross the loopback proxy as
real HTTP, and a scripted backend answers them — a JSON object for mem0ai's extraction, a tool call
for langmem's memory manager, graphiti's entity / fact / timestamp JSON (by the schema it sends). Checked: the calls are recorded with the system's name and role, the
store's change is recorded as a memory op with the library's native fields, the simulated clock
and the seeded ids reach the library (two runs with one seed give the same store), and a search
is the library's own. Part of `make test`, which installs the three extras and sets
``MEMPROBE_REQUIRE_EXTRAS`` (a missing library then fails); elsewhere skipped without the extra.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.proxy import close_shared_proxies
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory.base import MemoryServices, Observation, SimClock
from memprobe_engine.memory.registry import load_system_class
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, read_events, temp_recording

FACT = "User is vegetarian and lives in Oslo."


def _require(distribution: str, extra: str) -> None:
    """Skip when the library is not installed, unless ``MEMPROBE_REQUIRE_EXTRAS`` is set (``make test``
    sets it after installing the extras): there a missing library fails the test, never skips it."""
    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        reason = f"{distribution} is not installed: pip install 'memprobe[{extra}]' (make test installs it)"
        if os.environ.get("MEMPROBE_REQUIRE_EXTRAS"):
            pytest.fail(reason + "; MEMPROBE_REQUIRE_EXTRAS is set, so this does not skip")
        pytest.skip(reason)


def _tool_names(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["const"]] if isinstance(node.get("const"), str) else []
        return found + [name for value in node.values() for name in _tool_names(value)]
    if isinstance(node, list):
        return [name for value in node for name in _tool_names(value)]
    return []


#: graphiti's replies, by the top-level property of the schema each of its prompts sends.
GRAPHITI_REPLIES: dict[str, Any] = {
    "extracted_entities": {"extracted_entities": [{"name": "User", "entity_type_id": 0},
                                                  {"name": "Oslo", "entity_type_id": 0}]},
    "edges": {"edges": [{"source_entity_name": "User", "target_entity_name": "Oslo", "relation_type": "LIVES_IN",
                         "fact": FACT, "valid_at": None, "invalid_at": None}]},
    "valid_at": {"valid_at": None, "invalid_at": None},
    "summaries": {"summaries": []},
    "entity_resolutions": {"entity_resolutions": []},
    "duplicate_facts": {"duplicate_facts": [], "contradicted_facts": []},
}


def answer(request: ChatRequest) -> str:
    properties = (request.response_schema or {}).get("properties") or {}
    for key, reply in GRAPHITI_REPLIES.items():
        if key in properties:
            return json.dumps(reply)
    tools = _tool_names(request.response_schema)
    if "Memory" in tools:  # langmem's insert tool
        return json.dumps({"tool_calls": [{"name": "Memory", "arguments": {"content": FACT}}]})
    if tools:
        return json.dumps({"content": "nothing to change"})
    return json.dumps({"memory": [{"id": "0", "text": FACT, "attributed_to": "user"}]})  # mem0ai's extraction


async def _run(system: str, record: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    backend = ScriptedBackend(answer)
    with temp_recording(record) as recorder:
        chat = ChatClient(load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"]), recorder,
                          backend_factory=lambda spec: backend)
        services = MemoryServices(recorder=recorder, clock=SimClock(), seed=7, chat=chat,
                                  embedder=BagOfWordsEmbedder(dim=384, hashed=True))
        adapter_class: Any = load_system_class(system)  # an adapter: it takes the services
        memory = adapter_class(services)
        with recorder.span(f"u1 × {system}", "unit", user_id="u1", system=system):
            await memory.reset("u1")
            services.clock.advance(days=2)
            for kind, text in (("task", "I'm vegetarian and I live in Oslo."), ("assistant", "Noted!")):
                await memory.observe(Observation(kind=kind, text=text, task_index=0,
                                                 timestamp=services.clock.iso()))
            hits = await memory.search("where does the user live", 3)
            dump = memory.dump()
        await close_shared_proxies()
        await chat.aclose()
    return dump, hits


@pytest.mark.parametrize(("system", "distribution", "text_field", "time_field"), [
    ("mem0ai", "mem0ai", "memory", "created_at"), ("langmem", "langmem", "content", "created_at")])
async def test_library_store_and_calls_are_recorded_reproducibly(tmp_path: Path, system: str, distribution: str,
                                                                 text_field: str, time_field: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _require(distribution, system)
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0-home"))
    dump, hits = await _run(system, tmp_path / "one")
    again, _ = await _run(system, tmp_path / "two")
    assert [item[text_field] for item in dump] == [FACT]
    assert dump[0][time_field].startswith("2026-01-07T09:00:00")  # the simulated clock, not the wall clock
    assert again == dump  # same seed, same ids and timestamps: the store replays identically
    assert hits and hits[0].item[text_field] == FACT
    calls = read_events(tmp_path / "one")
    assert calls and all(c["system"] == system and c["role"] == "memory_writer" for c in calls)
    ops = read_events(tmp_path / "one", "memory_op")
    assert [op["op"] for op in ops] == ["reset", "add"] and ops[1]["system"] == system
    assert ops[1]["patch"][0]["value"][text_field] == FACT
    assert (tmp_path / "one" / "stores" / system / "u1").is_dir()  # the library's own store, in the run folder


async def test_graphiti_builds_its_graph_and_searches_it_with_full_text_and_capped_calls(tmp_path: Path) -> None:
    """graphiti-core 0.31.2 on Kuzu: the adapter creates the full-text indices the library's own
    setup leaves out (without them the first add_episode fails in edge resolution), and every call
    asks for at most the adapter's token cap (graphiti itself asks 16,384 for edge extraction)."""
    _require("graphiti-core", "graphiti")
    from memprobe_engine.memory.adapters.graphiti import MAX_TOKENS

    dump, hits = await _run("graphiti", tmp_path / "one")
    again, _ = await _run("graphiti", tmp_path / "two")
    by_type = {item["type"]: item for item in dump}
    assert sorted(item["type"] for item in dump) == ["entity", "entity", "episode", "fact"]
    assert by_type["fact"]["fact"] == FACT and by_type["episode"]["valid_at"].startswith("2026-01-07T09:00:00")
    assert again == dump  # seeded ids, simulated clock: the graph replays identically
    assert hits and hits[0].item["fact"] == FACT  # graphiti's hybrid search over the fact edges
    calls = read_events(tmp_path / "one")
    assert len(calls) >= 3 and all(c["system"] == "graphiti" and c["role"] == "memory_writer" for c in calls)
    assert all(0 < c["params"]["max_tokens"] <= MAX_TOKENS for c in calls)
    ops = read_events(tmp_path / "one", "memory_op")
    assert [op["op"] for op in ops][:1] == ["reset"] and {op["op"] for op in ops[1:]} == {"add"}


async def test_graphiti_full_text_search_finds_a_resaved_fact_for_a_question(tmp_path: Path) -> None:
    """A protocol-A retrieve query is a question: graphiti-core 0.31.2 hands it to Kuzu's full-text
    search unchanged, and Kuzu 0.11 reads ``?`` and ``*`` as wildcards. A wildcard term sends the
    query down Kuzu's pattern-matching path, which (kuzu 0.11.3) misses the terms only one fact holds
    once graphiti has saved that fact again (the second episode repeats it, so the edge is merged and
    re-written): the question found nothing, the same words without ``?`` found the fact. The vector half cannot find it here (one shared word is below graphiti's 0.6
    cosine floor), so a hit shows the full-text half read the question's words."""
    _require("graphiti-core", "graphiti")
    from memprobe_engine.memory.adapters.graphiti import Graphiti

    backend = ScriptedBackend(answer)
    with temp_recording(tmp_path / "rec") as recorder:
        chat = ChatClient(load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"]), recorder,
                          backend_factory=lambda spec: backend)
        services = MemoryServices(recorder=recorder, clock=SimClock(), seed=7, chat=chat,
                                  embedder=BagOfWordsEmbedder(dim=384, hashed=True))
        memory = Graphiti(services)
        with recorder.span("u1 × graphiti", "unit", user_id="u1", system="graphiti"):
            await memory.reset("u1")
            for task, text in enumerate(("I'm vegetarian and I live in Oslo.", "Still in Oslo, still vegetarian.")):
                for kind, said in (("task", text), ("assistant", "Noted!")):
                    await memory.observe(Observation(kind=kind, text=said, task_index=task,
                                                     timestamp=services.clock.iso()))
                await memory.finish()
            facts = [item for item in memory.dump() if item["type"] == "fact"]
            plain = await memory.search("Where does the user live", 3)
            question = await memory.search("Where does the user live?", 3)
            starred = await memory.search("Where does the user live*", 3)
        await close_shared_proxies()
        await chat.aclose()
    assert [fact["fact"] for fact in facts] == [FACT] and len(facts[0]["episodes"]) == 2  # merged, saved twice
    assert [hit.item["fact"] for hit in plain] == [FACT]
    assert [hit.item["fact"] for hit in question] == [FACT]
    assert [hit.item["fact"] for hit in starred] == [FACT]
