"""`memprobe sessions validate` on protocol-B suites: the paper's E.1 rules, each problem naming file,
episode and field; the shipped suites pass."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.paradigms.validate import validate_suite

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sessions" / "paradigms" / "upstream-sample"


def episodes() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (SAMPLE / "episodes.jsonl").read_bytes().splitlines()]


def write(tmp_path: Path, items: list[dict[str, Any]]) -> Path:
    (tmp_path / "episodes.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in items))
    return tmp_path


def fields(problems: list[Any]) -> set[tuple[str | None, str]]:
    return {(p.episode, p.field) for p in problems}


def test_shipped_suites_pass() -> None:
    assert validate_suite(SAMPLE) == []
    assert validate_suite(ROOT / "sessions" / "paradigms" / "suite56-specs") == []


def test_session_rules(tmp_path: Path) -> None:
    update, decoy = episodes()
    update["sessions"][4]["session_idx"] = 9                     # out of order
    update["sessions"][5]["phase"] = "warmup"                    # unknown phase
    del update["sessions"][6]["metadata"]                        # missing session field
    update["sessions"][19]["phase"] = "encoding"                 # encoding after the perturbation
    decoy["sessions"][2]["dialogue"] = []                        # empty dialogue
    decoy["metadata"]["total_sessions"] = 30
    problems = validate_suite(write(tmp_path, [update, decoy]))
    assert {("PILOT-01A", "sessions.4.session_idx"), ("PILOT-01A", "sessions.5.phase"),
            ("PILOT-01A", "sessions.6.metadata"), ("PILOT-01A", "sessions.19.phase"),
            ("PILOT-01B", "sessions.2.dialogue"), ("PILOT-01B", "metadata.total_sessions")} <= fields(problems)
    assert all(p.file.endswith(("episodes.jsonl:1", "episodes.jsonl:2")) for p in problems)


def test_split_metadata_rules(tmp_path: Path) -> None:
    update = episodes()[0]
    split = copy.deepcopy(update)
    split["latent_spec"]["perturbation_parts"] = ["perturbation_p1", "perturbation_p2"]
    split["latent_spec"]["split_perturbation"] = {"p1_hint": "a", "p2_hint": "b"}
    # Only one perturbation session (type "perturbation"), and the count says 1: both are wrong for a split.
    problems = validate_suite(write(tmp_path, [split]))
    assert ("PILOT-01A", "sessions") in fields(problems)
    assert ("PILOT-01A", "latent_spec.num_perturbation_sessions") in fields(problems)
    assert ("PILOT-01A", "metadata.split_perturbation") in fields(problems)


def test_gold_per_probe_type(tmp_path: Path) -> None:
    update, decoy = episodes()
    update["latent_spec"]["gold"]["has_changed"] = False
    update["latent_spec"]["gold"]["previous_value"] = None
    update["latent_spec"]["gold"]["original_value"] = None
    del decoy["latent_spec"]["gold"]["conflict_gold"]
    decoy["probes"][0]["question"] = " "
    decoy["probes"][1]["expected_behavior"] = "should_update"
    problems = validate_suite(write(tmp_path, [update, decoy]))
    assert {("PILOT-01A", "latent_spec.gold.has_changed"), ("PILOT-01A", "latent_spec.gold.previous_value"),
            ("PILOT-01B", "latent_spec.gold.conflict_gold"), ("PILOT-01B", "probes.0.question"),
            ("PILOT-01B", "probes.1.expected_behavior")} <= fields(problems)


def test_a_bad_line_does_not_hide_the_next(tmp_path: Path) -> None:
    update, decoy = episodes()
    update["sessions"][0]["dialogue"][0]["role"] = "narrator"
    del decoy["latent_spec"]["gold"]["conflict_gold"]
    problems = validate_suite(write(tmp_path, [update, decoy]))
    first = next(p for p in problems if p.episode == "PILOT-01A")
    assert first.field == "sessions.0.dialogue.0.role" and first.file.endswith("episodes.jsonl:1")
    assert ("PILOT-01B", "latent_spec.gold.conflict_gold") in fields(problems)


def test_cli_names_file_episode_field_and_exits_1(tmp_path: Path) -> None:
    update = episodes()[0]
    update["sessions"][3]["phase"] = "warmup"
    result = CliRunner().invoke(app, ["sessions", "validate", str(write(tmp_path, [update]))])
    assert result.exit_code == 1
    assert "episodes.jsonl:1 episode PILOT-01A: sessions.3.phase" in result.output.replace("\n", "")
    ok = CliRunner().invoke(app, ["sessions", "validate", str(SAMPLE)])
    assert ok.exit_code == 0 and "valid" in ok.output
