"""One outcomes fold: the report's tables and the replay's scoreboard count the same cases.

The fixture run is extended with what makes "current outcome" non-trivial: a re-score emitted
outside the case's scope that excludes the case (unparseable judge output), and a case whose store
overflowed (slot-fill and judge excluded). The report (pandas) and the TUI overview (run index) must
then agree case by case and on every B, exclusion and overflow count.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import orjson
import pandas as pd
import pytest

from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.scoring import JudgeScore, SlotFill
from memprobe_engine.events.writer import open_writer
from memprobe_engine.recovery.outcomes import NOT_JUDGED, OutcomeFold
from memprobe_engine.recovery.read import score_board
from memprobe_engine.recovery.read.frames import load_frames
from memprobe_engine.recovery.read.tables import table2
from memprobe_engine.protocols import open_session

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "tui" / "run"


def _judges(path: Path) -> list[dict[str, object]]:
    lines = (path / "events.jsonl").read_bytes().splitlines()
    return [e for e in (orjson.loads(line) for line in lines if b'"kind":"judge_score"' in line)]


@pytest.fixture()
def extended(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    judges = _judges(run)
    retrieve = next(j for j in judges if j["system"] == "amem" and j["mode"] == "retrieve" and "rescore_of" not in j)
    overflowed = next(j for j in judges if j["system"] == "mem0" and j["mode"] == "dump_all")
    writer = open_writer(run)
    recorder = Recorder(writer)
    # A re-score with no scope of its own: it belongs to the case it re-scores, and excludes it.
    recorder.emit(JudgeScore(mode="retrieve", score=None, excluded="judge output unparseable",
                             rescore_of=int(str(retrieve["seq"]))))
    with recorder.scope(user_id=str(overflowed["user_id"]), system="mem0", dimension=str(overflowed["dimension"])):
        recorder.emit(SlotFill(mode="dump_all", overflow=True, excluded="store does not fit the context"))
        recorder.emit(JudgeScore(mode="dump_all", score=None, excluded="store does not fit the context"))
    writer.close()
    return run


def test_report_tables_and_replay_scoreboard_agree_case_by_case(extended: Path) -> None:
    frames = load_frames([extended])
    session = open_session(extended)
    try:
        session.build_index()
        board = score_board(session)
    finally:
        session.close()
    rows = {(r.user_id, r.system, r.dimension, r.mode): r for r in frames.scores.itertuples()}
    assert set(board.pairs) == set(rows)
    for key, pair in board.pairs.items():
        row = rows[key]
        excluded = None if pd.isna(row.excluded) else row.excluded
        reported = None if math.isnan(row.score) or excluded is not None else row.score
        assert pair.score == reported, key
        assert pair.excluded == excluded, key
    # The fixture's own re-score (in scope) is current in both; the out-of-scope one excludes its case.
    rescored = [k for k, p in board.pairs.items() if p.latest is not None and p.latest.score == 1.0]
    assert rescored and all(rows[k].score == 1.0 for k in rescored)
    excluded = [k for k, p in board.pairs.items() if p.excluded == "judge output unparseable"]
    assert len(excluded) == 1 and (excluded[0][1], excluded[0][3]) == ("amem", "retrieve")
    assert rows[excluded[0]].excluded == "judge output unparseable"
    table = table2(frames).set_index("system")
    for system in ("amem", "mem0"):
        mine, row = board.system_means(system), table.loc[system]
        assert mine.b["dump_all"] == pytest.approx(row["B_full_mean"], nan_ok=True)
        assert mine.b["retrieve"] == pytest.approx(row["B_topk_mean"], nan_ok=True)
        assert sum(mine.excluded.values()) == row["excluded_cases"]
        assert sum(mine.overflow.values()) == row["overflow_cases"]
        scores = frames.scores[frames.scores["system"] == system]
        assert sum(mine.scored.values()) == int((scores["score"].notna() & scores["excluded"].isna()).sum())
    assert sum(board.system_means("mem0").overflow.values()) == 1


def _fold(*events: SlotFill | JudgeScore) -> OutcomeFold:
    fold = OutcomeFold()
    for event in events:
        fold.add(event)
    return fold


def _scoped(event: SlotFill | JudgeScore, seq: int) -> SlotFill | JudgeScore:
    return event.model_copy(update={"seq": seq, "user_id": "u", "system": "s", "dimension": "d"})


def test_a_newer_original_supersedes_an_earlier_rescore_and_unjudged_fills_are_excluded() -> None:
    fold = _fold(_scoped(JudgeScore(mode="dump_all", score=0.25), 1),
                 _scoped(JudgeScore(mode="dump_all", score=1.0, rescore_of=1), 2),
                 _scoped(JudgeScore(mode="dump_all", score=0.5), 3),  # the unit was re-run after the re-score
                 _scoped(SlotFill(mode="retrieve", label="x"), 4))
    full = fold.cases[("s", "u", "d", "dump_all")]
    assert full.score == 0.5 and full.rescores == [] and full.usable
    top = fold.cases[("s", "u", "d", "retrieve")]
    assert top.excluded == NOT_JUDGED and not top.usable
