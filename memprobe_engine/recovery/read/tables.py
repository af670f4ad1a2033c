"""The paper's result tables (Tables 2, 3, 4, 13 and 14) computed from :class:`ReportFrames`.

Every table is a plain DataFrame with numeric columns kept numeric — a mean and its standard
deviation are separate columns — so CSV and parquet exports can be read back by a machine;
:mod:`memprobe_engine.recovery.read.render` formats them for the terminal.

Conventions (Appendix F and H of the spec):

* ``B`` is category-balanced per user: a user's scored dimensions are averaged within each
  category, then the category means are averaged with equal weight. Excluded cases (no usable
  prediction or judge verdict; under the ``audit`` policy also dump_all overflows, a store that did
  not fit the reader's context) are left out, never scored as zero; under the ``paper`` policy an
  overflow was scored as the release scored it (unknown = 0) and counts. A category with no scored
  dimension is left out of that user's mean. Tables report mean ± std of the per-user values over
  users. Metric A leaves out episodes ``excluded`` for unusable simulator replies.
* Standard deviations are sample standard deviations (``ddof=1``): NaN for a single user.
* A system whose dump_all read overflowed is marked with a dagger: its full-store numbers are an
  auditability diagnostic, not a comparable score.
* Footprint quantiles follow the lower-order-statistic convention of the released aggregation
  script (Table 14): the median of an even number of users is the lower middle value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from memprobe_engine.errors import ConfigError
from memprobe_engine.recovery.input_rules import Category
from memprobe_engine.recovery.read.frames import ReportFrames

MODES: tuple[str, ...] = ("dump_all", "retrieve")
CATEGORIES: tuple[str, ...] = tuple(c.value for c in Category)
#: Attribution labels in Table 4's column order (Recovered, Memory, Task, Agent, User), then excluded.
LABELS: tuple[str, ...] = ("ok", "memory_failure", "task_design_failure", "agent_elicitation_failure",
                           "simulator_too_strict", "excluded")
DDOF = 1
DAGGER = "†"
QUANTILES: tuple[tuple[str, float], ...] = (("min", 0.0), ("p25", 0.25), ("p50", 0.5), ("p75", 0.75),
                                            ("p90", 0.9), ("max", 1.0))
UNKNOWN_CATEGORY = "unknown"


def usable_scores(frames: ReportFrames) -> pd.DataFrame:
    """Score rows that count towards B: judged, not excluded, with a category. An overflowed store
    counts only when the run's exclusion policy scored it (``paper``: unknown = 0); under ``audit``
    it carries an exclusion and no score."""
    s = frames.scores
    return s[s["score"].notna() & s["excluded"].isna() & s["category"].notna()]


def category_means(frames: ReportFrames) -> pd.DataFrame:
    """Per (system, user, mode, category): the mean score over that user's scored dimensions."""
    grouped = usable_scores(frames).groupby(["system", "user_id", "mode", "category"], sort=True)["score"]
    return grouped.mean().rename("value").reset_index()


def user_b(frames: ReportFrames) -> pd.DataFrame:
    """Per (system, user, mode): category-balanced B, the equal-weight mean of the category means.

    Summed left to right in the canonical category order (skill, knowledge, episodic, self model,
    preference), as the recovery release does, so imported per-user B equals its rows to the bit."""
    order = {category.value: rank for rank, category in enumerate(Category)}
    means = category_means(frames)
    means = means.assign(_rank=means["category"].map(lambda c: order.get(c, len(order)))).sort_values("_rank",
                                                                                                     kind="stable")
    grouped = means.groupby(["system", "user_id", "mode"], sort=True)["value"]
    return grouped.agg(lambda values: sum(values) / len(values)).rename("B").reset_index()


def overflow_systems(frames: ReportFrames) -> set[str]:
    """Systems with at least one dump_all case whose store overflowed the reader's context and was
    excluded for it (audit policy): their full-store numbers are a diagnostic, not a comparable score."""
    s = frames.scores
    return set(s.loc[s["overflow"] & s["excluded"].notna() & (s["mode"] == "dump_all"), "system"])


def systems(frames: ReportFrames) -> list[str]:
    """Every system any frame mentions, sorted."""
    found: set[str] = set()
    for frame in frames.as_dict().values():
        found.update(frame["system"])
    return sorted(found)


