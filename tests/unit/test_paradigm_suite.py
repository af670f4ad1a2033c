"""Protocol-B suite models: the shipped upstream data loads, round-trips unchanged, and bad input
is named by file, episode and field."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.paradigms.suite import (
    PARADIGMS,
    PROBE_TYPES,
    SplitPlan,
    dump_episode,
    load_episodes,
    load_suite,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sessions" / "paradigms" / "upstream-sample"
SPECS = ROOT / "sessions" / "paradigms" / "suite56-specs"


def test_upstream_sample_loads_with_gold_on_every_probe() -> None:
    suite = load_suite(SAMPLE)
    assert [e.episode_id for e in suite.episodes] == ["PILOT-01A", "PILOT-01B"]
    assert len(suite.fact_types) == 21 and len(suite.specs) == 2
    update, decoy = suite.episodes
    assert (update.expected_behavior, decoy.expected_behavior) == ("should_update", "should_preserve")
    assert len(update.sessions) == 21 and update.sessions[18].phase == "perturbation"
    assert all(p.gold is not None for e in suite.episodes for p in e.probes)
    assert update.probes[0].gold is not None and update.probes[0].gold.current_value == "CrossFit Central"
    conflict = decoy.latent_spec.gold.conflict_gold
    assert conflict is not None and conflict.applies_to_target is False and conflict.status == "different_entity"
    assert not update.is_split


def test_episodes_round_trip_byte_for_byte_as_json() -> None:
    original = [orjson.loads(line) for line in (SAMPLE / "episodes.jsonl").read_bytes().splitlines()]
    episodes = load_episodes(SAMPLE / "episodes.jsonl")
    assert [orjson.loads(dump_episode(e)) for e in episodes] == original


def test_the_56_specs_cover_every_paradigm_and_probe_type() -> None:
    suite = load_suite(SPECS)
    assert len(suite.specs) == 56 and not suite.episodes
    assert {s.paradigm for s in suite.specs} == set(PARADIGMS)
    assert {p.type for s in suite.specs for p in s.probes} == set(PROBE_TYPES)
    split = [s for s in suite.specs if s.is_split]
    assert len(split) == 12 and all(isinstance(s.split_perturbation, SplitPlan) for s in split)
    assert all(s.perturbation_parts == ["perturbation_p1", "perturbation_p2"] for s in split)
    assert sum(s.gold.temporal_gold is not None for s in suite.specs) == 14
    # Unknown upstream fields are kept, not dropped.
    assert suite.specs[0].model_dump()["group_design"] == "paired"


def test_bad_field_is_named_with_file_line_episode_and_field(tmp_path: Path) -> None:
    lines = (SAMPLE / "episodes.jsonl").read_bytes().splitlines()
    broken = orjson.loads(lines[1])
    broken["sessions"][3]["dialogue"][0]["role"] = "narrator"
    (tmp_path / "episodes.jsonl").write_bytes(lines[0] + b"\n" + orjson.dumps(broken) + b"\n")
    with pytest.raises(ConfigError) as err:
        load_suite(tmp_path)
    message = str(err.value)
    assert "episodes.jsonl:2" in message and "PILOT-01B" in message and "sessions.3.dialogue.0.role" in message


def test_missing_folder_and_empty_folder_say_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such suite folder"):
        load_suite(tmp_path / "nope")
    with pytest.raises(ConfigError, match="not a paradigm suite"):
        load_suite(tmp_path)
    (tmp_path / "episodes.jsonl").write_text("{not json\n")
    with pytest.raises(ConfigError, match=r"episodes.jsonl:1: not valid JSON"):
        load_suite(tmp_path)
