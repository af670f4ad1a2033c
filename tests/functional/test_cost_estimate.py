"""`memprobe run --dry-run`'s cost estimate against what real runs used (make demo's job,
recordings/sample-quick-fixed-user_001; the live quick run, recordings/sample-quick-sim_01; the protocol-B
quick run, recordings/sample-paradigms-quick), prices, and `memprobe report`'s actual use."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.cli.estimate_view import actual_use
from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import read_header
from memprobe_engine.llm.pricing import Price, load_prices
from memprobe_engine.llm.usage_estimate import CostEstimate
from memprobe_engine.paradigms.estimate import estimate_paradigms
from memprobe_engine.paradigms.estimate import plan_from_config as paradigm_plan
from memprobe_engine.recovery.estimate import estimate_recovery, plan_from_config
from memprobe_engine.recovery.outcome_shares import OutcomeShares, Tally, header_specs, measure_shares

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "recordings"
DEMO = RECORDINGS / "sample-quick-fixed-user_001"
LIVE = RECORDINGS / "sample-quick-sim_01"
PARADIGMS = RECORDINGS / "sample-paradigms-quick"
#: The recordings this repository ships (the shares below are counted on them).
SHIPPED = ("release-a-user_001-amem", "release-a-user_001-mem0", "sample-paradigms-quick",
           "sample-quick-fixed-user_001", "sample-quick-sim_01")


@functools.cache
def _shipped_folder() -> Path:
    """A folder holding only the shipped recordings (as links): recordings/ also gathers every
    `make demo` run, which would change the measured shares."""
    folder = Path(tempfile.mkdtemp(prefix="memprobe-shipped-"))
    atexit.register(shutil.rmtree, folder, True)
    for name in SHIPPED:
        (folder / name).symlink_to(RECORDINGS / name, target_is_directory=True)
    return folder


def _estimate_of(recording: Path, *, leave_out: bool = True) -> CostEstimate:
    """The estimate of a recorded protocol-A job, its branch shares measured on the shipped recordings
    (without the recording itself unless ``leave_out`` is False)."""
    config = read_header(recording).config
    plan = plan_from_config(config)
    assert plan is not None
    shares = measure_shares([_shipped_folder()], header_specs(config), fixed_dialogues=plan.dialogues is not None,
                            exclude=recording if leave_out else None)
    return estimate_recovery(plan, shares)


#: The roles checked per recording (the live run's resumed unit counts its replayed calls once).
SCORING_ROLES = {DEMO: ("slot_filler", "recovery_judge", "attribution_judge"),
                 LIVE: ("agent", "simulator", "preference_judge", "slot_filler", "recovery_judge",
                        "attribution_judge")}


@pytest.mark.parametrize("recording", [DEMO, LIVE], ids=["make-demo", "live-quick"])
def test_every_scoring_roles_actual_use_lies_in_its_estimated_range(recording: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    estimate = _estimate_of(recording).roles
    used = actual_use(recording)
    assert set(SCORING_ROLES[recording]) <= set(used) and set(used) <= set(estimate)
    for role in SCORING_ROLES[recording]:
        calls, prompt, completion = used[role]
        guess = estimate[role]
        assert guess.calls.low <= calls <= guess.calls.high, role
        assert guess.prompt_tokens.low <= prompt <= guess.prompt_tokens.high, role
        assert guess.completion_tokens.low <= completion <= guess.completion_tokens.high, role


def test_the_estimate_of_make_demos_job_brackets_what_it_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    estimate = _estimate_of(DEMO).roles
    used = actual_use(DEMO)
    assert set(used) == {"slot_filler", "recovery_judge", "attribution_judge"} <= set(estimate)
    for role, (calls, prompt, completion) in used.items():
        guess = estimate[role]
        assert guess.calls.low <= calls <= guess.calls.high, role
        assert guess.prompt_tokens.low <= prompt <= guess.prompt_tokens.high, role
        assert guess.completion_tokens.low <= completion <= guess.completion_tokens.high, role
    # The slot-filler reads the exact store the fixed dialogues build: within 10 % (8,657 prompt tokens used).
    assert abs(estimate["slot_filler"].prompt_tokens.expected / used["slot_filler"][1] - 1) < 0.10
    assert abs(estimate["recovery_judge"].prompt_tokens.expected / used["recovery_judge"][1] - 1) < 0.15
    # make demo's dry run on a clone sees the shipped recordings beside its --record folder, this job's
    # earlier recording among them: 15,363 expected against 12,480 used here (12,132 in a fresh run).
    dry_run = _estimate_of(DEMO, leave_out=False).tokens.expected
    total = sum(p + c for _, p, c in used.values())
    assert abs(dry_run / total - 1) < 0.30, (dry_run, total)


def test_branch_shares_are_counted_from_the_recordings_with_the_same_models() -> None:
    config = read_header(DEMO).config
    shares = measure_shares([_shipped_folder()], header_specs(config), fixed_dialogues=True)
    # Stage 0 is asked once per (user, dimension): make demo's 3 "cannot invite" and the live run's 2 of 3.
    assert (shares.can_invite.hits, shares.can_invite.seen) == (2, 6)
    assert shares.can_invite.recordings == {DEMO.name, LIVE.name}
    # Recovery is counted on the same feed only (fixed dialogues): longctx_full 3 of 6 at >= 0.75.
    assert (shares.recovered["longctx_full"].hits, shares.recovered["longctx_full"].seen) == (3, 6)
    live = measure_shares([_shipped_folder()], header_specs(read_header(LIVE).config), fixed_dialogues=False)
    # The simulator ended 11 of its 12 replies' episodes as satisfied (so episodes last ~1.2 turns).
    assert (live.satisfied.hits, live.satisfied.seen) == (11, 12)
    keep = 1 - (11 + 2 / 3) / (12 + 2)  # the prior of 1/3 worth two replies
    assert sum(live.expected_turns(3)) == pytest.approx(1 + keep + keep ** 2)
    other = measure_shares([_shipped_folder()], {**header_specs(config), "attribution_judge": "openai:gpt-4o"},
                           fixed_dialogues=True)
    assert other.can_invite.seen == 0 and other.can_invite.share == pytest.approx(0.98)


def test_the_live_quick_runs_estimate_is_near_what_it_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live job used 49,531 tokens (its resumed unit's replayed calls counted once). Estimated
    without its own recording, its turns come from the prior (one in three replies ends an episode):
    99,258 expected, inside the range but twice the use, since this simulator was satisfied after one
    turn 11 times of 12; with that share measured (its own recording beside it), 57,962 (+17 %)."""
    monkeypatch.chdir(ROOT)
    used = sum(p + c for _, p, c in actual_use(LIVE).values())
    prior = _estimate_of(LIVE).tokens
    assert prior.low <= used <= prior.high, (prior, used)
    expected = _estimate_of(LIVE, leave_out=False).tokens.expected
    assert abs(expected / used - 1) < 0.30, (expected, used)


