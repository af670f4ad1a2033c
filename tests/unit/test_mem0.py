"""mem0 against scripted memory_writer replies: extraction, ADD/UPDATE/DELETE/NONE, rejected ids, replay."""

from __future__ import annotations

import json
import re
from pathlib import Path

from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory.base import MemoryServices, MemorySystem, Observation, SimClock
from memprobe_engine.memory.mem0 import EXTRACT_SYSTEM, UPDATE_SYSTEM, Mem0
from memprobe_engine.memory.timeline import store_at
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, read_events, temp_recording

VocabEmbedder = BagOfWordsEmbedder


#: New user message -> the facts the extraction call returns ("JUNK" replies are not JSON).
FACTS: dict[str, list[str] | str] = {
    "Help me plan meals for the week.": ["User wants help planning meals for the week."],
    "I'm vegetarian and I live in Oslo.": ["User is vegetarian.", "User lives in Oslo."],
    "I moved to Berlin last month, and I eat fish now.": ["User lives in Berlin.", "User eats fish now."],
    "Please keep it short.": "JUNK",
}


def memory_ids(body: str) -> dict[str, str]:
    """Existing memory content -> the small id the update prompt gave it."""
    return {content: small for small, content in re.findall(r'^id "(\d+)": (.*)$', body, re.MULTILINE)}


def reply(request: ChatRequest) -> str:
    system, body = request.messages[0].content, request.messages[1].content
    if system == EXTRACT_SYSTEM:
        facts = FACTS[body.split("NEW USER MESSAGE\n", 1)[1]]
        return facts if isinstance(facts, str) else json.dumps({"facts": facts})
    assert system == UPDATE_SYSTEM
    ids = memory_ids(body)
    if "0: User is vegetarian." in body:
        events = [{"fact": 0, "event": "ADD", "target": "", "text": ""},
                  {"fact": 1, "event": "ADD", "target": "", "text": "User lives in Oslo, Norway."}]
    else:
        events = [
            {"fact": 0, "event": "UPDATE", "target": ids["User lives in Oslo, Norway."],
             "text": "User lives in Berlin, having moved from Oslo."},
            {"fact": 1, "event": "DELETE", "target": ids["User is vegetarian."], "text": ""},
            {"fact": 1, "event": "ADD", "target": "", "text": ""},
            {"fact": 1, "event": "UPDATE", "target": "9", "text": "invented target"},
            {"fact": 1, "event": "DELETE", "target": "f0123456789ab", "text": ""},
            {"fact": 1, "event": "UPDATE", "target": ids["User is vegetarian."], "text": "deleted above"},
            {"fact": 5, "event": "ADD", "target": "", "text": "no such fact"},
            {"fact": 0, "event": "NONE", "target": "", "text": ""},
        ]
    return json.dumps({"events": events})


def make_services(recorder: Recorder, backend: ScriptedBackend) -> MemoryServices:
    config = load_llm_config(None, {}, ["openai:test-model@http://127.0.0.1:1/v1"])
    return MemoryServices(recorder=recorder, clock=SimClock(), seed=11, embedder=VocabEmbedder(),
                          chat=ChatClient(config, recorder, backend_factory=lambda spec: backend))


def obs(kind: str, text: str, turn: int = 0) -> Observation:
    return Observation(kind=kind, text=text, task_index=1, turn=turn,  # type: ignore[arg-type]
                       timestamp="2026-01-05T09:00:00")


DIALOGUE = [obs("task", "Help me plan meals for the week."),
            obs("assistant", "Sure, any dietary needs?", 1),
            obs("user", "I'm vegetarian and I live in Oslo.", 1),
            obs("assistant", "Noted, here is a plan.", 2),
            obs("user", "I moved to Berlin last month, and I eat fish now.", 2),
            obs("user", "Please keep it short.", 3)]


async def run_dialogue(directory: Path) -> tuple[Mem0, ScriptedBackend]:
    backend = ScriptedBackend(reply)
    with temp_recording(directory) as recorder:
        services = make_services(recorder, backend)
        system = Mem0(services)
        with recorder.scope(user_id="u1", system="mem0"):
            await system.reset("u1")
            for observation in DIALOGUE:
                services.clock.advance(minutes=2)
                await system.observe(observation)
    return system, backend


