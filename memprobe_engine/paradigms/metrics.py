"""Protocol-B behavioural metrics over a frame of scored probes (paper §4.2, upstream compute_metrics).

Input: one row per scored (system, episode, probe) — see :data:`PROBE_COLUMNS`. A probe counts as
correct when its score is 1.0 (the paper's indicator c(q, S) in Eq. 2; partial credit is below 1
and counts as not correct, as upstream); excluded probes (execution errors) are in no denominator.
``mean_score`` keeps the partial credit visible beside the accuracy.

Intervals are episode-level bootstraps: episodes are resampled with replacement (2,000 times, fixed
seed) and accuracy is recomputed as correct / scored over the resampled episodes. Every system is
resampled with the *same* episode draws, so the paired comparison of two systems is the difference
on each draw; its p-value is the two-sided bootstrap p (twice the smaller tail, at most 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from memprobe_engine.report.compare_stats import N_RESAMPLES, SEED

#: Columns of the probe frame the metrics read.
PROBE_COLUMNS: tuple[str, ...] = (
    "system", "episode_id", "paradigm", "condition", "expected_behavior", "split", "probe_index",
    "probe_type", "score", "excluded",
)
PARADIGM_ORDER = ("interference", "misinformation", "consolidation", "reconsolidation")
PROBE_ORDER = ("current_value", "previous_value", "change_detection", "source", "conflict_value", "temporal")


def scored(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that enter denominators: scored and not excluded."""
    return frame[~frame["excluded"].astype(bool) & frame["score"].notna()]


def correct_mask(frame: pd.DataFrame) -> pd.Series:
    return frame["score"].astype(float) >= 1.0


@dataclass(frozen=True)
class Rate:
    """``correct`` of ``total``; ``value`` is None when nothing was scored."""

    correct: int
    total: int

    @property
    def value(self) -> float | None:
        return self.correct / self.total if self.total else None


def rate(frame: pd.DataFrame, where: pd.Series | None = None) -> Rate:
    rows = scored(frame if where is None else frame[where])
    return Rate(int(correct_mask(rows).sum()), len(rows))


def harmonic(a: float | None, b: float | None) -> float | None:
    """SP-Balance: the harmonic mean of plasticity and stability (0 when both are 0)."""
    if a is None or b is None:
        return None
    return 2 * a * b / (a + b) if a + b > 0 else 0.0


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


# --- bootstrap ------------------------------------------------------------------------------------

@dataclass
class EpisodeCounts:
    """Per system, the correct and scored probe counts of every episode, on a shared episode axis."""

    episodes: list[str]
    systems: list[str]
    correct: np.ndarray  # systems × episodes
    total: np.ndarray


def episode_counts(frame: pd.DataFrame, where: Callable[[pd.DataFrame], pd.Series] | None = None) -> EpisodeCounts:
    """Correct and scored probes per (system, episode) — of the rows ``where`` selects — on the axes
    of the whole frame (every system and episode appears, with zeros where nothing counts)."""
    episodes = sorted(frame["episode_id"].unique().tolist())
    systems = list(dict.fromkeys(frame["system"].tolist()))
    sys_code = pd.Categorical(frame["system"], categories=systems).codes.astype(np.int64)
    ep_code = pd.Categorical(frame["episode_id"], categories=episodes).codes.astype(np.int64)
    keep = (~frame["excluded"].astype(bool) & frame["score"].notna()).to_numpy(dtype=bool, copy=True)
    if where is not None:
        keep &= where(frame).fillna(False).to_numpy(dtype=bool)
    cell = (sys_code * len(episodes) + ep_code)[keep]
    size = len(systems) * len(episodes)
    good = (frame["score"].to_numpy(dtype=float, na_value=0.0) >= 1.0)[keep]
    total = np.bincount(cell, minlength=size).reshape(len(systems), len(episodes))
    correct = np.bincount(cell, weights=good, minlength=size).astype(np.int64).reshape(len(systems), len(episodes))
    return EpisodeCounts(episodes, systems, correct, total.astype(np.int64))


