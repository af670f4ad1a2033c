"""Episode-bootstrap 95 % intervals for every per-system metric of Tables 2, 3, 5, 7 and Figure 4.

The paper states that its intervals are episode-level bootstraps unless noted otherwise; Table 1's
accuracy interval lives in :func:`memprobe_engine.paradigms.metrics.bootstrap_ci`. Here every other
metric is recomputed on the *same* episode draws (so a table's intervals are consistent with Table 1
and with the paired comparisons): rates over a probe subset directly, and the derived metrics
(SP-Balance, the error rates, Δsplit, ΔFC, RAGnorm) from their parts on each draw. A percentile
interval is taken over the draws where the metric is defined (its subset was drawn at all).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from memprobe_engine.paradigms import metrics as M

INTERVAL_COLUMNS = ["system", "metric", "value", "ci_low", "ci_high"]


def _split(frame: pd.DataFrame) -> pd.Series:
    return frame["split"].fillna(False).astype(bool)


#: Rate metrics: the paired bootstrap's subsets plus the rest of Tables 3, 5 and 7's (the same subsets
#: as ``metrics.system_metrics``).
RATE_METRICS: dict[str, M.Where] = {
    **M.PAIRED_METRICS,
    "source_probe": M.equals("probe_type", "source"),
    "split_cv": lambda f: _split(f) & (f["probe_type"] == "current_value"),
    "split_cd": lambda f: _split(f) & (f["probe_type"] == "change_detection"),
    **{f"paradigm:{p}": M.equals("paradigm", p) for p in M.PARADIGM_ORDER},
}
#: Counted on the status frame (conflict probes scored by their status sub-score).
STATUS_METRICS: dict[str, M.Where] = {
    "conflict_status": M.equals("probe_type", "conflict_value"),
    "source_fidelity": lambda f: f["probe_type"].isin(["source", "conflict_value"]),
}


def _status_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The probe frame with each conflict probe's score replaced by its status sub-score, so the
    bootstrap counts "status right" where source fidelity pools conflict status with source probes."""
    if "sub_status" not in frame:
        return frame.assign(score=np.where(frame["probe_type"] == "conflict_value", np.nan, frame["score"]))
    conflict = frame["probe_type"] == "conflict_value"
    return frame.assign(score=np.where(conflict, frame["sub_status"], frame["score"]))


def _percentiles(draws: np.ndarray) -> tuple[float | None, float | None]:
    row = draws[~np.isnan(draws)]
    if not row.size:
        return None, None
    return float(np.percentile(row, 2.5)), float(np.percentile(row, 97.5))


def metric_intervals(frame: pd.DataFrame, weights: np.ndarray | None = None,
                     reference: str = "full_context") -> pd.DataFrame:
    """One row per (system, metric): the observed value and its 95 % episode-bootstrap interval
    (fractions; ΔFC and Δsplit are differences, RAGnorm a ratio). ``weights`` are the episode draws
    (``metrics.draws``); the same draws as Table 1 when the caller passes them."""
    if frame.empty:
        return pd.DataFrame(columns=INTERVAL_COLUMNS)
    base = M.episode_counts(frame)
    if not base.episodes:
        return pd.DataFrame(columns=INTERVAL_COLUMNS)
    weights = M.draws(len(base.episodes)) if weights is None else weights
    systems = base.systems
    # metric -> (observed per system, resampled: systems × draws)
    per = {**M.metric_draws(frame, weights, RATE_METRICS),
           **M.metric_draws(_status_frame(frame), weights, STATUS_METRICS)}
    for error, part in (("update_err", "plasticity"), ("preserve_err", "stability")):
        if part in per:
            observed, resampled = per[part]
            per[error] = (1 - observed, 1 - resampled)
    rows: list[dict[str, object]] = []
    for name, (observed, resampled) in per.items():
        for i, system in enumerate(systems):
            if np.isnan(observed[i]):
                continue
            low, high = _percentiles(resampled[i])
            rows.append({"system": system, "metric": name, "value": float(observed[i]), "ci_low": low,
                         "ci_high": high})
    if reference in systems and "overall" in per:
        ref = systems.index(reference)
        observed, resampled = per["overall"]
        for i, system in enumerate(systems):
            if i == ref or np.isnan(observed[i]) or np.isnan(observed[ref]):
                continue
            gap_low, gap_high = _percentiles(resampled[ref] - resampled[i])
            rows.append({"system": system, "metric": "delta_fc", "value": float(observed[ref] - observed[i]),
                         "ci_low": gap_low, "ci_high": gap_high})
            if observed[ref] > 0:
                with np.errstate(invalid="ignore", divide="ignore"):
                    norm = np.where(resampled[ref] > 0, resampled[i] / np.where(resampled[ref] > 0, resampled[ref], 1),
                                    np.nan)
                norm_low, norm_high = _percentiles(norm)
                rows.append({"system": system, "metric": "rag_norm", "value": float(observed[i] / observed[ref]),
                             "ci_low": norm_low, "ci_high": norm_high})
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)
