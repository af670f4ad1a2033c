"""Protocol B, run against run: per (episode, probe) flips and paired episode-bootstrap differences.

Both sides are read with the report's probe frame (``paradigms/read/frames.py``) and restricted to
the episodes both hold. Each pair of systems becomes a two-system frame (other first) that protocol
B's own paired bootstrap reads (:func:`memprobe_engine.paradigms.metrics.paired_bootstrap`: shared
episode draws, 95 % percentile interval), so Δaccuracy, Δplasticity, Δstability and ΔSP-balance are
other − base on exactly the draws the report's paired table uses. A probe is correct at score 1
(the scorer's rule; partial credit is not correct).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from memprobe_engine.errors import ConfigError
from memprobe_engine.paradigms import metrics as M
from memprobe_engine.paradigms.read.frames import load_paradigm_frames
from memprobe_engine.report.compare_inputs import Selection, pair_systems

PROBE_COLUMNS = ["base_system", "other_system", "episode_id", "probe_index", "probe_type", "expected_behavior",
                 "base_score", "other_score", "change"]
METRIC_COLUMNS = ["base_system", "other_system", "metric", "base", "other", "delta", "ci_low", "ci_high", "p",
                  "episodes"]
#: The metrics the compare reports, in order (names as protocol B's paired table has them).
METRICS: tuple[tuple[str, str], ...] = (("overall", "accuracy"), ("plasticity", "plasticity"),
                                        ("stability", "stability"), ("sp_balance", "SP-balance"))
_BASE, _OTHER = "base", "other"


@dataclass
class CompareB:
    probes: pd.DataFrame
    metrics: pd.DataFrame
    pairs: list[tuple[str, str]]
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, pd.DataFrame]:
        return {"compare_probes": self.probes, "compare_metrics": self.metrics}


def _side(selection: Selection, layer: str | None = None) -> tuple[pd.DataFrame, list[str], list[str]]:
    loaded = load_paradigm_frames([selection.path], layer=layer)
    found = list(loaded.systems)
    if selection.system is None:
        return loaded.probes, found, loaded.warnings
    if selection.system not in found:
        raise ConfigError(f"{selection.name}: {selection.path} holds no scored probes of system "
                          f"{selection.system!r}; it holds {', '.join(found) or 'none'}.")
    return loaded.probes[loaded.probes["system"] == selection.system], [selection.system], loaded.warnings


def _correct(score: object) -> bool | None:
    return None if score is None or pd.isna(score) else float(score) >= 1.0  # type: ignore[arg-type]


def _change(base: object, other: object) -> str:
    was, now = _correct(base), _correct(other)
    if was is None or now is None:
        return "excluded"
    return "gained" if now and not was else "lost" if was and not now else "unchanged"


def compare_paradigms(base: Selection, other: Selection, *, layer: str | None = None) -> CompareB:
    """Compare two protocol-B selections (see the module docstring), each read under score ``layer``
    (None: the run's own scores)."""
    base_probes, base_systems, base_warnings = _side(base, layer)
    other_probes, other_systems, other_warnings = _side(other, layer)
    pairs = pair_systems(base, base_systems, other, other_systems)
    probe_rows: list[dict[str, object]] = []
    metric_rows: list[dict[str, object]] = []
    warnings = [*base_warnings, *other_warnings]
    key = ["episode_id", "probe_index"]
    for pair in pairs:
        left = base_probes[base_probes["system"] == pair[0]]
        right = other_probes[other_probes["system"] == pair[1]]
        shared = sorted(set(left["episode_id"]) & set(right["episode_id"]))
        if not shared:
            warnings.append(f"{pair[0]} and {pair[1]} share no episode: nothing to pair.")
            continue
        joined = left.merge(right, on=key, suffixes=("_base", "_other"))
        for r in joined.itertuples():
            probe_rows.append({"base_system": pair[0], "other_system": pair[1], "episode_id": r.episode_id,
                               "probe_index": int(r.probe_index), "probe_type": r.probe_type_base,
                               "expected_behavior": r.expected_behavior_base,
                               "base_score": None if pd.isna(r.score_base) else float(r.score_base),
                               "other_score": None if pd.isna(r.score_other) else float(r.score_other),
                               "change": _change(r.score_base, r.score_other)})
        # Other first, so protocol B's paired table gives other − base.
        frame = pd.concat([right[right["episode_id"].isin(shared)].assign(system=_OTHER),
                           left[left["episode_id"].isin(shared)].assign(system=_BASE)], ignore_index=True)
        counts = M.episode_counts(frame)
        weights = M.draws(len(counts.episodes))
        paired = M.paired_bootstrap(counts, weights, frame=frame).set_index("metric")
        observed = M.metric_draws(frame, weights, {k: M.PAIRED_METRICS[k] for k in ("overall", "plasticity",
                                                                                    "stability")})
        order = {system: i for i, system in enumerate(counts.systems)}
        for metric, label in METRICS:
            if metric not in paired.index or metric not in observed:
                continue
            row, values = paired.loc[metric], observed[metric][0]
            metric_rows.append({"base_system": pair[0], "other_system": pair[1], "metric": label,
                                "base": float(values[order[_BASE]]), "other": float(values[order[_OTHER]]),
                                "delta": float(row["diff"]), "ci_low": float(row["ci_low"]),
                                "ci_high": float(row["ci_high"]), "p": float(row["p"]), "episodes": len(shared)})
    probes = pd.DataFrame.from_records(probe_rows, columns=PROBE_COLUMNS) if probe_rows else \
        pd.DataFrame(columns=PROBE_COLUMNS)
    metrics = pd.DataFrame.from_records(metric_rows, columns=METRIC_COLUMNS) if metric_rows else \
        pd.DataFrame(columns=METRIC_COLUMNS)
    return CompareB(probes=probes, metrics=metrics, pairs=pairs, warnings=warnings)
