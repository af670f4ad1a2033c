"""``memprobe export eee``: a run's results in the Every Eval Ever schema 0.3.0.

Every Eval Ever keeps one aggregate file per evaluated model and a companion ``_samples.jsonl``
with one record per instance, laid out as ``data/<benchmark>/<developer>/<model>/<uuid>.json``.
What MemProbe evaluates is a memory system (with the models of its roles), so each system of the
recording is one "model": ``memprobe/<system>``, its role models in ``additional_details``.

* Protocol A (benchmark ``memprobe-recovery``): per access mode, the recovery score B (mean over
  users, their SD) and B per category (Table 3), the recovery rate (Table 4) and metric A where the
  rollout was live. Instances are the current score of each (user, dimension, mode) case: the
  slot-filler's fill as the output, the hidden target as the reference, the judge's score (1 =
  recovered); excluded cases are left out (never scored as zero) and counted in the aggregate.
* Protocol B (``memprobe-paradigms``): accuracy with its episode-bootstrap 95 % CI, plasticity,
  stability and SP balance; instances are the probes (question, answer, rule score).

Ids are derived from the run id (uuid4-shaped), timestamps are the run's, so a re-export gives the
same files. Both files are validated against the vendored schemas (``eee_schema/``) with
``jsonschema`` before anything is written; without ``jsonschema`` the files are written and a line
says they were not validated.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson
import pandas as pd

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import RecordingHeader, read_header
from memprobe_engine.exports.files import write_file
from memprobe_engine.report.output import output_folder
from memprobe_engine.exports.registry import ExportJob, ExportResult, default_out

Json = dict[str, object]
SCHEMA_VERSION = "0.3.0"
SCHEMA_DIR = Path(__file__).with_name("eee_schema")
MODES = {"dump_all": "full_store", "retrieve": "top_k"}


@dataclass(frozen=True)
class Instance:
    """One per-instance record before it is laid out: its sample, what was asked, answered and scored."""

    result_id: str
    sample_id: str
    question: str
    reference: list[str]
    answer: str
    score: float
    correct: bool
    metadata: dict[str, str]


@dataclass
class SystemResults:
    """One system's aggregate results and its instances."""

    system: str
    results: list[Json]
    instances: list[Instance]
    details: dict[str, str]


