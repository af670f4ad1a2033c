"""`memprobe export eee`: every shipped recording (protocols A and B) and runner-written ones export
to Every Eval Ever 0.3.0 files that validate against the schema the package ships (vendored; the
copies are checked against its hashes, and against the package itself where it is installed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.exports.eee import SCHEMA_DIR
from tests.export_recordings import churn_run, recovery_run
from tests.functional.recovery_oracle import plan_for

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for p in (ROOT / "recordings").iterdir() if (p / "events.jsonl").is_file())
#: sha256 of every_eval_ever-0.3.0's schemas/*.json (the wheel on PyPI).
SCHEMA_SHA256 = {"eval.schema.json": "c9c6195aec8a9dfa0b2aba4924ac1aa8a184c9d8ca97cee778cb531088e39b48",
                 "instance_level_eval.schema.json": "b16b7fa7f0aa32763444179d94ffb2336ddb12c3fd2903835fe491666c1ff3e6"}


def validators() -> tuple[jsonschema.Draft7Validator, jsonschema.Draft7Validator]:
    load = lambda name: jsonschema.Draft7Validator(json.loads((SCHEMA_DIR / name).read_text()))  # noqa: E731
    return load("eval.schema.json"), load("instance_level_eval.schema.json")


def export(rec: Path, out: Path) -> list[tuple[dict[str, object], list[dict[str, object]]]]:
    result = CliRunner().invoke(app, ["export", "eee", str(rec), "--out", str(out)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "validated against Every Eval Ever schema 0.3.0" in result.output
    aggregate_check, instance_check = validators()
    found = []
    for path in sorted(out.rglob("*.json")):
        aggregate = json.loads(path.read_text())
        aggregate_check.validate(aggregate)
        repo = path.relative_to(out).as_posix()
        assert repo.startswith("data/memprobe-") and len(repo.split("/")) == 5
        samples = out / aggregate["detailed_evaluation_results"]["file_path"]
        rows = [json.loads(line) for line in samples.read_text().splitlines()]
        assert aggregate["detailed_evaluation_results"]["total_rows"] == len(rows)
        assert aggregate["detailed_evaluation_results"]["checksum"] == hashlib.sha256(samples.read_bytes()).hexdigest()
        ids = {r["evaluation_result_id"] for r in aggregate["evaluation_results"]}
        for row in rows:
            instance_check.validate(row)
            assert row["evaluation_id"] == aggregate["evaluation_id"] and row["evaluation_result_id"] in ids
        found.append((aggregate, rows))
    return found


def test_the_vendored_schemas_are_the_packages() -> None:
    for name, digest in SCHEMA_SHA256.items():
        assert hashlib.sha256((SCHEMA_DIR / name).read_bytes()).hexdigest() == digest
    try:
        import every_eval_ever  # type: ignore[import-not-found]
    except ImportError:
        return  # the package needs Python >= 3.12; the hashes above pin the copies to its 0.3.0 wheel
    shipped = Path(every_eval_ever.__file__).parent / "schemas"
    for name in SCHEMA_SHA256:
        assert (shipped / name).read_bytes() == (SCHEMA_DIR / name).read_bytes()


@pytest.mark.parametrize("rec", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_recording_exports_valid_eee(rec: Path, tmp_path: Path) -> None:
    found = export(rec, tmp_path)
    header = json.loads((rec / "header.json").read_text())
    assert sorted(a["model_info"]["id"] for a, _ in found) == sorted(f"memprobe/{s}" for s in header["config"]["systems"])
    for aggregate, rows in found:
        assert rows and all(0.0 <= r["evaluation"]["score"] <= 1.0 for r in rows)
        assert all(r["metric_config"]["min_score"] <= r["score_details"]["score"] <= r["metric_config"]["max_score"]
                   for r in aggregate["evaluation_results"])


def test_the_release_run_matches_its_report(tmp_path: Path) -> None:
    (aggregate, rows), = export(ROOT / "recordings" / "release-a-user_001-mem0", tmp_path)
    scores = {r["evaluation_result_id"]: r["score_details"]["score"] for r in aggregate["evaluation_results"]}
    assert scores["recovery_B.full_store"] == pytest.approx(0.5614285714285714)  # the release's own B of user_001
    assert len(rows) == 62 and {r["metadata"]["mode"] for r in rows} == {"dump_all", "retrieve"}
    first = next(r for r in rows if r["sample_id"] == "user_001:accomplishment_under_pressure_event"
                 and r["metadata"]["mode"] == "dump_all")
    assert first["input"]["reference"] == ["Caught a hard fly ball in a delayed tournament game"]
    assert first["evaluation"] == {"score": 0.25, "is_correct": False}
    assert first["metadata"]["attribution"] in {"memory_failure", "agent_elicitation_failure", "task_design_failure",
                                                 "simulator_too_strict", "ok", "excluded"}
    # a re-export is identical
    again = export(ROOT / "recordings" / "release-a-user_001-mem0", tmp_path / "again")
    assert again == [(aggregate, rows)]


def test_runner_written_recordings_export_valid_eee(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    from memprobe_engine.recovery.inputs import load_user

    dims = [e.dimension for e in load_user(ROOT / "sessions" / "users" / "sim_01").bank.entries][:2]
    plan_for(dims)
    found = export(recovery_run(tmp_path / "a", dims, ["nomem", "longctx_full"]), tmp_path / "a-eee")
    assert len(found) == 2 and all(len(rows) == 4 for _, rows in found)
    judged = [r for a, _ in found for r in a["evaluation_results"] if r["evaluation_result_id"] == "recovery_B.full_store"]
    assert all(r["metric_config"]["llm_scoring"]["judges"][0]["model_info"]["id"].startswith("openai:") for r in judged)
    found = export(churn_run(tmp_path / "b"), tmp_path / "b-eee")
    assert len(found) == 2 and all(len(rows) == 4 for _, rows in found)
    assert all(r["input"]["raw"] for _, rows in found for r in rows)