def draws(n_episodes: int, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> np.ndarray:
    """Episode-count matrix (resamples × episodes): how often each episode is drawn in each resample."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_episodes, size=(n_resamples, n_episodes))
    counts = np.zeros((n_resamples, n_episodes), dtype=np.int64)
    np.add.at(counts, (np.arange(n_resamples)[:, None], picks), 1)
    return counts


def resampled_accuracy(counts: EpisodeCounts, weights: np.ndarray) -> np.ndarray:
    """Accuracy of every system on every resample (systems × resamples); NaN where nothing scored."""
    correct = counts.correct @ weights.T
    total = counts.total @ weights.T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, correct / np.maximum(total, 1), np.nan)


def bootstrap_ci(counts: EpisodeCounts, weights: np.ndarray | None = None) -> dict[str, tuple[float, float]]:
    """95 % percentile interval of each system's accuracy."""
    if not counts.episodes:
        return {}
    weights = draws(len(counts.episodes)) if weights is None else weights
    acc = resampled_accuracy(counts, weights)
    out: dict[str, tuple[float, float]] = {}
    for i, system in enumerate(counts.systems):
        row = acc[i][~np.isnan(acc[i])]
        out[system] = (float(np.percentile(row, 2.5)), float(np.percentile(row, 97.5))) if row.size else \
            (float("nan"), float("nan"))
    return out


def equals(column: str, value: object) -> Callable[[pd.DataFrame], pd.Series]:
    return lambda f: f[column] == value


def observed_accuracy(counts: EpisodeCounts) -> np.ndarray:
    """Each system's accuracy over every episode (NaN where nothing counts)."""
    totals = counts.total.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, counts.correct.sum(axis=1) / np.maximum(totals, 1), np.nan)


def _harmonic_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SP-Balance per element, undefined (NaN) where either part is, as :func:`harmonic` is None."""
    with np.errstate(invalid="ignore", divide="ignore"):
        both = np.where(a + b > 0, 2 * a * b / np.where(a + b > 0, a + b, 1), 0.0)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, both)


Where = Callable[[pd.DataFrame], pd.Series]

#: Metrics the paired bootstrap compares (upstream analysis/paired_bootstrap_ci.json covers the same
#: families): name -> which scored probes count. sp_balance and delta_split are derived per draw.
PAIRED_METRICS: dict[str, Where] = {
    "overall": lambda f: pd.Series(True, index=f.index),
    "plasticity": lambda f: f["expected_behavior"] == "should_update",
    "stability": lambda f: f["expected_behavior"] == "should_preserve",
    "historical": lambda f: f["probe_type"] == "previous_value",
    "temporal": lambda f: f["probe_type"] == "temporal",
    "split": lambda f: f["split"].fillna(False).astype(bool),
    "non_split": lambda f: ~f["split"].fillna(False).astype(bool),
    **{f"probe:{kind}": equals("probe_type", kind) for kind in PROBE_ORDER},
}


def metric_draws(frame: pd.DataFrame, weights: np.ndarray,
                 subsets: Mapping[str, Where]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """For each named probe subset with anything scored: (observed accuracy per system, accuracy per
    system on every draw); plus SP-Balance and Δsplit from their parts on each draw, when ``subsets``
    names plasticity and stability, split and non_split. The one source of per-draw metrics for the
    paired comparisons and the per-system intervals."""
    per_metric: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, where in subsets.items():
        sub = episode_counts(frame, where)
        if sub.total.sum() == 0:
            continue
        per_metric[name] = (observed_accuracy(sub), resampled_accuracy(sub, weights))
    if "plasticity" in per_metric and "stability" in per_metric:
        (po, pr), (so, sr) = per_metric["plasticity"], per_metric["stability"]
        per_metric["sp_balance"] = (_harmonic_array(po, so), _harmonic_array(pr, sr))
    if "split" in per_metric and "non_split" in per_metric:
        (o1, r1), (o2, r2) = per_metric["split"], per_metric["non_split"]
        per_metric["delta_split"] = (o1 - o2, r1 - r2)
    return per_metric


def paired_bootstrap(counts: EpisodeCounts, weights: np.ndarray | None = None, *,
                     frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every pair of systems (in recording order, a before b): the observed difference a − b, its
    95 % CI over the shared episode draws and the two-sided p. With ``frame``, every metric of
    :data:`PAIRED_METRICS` plus SP-Balance and Δsplit; without, overall accuracy from ``counts``."""
    columns = ["metric", "system_a", "system_b", "diff", "ci_low", "ci_high", "p"]
    if len(counts.systems) < 2 or not counts.episodes:
        return pd.DataFrame(columns=columns)
    weights = draws(len(counts.episodes)) if weights is None else weights
    if frame is None:
        per_metric = {"overall": (observed_accuracy(counts), resampled_accuracy(counts, weights))}
    else:
        per_metric = metric_draws(frame, weights, PAIRED_METRICS)
    rows = []
    for name, (observed, acc) in per_metric.items():
        for i, a in enumerate(counts.systems):
            for j in range(i + 1, len(counts.systems)):
                diff = acc[i] - acc[j]
                diff = diff[~np.isnan(diff)]
                if not diff.size or np.isnan(observed[i] - observed[j]):
                    continue
                p = min(1.0, 2 * min(float(np.mean(diff <= 0)), float(np.mean(diff >= 0))))
                rows.append({"metric": name, "system_a": a, "system_b": counts.systems[j],
                             "diff": float(observed[i] - observed[j]), "ci_low": float(np.percentile(diff, 2.5)),
                             "ci_high": float(np.percentile(diff, 97.5)), "p": p})
    return pd.DataFrame(rows, columns=columns)


