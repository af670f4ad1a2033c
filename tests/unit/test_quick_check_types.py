"""A recording too large for the full check in the TUI still names a wrong-typed scoring event.

The TUI and the browser run the quick integrity check above QUICK_CHECK_ABOVE lines (no typed
validation of every line); the index pass validates every scoring and lifecycle event, and what it
found is kept in the banner's report. ``recording verify`` always runs the full check.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from memprobe_engine.events.checksum import seal
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.reader import open_recording
from memprobe_engine.recovery.read import score_board
from memprobe_engine.replay import session as session_module
from memprobe_engine.protocols import open_session

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "tui" / "run"


def _wrong_typed_judge(tmp_path: Path) -> tuple[Path, int]:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    lines = (run / "events.jsonl").read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"kind":"judge_score"' in line)
    event = orjson.loads(lines[at])
    event.pop("ck", None)
    event["score"] = "high"  # valid JSON, a wrong-typed field, sealed again: only the type is wrong
    lines[at] = seal(orjson.dumps(event)) + b"\n"
    (run / "events.jsonl").write_bytes(b"".join(lines))
    return run, at


def test_the_quick_check_keeps_the_wrong_typed_scoring_line_the_index_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, at = _wrong_typed_judge(tmp_path)
    monkeypatch.setattr(session_module, "QUICK_CHECK_ABOVE", 0)  # every recording counts as large
    session = open_session(run)
    try:
        session.build_index()
        assert session.integrity is not None and at in session.integrity.bad_lines
        assert "judge_score.score" in session.integrity.bad_lines[at]
        message = session.damage_message()
        assert message is not None and f"line {at + 1}" in message
        assert all(p.original is None or p.original.seq != at for p in score_board(session).pairs.values())
    finally:
        session.close()
    with open_recording(run) as reader:  # what `recording verify` runs
        full = check_recording(reader)
    assert at in full.bad_lines and full.count == session.integrity.count
