"""One case-material query: a re-score hands the slot-filler what the inspector shows it read."""

from __future__ import annotations

from pathlib import Path

from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.scoring import JudgeScore, SlotFill
from memprobe_engine.events.writer import open_writer
from memprobe_engine.recovery.case_material import DialogueTurn, evidence_turns
from memprobe_engine.recovery.read import dimension_detail
from memprobe_engine.recovery.rescore import Case, gather
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.functional.test_recovery_run import USER, dims, run
from memprobe_engine.protocols import open_session

SYSTEM = "longctx_full"


def test_the_inspector_shows_what_a_rescore_hands_the_slot_filler(tmp_path: Path) -> None:
    chosen = dims(2)
    plan_for(chosen)
    record = run(tmp_path, RecoveryOracle(), chosen, [SYSTEM])
    dimension = chosen[1]
    with open_recording(record) as reader:
        before = gather(reader, Case(USER, SYSTEM, dimension, "dump_all"))
    # A re-score appends its own slot-fill and judge score: a later re-score must still re-do the
    # run's original from the run's fill, not the earlier re-score's.
    writer = open_writer(record)
    recorder = Recorder(writer)
    with recorder.span("rescore", "rescore", user_id=USER, system=SYSTEM, dimension=dimension, mode="dump_all"):
        recorder.emit(SlotFill(mode="dump_all", label="x"))
        recorder.emit(JudgeScore(mode="dump_all", score=1.0, rescore_of=before.original_score_seq))
    writer.close()
    session = open_session(record)
    try:
        session.build_index()
        detail = dimension_detail(session, USER, SYSTEM, dimension)
    finally:
        session.close()
    with open_recording(record) as reader:
        retrieve = gather(reader, Case(USER, SYSTEM, dimension, "retrieve"))
        full = gather(reader, Case(USER, SYSTEM, dimension, "dump_all"))
    shown = detail.modes["retrieve"].retrieved
    assert shown and retrieve.memory == [item for _, _, item in shown]
    assert full.original_score_seq == before.original_score_seq and full.memory == before.memory
    pair = detail.modes["dump_all"].pair
    assert pair is not None and pair.original is not None and pair.original.seq == full.original_score_seq
    assert pair.latest is not None and pair.latest.score == 1.0
    assert full.history and full.history[0][0] == "user"


def test_evidence_turns_match_quotes_and_most_content_words() -> None:
    dialogue = [DialogueTurn(0, 1, "user", "I get calmer and more focused when a crisis escalates."),
                DialogueTurn(0, 2, "assistant", "Noted."), DialogueTurn(0, 3, "system", "calmer focused crisis")]
    found = evidence_turns(dialogue, "calmer focused crisis escalates", 0.5)
    assert [(t.turn, t.role) for t in found] == [(1, "user")] and found[0].overlap == 1.0
