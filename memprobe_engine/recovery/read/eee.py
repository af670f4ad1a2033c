"""Protocol A's results for ``memprobe export eee`` (benchmark ``memprobe-recovery``).

Per memory system and access mode: the recovery score B (mean over users, their SD) and B per
category (Table 3), the recovery rate (Table 4) and metric A where the rollout was live. Instances
are the current score of each (user, dimension, mode) case: the slot-filler's fill as the output,
the hidden target as the reference, the judge's score (1 = recovered); excluded cases are left out
(never scored as zero) and counted in the system's details. A model judge is named in ``llm_scoring``
with its system prompt.
"""

from __future__ import annotations

from pathlib import Path

from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.report.eee_record import (EeeInstance, EeeResults, EeeSystem, EvaluationResult, JudgeConfig,
                                                LlmScoring, metric_result, model_info, number, role_models)
from memprobe_engine.recovery.config import RecoveryConfig

BENCHMARK = "memprobe-recovery"
#: Access mode → how its result ids name it.
MODES = {"dump_all": "full_store", "retrieve": "top_k"}
Case = tuple[str, str, str, str]  # (user, system, dimension, mode)


def _judge(header: RecordingHeader) -> LlmScoring | None:
    """The ``llm_scoring`` of a run judged by a model (None for a calibrated judge or an import)."""
    from memprobe_engine.recovery.judge_kind import MODEL_JUDGE, judge_of
    from memprobe_engine.recovery.prompts import JUDGE_SYSTEM

    spec = role_models(header).get("recovery_judge")
    if judge_of(header.config) != MODEL_JUDGE or not spec:
        return None
    return LlmScoring(judges=[JudgeConfig(model_info=model_info(spec, spec))], input_prompt=JUDGE_SYSTEM)


def eee_results(path: Path, header: RecordingHeader) -> EeeResults:
    """The recording's results, one :class:`EeeSystem` per memory system."""
    from memprobe_engine.recovery.read.frames import load_frames
    from memprobe_engine.recovery.read.tables import build_tables

    frames = load_frames([path])
    tables = build_tables(frames)
    texts = _texts(path)
    labels = {(str(r["user_id"]), str(r["system"]), str(r["dimension"]), str(r["mode"])): str(r["label"])
              for r in frames.attribution.to_dict("records")}
    judge = _judge(header)
    dataset = f"{BENCHMARK}:{RecoveryConfig.of(header).sessions or 'sessions'}"
    out: list[EeeSystem] = []
    for row in tables["table2"].to_dict("records"):
        system = str(row["system"])
        results: list[EvaluationResult] = []
        for mode, short in MODES.items():
            key = "full" if mode == "dump_all" else "topk"
            mean = number(row.get(f"B_{key}_mean"))
            if mean is not None:
                results.append(metric_result(f"recovery_B.{short}", f"Recovery score B ({mode})",
                                             f"Mean over users of the judge's score (0, .25, .5, .75, 1) of the "
                                             f"hidden dimensions reconstructed from the memory ({mode}).", mean,
                                             dataset, std=number(row.get(f"B_{key}_std")),
                                             samples=int(row.get(f"B_{key}_users") or 0) or None, judge=judge))
        for cat in tables["table3"][tables["table3"]["system"] == system].to_dict("records"):
            for column, value in cat.items():
                found = number(value)
                if str(column).endswith("_mean") and found is not None:
                    category, short = str(column).removesuffix("_mean"), MODES.get(str(cat["mode"]), str(cat["mode"]))
                    results.append(metric_result(f"recovery_B.{short}.{category}", f"Recovery score B, {category} "
                                                 f"({cat['mode']})", f"B of the {category} dimensions ({cat['mode']}).",
                                                 found, dataset, std=number(cat.get(f"{category}_std")), judge=judge))
        for t4 in tables["table4"][tables["table4"]["system"] == system].to_dict("records"):
            rate = number(t4.get("recovery_rate_pct"))
            if rate is not None:
                short = MODES.get(str(t4["mode"]), str(t4["mode"]))
                results.append(metric_result(f"recovery_rate.{short}", f"Recovery rate ({t4['mode']})",
                                             "Share of cases attributed ok (recovered), Table 4.", rate, dataset,
                                             unit="percent", high=100.0, samples=int(t4.get("total") or 0) or None))
        success = number(row.get("A_pct"))
        if success is not None:
            results.append(metric_result("task_success_A", "Task success A", "Share of tasks the simulated user "
                                         "ended satisfied (live rollouts).", success, dataset, unit="percent",
                                         high=100.0))
        scores = frames.scores[(frames.scores["system"] == system) & frames.scores["score"].notna()]
        instances = [_instance(case, texts, labels) for case in scores.to_dict("records")]
        out.append(EeeSystem(system, results, instances, {
            "excluded_cases": str(int(row.get("excluded_cases") or 0)), "rollout": str(row.get("rollout", ""))}))
    return EeeResults(BENCHMARK, out)


def _texts(path: Path) -> dict[Case, dict[str, str]]:
    """Per (user, system, dimension, mode): the latest fill, judge reason and hidden target."""
    from memprobe_engine.events.scoring import JudgeScore, SlotFill
    from memprobe_engine.recovery.read.dimension import load_target
    from memprobe_engine.replay.session import ReplaySession

    found: dict[Case, dict[str, str]] = {}
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


def _instance(case: dict[str, object], texts: dict[Case, dict[str, str]], labels: dict[Case, str]) -> EeeInstance:
    key = (str(case["user_id"]), str(case["system"]), str(case["dimension"]), str(case["mode"]))
    said = texts.get(key, {})
    score = float(case["score"])  # type: ignore[arg-type]
    return EeeInstance(result_id=f"recovery_B.{MODES.get(key[3], key[3])}", sample_id=f"{key[0]}:{key[2]}",
                       question=f"Reconstruct the user's hidden {key[2]} ({case.get('category')}) from the memory "
                                f"({key[3]}).", reference=[said["target"]] if said.get("target") else [],
                       answer=said.get("fill", ""), score=score, correct=score >= 1.0,
                       metadata={"category": str(case.get("category")), "mode": key[3],
                                 "attribution": labels.get(key, ""), "judge_reason": said.get("reason", "")},
                       extraction_method="llm_judge")
