"""`memprobe export eee`: every shipped recording (protocols A and B) and runner-written ones export
to Every Eval Ever 0.3.0 files. The product validates them with its own model of the format
(``report/eee_record.py``); here they are checked against the format's own JSON Schemas, read out
of the every-eval-ever 0.3.0 wheel from PyPI (``tests/eee_wheel.py``; ``make test`` fetches it), and
the model is checked to refuse what those schemas refuse."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.report.eee_record import SCHEMA_VERSION, EvaluationLog, InstanceRecord, dump
from tests import eee_wheel
from tests.export_recordings import churn_run, recovery_run
from tests.functional.recovery_oracle import plan_for

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for p in (ROOT / "recordings").iterdir() if (p / "events.jsonl").is_file())
Validators = tuple[jsonschema.Draft7Validator, jsonschema.Draft7Validator]


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict[str, object]]:
    """The aggregate and instance schemas of the wheel on PyPI (fetched once; a fetch that fails fails)."""
    try:
        return eee_wheel.schemas(eee_wheel.fetch())
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="module")
def validators(schemas: dict[str, dict[str, object]]) -> Validators:
    return jsonschema.Draft7Validator(schemas["aggregate"]), jsonschema.Draft7Validator(schemas["instance"])


def export(rec: Path, out: Path, validators: Validators) -> list[tuple[dict[str, object], list[dict[str, object]]]]:
    result = CliRunner().invoke(app, ["export", "eee", str(rec), "--out", str(out)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "each record validated against the Every Eval Ever 0.3.0 format" in result.output
    aggregate_check, instance_check = validators
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


def test_the_schemas_are_the_release_the_model_describes(schemas: dict[str, dict[str, object]]) -> None:
    assert schemas["aggregate"]["version"] == schemas["instance"]["version"] == SCHEMA_VERSION == eee_wheel.VERSION
    assert not (ROOT / "memprobe_engine" / "exports" / "eee_schema").exists()  # nothing of it is vendored


@pytest.mark.parametrize("rec", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_recording_exports_valid_eee(rec: Path, tmp_path: Path, validators: Validators) -> None:
    found = export(rec, tmp_path, validators)
    header = json.loads((rec / "header.json").read_text())
    assert sorted(a["model_info"]["id"] for a, _ in found) == sorted(f"memprobe/{s}" for s in header["config"]["systems"])
    for aggregate, rows in found:
        assert rows and all(0.0 <= r["evaluation"]["score"] <= 1.0 for r in rows)
        assert all(r["metric_config"]["min_score"] <= r["score_details"]["score"] <= r["metric_config"]["max_score"]
                   for r in aggregate["evaluation_results"])


def test_the_release_run_matches_its_report(tmp_path: Path, validators: Validators) -> None:
    (aggregate, rows), = export(ROOT / "recordings" / "release-a-user_001-mem0", tmp_path, validators)
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
    again = export(ROOT / "recordings" / "release-a-user_001-mem0", tmp_path / "again", validators)
    assert again == [(aggregate, rows)]


def test_runner_written_recordings_export_valid_eee(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    validators: Validators) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    from memprobe_engine.recovery.inputs import load_user

    dims = [e.dimension for e in load_user(ROOT / "sessions" / "users" / "sim_01").bank.entries][:2]
    plan_for(dims)
    found = export(recovery_run(tmp_path / "a", dims, ["nomem", "longctx_full"]), tmp_path / "a-eee", validators)
    assert len(found) == 2 and all(len(rows) == 4 for _, rows in found)
    judged = [r for a, _ in found for r in a["evaluation_results"] if r["evaluation_result_id"] == "recovery_B.full_store"]
    assert all(r["metric_config"]["llm_scoring"]["judges"][0]["model_info"]["id"].startswith("openai:") for r in judged)
    found = export(churn_run(tmp_path / "b"), tmp_path / "b-eee", validators)
    assert len(found) == 2 and all(len(rows) == 4 for _, rows in found)
    assert all(r["input"]["raw"] for _, rows in found for r in rows)


Json = dict[str, object]
Mutation = Callable[[dict[str, Any]], None]


def _drop(*path: str | int) -> Mutation:
    def change(doc: dict[str, Any]) -> None:
        for key in path[:-1]:
            doc = doc[key]
        del doc[path[-1]]
    return change


def _set(value: object, *path: str | int) -> Mutation:
    def change(doc: dict[str, Any]) -> None:
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value
    return change


#: Changes to a real aggregate record that the format's schema refuses.
AGGREGATE_BREAKS: dict[str, Mutation] = {
    **{f"no {key}": _drop(key) for key in ("schema_version", "evaluation_id", "retrieved_timestamp", "source_metadata",
                                           "model_info", "eval_library", "evaluation_results")},
    "unknown top-level key": _set("x", "extra"),
    "source_type not an enum value": _set("scrape", "source_metadata", "source_type"),
    "evaluator_relationship not an enum value": _set("self", "source_metadata", "evaluator_relationship"),
    "a detail that is not a string": _set(3, "source_metadata", "additional_details", "run_id"),
    "no eval_library version": _drop("eval_library", "version"),
    "no deployment_type": _drop("model_info", "additional_details", "deployment_type"),
    "model_availability not an enum value": _set("public", "model_info", "additional_details", "model_availability"),
    "model detail not a string": _set(1, "model_info", "additional_details", "memory_system"),
    "no lower_is_better": _drop("evaluation_results", 0, "metric_config", "lower_is_better"),
    "continuous without min_score": _drop("evaluation_results", 0, "metric_config", "min_score"),
    "continuous without max_score": _drop("evaluation_results", 0, "metric_config", "max_score"),
    "levels without level_names": _set("levels", "evaluation_results", 0, "metric_config", "score_type"),
    "score_type not an enum value": _set("ordinal", "evaluation_results", 0, "metric_config", "score_type"),
    "score as a string": _set("0.5", "evaluation_results", 0, "score_details", "score"),
    "no score": _drop("evaluation_results", 0, "score_details", "score"),
    "source_data of no known kind": _set("file", "evaluation_results", 0, "source_data", "source_type"),
    "url source without urls": _set({"dataset_name": "d", "source_type": "url", "url": []},
                                    "evaluation_results", 0, "source_data"),
    "judge list empty": _set({"judges": [], "input_prompt": "p"}, "evaluation_results", 0, "metric_config",
                             "llm_scoring"),
    "confidence level above 1": _set({"lower": 0.1, "upper": 0.2, "confidence_level": 95},
                                     "evaluation_results", 0, "score_details", "uncertainty", "confidence_interval"),
    "samples file outside data/": _set("samples.jsonl", "detailed_evaluation_results", "file_path"),
    "samples format not jsonl": _set("csv", "detailed_evaluation_results", "format"),
    "hash algorithm not an enum value": _set("crc32", "detailed_evaluation_results", "hash_algorithm"),
}
#: Changes to a real instance record that the format's schema refuses.
INSTANCE_BREAKS: dict[str, Mutation] = {
    **{f"no {key}": _drop(key) for key in ("schema_version", "evaluation_id", "model_id", "evaluation_name",
                                           "sample_id", "interaction_type", "input", "answer_attribution",
                                           "evaluation")},
    "unknown top-level key": _set("x", "extra"),
    "interaction_type not an enum value": _set("chat", "interaction_type"),
    "single_turn without output": _set(None, "output"),
    "single_turn with messages": _set([{"turn_idx": 0, "role": "user"}], "messages"),
    "multi_turn with an output": _set("multi_turn", "interaction_type"),
    "no reference": _drop("input", "reference"),
    "output raw not a list": _set("answer", "output", "raw"),
    "negative turn_idx": _set(-1, "answer_attribution", 0, "turn_idx"),
    "attribution without is_terminal": _drop("answer_attribution", 0, "is_terminal"),
    "is_correct not a boolean": _set("yes", "evaluation", "is_correct"),
    "zero turns": _set(0, "evaluation", "num_turns"),
    "metadata value not a string": _set(2, "metadata", "mode"),
    "token usage without a total": _set({"input_tokens": 1, "output_tokens": 1}, "token_usage"),
}


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory, validators: Validators) -> tuple[Json, Json]:
    """A real aggregate record (protocol B: it has intervals) and a real instance record (protocol A)."""
    (aggregate, _), *_ = export(ROOT / "recordings" / "sample-paradigms-quick", tmp_path_factory.mktemp("b"),
                                validators)
    (_, rows), = export(ROOT / "recordings" / "release-a-user_001-mem0", tmp_path_factory.mktemp("a"), validators)
    return aggregate, rows[0]


def test_the_model_reads_back_what_it_writes(records: tuple[Json, Json]) -> None:
    aggregate, instance = records
    assert dump(EvaluationLog.model_validate(aggregate)) == aggregate
    assert InstanceRecord.model_validate(instance).model_dump(mode="json", exclude_none=True) == instance


@pytest.mark.parametrize("kind,name", [("aggregate", n) for n in AGGREGATE_BREAKS] +
                         [("instance", n) for n in INSTANCE_BREAKS])
def test_the_model_refuses_what_the_schema_refuses(kind: str, name: str, records: tuple[Json, Json],
                                                   validators: Validators) -> None:
    aggregate, instance = records
    document = copy.deepcopy(aggregate if kind == "aggregate" else instance)
    (AGGREGATE_BREAKS if kind == "aggregate" else INSTANCE_BREAKS)[name](document)
    schema = validators[0] if kind == "aggregate" else validators[1]
    assert list(schema.iter_errors(document)), f"{name}: the schema accepts it, so this case tests nothing"
    with pytest.raises(ValidationError):
        (EvaluationLog if kind == "aggregate" else InstanceRecord).model_validate(document)
