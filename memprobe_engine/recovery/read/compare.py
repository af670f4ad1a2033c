"""Protocol A, run against run: every case side by side, ΔB per category with paired intervals, flips.

The two sides are read with the report's own frames (``recovery/read/frames.py``: the current outcome of
every case, by the one outcomes fold), so a compare counts exactly what ``memprobe report`` counts.
Systems are paired one to one when each side selects one system (``amem`` against ``mem0``), else
by name (the same systems in two runs).

* **cases** — per (pair, user, dimension, mode): both scores, ``improved`` / ``regressed`` /
  ``unchanged`` (or ``excluded`` when either side has no usable score), both attribution labels.
* **categories** — per (pair, mode, category): ΔB = other − base of the mean over users of each
  user's category mean (Table 3's arithmetic, so it equals the difference of the two Table 3 cells
  when both runs hold the same users), its paired bootstrap 95 % interval over users, and the
  recovered-or-not flips (score ≥ 0.75) with the exact McNemar p. Category ``B`` is the
  category-balanced B of Table 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from memprobe_engine.errors import ConfigError
from memprobe_engine.recovery.read.frames import ReportFrames, load_frames
from memprobe_engine.recovery.read.tables import _category_order, _mode_order, category_means, usable_scores, user_b
from memprobe_engine.report.compare_inputs import Selection, pair_systems
from memprobe_engine.report.compare_stats import RECOVERED_AT, mcnemar_exact, paired_bootstrap

CASE_COLUMNS = ["base_system", "other_system", "user_id", "dimension", "category", "mode", "base_score",
                "other_score", "delta", "change", "base_label", "other_label"]
CATEGORY_COLUMNS = ["base_system", "other_system", "mode", "category", "users", "base_B", "other_B", "delta_B",
                    "ci_low", "ci_high", "cases", "recovered_base", "recovered_other", "lost", "gained",
                    "mcnemar_p"]
#: The category row that stands for the whole of B (category-balanced, Table 2).
ALL_CATEGORIES = "B"


@dataclass
class CompareA:
    """What a protocol-A compare found; ``warnings`` come from reading the recordings."""

    cases: pd.DataFrame
    categories: pd.DataFrame
    pairs: list[tuple[str, str]]
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, pd.DataFrame]:
        return {"compare_cases": self.cases, "compare_categories": self.categories}


def _only(frames: ReportFrames, system: str | None) -> ReportFrames:
    if system is None:
        return frames
    return ReportFrames(**{name: frame[frame["system"] == system].reset_index(drop=True)
                           for name, frame in frames.as_dict().items()}, warnings=frames.warnings,
                        fixed=frames.fixed, notes=frames.notes)


def _systems(frames: ReportFrames) -> list[str]:
    return sorted(set(frames.scores["system"]))


def _side(selection: Selection, layer: str | None) -> tuple[ReportFrames, list[str]]:
    """The selection's frames and the systems it compares; ConfigError for a system it lacks."""
    frames = load_frames([selection.path], layer=layer)
    found = _systems(frames)
    if selection.system is None:
        return frames, found
    if selection.system not in found:
        raise ConfigError(f"{selection.name}: {selection.path} holds no scores of system {selection.system!r}; "
                          f"it holds {', '.join(found) or 'none'}.")
    return _only(frames, selection.system), [selection.system]


def _change(base: float | None, other: float | None) -> str:
    if base is None or other is None or pd.isna(base) or pd.isna(other):
        return "excluded"
    return "improved" if other > base else "regressed" if other < base else "unchanged"


def _case_rows(base: ReportFrames, other: ReportFrames, pair: tuple[str, str]) -> list[dict[str, object]]:
    key = ["user_id", "dimension", "mode"]
    left = base.scores[base.scores["system"] == pair[0]]
    right = other.scores[other.scores["system"] == pair[1]]
    usable_left = usable_scores(base).index
    usable_right = usable_scores(other).index
    labels_left = {tuple(r): r_label for *r, r_label in base.attribution.loc[
        base.attribution["system"] == pair[0], [*key, "label"]].itertuples(index=False)}
    labels_right = {tuple(r): r_label for *r, r_label in other.attribution.loc[
        other.attribution["system"] == pair[1], [*key, "label"]].itertuples(index=False)}
    right_by = {(r.user_id, r.dimension, r.mode): (r.Index, r) for r in right.itertuples()}
    rows: list[dict[str, object]] = []
    for r in left.itertuples():
        k = (r.user_id, r.dimension, r.mode)
        if k not in right_by:
            continue
        index, o = right_by[k]
        b_score = float(r.score) if r.Index in usable_left else None
        o_score = float(o.score) if index in usable_right else None
        rows.append({"base_system": pair[0], "other_system": pair[1], "user_id": r.user_id,
                     "dimension": r.dimension, "category": r.category or o.category, "mode": r.mode,
                     "base_score": b_score, "other_score": o_score,
                     "delta": None if b_score is None or o_score is None else o_score - b_score,
                     "change": _change(b_score, o_score), "base_label": labels_left.get(k),
                     "other_label": labels_right.get(k)})
    return rows


