"""The shipped calibrated judge: real weights on the real packaged MiniLM, no double.

It must load only the weights its card names, give one case the same score on every call whatever
was scored before, agree with the paper's judge on the paper's user_001 (a training user: a broken
load or a scrambled input order scores near kappa 0 here), and run through `memprobe judge check`
on a shipped recording.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import ConfigError
from memprobe_engine.recovery.calibration.agreement import ScoredPair, agreement
from memprobe_engine.recovery.calibration.cases import release_cases
from memprobe_engine.recovery.cross_judge import DEFAULT_JUDGE, JudgeCard, cross_judge
from memprobe_engine.recovery.judge_kind import check_judge, default_judge, judge_error_sd, judge_of
from memprobe_engine.recovery.scoring import is_unknown

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "tests/fixtures/release-sample-A"


def test_card_names_the_weights_and_their_held_out_figures() -> None:
    card = JudgeCard.load(DEFAULT_JUDGE)
    assert card.trained_on["users"] and not set(card.trained_on["users"]) & set(card.held_out["users"])
    assert not any(u >= "user_025" for u in card.trained_on["users"] + card.held_out["users"])
    assert list(card.cuts) == sorted(card.cuts)
    assert 0 < card.held_out["error_sd"] < 0.5
    assert judge_error_sd(f"calibrated:{DEFAULT_JUDGE}") == card.held_out["error_sd"]
    assert judge_error_sd("model") is None


def test_the_choice_of_judge_is_checked_and_defaults_by_framing() -> None:
    assert default_judge("embedded") == f"calibrated:{DEFAULT_JUDGE}" and default_judge("release") == "model"
    assert check_judge("calibrated") == f"calibrated:{DEFAULT_JUDGE}"
    assert judge_of({}) == "model" and judge_of({"recovery_judge": "calibrated:x"}) == "calibrated:x"
    with pytest.raises(ConfigError, match="--recovery-judge 'calibrated:nosuch'"):
        check_judge("calibrated:nosuch")


def test_same_case_same_score_whatever_came_before() -> None:
    judge = cross_judge()
    case = ("writing_skill", "Writes clearly in school assignments",
            "He writes short, clear paragraphs for school and keeps them on topic.", "writes clear, short school texts")
    first = judge.probability(*case)
    judge.probability("geographic_knowledge", "Knows Ponte Vedra Beach well", "He grew up near the beach.", "good")
    assert judge.probability(*case) == first


def test_agrees_with_the_paper_on_user_001_and_orders_obvious_cases() -> None:
    judge = cross_judge()
    cases = [c for c in release_cases(RELEASE, ["user_001"]) if not is_unknown(c.predicted)]
    pairs = [ScoredPair(c.system, c.reference, judge.score(c.dimension, c.truth, c.explanation, c.predicted)[0])
             for c in cases]
    result = agreement(pairs)
    assert result.n > 100 and result.kappa_linear > 0.45 and result.within_one > 0.8
    truth = ("geographic_knowledge", "Knows the Ponte Vedra Beach area well",
             "He grew up near Ponte Vedra Beach and knows its beaches, landings and shops by name.")
    right = judge.score(*truth, "knows Ponte Vedra Beach spots like Mickler's Landing")[0]
    wrong = judge.score(*truth, "enjoys baking bread on weekends")[0]
    # A fill on another topic entirely is rare in the paper's data, and the judge puts it mid-scale
    # (0.5 here; docs/protocol-a.md names this weakness): it must still rank below the right one.
    assert right >= 0.75 and wrong <= 0.5 and wrong < right


def test_judge_check_on_a_shipped_recording(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    result = CliRunner().invoke(app, ["judge", "check", str(ROOT / "recordings/release-a-user_001-mem0"),
                                      "--judge", "calibrated", "--limit", "15", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "linear-weighted kappa" in result.output and "self-consistency: 100.0%" in result.output
    figures = json.loads(out.read_text())
    assert figures["cases"] == 15 and figures["self_consistency"] == 1.0
    assert sum(map(sum, figures["confusion"])) == 15


def test_judge_check_fill_stage_fills_from_the_release_and_writes_its_json(tmp_path: Path) -> None:
    """``--stage fill`` on the shipped release sample with a scripted slot-filler on a loopback endpoint:
    it fills from what the release's slot-filler read, judges both fills, and ``--json`` writes every case
    (it was silently ignored under ``--stage fill``)."""
    from tests.loopback_endpoint import running_endpoint

    out = tmp_path / "fills.json"
    with running_endpoint(0.0) as (url, _):
        result = CliRunner().invoke(app, [
            "judge", "check", str(RELEASE), "--stage", "fill", "--recovered-only", "--limit", "6", "--seed", "1",
            "--model", f"slot_filler=openai:scripted@{url}", "--json", str(out)],
            env={"MEMPROBE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    assert "candidate fill scored >= 0.75 in" in " ".join(result.output.split())
    figures = json.loads(out.read_text())
    assert figures["judge"] == "calibrated:minilm-judge-v1" and len(figures["cases"]) == 6
    filled = [case for case in figures["cases"] if case["excluded"] is None]
    assert filled and all(case["fill"] and case["fill_score"] in (0, 0.25, 0.5, 0.75, 1) for case in filled)
    assert all(case["release_reference_score"] >= 0.75 for case in figures["cases"])
