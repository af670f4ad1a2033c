"""Judge sensitivity: the judgment layers of protocol-A recordings set side by side.

A recording's own judgments are the ``run`` layer; ``memprobe rescore --as NAME`` adds named
layers (``EventBase.layer``). For every named layer, on the cases both layers scored (usable:
judged, not excluded): exact agreement, agreement within one level of the five-level scale, the
linear-weighted Cohen's kappa, each system's mean score and category-balanced B under each layer
(on those common cases only, so the two columns are comparable), and Kendall's tau-b between the
systems' B under the two layers — whether the ranking of systems changes (undefined with one
system).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.recovery.read.frames import ReportFrames, load_frames
from memprobe_engine.recovery.read.tables import usable_scores, user_b
from memprobe_engine.report.compare_stats import JUDGE_LEVELS, kendall_tau_b, weighted_kappa

#: The name of a recording's own judgments among its layers.
RUN_LAYER = "run"
AGREEMENT_COLUMNS = ["layer", "cases", "exact", "within_one_level", "weighted_kappa", "kendall_tau", "systems"]
SYSTEM_COLUMNS = ["layer", "system", "cases", "run_mean", "layer_mean", "run_B", "layer_B"]
CASE_COLUMNS = ["layer", "system", "user_id", "dimension", "mode", "run_score", "layer_score"]
#: Half a level: two scores within one level differ by at most a level (0.25) plus float noise.
_ONE_LEVEL = (JUDGE_LEVELS[1] - JUDGE_LEVELS[0]) + 1e-9


@dataclass
class LayerComparison:
    agreement: pd.DataFrame
    systems: pd.DataFrame
    cases: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, pd.DataFrame]:
        return {"layers_agreement": self.agreement, "layers_systems": self.systems, "layers_cases": self.cases}


def layers_in(recordings: Sequence[Path]) -> list[str]:
    """The named layers the recordings' judge scores carry, in first-seen order."""
    found: dict[str, None] = {}
    for path in recordings:
        with open_recording(path) as reader:
            for _, data in reader.iter_dicts(["judge_score"]):
                layer = data.get("layer")
                if isinstance(layer, str):
                    found.setdefault(layer, None)
    return list(found)


def _usable(frames: ReportFrames) -> pd.DataFrame:
    return usable_scores(frames)[["system", "user_id", "dimension", "category", "mode", "score"]]


def _b_on(frames: ReportFrames, keep: pd.DataFrame) -> dict[str, float]:
    """Each system's mean over users and modes of category-balanced B, on the cases in ``keep``."""
    key = ["system", "user_id", "dimension", "mode"]
    scores = frames.scores.merge(keep[key], on=key)
    b = user_b(ReportFrames(scores=scores, episodes=frames.episodes, preferences=frames.preferences,
                            footprints=frames.footprints, attribution=frames.attribution))
    return {str(k): float(v) for k, v in b.groupby("system")["B"].mean().items()}


def compare_layers(recordings: Sequence[Path], layers: Sequence[str] | None = None) -> LayerComparison:
    """Every named layer of ``recordings`` (or those asked for) against the run's own judgments."""
    present = layers_in(recordings)
    wanted = list(layers) if layers else present
    missing = [name for name in wanted if name not in present]
    if missing or not wanted:
        names = ", ".join(str(p) for p in recordings)
        raise ConfigError(f"{names}: no judgment layer {', '.join(missing) or ''} to compare"
                          f"{'' if not present else ' (it holds: ' + ', '.join(present) + ')'}. Add one with "
                          f"`memprobe rescore REC --model recovery_judge=SPEC --as NAME`.")
    run = load_frames(recordings)
    warnings = list(run.warnings)
    run_scores = _usable(run)
    agreement_rows: list[dict[str, object]] = []
    system_rows: list[dict[str, object]] = []
    case_frames: list[pd.DataFrame] = []
    key = ["system", "user_id", "dimension", "mode"]
    for name in wanted:
        layered = load_frames(recordings, layer=name)
        joined = run_scores.merge(_usable(layered)[[*key, "score"]], on=key, suffixes=("_run", "_layer"))
        if joined.empty:
            warnings.append(f"layer {name!r} scored no case the run also scored usably; nothing to compare.")
            continue
        a, b = joined["score_run"].tolist(), joined["score_layer"].tolist()
        run_b, layer_b = _b_on(run, joined), _b_on(layered, joined)
        systems = sorted(set(run_b) & set(layer_b))
        tau = kendall_tau_b([run_b[s] for s in systems], [layer_b[s] for s in systems]) if len(systems) > 1 else None
        diff = (joined["score_run"] - joined["score_layer"]).abs()
        agreement_rows.append({"layer": name, "cases": len(joined), "exact": float((diff < 1e-9).mean()),
                               "within_one_level": float((diff <= _ONE_LEVEL).mean()),
                               "weighted_kappa": weighted_kappa(a, b), "kendall_tau": tau, "systems": len(systems)})
        for system in systems:
            cell = joined[joined["system"] == system]
            system_rows.append({"layer": name, "system": system, "cases": len(cell),
                                "run_mean": float(cell["score_run"].mean()), "layer_mean": float(cell["score_layer"].mean()),
                                "run_B": run_b[system], "layer_B": layer_b[system]})
        case_frames.append(joined.assign(layer=name).rename(columns={"score_run": "run_score",
                                                                     "score_layer": "layer_score"})[CASE_COLUMNS])
    return LayerComparison(
        agreement=pd.DataFrame.from_records(agreement_rows, columns=AGREEMENT_COLUMNS),
        systems=pd.DataFrame.from_records(system_rows, columns=SYSTEM_COLUMNS),
        cases=pd.concat(case_frames, ignore_index=True) if case_frames else pd.DataFrame(columns=CASE_COLUMNS),
        warnings=warnings)
