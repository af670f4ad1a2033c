"""``memprobe run`` inside a Slurm job array takes the array task's shard when --shard is not given."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import ConfigError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.orchestration.units import shard_from_env
from tests.loopback_endpoint import running_endpoint


def test_array_variables_map_to_a_shard() -> None:
    assert shard_from_env({}) is None
    assert shard_from_env({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"}) == (2, 4)
    # --array=1-4: ids 1..4 are shards 0..3; --array=0-6:2: ids 0,2,4,6 are shards 0..3
    assert shard_from_env({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4",
                           "SLURM_ARRAY_TASK_MIN": "1"}) == (3, 4)
    assert shard_from_env({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0",
                           "SLURM_ARRAY_TASK_STEP": "2"}) == (2, 4)
    with pytest.raises(ConfigError, match="--shard I/N"):
        shard_from_env({"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"})
    with pytest.raises(ConfigError, match="SLURM_ARRAY_TASK_COUNT"):
        shard_from_env({"SLURM_ARRAY_TASK_ID": "1"})


def test_run_in_an_array_task_records_its_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "5")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "4")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    record = tmp_path / "rec"
    with running_endpoint(0.0) as (url, _):
        result = CliRunner().invoke(app, [
            "run", "--record", str(record), "--users", "sim_01,sim_02", "--dims", "reply_layout",
            "--systems", "nomem", "--max-turns", "2", "--model", f"default=openai:scripted@{url}", "--no-cache"])
    assert result.exit_code == 0, result.output
    shard = tmp_path / "rec.shard-1-of-2"
    assert not record.exists() and shard.is_dir()
    with open_recording(shard) as reader:
        assert reader.header.config["shard"] == "1/2"
        units = {e.user_id for e in reader.iter_events(kinds=["span_begin"]) if e.span_kind == "unit"}
    assert units == {"sim_02"}  # the second of the two units


def test_merge_counts_the_requests_shards_sent_twice(tmp_path: Path) -> None:
    """Shards share no answers: one user's two systems in two shards both ask the user's simulated first
    lines and stage-0 attribution. ``merge`` says how many requests went out again: exactly what the
    endpoint answered more than once."""
    from memprobe_engine.cli.merge_cmd import merge_recordings
    from tests.loopback_endpoint import endpoint_stats

    record = tmp_path / "rec"
    with running_endpoint(0.0) as (url, _):
        for shard in ("0/2", "1/2"):
            result = CliRunner().invoke(app, [
                "run", "--record", str(record), "--users", "sim_01", "--dims", "reply_layout,low_point_episode",
                "--systems", "nomem,longctx_full", "--max-turns", "2", "--model", f"default=openai:scripted@{url}",
                "--no-cache", "--shard", shard])
            assert result.exit_code == 0, result.output
        _, bodies = endpoint_stats(url)
    merged = merge_recordings(tmp_path / "merged", [tmp_path / "rec.shard-0-of-2", tmp_path / "rec.shard-1-of-2"])
    twice = sum(count - 1 for count in bodies.values())
    assert merged.asked_again == twice > 0
