"""Engine-side replay queries of a paradigm recording (no Textual): the episode list with per-probe
scores (latest re-score counted), the session stepper's store growth and per-session diff, the probe
detail's gold and answer, and the live probe re-run appending a probe_score with ``rescore_of``."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from memprobe_engine.errors import ConfigError, RecordingError
from memprobe_engine.events.paradigms import ProbeScore
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.run import RunEnd, SpanEnd
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.paradigms.read.ingest import session_detail, store_growth
from memprobe_engine.paradigms.read.probe import probe_detail
from memprobe_engine.paradigms.read.queries import (
    episode_rows,
    episode_steps,
    is_paradigm_recording,
    paradigm_systems,
    score_cells,
    system_accuracy,
)
from memprobe_engine.paradigms.rerun import (
    ProbeRerunRequest,
    gather_probe,
    reader_config,
    rerun_probe,
)
from memprobe_engine.replay import ReplaySession
from tests.doubles import ScriptedBackend
from memprobe_engine.protocols import open_session

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "paradigm" / "run"
RECOVERY = Path(__file__).resolve().parents[1] / "fixtures" / "tui" / "run"


@pytest.fixture
def session() -> Iterator[ReplaySession]:
    opened = open_session(FIXTURE)
    opened.build_index()
    yield opened
    opened.close()


def test_a_paradigm_recording_is_recognised_by_its_header_and_a_recovery_one_is_not(session: ReplaySession) -> None:
    assert is_paradigm_recording(session)
    other = open_session(RECOVERY)
    try:
        assert not is_paradigm_recording(other)
    finally:
        other.close()


def test_episode_rows_carry_the_labels_and_the_current_score_of_every_probe(session: ReplaySession) -> None:
    assert paradigm_systems(session) == ["amem", "full_context"]
    rows = {r.episode_id: r for r in episode_rows(session, "amem")}
    update = rows["PILOT-01A"]
    assert (update.paradigm, update.condition, update.expected_behavior, update.split) == (
        "interference", "authoritative_update", "should_update", False)
    assert update.sessions == 21 and update.status == "ok" and update.store_unit == "PILOT-01A"
    assert [c.probe_type for c in update.probes] == ["current_value", "previous_value", "change_detection", "temporal"]
    # probe 0 was 0 and re-scored to 1: the latest counts, the original stays on record
    first = update.probes[0]
    assert first.original is not None and first.original["score"] == 0.0
    assert first.rescores == 1 and first.value == 1.0
    # accuracy counts a probe correct at score 1 (partial credit is not), as the report does
    assert first.correct and not update.probes[3].correct
    assert update.accuracy == pytest.approx(2 / 4)
    assert update.mean_score == pytest.approx((1.0 + 1.0 + 0.0 + 0.5) / 4)


def test_an_execution_error_is_excluded_from_the_accuracy_and_counted(session: ReplaySession) -> None:
    rows = episode_rows(session, "full_context")
    decoy = next(r for r in rows if r.episode_id == "PILOT-01B")
    assert decoy.probes[3].value is None and decoy.probes[3].current is not None
    assert decoy.accuracy == pytest.approx(1 / 3) and decoy.probes[3].correct is None
    totals = system_accuracy(rows)
    assert (totals.scored, totals.excluded) == (7, 1)
    assert totals.accuracy == pytest.approx(4 / 7)
    assert totals.mean_score == pytest.approx((1 + 1 + 1 + 0.5 + 0 + 1 + 0) / 7)


def test_store_growth_follows_the_amem_store_session_by_session(session: ReplaySession) -> None:
    steps = episode_steps(session, "PILOT-01A", "amem")
    assert steps is not None and len(steps.sessions) == 21 and len(steps.probes) == 4
    growth = store_growth(session, steps)
    sizes = [g.size for g in growth]
    assert sizes[:3] == [1, 2, 3]  # one note per encoding session
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]
    # the perturbation session adds its notes and evolves the first one
    perturbation = next(i for i, s in enumerate(steps.sessions) if s.phase == "perturbation")
    assert growth[perturbation].updated == 1 and growth[perturbation].added == 2
    assert sum(g.added - g.deleted for g in growth) == sizes[-1]


def test_session_detail_holds_the_ingested_dialogue_and_the_diff_of_that_session(session: ReplaySession) -> None:
    steps = episode_steps(session, "PILOT-01A", "amem")
    assert steps is not None
    detail = session_detail(session, steps, 18)
    assert detail.step.phase == "perturbation" and detail.ingested and detail.clock
    assert [t.role for t in detail.turns] == ["user", "assistant", "user", "assistant"]
    assert "CrossFit Central" in " ".join(t.content for t in detail.turns)
    assert detail.store is not None
    assert (detail.store.added, detail.store.updated, detail.store.deleted) == (2, 1, 0)
    assert {r.item_id for r in detail.store.rows if r.mark == "~"} == {"note-1"}
    assert len(detail.llm_calls) == 2  # one memory_writer call per user turn


def test_a_system_without_a_store_shows_an_empty_one(session: ReplaySession) -> None:
    steps = episode_steps(session, "PILOT-01A", "full_context")
    assert steps is not None
    detail = session_detail(session, steps, 0)
    assert detail.store is not None and detail.store.rows == [] and detail.memory_ops == []


def test_probe_detail_puts_the_structured_gold_beside_the_answer_and_the_rescore(session: ReplaySession) -> None:
    detail = probe_detail(session, "PILOT-01A", "amem", 0)
    assert detail.gold is not None and detail.gold.gold["current_value"] == "CrossFit Central"
    assert detail.gold.question == "What gym does the user currently go to?"
    assert detail.answer is not None and detail.answer.answer == {"answer": "FitLife",
                                                                   "reason": "from the notes about the user's gym"}
    assert [i.id for i in detail.answer.retrieved] and detail.call_seq == detail.answer.llm_call_seq
    assert detail.score is not None and detail.score["score"] == 0.0
    assert detail.cell is not None and detail.cell.latest is not None and detail.cell.latest["score"] == 1.0
    assert detail.rescore_answer is not None and detail.rescore_answer.answer["answer"] == "CrossFit Central"
    conflict = probe_detail(session, "PILOT-01B", "full_context", 1)
    assert conflict.gold is not None and conflict.gold.gold["conflict_gold"]["status"] == "different_entity"
    assert conflict.score is not None and conflict.score["subscores"]["applicability"] == 0.0


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(FIXTURE, target)
    return target


class Sink:
    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.notes: list[str] = []
        self.answers: list[Any] = []
        self.scores: list[tuple[float, dict[str, float], str, bool]] = []

    def text(self, piece: str) -> None:
        self.pieces.append(piece)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def answer(self, answer: dict[str, Any] | None, error: str | None) -> None:
        self.answers.append((answer, error))

    def score(self, score: float, subscores: dict[str, float], reason: str, excluded: bool) -> None:
        self.scores.append((score, subscores, reason, excluded))


def _scripted(reply: str) -> tuple[ScriptedBackend, Any]:
    backend = ScriptedBackend(lambda request: reply, piece_size=5)  # the same reply to every repair round
    return backend, lambda config, recorder: ChatClient(config, recorder, cache=None, backend_factory=lambda spec: backend)


def test_rerun_resends_what_the_reader_saw_and_appends_answer_and_score(copy: Path) -> None:
    backend, factory = _scripted('{"answer": "CrossFit Central", "reason": "the user switched gyms"}')
    sink = Sink()
    config = load_llm_config(None, {}, [])
    request = ProbeRerunRequest(copy, "PILOT-01A", "amem", 1, reader="openai:other-model@http://127.0.0.1:9/v1")
    with open_recording(copy) as reader:
        before = len(reader)
        original_call = gather_probe(reader, request).messages
    score = asyncio.run(rerun_probe(request, sink, llm_config=config, chat_factory=factory))
    # the recorded reader prompt went out again, to the requested model, streamed piece by piece
    sent = backend.requests[0]
    assert [m.content for m in sent.messages] == [m.content for m in original_call]
    assert sent.model == "other-model"
    assert "".join(sink.pieces).startswith('{"answer": "CrossFit Central"') and len(sink.pieces) > 3
    assert sink.answers == [({"answer": "CrossFit Central", "reason": "the user switched gyms"}, None)]
    # previous_value gold is FitLife: the new answer is scored by the real rule scorer
    assert score.score == 0.0 and sink.scores[0][0] == 0.0 and not score.excluded
    with open_recording(copy) as reader:
        new = [reader.get(line) for line in range(before, len(reader))]
    kinds = [e.kind for e in new if e.kind not in ("span_begin", "span_end")]
    assert kinds == ["run_start", "llm_call", "probe_answer", "probe_score", "run_end"]  # the run lifecycle
    end = new[-1]
    assert isinstance(end, RunEnd) and end.status == "completed"
    appended = next(e for e in new if isinstance(e, ProbeScore))
    assert appended.rescore_of is not None
    session = open_session(copy)
    try:
        session.build_index()
        cell = score_cells(session)[("amem", "PILOT-01A", 1)]
        assert cell.original is not None and cell.original["seq"] == appended.rescore_of
        assert cell.rescores == 1 and cell.value == 0.0
    finally:
        session.close()


def test_an_unusable_reply_is_recorded_as_an_excluded_rescore(copy: Path) -> None:
    backend, factory = _scripted("I think it is FitLife")
    sink = Sink()
    request = ProbeRerunRequest(copy, "PILOT-01A", "amem", 0)
    score = asyncio.run(rerun_probe(request, sink, llm_config=load_llm_config(None, {}, []), chat_factory=factory))
    assert score.excluded and score.exclusion_reason and "execution error" in score.exclusion_reason
    assert sink.answers[0][0] is None and sink.answers[0][1]
    assert backend.requests and len(backend.requests) > 1  # the client asked for a repair before giving up


def test_rerun_refuses_what_it_cannot_redo_with_a_message_naming_it(copy: Path) -> None:
    with open_recording(copy) as reader:
        with pytest.raises(RecordingError, match="PILOT-01A × nomem is not in this recording"):
            gather_probe(reader, ProbeRerunRequest(copy, "PILOT-01A", "nomem", 0))
        with pytest.raises(RecordingError, match="has 4 probes"):
            gather_probe(reader, ProbeRerunRequest(copy, "PILOT-01A", "amem", 9))
    with pytest.raises(ConfigError):
        reader_config(load_llm_config(None, {}, []), "nosuchbackend:model")
    events = (copy / "events.jsonl").read_bytes()
    assert orjson.loads(events.splitlines()[0])["kind"] == "run_start"


class EndlessBackend:
    """Streams tokens until cancelled, like a slow model."""

    name = "endless"

    async def complete(self, request: Any) -> Any:
        raise AssertionError("the re-run streams")

    async def stream(self, request: Any) -> AsyncIterator[str]:
        while True:
            yield "tok "
            await asyncio.sleep(0.01)

    async def aclose(self) -> None:
        return None


def test_a_cancelled_rerun_ends_its_run_interrupted_and_appends_no_score(copy: Path) -> None:
    backend = EndlessBackend()
    sink = Sink()
    request = ProbeRerunRequest(copy, "PILOT-01A", "amem", 0)

    async def main() -> None:
        task = asyncio.create_task(rerun_probe(
            request, sink, llm_config=load_llm_config(None, {}, []),
            chat_factory=lambda config, recorder: ChatClient(config, recorder, cache=None,
                                                             backend_factory=lambda spec: backend)))
        while len(sink.pieces) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with open_recording(copy) as reader:
        before = len(reader)
    asyncio.run(main())
    with open_recording(copy) as reader:
        new = [reader.get(line) for line in range(before, len(reader))]
    assert not [e for e in new if e.kind in ("probe_answer", "probe_score")]
    end = new[-1]
    assert isinstance(end, RunEnd) and end.status == "interrupted"
    assert any(isinstance(e, SpanEnd) and e.status == "cancelled" for e in new)
