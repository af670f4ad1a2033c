"""memoryos against scripted memory_writer replies: the FIFO, chaining, segments, heat, long-term tiers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory import memoryos as mos
from memprobe_engine.memory import memoryos_prompts as prompts
from memprobe_engine.memory.base import (
    MemoryServices,
    MemorySystem,
    Observation,
    SimClock,
)
from memprobe_engine.memory.timeline import store_at
from tests.doubles import (
    BagOfWordsEmbedder,
    ScriptedBackend,
    read_events,
    temp_recording,
)


def reply(request: ChatRequest) -> str:
    system, body = request.messages[0].content, request.messages[1].content
    if system == prompts.CONTINUITY_SYSTEM:
        # Cooking pages continue each other; anything else starts a new chain.
        first, second = body.split("\n\nSECOND\n", 1)
        return json.dumps({"reason": "r", "continuous": "cook" in first and "cook" in second})
    if system == prompts.META_SYSTEM:
        return json.dumps({"meta_info": "The user is cooking." if "cook" in body else "Travel planning."})
    if system == prompts.THEMES_SYSTEM:
        if "cook" in body:
            return json.dumps({"themes": [{"theme": "cooking", "keywords": ["cooking", "food"],
                                           "summary": "The user cooks vegetarian food at home."}]})
        return json.dumps({"themes": [{"theme": "travel", "keywords": ["travel"],
                                       "summary": "The user plans a trip by train."}]})
    if system == prompts.PROFILE_SYSTEM:
        return json.dumps({"profile": "Vegetarian home cook."})
    assert system == prompts.KNOWLEDGE_SYSTEM
    return json.dumps({"user_knowledge": ["User is vegetarian."], "assistant_knowledge": ["Suggested lentil soup."]})


def _system(recorder: object, backend: ScriptedBackend) -> mos.MemoryOS:
    chat = ChatClient(load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"]), recorder,  # type: ignore[arg-type]
                      backend_factory=lambda spec: backend)
    return mos.MemoryOS(MemoryServices(recorder=recorder, clock=SimClock(), seed=3, chat=chat,  # type: ignore[arg-type]
                                       embedder=BagOfWordsEmbedder()))


async def _exchange(system: mos.MemoryOS, user: str, assistant: str, turn: int) -> None:
    system.services.clock.advance(minutes=5)
    await system.observe(Observation(kind="user", text=user, task_index=0, turn=turn, timestamp=system.services.clock.iso()))
    await system.observe(Observation(kind="assistant", text=assistant, task_index=0, turn=turn,
                                     timestamp=system.services.clock.iso()))


async def test_pages_flow_from_the_fifo_into_segments_and_a_hot_segment_feeds_long_term(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mos, "SHORT_TERM_CAPACITY", 2)
    backend = ScriptedBackend(reply)
    with temp_recording(tmp_path / "rec") as recorder:
        system = _system(recorder, backend)
        assert isinstance(system, MemorySystem)
        with recorder.span("u1 × memoryos", "unit", user_id="u1", system="memoryos"):
            await system.reset("u1")
            for turn in range(1, 7):
                await _exchange(system, f"I like to cook vegetarian dish {turn}", f"Try a cook recipe {turn}", turn)
            await _exchange(system, "Book me a train to Rome", "Here are train times", 7)
        items = {item_id: item for item_id, item in zip(system.store.ids(), system.dump())}
    pages = [i for i in items.values() if i["type"] == "page"]
    segments = [i for i in items.values() if i["type"] == "segment"]
    assert [p["tier"] for p in pages].count("short") == 2  # the FIFO holds its capacity
    cooking = next(s for s in segments if "cooking" in s["keywords"])
    assert len(cooking["pages"]) == 5  # five evicted cooking pages joined one segment by topic match
    mid = [p for p in pages if p["tier"] == "mid"]
    assert all(p["meta_info"] == "The user is cooking." for p in mid)
    linked = [p for p in mid if p["pre_page"]]
    assert len(linked) == 4 and all(items[p["pre_page"]]["next_page"] for p in linked)  # one continuous chain
    # The cooking segment got hot (L_interaction ≥ 4 pages + recency) and was analysed into long-term memory.
    assert items["profile"]["profile"] == "Vegetarian home cook."
    assert {i["knowledge"] for i in items.values() if i["type"] in ("user_knowledge", "assistant_knowledge")} == {
        "User is vegetarian.", "Suggested lentil soup."}
    assert cooking["L_interaction"] < 5 and all(items[p]["analyzed"] for p in cooking["pages"][:4])
    ops = {event["op"] for event in read_events(tmp_path / "rec", "memory_op")}
    assert {"add_page", "move_to_mid", "new_segment", "merge_segment", "update_profile", "cool_segment"} <= ops
    with open_recording(tmp_path / "rec") as reader:  # the store rebuilt from the recorded patches
        assert store_at(reader, unit="u1", system="memoryos", upto_seq=10**9) == items


async def test_search_puts_the_profile_first_and_visits_retrieved_segments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mos, "SHORT_TERM_CAPACITY", 2)
    with temp_recording(tmp_path / "rec") as recorder:
        system = _system(recorder, ScriptedBackend(reply))
        await system.reset("u1")
        for turn in range(1, 7):
            await _exchange(system, f"I like to cook vegetarian dish {turn}", f"Try a cook recipe {turn}", turn)
        before = {i: dict(system.store.get(i)) for i in system.store.ids() if system.store.get(i)["type"] == "segment"}
        hits = await system.search("vegetarian cook recipe", 5)
        assert hits[0].id == "profile" and len(hits) == 5
        assert all(h.score is not None for h in hits[1:]) and hits[1].score >= hits[-1].score  # type: ignore[operator]
        visited = [i for i in before if system.store.get(i)["N_visit"] == before[i]["N_visit"] + 1]
        assert visited  # a retrieval counts as a visit of the segments it reached
        assert await system.search("anything", 0) == []