# --- per-system metric families -------------------------------------------------------------------

def system_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per system: every headline metric of Tables 1, 2, 5 and 7 (fractions, not percent)."""
    rows = []
    for system, rows_s in frame.groupby("system", sort=False):
        overall = rate(rows_s)
        plasticity = rate(rows_s, rows_s["expected_behavior"] == "should_update").value
        stability = rate(rows_s, rows_s["expected_behavior"] == "should_preserve").value
        split = rows_s["split"].fillna(False).astype(bool)
        split_rate, nonsplit_rate = rate(rows_s, split).value, rate(rows_s, ~split).value
        source = rate(rows_s, rows_s["probe_type"] == "source")
        status = conflict_status(rows_s)
        pooled = Rate(source.correct + status.correct, source.total + status.total)
        live = scored(rows_s)
        rows.append({
            "system": system,
            "accuracy": overall.value, "correct": overall.correct, "scored": overall.total,
            "excluded": int(rows_s["excluded"].astype(bool).sum()),
            "mean_score": float(live["score"].mean()) if len(live) else None,
            "plasticity": plasticity, "stability": stability, "sp_balance": harmonic(plasticity, stability),
            "preserve_err": None if stability is None else 1 - stability,
            "update_err": None if plasticity is None else 1 - plasticity,
            "historical": rate(rows_s, rows_s["probe_type"] == "previous_value").value,
            "source_fidelity": pooled.value, "source_probe": source.value, "conflict_status": status.value,
            "temporal": rate(rows_s, rows_s["probe_type"] == "temporal").value,
            "split": split_rate, "non_split": nonsplit_rate, "delta_split": _minus(split_rate, nonsplit_rate),
            "split_cv": rate(rows_s, split & (rows_s["probe_type"] == "current_value")).value,
            "split_cd": rate(rows_s, split & (rows_s["probe_type"] == "change_detection")).value,
        })
    return pd.DataFrame(rows)


def conflict_status(frame: pd.DataFrame) -> Rate:
    """Conflict-value probes whose status sub-score is right (a part of source fidelity)."""
    rows = scored(frame[frame["probe_type"] == "conflict_value"])
    if "sub_status" not in rows:
        return Rate(0, 0)
    rows = rows[rows["sub_status"].notna()]
    return Rate(int((rows["sub_status"] >= 1.0).sum()), len(rows))


def retrieval_gap(metrics: pd.DataFrame, reference: str = "full_context") -> pd.DataFrame:
    """ΔFC (Acc_FC − Acc_r) and RAGnorm (Acc_r / Acc_FC) of every other system against ``reference``."""
    columns = ["system", "delta_fc", "rag_norm"]
    ref = metrics[metrics["system"] == reference]
    if ref.empty or ref["accuracy"].isna().all():
        return pd.DataFrame(columns=columns)
    acc_fc = float(ref["accuracy"].iloc[0])
    rows = [{"system": r.system, "delta_fc": None if r.accuracy is None or pd.isna(r.accuracy) else acc_fc - r.accuracy,
             "rag_norm": (r.accuracy / acc_fc) if acc_fc > 0 and r.accuracy is not None and not pd.isna(r.accuracy)
             else None}
            for r in metrics.itertuples(index=False) if r.system != reference]
    return pd.DataFrame(rows, columns=columns)


def breakdown(frame: pd.DataFrame, column: str, order: tuple[str, ...]) -> pd.DataFrame:
    """Accuracy per system and value of ``column`` (paradigm or probe type), long form."""
    rows = []
    for system, rows_s in frame.groupby("system", sort=False):
        present = [v for v in order if v in set(rows_s[column])] + sorted(set(rows_s[column]) - set(order))
        for value in present:
            r = rate(rows_s, rows_s[column] == value)
            rows.append({"system": system, column: value, "accuracy": r.value, "correct": r.correct,
                         "scored": r.total})
    return pd.DataFrame(rows, columns=["system", column, "accuracy", "correct", "scored"])


# --- failure categories ---------------------------------------------------------------------------

FAILURE_CATEGORIES = ("under_update", "over_update", "historical_overwrite", "provenance_loss",
                      "temporal_reconstruction", "distributed_evidence_miss", "conflict_missed")


def failure_category(row: pd.Series) -> str | None:
    """The paper's §5.5 failure mode of one not-correct probe, from its type, episode and sub-scores."""
    if row["excluded"] or pd.isna(row["score"]) or row["score"] >= 1.0:
        return None
    kind = row["probe_type"]
    if kind == "previous_value":
        return "historical_overwrite"
    if kind == "temporal":
        return "temporal_reconstruction"
    if kind == "source":
        return "provenance_loss"
    if kind == "conflict_value":
        return "conflict_missed" if row.get("sub_value", 1.0) == 0.0 else "provenance_loss"
    if bool(row["split"]) and row["expected_behavior"] == "should_update":
        return "distributed_evidence_miss"
    return "under_update" if row["expected_behavior"] == "should_update" else "over_update"


def failures(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts of failure categories per system (wide: one column per category)."""
    labelled = frame.assign(category=frame.apply(failure_category, axis=1) if len(frame) else [])
    labelled = labelled[labelled["category"].notna()]
    table = labelled.groupby(["system", "category"]).size().unstack(fill_value=0)
    systems = list(dict.fromkeys(frame["system"].tolist()))
    table = table.reindex(index=systems, columns=list(FAILURE_CATEGORIES), fill_value=0)
    return table.reset_index().rename(columns={"index": "system"})


def exclusions(frame: pd.DataFrame) -> pd.DataFrame:
    """Every excluded probe with its reason (they are reported, never scored as wrong)."""
    cols = ["system", "episode_id", "probe_index", "probe_type", "exclusion_reason"]
    rows = frame[frame["excluded"].astype(bool)]
    if "exclusion_reason" not in rows:
        rows = rows.assign(exclusion_reason=None)
    return rows[cols].reset_index(drop=True)
