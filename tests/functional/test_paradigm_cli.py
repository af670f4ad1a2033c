"""`memprobe run --suite paradigms` from the command line: heuristics on the shipped upstream sample
(no model at all), `--dry-run`, resume, and bad flags answered with one message, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.reader import open_recording

SAMPLE = Path(__file__).resolve().parents[2] / "sessions" / "paradigms" / "upstream-sample"
HEURISTICS = "latest_value,always_update,always_preserve,source_preference"


def _run(*args: str) -> tuple[int, str]:
    """Exit code and output; a user error (MemProbeError, which the console entry point prints as one
    ``error:`` line) comes back as its message."""
    result = CliRunner().invoke(app, ["run", "--suite", "paradigms", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert isinstance(result.exception, MemProbeError), repr(result.exception)
        return 2, str(result.exception)
    return result.exit_code, result.output


def test_heuristics_run_without_a_model_and_resume_does_nothing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # No model may be reached: a heuristic that tried would fail on this unreachable endpoint.
    monkeypatch.setenv("MEMPROBE_MODEL", "openai:none@http://127.0.0.1:9/v1")
    record = tmp_path / "heur"
    code, out = _run("--sessions", str(SAMPLE), "--systems", HEURISTICS, "--record", str(record))
    assert code == 0, out
    with open_recording(record) as rec:
        kinds = [e.kind for e in rec.iter_events()]
        every = [e for e in rec.iter_events(kinds=["probe_score"])]
    scores = [s for s in every if s.layer is None]
    assert "llm_call" not in kinds and "embedding" not in kinds
    assert len(scores) == 2 * 4 * 4 and not any(s.excluded for s in scores)
    assert {s.scorer_version for s in scores} == {"b1-upstream-1"}   # the default mode, the corrected as a layer
    assert len([s for s in every if s.layer == "scoring:corrected"]) == 32
    code, out = _run("--sessions", str(SAMPLE), "--systems", HEURISTICS, "--record", str(record), "--dry-run")
    assert code == 0 and "8 unit(s) already finished" in out, out
    code, out = _run("--sessions", str(SAMPLE), "--systems", HEURISTICS, "--record", str(record))
    assert code == 0, out
    with open_recording(record) as rec:
        assert sum(1 for s in rec.iter_events(kinds=["probe_score"]) if s.layer is None) == 32  # nothing scored twice


@pytest.mark.parametrize(("args", "message"), [
    (["--systems", "latest_value", "--episodes", "PILOT-99"], "--episodes: PILOT-99 not in"),
    (["--systems", "latest_value", "--paradigms", "consolidation"], "--paradigms: consolidation not in"),
    (["--systems", "no_such_system"], "unknown memory system 'no_such_system'"),
    (["--systems", "latest_value", "--ingest", "lines"], "--ingest 'lines'"),
    (["--systems", "latest_value", "--limit", "0"], "--limit must be at least 1"),
])
def test_bad_flags_get_one_clear_message(tmp_path: Path, args: list[str], message: str) -> None:
    code, out = _run("--sessions", str(SAMPLE), "--record", str(tmp_path / "r"), *args)
    assert code != 0 and message in out and "Traceback" not in out, out
    assert not (tmp_path / "r").exists()


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    code, out = _run("--sessions", str(SAMPLE), "--systems", "amem,full_context,latest_value", "--limit", "1",
                     "--record", str(tmp_path / "r"), "--dry-run")
    assert code == 0, out
    assert "1 episode(s) × 3 system(s) = 3 unit(s)" in out and "reader calls" in out
    assert not (tmp_path / "r").exists()