def _stats(values: pd.Series) -> tuple[float, float]:
    """Mean and sample std over users, NaN-safe (NaN when there is nothing to average)."""
    clean = values.dropna()
    if clean.empty:
        return float("nan"), float("nan")
    return float(clean.mean()), float(clean.std(ddof=DDOF))


def _mode_order(modes: Iterable[str]) -> list[str]:
    present = set(modes)
    return [m for m in MODES if m in present] + sorted(present - set(MODES))


def _category_order(categories: Iterable[str]) -> list[str]:
    present = set(categories)
    return [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))


def table2(frames: ReportFrames) -> pd.DataFrame:
    """Main results: task completion A, preference D, turns C, B under both modes, footprint."""
    ep, pref, fp, sc = frames.episodes, frames.preferences, frames.footprints, frames.scores
    # D as the recovery release computes it: the mean over all of a user's judged turns (so longer
    # episodes weigh more), then mean ± std over users.
    d_user = pref.dropna(subset=["mean"]).groupby(["system", "user_id"])["mean"].mean()
    c_user = ep.groupby(["system", "user_id"])["turns"].mean()
    b_user = user_b(frames)
    overflowed = overflow_systems(frames)
    usable_index = usable_scores(frames).index
    rows = []
    for system in systems(frames):
        sys_ep = ep[ep["system"] == system]
        # An episode excluded for unusable simulator replies is no evidence about the task either way.
        counted_ep = sys_ep[sys_ep["end_reason"] != "excluded"]
        users = set(sys_ep["user_id"]) | set(sc.loc[sc["system"] == system, "user_id"]) | \
            set(fp.loc[fp["system"] == system, "user_id"]) | set(pref.loc[pref["system"] == system, "user_id"])
        row: dict[str, object] = {
            "system": system, "users": len(users), "episodes": len(sys_ep),
            "A_pct": 100.0 * float((counted_ep["end_reason"] == "satisfied").mean()) if len(counted_ep)
            else float("nan")}
        row["D_mean"], row["D_std"] = _stats(d_user[d_user.index.get_level_values("system") == system])
        row["C_mean"], row["C_std"] = _stats(c_user[c_user.index.get_level_values("system") == system])
        row["rollout"] = frames.fixed.get(system, "live")
        if system in frames.fixed:  # a fixed dialogue has no live rollout to complete, rate or count
            for name in ("A_pct", "D_mean", "D_std", "C_mean", "C_std"):
                row[name] = float("nan")
        for mode, name in (("dump_all", "B_full"), ("retrieve", "B_topk")):
            values = b_user.loc[(b_user["system"] == system) & (b_user["mode"] == mode), "B"]
            row[f"{name}_mean"], row[f"{name}_std"] = _stats(values)
            row[f"{name}_users"] = int(values.notna().sum())
        row["B_full_note"] = DAGGER if system in overflowed else ""
        sys_fp = fp[fp["system"] == system]
        row["N_items"] = float(sys_fp["n_items"].mean()) if len(sys_fp) else float("nan")
        row["chars_per_item"] = float(sys_fp["mean_chars"].mean()) if len(sys_fp) else float("nan")
        sys_sc = sc[sc["system"] == system]
        row["excluded_cases"] = int((~sys_sc.index.isin(usable_index)).sum())
        row["overflow_cases"] = int(sys_sc["overflow"].sum())
        rows.append(row)
    columns = ["system", "users", "episodes", "A_pct", "D_mean", "D_std", "C_mean", "C_std",
               "B_full_mean", "B_full_std", "B_full_users", "B_full_note", "B_topk_mean", "B_topk_std",
               "B_topk_users", "N_items", "chars_per_item", "excluded_cases", "overflow_cases", "rollout"]
    return pd.DataFrame(rows, columns=columns)


def table3(frames: ReportFrames) -> pd.DataFrame:
    """B per category, per system and mode: mean ± std over users of each user's category mean."""
    means = category_means(frames)
    overflowed = overflow_systems(frames)
    categories = _category_order(means["category"])
    rows = []
    for system in sorted(set(frames.scores["system"])):
        for mode in _mode_order(frames.scores.loc[frames.scores["system"] == system, "mode"]):
            cell = means[(means["system"] == system) & (means["mode"] == mode)]
            row: dict[str, object] = {"system": system, "mode": mode, "users": cell["user_id"].nunique()}
            for category in categories:
                row[f"{category}_mean"], row[f"{category}_std"] = _stats(
                    cell.loc[cell["category"] == category, "value"])
            row["note"] = DAGGER if mode == "dump_all" and system in overflowed else ""
            rows.append(row)
    columns = ["system", "mode", "users", *[f"{c}_{s}" for c in categories for s in ("mean", "std")], "note"]
    return pd.DataFrame(rows, columns=columns)


