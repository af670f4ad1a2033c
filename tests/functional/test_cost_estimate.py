"""`memprobe run --dry-run`'s cost estimate against what `make demo`'s job really used (its shipped
recording, recordings/sample-quick-fixed-user_001), prices, and `memprobe report`'s actual use."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.cli.estimate_view import actual_use
from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import read_header
from memprobe_engine.llm.pricing import Price, load_prices
from memprobe_engine.recovery.estimate import estimate_recovery, plan_from_config

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "recordings" / "sample-quick-fixed-user_001"


def test_the_estimate_of_make_demos_job_brackets_what_it_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    plan = plan_from_config(read_header(DEMO).config)
    assert plan is not None and plan.dialogues is not None
    estimate = estimate_recovery(plan).roles
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