def test_attribution_calls_follow_the_runners_branches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages 1–2 run only for cases below 0.75 whose task can invite the evidence (attribution.py)."""
    monkeypatch.chdir(ROOT)
    plan = plan_from_config(read_header(DEMO).config)
    assert plan is not None

    def attribution_calls(can_invite: int, recovered: int) -> float:
        shares = OutcomeShares(can_invite=Tally(0.98, hits=can_invite, seen=1000),
                               recovered={"longctx_full": Tally(0.4, hits=recovered, seen=1000)})
        return estimate_recovery(plan, shares).roles["attribution_judge"].calls.expected

    # 3 dimensions: stage 0 once each (nomem always fails); nothing can be invited → stage 0 only.
    assert attribution_calls(0, 0) == pytest.approx(3, abs=0.05)
    # Everything invited, every case failed: 4 cases (2 systems × 2 modes) per dimension reach stage 1,
    # and stage 2 for those not disclosed (the release's 8 %).
    assert attribution_calls(1000, 0) == pytest.approx(3 + 12 + 12 * 0.08, abs=0.1)
    # longctx_full always recovered: only nomem's 2 cases per dimension are attributed.
    assert attribution_calls(1000, 1000) == pytest.approx(3 + 6 + 6 * 0.08, abs=0.1)


def test_protocol_b_estimate_matches_the_recorded_quick_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    plan = paradigm_plan(read_header(PARADIGMS).config)
    assert plan is not None
    estimate = estimate_paradigms(plan)
    used = actual_use(PARADIGMS)
    assert set(used) == set(estimate.roles) == {"memory_writer", "reader"}
    for role, (calls, prompt, completion) in used.items():
        guess = estimate.roles[role]
        assert guess.calls.expected == calls, role  # amem's calls and the reader's are known exactly
        assert guess.prompt_tokens.low <= prompt <= guess.prompt_tokens.high, role
        assert guess.completion_tokens.low <= completion <= guess.completion_tokens.high, role
        # Measured: memory_writer 20.7k expected vs 18,931 used, reader 23.9k vs 21,593 (+9 %, +11 %).
        assert abs(guess.tokens.expected / (prompt + completion) - 1) < 0.25, role
    total = sum(p + c for _, p, c in used.values())
    assert abs(estimate.tokens.expected / total - 1) < 0.20, (estimate.tokens.expected, total)


def test_protocol_b_dry_run_and_report_print_tokens_per_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    config = read_header(PARADIGMS).config
    result = CliRunner().invoke(app, ["run", "--record", "/tmp/never-written-b", "--suite", "paradigms",
                                      "--sessions", config["sessions"], "--episodes", ",".join(config["episodes"]),
                                      "--systems", ",".join(config["systems"]), "--ingest", "session", "--k", "5",
                                      "--session-k", "3", "--reader-max-tokens", "200",
                                      "--config", "sessions/quick-paradigms.toml", "--dry-run",
                                      "--price", "default=0.15/0.60"])
    assert result.exit_code == 0, result.output
    assert "cost estimate per role" in result.output and "memory_writer" in result.output
    assert "reader" in result.output and "tokens in all:" in result.output
    assert not Path("/tmp/never-written-b").exists()
    report = CliRunner().invoke(app, ["report", str(PARADIGMS.relative_to(ROOT))])
    assert report.exit_code == 0, report.output
    assert "beside the run's actual use" in report.output
    assert "actual tokens in all: 40,524" in report.output


def test_dry_run_prints_the_estimate_and_prices_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    quick = subprocess.run(["make", "-s", "quick-args"], capture_output=True, text=True, check=True).stdout.split()
    result = CliRunner().invoke(app, ["run", "--record", "/tmp/never-written", *quick, "--dry-run",
                                      "--price", "default=0.15/0.60", "--price", "recovery_judge=2.5/10"])
    assert result.exit_code == 0, result.output
    assert "cost estimate per role" in result.output and "slot_filler" in result.output
    assert "tokens in all:" in result.output and "cost " in result.output
    assert not Path("/tmp/never-written").exists()


def test_prices_from_flags_and_config(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[models]\ndefault = "local:1.5b"\n[prices]\ndefault = "1/2"\nrecovery_judge = "3/4"\n')
    prices = load_prices(config, ["recovery_judge=5/6"])
    assert prices == {"default": Price(1, 2), "recovery_judge": Price(5, 6)}
    assert Price(1, 2).cost(1_000_000, 500_000) == 2.0
    for bad in ("judge", "judge=1", "judge=a/b", "judge=-1/2"):
        with pytest.raises(ConfigError, match="--price"):
            load_prices(None, [bad])


def test_report_prints_actual_tokens_beside_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, ["report", str(DEMO.relative_to(ROOT)), "--price", "default=0.15/0.60"])
    assert result.exit_code == 0, result.output
    assert "beside the run's actual use" in result.output
    assert "8,657+280" in result.output  # the slot-filler's actual prompt + completion tokens
    assert "actual tokens in all: 12,480" in result.output


def test_without_prices_the_hint_names_the_config_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, ["report", str(DEMO.relative_to(ROOT))])
    assert result.exit_code == 0, result.output
    # Rich read "[prices]" as a style tag and printed "or  in the config".
    assert "[prices] in the config" in " ".join(result.output.split())
