"""The figures ``memprobe judge check`` prints, and what a run can detect, on cases worked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memprobe_engine.recovery.calibration.agreement import ScoredPair, agreement, render
from memprobe_engine.report.compare_stats import linear_weighted_kappa
from memprobe_engine.recovery.calibration.cases import JudgedCase, recording_cases, release_cases, stratified
from memprobe_engine.recovery.read.detectable import Z_SUM, detectable, paired_line, run_detectable

ROOT = Path(__file__).resolve().parents[2]


def test_linear_weighted_kappa_by_hand() -> None:
    # Two raters on 4 cases over 3 levels: observed weighted disagreement (0 + 0 + 0.5 + 0) / 4 = 0.125;
    # marginals (2, 1, 1) and (1, 2, 1) give expected Σ w·p·q = 0.4375; kappa = 1 − 0.125 / 0.4375
    kappa = linear_weighted_kappa([0, 0, 1, 2], [0, 1, 1, 2], levels=3)
    assert kappa == pytest.approx(1 - 0.125 / 0.4375)  # sklearn: 0.7142857
    assert linear_weighted_kappa([0, 1, 2], [0, 1, 2], levels=3) == pytest.approx(1.0)


def test_agreement_counts_confusion_and_bias_per_system() -> None:
    pairs = [ScoredPair("a", 0.75, 0.75), ScoredPair("a", 0.5, 0.75), ScoredPair("b", 0.0, 0.5),
             ScoredPair("b", 1.0, 1.0)]
    result = agreement(pairs)
    assert (result.n, result.exact, result.within_one) == (4, 0.5, 0.75)
    assert result.confusion[2][3] == 1 and result.confusion[0][2] == 1 and result.confusion[4][4] == 1
    assert result.bias_by_system == {"a": (0.125, 2), "b": (0.25, 2)}
    text = render(result, title="t")
    assert "exact 50.0%" in text and "within one level 75.0%" in text and "+0.250" in text


def _case(level: float, index: int) -> JudgedCase:
    return JudgedCase(user_id=f"u{index}", system="s", mode="dump_all", category="c", dimension="d", truth="t",
                      explanation="", predicted="p", reference=level)


def test_stratified_draw_spreads_over_levels_and_is_seeded() -> None:
    cases = [_case(0.75, i) for i in range(40)] + [_case(0.0, 100 + i) for i in range(3)] + \
        [_case(0.5, 200 + i) for i in range(10)]
    drawn = stratified(cases, 9, seed=1)
    levels = sorted(c.reference for c in drawn)
    assert levels == [0.0] * 3 + [0.5] * 3 + [0.75] * 3
    assert drawn == stratified(cases, 9, seed=1) and drawn != stratified(cases, 9, seed=2)
    assert stratified(cases, None, 0) == cases


def test_release_and_recording_cases_read_the_same_judgments() -> None:
    release = release_cases(ROOT / "tests/fixtures/release-sample-A", users=["user_001"])
    mem0 = [c for c in release if c.system == "mem0"]
    recorded = recording_cases(ROOT / "recordings/release-a-user_001-mem0")
    assert {"amem", "longctx_full", "mem0", "memt", "nomem"} <= {c.system for c in release}
    # The import keeps every judged fill; unknown fills are judged 0 by the rubric in both.
    by_key = {(c.dimension, c.mode): c for c in mem0}
    assert recorded and all(by_key[(c.dimension, c.mode)].reference == c.reference for c in recorded)
    assert all(by_key[(c.dimension, c.mode)].truth == c.truth for c in recorded)


def test_detectable_difference_formula() -> None:
    assert detectable(0.5, 25) == pytest.approx(Z_SUM * 0.5 / 5)
    run = run_detectable([0.0, 0.5, 1.0, 0.5], judge_sd=0.3)
    spread = float(__import__("numpy").std([0.0, 0.5, 1.0, 0.5], ddof=1))
    assert run.difference == pytest.approx(Z_SUM * math.sqrt(2 * 0.09 + spread ** 2) / 2)
    assert "judge error 0.30" in run.line("sys")
    assert "lower bound" in run_detectable([0.0, 1.0], None).line("sys")
    assert "no spread" in run_detectable([0.0, 0.0, 0.0], None).line("nomem")
    assert "below what these cases can detect" in paired_line([0.25, -0.25, 0.0, 0.25], "a → b")
    assert "at or above" in paired_line([0.5] * 9 + [0.25], "a → b")


def test_a_system_whose_cases_no_judge_scored_carries_no_judge_error() -> None:
    from memprobe_engine.recovery.read.detectable import report_lines

    rows = [("nomem", "r", 0.0, False)] * 6 + [("longctx_full", "r", s, True) for s in (0.0, 0.75, 0.75, 0.25)]
    nomem, longctx = sorted(report_lines(rows, lambda recording: 0.24), key=lambda line: not line.startswith("nomem"))
    assert "no spread" in nomem and "judge error 0.24" in longctx
