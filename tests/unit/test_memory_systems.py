"""Memory systems: nomem, longctx_full, the registry, time travel over a recording, the example plug-in."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from memprobe_engine.errors import ConfigError, RecordingError
from memprobe_engine.events.header import new_header
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.writer import EventWriter, open_writer
from memprobe_engine.memory import registry
from memprobe_engine.memory.base import (
    Footprint,
    MemoryServices,
    MemorySystem,
    Observation,
    RecordedStore,
    ScoredItem,
    SimClock,
)
from memprobe_engine.memory.longctx_full import LongContextFull
from memprobe_engine.memory.nomem import NoMemory
from memprobe_engine.memory.registry import (
    BUILTIN_SYSTEMS,
    create_system,
    list_systems,
    load_system_class,
    validate_system_class,
)
from memprobe_engine.memory.timeline import CHECKPOINT_EVERY, StoreTimeline, record_snapshot, store_at, store_diff
from tests.doubles import BagOfWordsEmbedder

ROOT = Path(__file__).resolve().parents[2]


def HashingEmbedder() -> BagOfWordsEmbedder:  # noqa: N802 (kept as the tests' name for it)
    return BagOfWordsEmbedder(64, hashed=True)


@pytest.fixture
def recording(tmp_path: Path) -> Iterator[tuple[EventWriter, Recorder, Path]]:
    directory = tmp_path / "rec"
    writer = open_writer(directory, new_header("r", "test", {}))
    yield writer, Recorder(writer), directory
    writer.close()


def services(recorder: Recorder, embedder: HashingEmbedder | None = None) -> MemoryServices:
    return MemoryServices(recorder=recorder, clock=SimClock(), seed=7, embedder=embedder or HashingEmbedder())


def obs(kind: str, text: str, task_index: int = 1, turn: int = 0) -> Observation:
    return Observation(kind=kind, text=text, task_index=task_index, turn=turn,  # type: ignore[arg-type]
                       timestamp=f"2026-01-0{task_index}T09:0{turn}:00")


DIALOGUE = [
    obs("task", "Help me plan my week of gardening chores.", 1),
    obs("assistant", "Sure, here is a plan with watering on Monday.", 1, 1),
    obs("user", "I prefer blunt feedback and short bullet lists.", 1, 1),
    obs("task", "Suggest a recipe for dinner with lentils.", 2),
    obs("user", "I am allergic to peanuts, keep that in mind.", 2, 1),
]


# -- longctx_full ---------------------------------------------------------------------------------
async def test_longctx_full_stores_every_observation_verbatim_with_native_fields(recording: Any) -> None:
    _, recorder, _ = recording
    system = LongContextFull(services(recorder))
    with recorder.scope(user_id="u1", system="longctx_full"):
        await system.reset("u1")
        for observation in DIALOGUE:
            await system.observe(observation)
    dump = system.dump()
    assert [item["content"] for item in dump] == [
        "[Task 1] Help me plan my week of gardening chores.",
        "Agent: Sure, here is a plan with watering on Monday.",
        "User: I prefer blunt feedback and short bullet lists.",
        "[Task 2] Suggest a recipe for dinner with lentils.",
        "User: I am allergic to peanuts, keep that in mind."]
    assert [item["category"] for item in dump] == ["task", "agent_reply", "user_reply", "task", "user_reply"]
    assert dump[0] == {"id": "t0001", "content": dump[0]["content"], "category": "task", "task_index": 1,
                       "timestamp": "2026-01-01T09:00:00"}
    assert dump[2]["turn"] == 1 and dump[2]["task_index"] == 1 and "turn" not in dump[3]
    assert len({item["id"] for item in dump}) == 5
    assert system.footprint() == Footprint(n_items=5, total_chars=sum(len(item["content"]) for item in dump))


async def test_longctx_full_ops_rebuild_the_final_dump(recording: Any) -> None:
    writer, recorder, directory = recording
    system = LongContextFull(services(recorder))
    with recorder.scope(user_id="u1", system="longctx_full"):
        await system.reset("u1")
        for observation in DIALOGUE:
            await system.observe(observation)
    with open_recording(directory) as reader:
        ops = list(reader.iter_events(kinds=["memory_op"]))
        assert [op.op for op in ops] == ["reset"] + ["add"] * 5
        assert all(op.user_id == "u1" and op.system == "longctx_full" for op in ops)
        rebuilt = store_at(reader, unit="u1", system="longctx_full", upto_seq=writer.next_seq)
    assert list(rebuilt.values()) == system.dump()
    assert list(rebuilt) == [item["id"] for item in system.dump()]


async def test_longctx_full_search_ranks_the_relevant_item_first_and_embeds_each_item_once(recording: Any) -> None:
    _, recorder, _ = recording
    embedder = HashingEmbedder()
    system = LongContextFull(services(recorder, embedder))
    await system.reset("u1")
    for observation in DIALOGUE:
        await system.observe(observation)
    hits = await system.search("is the user allergic to peanuts", 3)
    assert len(hits) == 3 and all(isinstance(hit, ScoredItem) for hit in hits)
    assert hits[0].item["content"] == "User: I am allergic to peanuts, keep that in mind."
    assert hits[0].score is not None and hits[0].score >= (hits[1].score or 0.0)
    await system.observe(obs("user", "My tomatoes need watering every morning.", 3, 1))
    hits = await system.search("tomatoes watering", 1)
    assert hits[0].item["content"] == "User: My tomatoes need watering every morning."
    items_embedded = [text for text in embedder.embedded if text.startswith(("[Task", "User:", "Agent:"))]
    assert len(items_embedded) == 6  # every item once, never re-embedded
    assert await system.search("anything", 0) == []


class YieldingEmbedder(BagOfWordsEmbedder):
    """Hands control back to the event loop before answering, as the real (threaded) embedder does."""

    async def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        await asyncio.sleep(0)
        return await super().embed(texts)


async def test_longctx_full_concurrent_searches_embed_pending_items_once(recording: Any) -> None:
    """Dimensions are scored concurrently over one store: two searches that both find items pending
    must not append their rows twice (the matrix would outgrow the ids and a search would crash)."""
    _, recorder, _ = recording
    embedder = YieldingEmbedder(64, hashed=True)
    system = LongContextFull(services(recorder, embedder))
    await system.reset("u1")
    for observation in DIALOGUE:
        await system.observe(observation)
    results = await asyncio.gather(*(system.search(query, 5) for query in ("peanuts", "gardening", "lentils")))
    assert [len(hits) for hits in results] == [5, 5, 5]
    assert results[0][0].item["content"] == "User: I am allergic to peanuts, keep that in mind."
    items_embedded = [text for text in embedder.embedded if text.startswith(("[Task", "User:", "Agent:"))]
    assert len(items_embedded) == len(DIALOGUE)


async def test_longctx_full_reset_clears_store_and_search(recording: Any) -> None:
    _, recorder, _ = recording
    system = LongContextFull(services(recorder))
    await system.observe(DIALOGUE[0])
    await system.search("garden", 1)
    await system.reset("u2")
    assert system.dump() == [] and await system.search("garden", 5) == []
    await system.observe(DIALOGUE[4])
    assert [hit.item["content"] for hit in await system.search("peanuts", 5)] == [
        "User: I am allergic to peanuts, keep that in mind."]


def test_longctx_full_without_embedder_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs an embedder"):
        LongContextFull(MemoryServices(recorder=Recorder(None), clock=SimClock()))


async def test_nomem_keeps_nothing() -> None:
    system = NoMemory(MemoryServices(recorder=Recorder(None), clock=SimClock()))
    await system.reset("u1")
    for observation in DIALOGUE:
        await system.observe(observation)
    assert await system.search("peanuts", 5) == []
    assert system.dump() == [] and system.footprint() == Footprint(n_items=0, total_chars=0)


# -- registry -------------------------------------------------------------------------------------
def test_registry_resolves_builtin_names() -> None:
    assert load_system_class("nomem") is NoMemory
    assert load_system_class("longctx_full") is LongContextFull
    assert {"nomem", "longctx_full", "amem", "mem0", "memt"} <= set(BUILTIN_SYSTEMS)
    listed = {row.name: row for row in list_systems()}
    assert listed["nomem"].origin == "built-in" and listed["longctx_full"].description == LongContextFull.description
    system = create_system("nomem", MemoryServices(recorder=Recorder(None), clock=SimClock()))
    assert isinstance(system, NoMemory) and isinstance(system, MemorySystem)


def test_registry_reports_builtins_missing_from_this_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BUILTIN_SYSTEMS, "amem", "memprobe_engine.memory.no_such_module:AMem")
    with pytest.raises(ConfigError, match="system 'amem' is not available in this version"):
        load_system_class("amem")
    assert "amem" not in {row.name for row in list_systems()}


def test_registry_loads_module_class_paths() -> None:
    from examples.keyword_memory import KeywordMemory
    assert load_system_class("examples.keyword_memory:KeywordMemory") is KeywordMemory


@pytest.mark.parametrize(("path", "message"), [
    ("examples.no_such_module:Thing", "cannot import module 'examples.no_such_module'"),
    ("examples.keyword_memory:NoSuchClass", "has no attribute 'NoSuchClass'"),
    ("examples.keyword_memory:keywords", "is a function, not a class"),
    ("examples.keyword_memory.KeywordMemory", "Separate the module from the class with a colon"),
    ("no_such_system", "unknown memory system 'no_such_system'"),
])
def test_registry_bad_paths_give_clear_errors(path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_system_class(path)


def test_registry_finds_entry_point_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    group = "memprobe.memory_systems"
    plugins = {"keyword": EntryPoint("keyword", "examples.keyword_memory:KeywordMemory", group),
               "broken": EntryPoint("broken", "examples.no_such_module:Broken", group),
               "nomem": EntryPoint("nomem", "examples.keyword_memory:KeywordMemory", group)}
    monkeypatch.setattr(registry, "_entry_points", lambda: plugins)
    from examples.keyword_memory import KeywordMemory
    assert load_system_class("keyword") is KeywordMemory
    assert load_system_class("nomem") is NoMemory  # a built-in name is never taken over by a plug-in
    with pytest.raises(ConfigError, match="plug-in memory system 'broken'.*failed to load"):
        load_system_class("broken")
    rows = {row.name: row for row in list_systems()}
    assert rows["keyword"].description == KeywordMemory.description
    assert rows["keyword"].origin.startswith("plug-in examples.keyword_memory:KeywordMemory")
    assert rows["broken"].description.startswith("cannot be loaded")
    assert "shadowed by the built-in" in rows["examples.keyword_memory:KeywordMemory"].description


class NoSearch:
    name: ClassVar[str] = "nosearch"
    description: ClassVar[str] = "forgot its read interface"

    def __init__(self, services: MemoryServices) -> None:
        self.services = services

    async def reset(self, user_id: str) -> None: ...

    async def observe(self, observation: Observation) -> None: ...

    def dump(self) -> list[dict[str, Any]]:
        return []

    def footprint(self) -> Footprint:
        return Footprint(n_items=0, total_chars=0)


class SyncObserveNoName(NoSearch):
    name = ""

    def observe(self, observation: Observation) -> None:  # type: ignore[override]
        return None


def test_registry_rejects_classes_missing_protocol_members() -> None:
    with pytest.raises(ConfigError, match=r"missing: method `search` \(async def search"):
        load_system_class(f"{__name__}:NoSearch")
    with pytest.raises(ConfigError) as err:
        validate_system_class(SyncObserveNoName, "mine")
    assert "`name`" in str(err.value) and "method `observe` must be written as `async def observe" in str(err.value)
    assert "`search`" in str(err.value) and "docs/memory-systems.md" in str(err.value)


# -- timeline -------------------------------------------------------------------------------------
def test_store_at_intermediate_seq_and_store_diff(recording: Any) -> None:
    writer, recorder, directory = recording
    seen: list[tuple[int, dict[str, Any]]] = []
    store = RecordedStore(recorder)

    def mark() -> None:
        seen.append((writer.next_seq - 1, {item_id: dict(store.get(item_id)) for item_id in store.ids()}))

    with recorder.scope(user_id="u1", system="toy"):
        store.add("a", {"content": "likes tea"})
        mark()
        store.add("b", {"content": "lives in Oslo"})
        mark()
        with recorder.scope(user_id="u2"):
            RecordedStore(recorder).add("x", {"content": "another user"})
        store.update("a", {"content": "likes green tea"})
        mark()
        store.delete("b")
        mark()
        store.add("c", {"content": "has a dog"})
        mark()
    with open_recording(directory) as reader:
        timeline = StoreTimeline(reader)
        for seq, expected in seen:
            assert timeline.store_at(unit="u1", system="toy", upto_seq=seq) == expected
        assert timeline.store_at(unit="u1", system="toy", upto_seq=-1) == {}
        assert timeline.store_at(unit="u2", system="toy", upto_seq=10**6) == {"x": {"content": "another user"}}
        assert timeline.store_at(unit="u9", system="toy", upto_seq=10**6) == {}
        assert ("u2", "toy") in timeline.keys() and len(timeline.event_seqs(unit="u1", system="toy")) == 5
    diff = store_diff(seen[1][1], seen[4][1])
    assert (diff.added, diff.updated, diff.deleted) == (["c"], ["a"], ["b"])
    assert store_diff(seen[0][1], seen[0][1]).empty


def test_store_at_uses_checkpoints_and_snapshots_on_long_histories(recording: Any) -> None:
    writer, recorder, directory = recording
    store = RecordedStore(recorder)
    expected: dict[int, dict[str, Any]] = {}
    with recorder.scope(user_id="u1", system="toy"):
        for n in range(2 * CHECKPOINT_EVERY + 50):
            store.add(f"m{n}", {"content": f"fact {n}"})
            if n % 3 == 0 and n > 0:
                store.update(f"m{n - 1}", {"content": f"fact {n - 1} revised"})
            if n == CHECKPOINT_EVERY + 10:
                record_snapshot(recorder, {item_id: store.get(item_id) for item_id in store.ids()})
            expected[writer.next_seq - 1] = {item_id: dict(store.get(item_id)) for item_id in store.ids()}
    with open_recording(directory) as reader:
        timeline = StoreTimeline(reader)
        for seq in sorted(expected)[::-1][::37] + [max(expected)]:
            assert timeline.store_at(unit="u1", system="toy", upto_seq=seq) == expected[seq]
        track = timeline._tracks[("u1", "toy")]
        assert len(track.checkpoints) > 1  # later queries start from a checkpoint, not from seq 0


@pytest.mark.parametrize(("damage", "message"), [
    (lambda line: line.replace(b'"op":"add"', b'"op":42'), "line 1 is (not a valid event|damaged)"),  # sealed lines: an edit fails the seal
    (lambda line: line[:-3] + b"\n", "line 1 is damaged and may be a memory operation of unit u1"),
])
def test_store_at_refuses_to_skip_a_damaged_memory_line(recording: Any, damage: Any, message: str) -> None:
    writer, recorder, directory = recording
    store = RecordedStore(recorder)
    with recorder.scope(user_id="u1", system="toy"):
        store.add("a", {"content": "one"})
        store.add("b", {"content": "two"})
    writer.close()
    lines = (directory / "events.jsonl").read_bytes().splitlines(keepends=True)
    lines[0] = damage(lines[0])
    (directory / "events.jsonl").write_bytes(b"".join(lines))
    with open_recording(directory) as reader:
        with pytest.raises(RecordingError, match=message):
            store_at(reader, unit="u1", system="toy", upto_seq=1)


# -- the example plug-in --------------------------------------------------------------------------
async def test_example_keyword_memory_satisfies_the_protocol(recording: Any) -> None:
    _, recorder, directory = recording
    cls = load_system_class("examples.keyword_memory:KeywordMemory")
    system = create_system("examples.keyword_memory:KeywordMemory", services(recorder))
    assert isinstance(system, cls) and isinstance(system, MemorySystem)
    with recorder.scope(user_id="u1", system=cls.name):
        await system.reset("u1")
        for observation in DIALOGUE:
            await system.observe(observation)
    assert [item["content"] for item in system.dump()] == [o.text for o in DIALOGUE if o.kind == "user"]
    hits = await system.search("peanuts allergic", 5)
    assert hits[0].item["content"] == "I am allergic to peanuts, keep that in mind." and hits[0].score == 1.0
    with open_recording(directory) as reader:
        rebuilt = store_at(reader, unit="u1", system=cls.name, upto_seq=10**6)
    assert list(rebuilt.values()) == system.dump()


def test_docs_show_the_example_verbatim() -> None:
    doc = (ROOT / "docs" / "memory-systems.md").read_text()
    assert (ROOT / "examples" / "keyword_memory.py").read_text() in doc
    assert "memprobe.memory_systems" in doc and "--system examples.keyword_memory:KeywordMemory" in doc
