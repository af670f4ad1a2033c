"""The incremental protocol: how sessions become observations, spans and a store rebuildable per session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from memprobe_engine.events.reader import open_recording
from memprobe_engine.memory.base import (
    Footprint,
    MemoryServices,
    Observation,
    ScoredItem,
    SimClock,
)
from memprobe_engine.memory.longctx_full import LongContextFull
from memprobe_engine.memory.timeline import store_at
from memprobe_engine.paradigms.protocol import (
    ingest_episode,
    observation_kind,
    session_observations,
)
from memprobe_engine.paradigms.suite import Episode, Session, Turn, load_suite
from tests.doubles import BagOfWordsEmbedder, temp_recording

SAMPLE = Path(__file__).resolve().parents[2] / "sessions" / "paradigms" / "upstream-sample"


def _episode(sessions: int = 3) -> Episode:
    episode = load_suite(SAMPLE).episodes[0]
    agentic = Session(session_idx=1, phase="encoding", session_type="encoding", dialogue=[
        Turn(role="user", content="Check the deploy config for me."),
        Turn(role="tool_output", content="config: region=eu-west-1"),
        Turn(role="assistant", content="It deploys to eu-west-1."),
        Turn(role="user", content="Thanks.")])
    chosen = [episode.sessions[0], agentic, *episode.sessions[2:sessions]]
    # out of order on purpose: ingestion follows session_idx, not list order
    return episode.model_copy(update={"sessions": list(reversed(chosen))})


class Noting:
    """A plug-in-shaped system that notes what it was given (tests only)."""

    name: ClassVar[str] = "noting"
    description: ClassVar[str] = "notes observations"

    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def reset(self, user_id: str) -> None:
        self.calls.append(("reset", user_id))

    async def observe(self, observation: Observation) -> None:
        self.calls.append(observation)

    async def finish(self) -> None:
        self.calls.append("finish")

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        return []

    def dump(self) -> list[dict[str, Any]]:
        return []

    def footprint(self) -> Footprint:
        return Footprint(n_items=0, total_chars=0)


def test_turn_roles_map_to_observation_kinds() -> None:
    assert observation_kind("user", first_user_turn=True) == "task"
    assert observation_kind("user", first_user_turn=False) == "user"
    assert observation_kind("assistant", first_user_turn=False) == "assistant"
    assert observation_kind("tool_output", first_user_turn=False) == "tool_output"
    clock = SimClock()
    observed = session_observations(_episode().sessions[-2], clock)
    assert [o.kind for o in observed] == ["task", "tool_output", "assistant", "user"]
    assert {o.task_index for o in observed} == {1}
    assert [o.turn for o in observed] == [0, 1, 2, 3]
    assert sorted(o.timestamp for o in observed) == [o.timestamp for o in observed]


def test_episode_is_reset_then_ingested_in_session_order_with_finish_per_session(tmp_path: Path) -> None:
    episode = _episode()
    system = Noting()
    with temp_recording(tmp_path / "rec") as recorder:
        asyncio.run(ingest_episode(system, episode, recorder=recorder, clock=SimClock()))
    assert system.calls[0] == ("reset", episode.episode_id)
    sessions_seen = [c.task_index for c in system.calls if isinstance(c, Observation)]
    assert sessions_seen == sorted(sessions_seen) and set(sessions_seen) == {0, 1, 2}
    # finish() closes every session, right after its last observation
    finishes = [i for i, c in enumerate(system.calls) if c == "finish"]
    assert len(finishes) == 3 and finishes[-1] == len(system.calls) - 1
    # the session's labels never reach the system
    texts = " ".join(c.text for c in system.calls if isinstance(c, Observation))
    assert "encoding" not in texts and "perturbation" not in texts
    with open_recording(tmp_path / "rec") as rec:
        events = list(rec.iter_events())
    sessions = [e for e in events if e.kind == "span_begin" and e.span_kind == "session"]
    assert [s.attrs["session_idx"] for s in sessions] == [0, 1, 2]
    ingests = [e for e in events if e.kind == "session_ingest"]
    assert [i.session_idx for i in ingests] == [0, 1, 2]
    assert [t.role for t in ingests[1].turns] == ["user", "tool_output", "assistant", "user"]
    assert ingests[0].clock is not None and ingests[0].clock < ingests[1].clock < ingests[2].clock  # type: ignore[operator]
    # long turns are stored once in the payload file, short ones inline
    assert any(t.content_ref for t in ingests[0].turns) and ingests[1].turns[1].content == "config: region=eu-west-1"


def test_store_can_be_rebuilt_after_every_session(tmp_path: Path) -> None:
    episode = _episode(sessions=5)
    dumps: list[tuple[int, list[dict[str, Any]]]] = []
    with temp_recording(tmp_path / "rec") as recorder:
        services = MemoryServices(recorder=recorder, clock=SimClock(), embedder=BagOfWordsEmbedder(hashed=True))
        system = LongContextFull(services)
        original = system.finish if hasattr(system, "finish") else None
        assert original is None  # longctx_full has no batch hook: note the store when each session ends

        async def noted() -> None:
            assert recorder.writer is not None
            dumps.append((recorder.writer.next_seq - 1, system.dump()))

        system.finish = noted  # type: ignore[attr-defined]
        with recorder.scope(unit=episode.episode_id, system="longctx_full"):
            asyncio.run(ingest_episode(system, episode, recorder=recorder, clock=services.clock))
    assert len(dumps) == 5
    with open_recording(tmp_path / "rec") as rec:
        for seq, dumped in dumps:
            rebuilt = store_at(rec, unit=episode.episode_id, system="longctx_full", upto_seq=seq)
            assert list(rebuilt.values()) == dumped
    sizes = [len(d) for _, d in dumps]
    assert sizes == sorted(sizes) and sizes[0] > 0
    tool_items = [item for item in dumps[-1][1] if item["category"] == "tool_output"]
    assert [item["content"] for item in tool_items] == ["Tool: config: region=eu-west-1"]


def test_session_granularity_offers_one_transcript_per_session(tmp_path: Path) -> None:
    episode = _episode()
    system = Noting()
    with temp_recording(tmp_path / "rec") as recorder:
        asyncio.run(ingest_episode(system, episode, recorder=recorder, clock=SimClock(), granularity="session"))
    observed = [c for c in system.calls if isinstance(c, Observation)]
    assert [(o.kind, o.task_index) for o in observed] == [("task", 0), ("task", 1), ("task", 2)]
    assert observed[1].text == ("User: Check the deploy config for me.\nTool output: config: region=eu-west-1\n"
                                "Assistant: It deploys to eu-west-1.\nUser: Thanks.")
    assert system.calls.count("finish") == 3