def _num(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _result(result_id: str, name: str, description: str, score: float, dataset: str, *, unit: str = "proportion",
            low: float = 0.0, high: float = 1.0, std: float | None = None, samples: int | None = None,
            ci: tuple[float | None, float | None] | None = None, judge: Json | None = None) -> Json:
    metric: Json = {"evaluation_description": description, "metric_id": f"memprobe.{result_id}",
                    "metric_name": name, "metric_kind": "score", "metric_unit": unit, "lower_is_better": False,
                    "score_type": "continuous", "min_score": low, "max_score": high}
    if judge is not None:
        metric["llm_scoring"] = judge
    uncertainty: Json = {}
    if std is not None:
        uncertainty["standard_deviation"] = std
    if samples is not None:
        uncertainty["num_samples"] = samples
    if ci is not None and ci[0] is not None and ci[1] is not None:
        uncertainty["confidence_interval"] = {"lower": ci[0], "upper": ci[1], "confidence_level": 0.95,
                                              "method": "episode bootstrap, 2,000 resamples"}
        uncertainty["num_bootstrap_samples"] = 2000
    details: Json = {"score": score}
    if uncertainty:
        details["uncertainty"] = uncertainty
    return {"evaluation_result_id": result_id, "evaluation_name": name,
            "source_data": {"dataset_name": dataset, "source_type": "other"},
            "metric_config": metric, "score_details": details}


def _specs(header: RecordingHeader) -> dict[str, str]:
    models = header.config.get("models")
    roles = models.get("models") if isinstance(models, dict) else None
    if not isinstance(roles, dict):
        return {}
    return {str(role): str(spec.get("spec")) for role, spec in roles.items() if isinstance(spec, dict)}


def _judge(header: RecordingHeader) -> Json | None:
    """The ``llm_scoring`` block of a run judged by a model (None for a calibrated judge or an import)."""
    from memprobe_engine.recovery.judge_kind import MODEL_JUDGE, judge_of
    from memprobe_engine.recovery.prompts import JUDGE_SYSTEM

    spec = _specs(header).get("recovery_judge")
    if judge_of(header.config) != MODEL_JUDGE or not spec:
        return None
    return {"judges": [{"model_info": _model_info(spec, spec, header)}], "input_prompt": JUDGE_SYSTEM}


def _model_info(name: str, model_id: str, header: RecordingHeader, extra: dict[str, str] | None = None) -> Json:
    backend = model_id.split(":", 1)[0] if ":" in model_id else ""
    deployment = {"local": "self_deployed", "vllm": "self_deployed", "openai": "externally_managed"}.get(
        backend, "unknown")
    details = {"deployment_type": deployment, "model_availability": "unknown", **(extra or {})}
    return {"name": name, "id": model_id, "developer": "memprobe", "additional_details": details}


def _recovery(path: Path, header: RecordingHeader) -> list[SystemResults]:
    from memprobe_engine.recovery.read.frames import load_frames
    from memprobe_engine.recovery.read.tables import build_tables

    frames = load_frames([path])
    tables = build_tables(frames)
    texts = _recovery_texts(path)
    labels = {(str(r["user_id"]), str(r["system"]), str(r["dimension"]), str(r["mode"])): str(r["label"])
              for r in frames.attribution.to_dict("records")}
    judge = _judge(header)
    dataset = f"memprobe-recovery:{header.config.get('sessions') or 'sessions'}"
    out: list[SystemResults] = []
    for row in tables["table2"].to_dict("records"):
        system = str(row["system"])
        results: list[Json] = []
        for mode, short in MODES.items():
            key = "full" if mode == "dump_all" else "topk"
            mean = _num(row.get(f"B_{key}_mean"))
            if mean is not None:
                results.append(_result(f"recovery_B.{short}", f"Recovery score B ({mode})",
                                       f"Mean over users of the judge's score (0, .25, .5, .75, 1) of the hidden "
                                       f"dimensions reconstructed from the memory ({mode}).", mean, dataset,
                                       std=_num(row.get(f"B_{key}_std")),
                                       samples=int(row.get(f"B_{key}_users") or 0) or None, judge=judge))
        for cat in tables["table3"][tables["table3"]["system"] == system].to_dict("records"):
            for column, value in cat.items():
                if str(column).endswith("_mean") and _num(value) is not None:
                    category, short = str(column).removesuffix("_mean"), MODES.get(str(cat["mode"]), str(cat["mode"]))
                    results.append(_result(f"recovery_B.{short}.{category}", f"Recovery score B, {category} "
                                           f"({cat['mode']})", f"B of the {category} dimensions ({cat['mode']}).",
                                           float(value), dataset, std=_num(cat.get(f"{category}_std")), judge=judge))
        for t4 in tables["table4"][tables["table4"]["system"] == system].to_dict("records"):
            rate = _num(t4.get("recovery_rate_pct"))
            if rate is not None:
                short = MODES.get(str(t4["mode"]), str(t4["mode"]))
                results.append(_result(f"recovery_rate.{short}", f"Recovery rate ({t4['mode']})",
                                       "Share of cases attributed ok (recovered), Table 4.", rate, dataset,
                                       unit="percent", high=100.0, samples=int(t4.get("total") or 0) or None))
        if _num(row.get("A_pct")) is not None:
            results.append(_result("task_success_A", "Task success A", "Share of tasks the simulated user "
                                   "ended satisfied (live rollouts).", float(row["A_pct"]), dataset,
                                   unit="percent", high=100.0))
        scores = frames.scores[(frames.scores["system"] == system) & frames.scores["score"].notna()]
        instances = [_recovery_instance(case, texts, labels) for case in scores.to_dict("records")]
        out.append(SystemResults(system, results, instances, {
            "excluded_cases": str(int(row.get("excluded_cases") or 0)), "rollout": str(row.get("rollout", ""))}))
    return out


def _recovery_texts(path: Path) -> dict[tuple[str, str, str, str], dict[str, str]]:
    """Per (user, system, dimension, mode): the latest fill, judge reason and hidden target."""
    from memprobe_engine.events.scoring import JudgeScore, SlotFill
    from memprobe_engine.recovery.read.dimension import load_target
    from memprobe_engine.replay.session import ReplaySession

    found: dict[tuple[str, str, str, str], dict[str, str]] = {}
    session = ReplaySession.open(path)
    try:
        session.build_index()
        for event in session.reader.iter_of(SlotFill, JudgeScore):
            if event.layer is not None or not (event.user_id and event.system and event.dimension):
                continue
            if isinstance(event, SlotFill):
                found.setdefault((event.user_id, event.system, event.dimension, event.mode), {})["fill"] = \
                    str(event.label or "")
            elif isinstance(event, JudgeScore):
                found.setdefault((event.user_id, event.system, event.dimension, event.mode), {})["reason"] = \
                    str(event.reason or "")
        for user, system, dimension, _ in list(found):
            target, _why = load_target(session, user, dimension, system)
            for mode in MODES:
                if (user, system, dimension, mode) in found and target is not None:
                    found[(user, system, dimension, mode)]["target"] = target.short
    finally:
        session.close()
    return found


def _recovery_instance(case: dict[str, object], texts: dict[tuple[str, str, str, str], dict[str, str]],
                       labels: dict[tuple[str, str, str, str], str]) -> Instance:
    key = (str(case["user_id"]), str(case["system"]), str(case["dimension"]), str(case["mode"]))
    said = texts.get(key, {})
    score = float(case["score"])  # type: ignore[arg-type]
    return Instance(result_id=f"recovery_B.{MODES.get(key[3], key[3])}", sample_id=f"{key[0]}:{key[2]}",
                    question=f"Reconstruct the user's hidden {key[2]} ({case.get('category')}) from the memory "
                             f"({key[3]}).", reference=[said["target"]] if said.get("target") else [],
                    answer=said.get("fill", ""), score=score, correct=score >= 1.0,
                    metadata={"category": str(case.get("category")), "mode": key[3],
                              "attribution": labels.get(key, ""), "judge_reason": said.get("reason", "")})


def _paradigms(path: Path, header: RecordingHeader) -> list[SystemResults]:
    from memprobe_engine.events.paradigms import ProbeAnswer
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.paradigms.read.frames import load_paradigm_frames
    from memprobe_engine.paradigms.read.tables import build_paradigm_tables

    probes = load_paradigm_frames([path]).probes
    tables = build_paradigm_tables(probes, ["1", "2", "intervals"])
    intervals = tables.get("intervals", pd.DataFrame(columns=["system", "metric", "ci_low", "ci_high"]))
    answers: dict[tuple[str, str, int], ProbeAnswer] = {}
    with open_recording(path) as reader:
        for event in reader.iter_of(ProbeAnswer):
            if event.layer is None and event.system:
                answers[(event.system, event.episode_id, event.probe_index)] = event
    dataset = f"memprobe-paradigms:{header.config.get('sessions') or 'suite'}"
    out: list[SystemResults] = []
    t2 = tables["table2"].set_index("system") if "table2" in tables else pd.DataFrame()
    for row in tables["table1"].to_dict("records"):
        system = str(row["system"])
        acc = _num(row.get("accuracy"))
        results: list[Json] = []
        if acc is not None:
            results.append(_result("accuracy", "Accuracy", "Share of probes scored correct (score 1) by the rule "
                                   "scorer.", acc, dataset, samples=int(row.get("scored") or 0) or None,
                                   ci=(_num(row.get("ci_low")), _num(row.get("ci_high")))))
        for metric in ("plasticity", "stability", "sp_balance"):
            value = _num(t2.loc[system, metric]) if system in t2.index else None
            if value is None:
                continue
            ci = intervals[(intervals["system"] == system) & (intervals["metric"] == metric)]
            bounds = (_num(ci["ci_low"].iloc[0]), _num(ci["ci_high"].iloc[0])) if len(ci) else None
            results.append(_result(metric, metric.replace("_", " ").capitalize(), f"Table 2 {metric}.", value,
                                   dataset, ci=bounds))
        instances = []
        for probe in probes[(probes["system"] == system) & ~probes["excluded"].astype(bool)].to_dict("records"):
            answer = answers.get((system, str(probe["episode_id"]), int(probe["probe_index"])))
            score = float(probe["score"])
            text = (answer.answer_text or (orjson.dumps(answer.answer).decode() if answer.answer else "")) if answer \
                else ""
            instances.append(Instance("accuracy", f"{probe['episode_id']}:{probe['probe_index']}",
                                      answer.question if answer else str(probe["probe_type"]), [], text, score,
                                      score >= 1.0, {k: str(probe[k]) for k in (
                                          "paradigm", "condition", "expected_behavior", "probe_type", "reason")}))
        protocols = header.config.get("input_protocols")
        out.append(SystemResults(system, results, instances, {
            "input_protocol": str(protocols.get(system, "") if isinstance(protocols, dict) else "")}))
    return out


def _uuid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def _component(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".- ") or "system"


def _instance_record(item: Instance, evaluation_id: str, model_id: str) -> Json:
    return {"schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "model_id": model_id,
            "evaluation_name": item.result_id, "evaluation_result_id": item.result_id, "sample_id": item.sample_id,
            "interaction_type": "single_turn",
            "input": {"raw": item.question, "reference": item.reference},
            "output": {"raw": [item.answer]}, "messages": None,
            "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": item.answer,
                                    "extraction_method": "llm_judge" if item.result_id.startswith("recovery")
                                    else "rule_scorer", "is_terminal": True}],
            "evaluation": {"score": item.score, "is_correct": item.correct}, "metadata": item.metadata}


