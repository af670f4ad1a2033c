"""Protocol B's results for ``memprobe export eee`` (benchmark ``memprobe-paradigms``).

Per memory system: accuracy with its episode-bootstrap 95 % interval, and Table 2's plasticity,
stability and SP balance (with their intervals where the report has them). Instances are the probes
that were scored (excluded ones are left out): the question, the reader's answer, the rule score.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd

from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.report.eee_record import EeeInstance, EeeResults, EeeSystem, EvaluationResult, metric_result, number
from memprobe_engine.paradigms.config import ParadigmConfig

BENCHMARK = "memprobe-paradigms"
#: Probe fields kept as an instance's metadata.
PROBE_FIELDS = ("paradigm", "condition", "expected_behavior", "probe_type", "reason")


def eee_results(path: Path, header: RecordingHeader) -> EeeResults:
    """The recording's results, one :class:`EeeSystem` per memory system."""
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
    config = ParadigmConfig.of(header)
    dataset = f"{BENCHMARK}:{config.sessions or 'suite'}"
    protocols = config.input_protocols
    out: list[EeeSystem] = []
    t2 = tables["table2"].set_index("system") if "table2" in tables else pd.DataFrame()
    for row in tables["table1"].to_dict("records"):
        system = str(row["system"])
        acc = number(row.get("accuracy"))
        results: list[EvaluationResult] = []
        if acc is not None:
            results.append(metric_result("accuracy", "Accuracy", "Share of probes scored correct (score 1) by the "
                                         "rule scorer.", acc, dataset, samples=int(row.get("scored") or 0) or None,
                                         ci=(number(row.get("ci_low")), number(row.get("ci_high")))))
        for metric in ("plasticity", "stability", "sp_balance"):
            value = number(t2.loc[system, metric]) if system in t2.index else None
            if value is None:
                continue
            ci = intervals[(intervals["system"] == system) & (intervals["metric"] == metric)]
            bounds = (number(ci["ci_low"].iloc[0]), number(ci["ci_high"].iloc[0])) if len(ci) else None
            results.append(metric_result(metric, metric.replace("_", " ").capitalize(), f"Table 2 {metric}.", value,
                                         dataset, ci=bounds))
        instances = []
        for probe in probes[(probes["system"] == system) & ~probes["excluded"].astype(bool)].to_dict("records"):
            answer = answers.get((system, str(probe["episode_id"]), int(probe["probe_index"])))
            score = float(probe["score"])
            text = (answer.answer_text or (orjson.dumps(answer.answer).decode() if answer.answer else "")) if answer \
                else ""
            instances.append(EeeInstance("accuracy", f"{probe['episode_id']}:{probe['probe_index']}",
                                         answer.question if answer else str(probe["probe_type"]), [], text, score,
                                         score >= 1.0, {k: str(probe[k]) for k in PROBE_FIELDS}, "rule_scorer"))
        out.append(EeeSystem(system, results, instances, {
            "input_protocol": str(protocols.get(system, "") if isinstance(protocols, dict) else "")}))
    return EeeResults(BENCHMARK, out)
