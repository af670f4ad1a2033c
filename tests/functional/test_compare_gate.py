"""`memprobe compare --fail-on`: the CI gate exits 1 when the other run is significantly worse (runs
the real runner writes against a scripted backend, two users so ΔB has an interval) and 0 when it
is not, with the reason as the last line; protocol B gates Δaccuracy; a bad gate is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.llm.types import ChatRequest
from tests.export_recordings import recovery_run
from tests.functional.recovery_oracle import PLAN, RecoveryOracle

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "recordings"


class Forgetful(RecoveryOracle):
    """The judge finds every fill wrong: the run a regression produces."""

    def answer(self, request: ChatRequest) -> tuple[str, str]:
        role, text = super().answer(request)
        if role == "recovery_judge":
            return role, orjson.dumps({"reason": "nothing recovered", "score": 0.0}).decode()
        return role, text


def gate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["compare", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gate")
    PLAN.clear()  # every dimension recovers fully in the good run
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMPROBE_CACHE_DIR", str(folder / "cache"))
        good = recovery_run(folder / "good", None, ["longctx_full"], users=("sim_01", "sim_02"))
        patch.setenv("MEMPROBE_CACHE_DIR", str(folder / "cache2"))
        bad = recovery_run(folder / "bad", None, ["longctx_full"], oracle=Forgetful(), users=("sim_01", "sim_02"))
    return good, bad


def test_a_worse_run_fails_the_gate_and_a_better_one_passes(runs: tuple[Path, Path]) -> None:
    good, bad = runs
    code, line = gate(str(good), str(bad), "--fail-on", "regression")
    assert code == 1 and line.startswith("FAIL: significant regression: ΔB dump_all longctx_full→longctx_full -1.000")
    assert "interval below 0" in line
    code, line = gate(str(bad), str(good), "--fail-on", "regression")
    assert code == 0 and line.startswith("PASS: no significant regression: ΔB dump_all") and "+1.000" in line
    code, line = gate(str(good), str(good), "--fail-on", "regression")
    assert code == 0 and "+0.000 [95% CI +0.000, +0.000]" in line
    code, line = gate(str(good), str(bad), "--fail-on", "any-regressed")
    assert code == 1 and line.startswith("FAIL: ") and "case(s) regressed, e.g. sim_01:" in line and "1.00 → 0.00" in line
    code, line = gate(str(bad), str(good), "--fail-on", "any-regressed")
    assert code == 0 and line.startswith("PASS: no case regressed")
    # without --fail-on, compare still exits 0 whatever it finds
    assert gate(str(good), str(bad))[0] == 0


def test_one_user_is_not_enough_for_an_interval() -> None:
    code, line = gate(str(SHIPPED / "release-a-user_001-amem"), str(SHIPPED / "release-a-user_001-mem0"),
                      "--fail-on", "regression")
    assert code == 0 and line == ("PASS: no significant regression can be shown: 1 paired user(s), an interval needs "
                                  "at least 2")


def test_protocol_b_gates_delta_accuracy() -> None:
    rec = SHIPPED / "sample-paradigms-quick"
    code, line = gate(f"{rec}:full_context", f"{rec}:naive_rag", "--fail-on", "regression")
    assert line.startswith(("PASS: ", "FAIL: ")) and "Δaccuracy full_context→naive_rag" in line
    assert code == (1 if line.startswith("FAIL") else 0)
    code, line = gate(f"{rec}:full_context", f"{rec}:naive_rag", "--fail-on", "any-regressed")
    assert code == 1 and "probe(s) regressed" in line  # naive_rag misses a probe full_context answers


def test_a_bad_gate_is_one_line_and_exit_2() -> None:
    rec = str(SHIPPED / "release-a-user_001-amem")
    done = subprocess.run([sys.executable, "-m", "memprobe_tui.main", "compare", rec, rec, "--fail-on", "worse"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip() == "error: --fail-on worse: use regression or any-regressed."