async def test_mem0_consolidates_facts_with_update_delete_and_add(tmp_path: Path) -> None:
    system, backend = await run_dialogue(tmp_path / "rec")
    assert isinstance(system, MemorySystem)
    dump = {item["content"]: item for item in system.dump()}
    assert list(dump) == ["User wants help planning meals for the week.",
                          "User lives in Berlin, having moved from Oslo.", "User eats fish now."]
    berlin = dump["User lives in Berlin, having moved from Oslo."]
    assert berlin["category"] == "fact" and berlin["metadata"] == {"task_index": 1, "turn": 1}
    assert berlin["timestamp"] == "2026-01-05T09:10:00"  # the simulated time of the UPDATE
    assert berlin["history"] == [
        {"timestamp": "2026-01-05T09:06:00", "event": "ADD", "old": None, "new": "User lives in Oslo, Norway."},
        {"timestamp": "2026-01-05T09:10:00", "event": "UPDATE", "old": "User lives in Oslo, Norway.",
         "new": "User lives in Berlin, having moved from Oslo."}]
    assert dump["User eats fish now."]["history"][0]["event"] == "ADD"  # an empty ADD text stores the fact
    assert set(berlin) == {"id", "content", "category", "metadata", "timestamp", "history"}
    # No update call while the store was empty; assistant turns are never extracted from, only shown.
    calls = [request.messages[0].content for request in backend.requests]
    assert calls.count(UPDATE_SYSTEM) == 2 and calls.count(EXTRACT_SYSTEM) == 4 + 2  # + 2 repair rounds
    second_extraction = backend.requests[1].messages[1].content
    assert "[assistant] Sure, any dietary needs?" in second_extraction
    assert "[user] Help me plan meals for the week." in second_extraction
    hits = await system.search("lives in Berlin", 1)
    assert [hit.item["content"] for hit in hits] == ["User lives in Berlin, having moved from Oslo."]
    assert hits[0].score is not None and hits[0].score > 0


async def test_mem0_rejects_invented_ids_and_records_exclusions(tmp_path: Path) -> None:
    system, _ = await run_dialogue(tmp_path / "rec")
    errors = read_events(tmp_path / "rec", "error")
    kinds = [(error["where"], error["error_type"], error["recoverable"]) for error in errors]
    assert kinds == [("mem0", "RejectedMemoryEvent", True), ("mem0", "WriteExcluded", True)]
    rejected = errors[0]["message"]
    assert "UPDATE of id '9'" in rejected and "DELETE of id 'f0123456789ab'" in rejected
    assert "deleted earlier in this batch" in rejected and "fact 5: no such fact" in rejected
    assert "turn 3" in errors[1]["message"]
    ops = read_events(tmp_path / "rec", "memory_op")
    assert [op["op"] for op in ops] == ["reset", "add", "add", "add", "update", "delete", "add"]
    assert all(op["user_id"] == "u1" and op["system"] == "mem0" for op in ops)
    assert len(system.dump()) == 3 and system.footprint().n_items == 3


async def test_mem0_recorded_patches_rebuild_the_dump(tmp_path: Path) -> None:
    system, _ = await run_dialogue(tmp_path / "rec")
    last = read_events(tmp_path / "rec", "memory_op")[-1]["seq"]
    with open_recording(tmp_path / "rec") as reader:
        rebuilt = store_at(reader, unit="u1", system="mem0", upto_seq=last)
    assert rebuilt == {item["id"]: item for item in system.dump()}


async def test_mem0_reset_forgets_store_embeddings_and_context(tmp_path: Path) -> None:
    backend = ScriptedBackend(reply)
    with temp_recording(tmp_path / "rec") as recorder:
        system = Mem0(make_services(recorder, backend))
        with recorder.scope(user_id="u1", system="mem0"):
            await system.reset("u1")
            for observation in DIALOGUE[:3]:
                await system.observe(observation)
        assert len(system.dump()) == 3
        with recorder.scope(user_id="u2", system="mem0"):
            await system.reset("u2")
            assert system.dump() == [] and await system.search("Oslo", 5) == []
            await system.observe(obs("user", "I'm vegetarian and I live in Oslo.", 1))
    assert "EARLIER MESSAGES (context only)\n(none)" in backend.requests[-1].messages[1].content
    assert [item["content"] for item in system.dump()] == ["User is vegetarian.", "User lives in Oslo."]