def _label_counts(frame: pd.DataFrame) -> dict[str, int]:
    counts = frame["label"].value_counts()
    return {label: int(counts.get(label, 0)) for label in LABELS}


def table4(frames: ReportFrames) -> pd.DataFrame:
    """Failure attribution counts per system and mode, and Recovery rate = ok / (ok + memory)."""
    att = frames.attribution
    overflowed = overflow_systems(frames)
    rows = []
    for system in sorted(set(att["system"])):
        for mode in _mode_order(att.loc[att["system"] == system, "mode"]):
            counts = _label_counts(att[(att["system"] == system) & (att["mode"] == mode)])
            responsible = counts["ok"] + counts["memory_failure"]
            rows.append({"system": system, "mode": mode, **counts, "total": sum(counts.values()),
                         "recovery_rate_pct": 100.0 * counts["ok"] / responsible if responsible else float("nan"),
                         "note": DAGGER if mode == "dump_all" and system in overflowed else ""})
    columns = ["system", "mode", *LABELS, "total", "recovery_rate_pct", "note"]
    return pd.DataFrame(rows, columns=columns)


def table13(frames: ReportFrames) -> pd.DataFrame:
    """Attribution counts per system and category under dump_all (Appendix H, Table 13)."""
    att = frames.attribution[frames.attribution["mode"] == "dump_all"].copy()
    att["category"] = att["category"].fillna(UNKNOWN_CATEGORY)
    rows = []
    for system in sorted(set(att["system"])):
        sys_att = att[att["system"] == system]
        for category in _category_order(sys_att["category"]):
            counts = _label_counts(sys_att[sys_att["category"] == category])
            rows.append({"system": system, "category": category, **counts, "total": sum(counts.values())})
    return pd.DataFrame(rows, columns=["system", "category", *LABELS, "total"])


def table14(frames: ReportFrames) -> pd.DataFrame:
    """Per-user memory footprint distribution per system: mean and lower-order quantiles."""
    fp = frames.footprints
    rows = []
    for system in sorted(set(fp["system"])):
        sys_fp = fp[fp["system"] == system]
        row: dict[str, object] = {"system": system, "users": len(sys_fp)}
        for column, name in (("n_items", "items"), ("mean_chars", "chars")):
            values = sys_fp[column].to_numpy(dtype=float)
            row[f"{name}_mean"] = float(values.mean())
            for label, q in QUANTILES:
                value = float(np.quantile(values, q, method="lower"))
                row[f"{name}_{label}"] = int(value) if name == "items" else value
        rows.append(row)
    stats = ["mean", *[label for label, _ in QUANTILES]]
    columns = ["system", "users", *[f"{n}_{s}" for n in ("items", "chars") for s in stats]]
    return pd.DataFrame(rows, columns=columns)


TABLES: dict[str, Callable[[ReportFrames], pd.DataFrame]] = {
    "table2": table2, "table3": table3, "table4": table4, "table13": table13, "table14": table14}


def parse_table_names(spec: str) -> list[str]:
    """``"2,3,table4"`` → ``["table2", "table3", "table4"]``; ConfigError naming an unknown table."""
    names: list[str] = []
    for part in (p.strip().lower() for p in spec.split(",")):
        if not part:
            continue
        name = part if part.startswith("table") else f"table{part}"
        if name not in TABLES:
            known = ", ".join(n.removeprefix("table") for n in TABLES)
            raise ConfigError(f"--tables: there is no table {part!r}; choose from {known} (comma-separated).")
        if name not in names:
            names.append(name)
    return names


def build_tables(frames: ReportFrames, names: Iterable[str] = tuple(TABLES)) -> dict[str, pd.DataFrame]:
    """The named tables (keys as in :data:`TABLES`), in the order asked for."""
    return {name: TABLES[name](frames) for name in names}