def _validator(name: str) -> object | None:
    try:
        import jsonschema
    except ImportError:
        return None
    schema = orjson.loads((SCHEMA_DIR / name).read_bytes())
    validator: object = jsonschema.Draft7Validator(schema)
    return validator


def _check(validator: object | None, document: Json, where: str) -> None:
    if validator is None:
        return
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))  # type: ignore[attr-defined]
    if errors:
        first = errors[0]
        at = "/".join(map(str, first.path)) or "(top)"
        raise ConfigError(f"{where}: the Every Eval Ever export does not validate against schema {SCHEMA_VERSION} "
                          f"({len(errors)} error(s); first at {at}: {first.message[:200]}). This is a bug in "
                          f"MemProbe's export: please report it with the recording.")


def eee_documents(path: Path) -> list[tuple[str, Json, list[Json]]]:
    """(repository path of the aggregate file, aggregate, instance records) per system of the recording."""
    from memprobe_engine import __version__

    header = read_header(path)
    paradigm = header.suite == "paradigms"
    benchmark = "memprobe-paradigms" if paradigm else "memprobe-recovery"
    systems = _paradigms(path, header) if paradigm else _recovery(path, header)
    stamp = str(header.created)
    specs = _specs(header)
    out = []
    for found in systems:
        model_id = f"memprobe/{found.system}"
        evaluation_id = f"{benchmark}/{model_id}/{stamp}"
        name = _uuid(header.run_id, found.system, benchmark)
        folder = f"data/{benchmark}/memprobe/{_component(found.system)}"
        records = [_instance_record(i, evaluation_id, model_id) for i in found.instances]
        lines = b"".join(orjson.dumps(r) + b"\n" for r in records)
        extra = {"memory_system": found.system, **{f"model.{role}": spec for role, spec in sorted(specs.items())},
                 **found.details}
        aggregate: Json = {
            "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "evaluation_timestamp": stamp,
            "retrieved_timestamp": stamp,
            "source_metadata": {"source_name": "MemProbe", "source_type": "evaluation_run",
                                "source_organization_name": "MemProbe", "evaluator_relationship": "third_party",
                                "additional_details": {"run_id": header.run_id, "suite": header.suite,
                                                       "recording": path.name}},
            "eval_library": {"name": "memprobe", "version": str(header.packages.get("memprobe") or __version__)},
            "model_info": _model_info(f"{found.system} (memory system)", model_id, header, extra),
            "evaluation_results": found.results,
            "detailed_evaluation_results": {"format": "jsonl", "file_path": f"{folder}/{name}_samples.jsonl",
                                            "hash_algorithm": "sha256",
                                            "checksum": hashlib.sha256(lines).hexdigest(), "total_rows": len(records)}}
        out.append((f"{folder}/{name}.json", aggregate, records))
    return out