def _category_rows(base: ReportFrames, other: ReportFrames, pair: tuple[str, str],
                   cases: pd.DataFrame, n_resamples: int, seed: int) -> list[dict[str, object]]:
    means = {side: category_means(frames).rename(columns={"value": "score"})
             for side, frames in (("base", base), ("other", other))}
    balanced = {side: user_b(frames).rename(columns={"B": "score"}).assign(category=ALL_CATEGORIES)
                for side, frames in (("base", base), ("other", other))}
    rows: list[dict[str, object]] = []
    pair_cases = cases[(cases["base_system"] == pair[0]) & (cases["other_system"] == pair[1])]
    for mode in _mode_order(pair_cases["mode"]):
        categories = [*_category_order(pair_cases.loc[pair_cases["mode"] == mode, "category"].dropna()),
                      ALL_CATEGORIES]
        for category in categories:
            source = balanced if category == ALL_CATEGORIES else means
            left = source["base"]
            right = source["other"]
            left = left[(left["system"] == pair[0]) & (left["mode"] == mode) & (left["category"] == category)]
            right = right[(right["system"] == pair[1]) & (right["mode"] == mode) & (right["category"] == category)]
            joined = left.merge(right, on="user_id", suffixes=("_base", "_other")).sort_values("user_id")
            joined = joined.dropna(subset=["score_base", "score_other"])
            # Table 3's arithmetic on the paired users: the mean of each side, then the difference.
            base_b = float(joined["score_base"].mean()) if len(joined) else float("nan")
            other_b = float(joined["score_other"].mean()) if len(joined) else float("nan")
            interval = paired_bootstrap((joined["score_other"] - joined["score_base"]).tolist(),
                                        n_resamples=n_resamples, seed=seed)
            scoped = pair_cases[(pair_cases["mode"] == mode) & (pair_cases["change"] != "excluded")]
            if category != ALL_CATEGORIES:
                scoped = scoped[scoped["category"] == category]
            was = scoped["base_score"].astype(float) >= RECOVERED_AT
            now = scoped["other_score"].astype(float) >= RECOVERED_AT
            lost, gained = int((was & ~now).sum()), int((~was & now).sum())
            rows.append({"base_system": pair[0], "other_system": pair[1], "mode": mode, "category": category,
                         "users": len(joined), "base_B": base_b, "other_B": other_b,
                         "delta_B": other_b - base_b if len(joined) else float("nan"),
                         "ci_low": interval[1] if interval else float("nan"),
                         "ci_high": interval[2] if interval else float("nan"), "cases": len(scoped),
                         "recovered_base": int(was.sum()), "recovered_other": int(now.sum()),
                         "lost": lost, "gained": gained, "mcnemar_p": mcnemar_exact(lost, gained)})
    return rows


def compare_recovery(base: Selection, other: Selection, *, layer: str | None = None,
                     n_resamples: int | None = None, seed: int | None = None) -> CompareA:
    """Compare two protocol-A selections (see the module docstring)."""
    from memprobe_engine.report.compare_stats import N_RESAMPLES, SEED

    base_frames, base_systems = _side(base, layer)
    other_frames, other_systems = _side(other, layer)
    pairs = pair_systems(base, base_systems, other, other_systems)
    case_rows = [row for pair in pairs for row in _case_rows(base_frames, other_frames, pair)]
    cases = pd.DataFrame.from_records(case_rows, columns=CASE_COLUMNS) if case_rows else \
        pd.DataFrame(columns=CASE_COLUMNS)
    category_rows = [row for pair in pairs for row in _category_rows(
        base_frames, other_frames, pair, cases, n_resamples or N_RESAMPLES, SEED if seed is None else seed)]
    categories = pd.DataFrame.from_records(category_rows, columns=CATEGORY_COLUMNS) if category_rows else \
        pd.DataFrame(columns=CATEGORY_COLUMNS)
    warnings = [*base_frames.warnings, *other_frames.warnings]
    if cases.empty:
        warnings.append(f"{base.name} and {other.name} share no (user, dimension, mode) case: nothing to pair.")
    return CompareA(cases=cases, categories=categories, pairs=pairs, warnings=warnings)