def export_eee(job: ExportJob) -> ExportResult:
    """The registry's ``eee`` writer: validate everything, then write the datastore layout under --out."""
    if len(job.recordings) != 1:
        raise ConfigError("export eee takes one recording.")
    path = Path(job.recordings[0])
    documents = eee_documents(path)
    aggregate_check, instance_check = _validator("eval.schema.json"), _validator("instance_level_eval.schema.json")
    for repo_path, aggregate, records in documents:
        _check(aggregate_check, aggregate, repo_path)
        for index, record in enumerate(records):
            _check(instance_check, record, f"{repo_path} instance {index}")
    out = output_folder(job.out if job.out is not None else default_out(job, "-eee"))
    result = ExportResult()
    for repo_path, aggregate, records in documents:
        result.written.append(write_file(out / repo_path, orjson.dumps(aggregate, option=orjson.OPT_INDENT_2) + b"\n"))
        samples = aggregate["detailed_evaluation_results"]
        assert isinstance(samples, dict)
        result.written.append(write_file(out / str(samples["file_path"]),
                                         b"".join(orjson.dumps(r) + b"\n" for r in records)))
    validated = "validated against" if aggregate_check is not None else "NOT validated (install jsonschema) against"
    rows = sum(len(r) for _, _, r in documents)
    result.lines.append(f"wrote {len(documents)} evaluation(s) with {rows} instance(s) to {out}, {validated} "
                        f"Every Eval Ever schema {SCHEMA_VERSION}")
    return result
