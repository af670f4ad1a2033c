"""PNG figures of a report (``memprobe report --plots DIR``), drawn with matplotlib.

Protocol A (hidden user-state recovery): recovery B per category of hidden dimension and system,
full store beside top-k (``recovery_by_category.png``); B of each system under both access modes
with the gap between them (``access_gap.png``); the distribution of judge scores per system
(``score_distribution.png``). Protocol B (stability–plasticity paradigms): every system as a point
on the stability–plasticity plane (``stability_plasticity.png``) and accuracy per probe type
(``probe_types.png``), from the metrics of :mod:`memprobe_engine.paradigms.metrics`.

matplotlib is the optional ``plots`` extra; without it the command says how to install it. The
Agg backend is used (files only: no display needed over SSH).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from memprobe_engine.errors import ConfigError
from memprobe_engine.exports.files import output_folder

MODE_NAMES = {"dump_all": "full store (dump_all)", "retrieve": "top-k (retrieve)"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise ConfigError("--plots needs matplotlib, the optional 'plots' extra: pip install 'memprobe[plots]' "
                          "(or pip install matplotlib==3.11.2).") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, folder: Path, name: str) -> Path:
    path = folder / name
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    fig.clf()
    return path


def _current_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Judged, not excluded, not overflowed rows (the ones B averages)."""
    live = scores[scores["score"].notna()]
    if "excluded" in live:
        live = live[live["excluded"].isna()]
    if "overflow" in live:
        live = live[~live["overflow"].fillna(False).astype(bool)]
    return live


def category_b(scores: pd.DataFrame) -> pd.DataFrame:
    """B per (mode, category, system): the mean judge score over that category's dimensions."""
    live = _current_scores(scores)
    return live.groupby(["mode", "category", "system"], as_index=False)["score"].mean()


def system_b(scores: pd.DataFrame) -> pd.DataFrame:
    """B per (system, mode) as the overview computes it: the mean of per-category means."""
    per_cat = category_b(scores)
    return per_cat.groupby(["system", "mode"], as_index=False)["score"].mean()


def recovery_plots(scores: pd.DataFrame, folder: Path) -> list[Path]:
    """The protocol-A figures; returns the files written."""
    plt = _pyplot()
    output_folder(folder)
    written: list[Path] = []
    if scores.empty:
        return written
    per_cat = category_b(scores)
    systems = sorted(per_cat["system"].unique())
    categories = sorted(per_cat["category"].unique())
    modes = [m for m in MODE_NAMES if m in set(per_cat["mode"])]
    fig, axes = plt.subplots(len(modes), 1, figsize=(max(6.0, 1.2 * len(categories) * max(1, len(systems)) / 2), 3.2 *
                                                        len(modes)), squeeze=False)
    width = 0.8 / max(1, len(systems))
    for ax, mode in zip(axes[:, 0], modes):
        rows = per_cat[per_cat["mode"] == mode]
        for i, system in enumerate(systems):
            values = [float(rows[(rows["category"] == c) & (rows["system"] == system)]["score"].mean())
                      if ((rows["category"] == c) & (rows["system"] == system)).any() else 0.0 for c in categories]
            ax.bar([x + i * width for x in range(len(categories))], values, width, label=system)
        ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(categories))])
        ax.set_xticklabels([c.replace("_", " ") for c in categories], rotation=20, ha="right", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("B (mean judge score)")
        ax.set_title(f"Recovery per category — {MODE_NAMES[mode]}")
        ax.legend(fontsize=8)
    written.append(_save(fig, folder, "recovery_by_category.png"))

    per_system = system_b(scores)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(systems)), 3.5))
    for i, mode in enumerate(modes):
        values = [float(per_system[(per_system["system"] == s) & (per_system["mode"] == mode)]["score"].mean())
                  if ((per_system["system"] == s) & (per_system["mode"] == mode)).any() else 0.0 for s in systems]
        ax.bar([x + i * 0.4 for x in range(len(systems))], values, 0.4, label=MODE_NAMES[mode])
    ax.set_xticks([x + 0.2 * (len(modes) - 1) for x in range(len(systems))])
    ax.set_xticklabels(systems)
    ax.set_ylim(0, 1)
    ax.set_ylabel("B")
    ax.set_title("B with the full store vs top-k retrieval (the access gap)")
    ax.legend(fontsize=8)
    written.append(_save(fig, folder, "access_gap.png"))

    live = _current_scores(scores)
    fig, axes = plt.subplots(1, len(modes), figsize=(4.5 * len(modes), 3.2), squeeze=False)
    values = sorted(live["score"].round(2).unique())
    for ax, mode in zip(axes[0, :], modes):
        rows = live[live["mode"] == mode]
        for i, system in enumerate(systems):
            counts = [int(((rows["system"] == system) & (rows["score"].round(2) == v)).sum()) for v in values]
            ax.bar([x + i * width for x in range(len(values))], counts, width, label=system)
        ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(values))])
        ax.set_xticklabels([f"{v:g}" for v in values])
        ax.set_xlabel("judge score")
        ax.set_ylabel("dimensions")
        ax.set_title(f"Score distribution — {MODE_NAMES[mode]}", fontsize=10)
        ax.legend(fontsize=8)
    written.append(_save(fig, folder, "score_distribution.png"))
    plt.close("all")
    return written


def paradigm_plots(probes: pd.DataFrame, folder: Path) -> list[Path]:
    """The protocol-B figures (the stability–plasticity plane, accuracy per probe type)."""
    from memprobe_engine.paradigms.metrics import PROBE_ORDER, breakdown, system_metrics

    plt = _pyplot()
    output_folder(folder)
    written: list[Path] = []
    if probes.empty:
        return written
    metrics = system_metrics(probes)
    fig, ax = plt.subplots(figsize=(5.0, 4.6))
    for row in metrics.itertuples(index=False):
        if row.stability is None or row.plasticity is None or pd.isna(row.stability) or pd.isna(row.plasticity):
            continue
        ax.scatter([row.stability], [row.plasticity], s=60)
        ax.annotate(str(row.system), (row.stability, row.plasticity), textcoords="offset points", xytext=(6, 4),
                    fontsize=8)
    ax.plot([0, 1], [0, 1], linestyle=":", linewidth=0.8, color="grey")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("stability (should-preserve probes correct)")
    ax.set_ylabel("plasticity (should-update probes correct)")
    ax.set_title("Stability–plasticity plane")
    written.append(_save(fig, folder, "stability_plasticity.png"))

    per_type = breakdown(probes, "probe_type", PROBE_ORDER)
    types = list(dict.fromkeys(per_type["probe_type"]))
    systems = list(dict.fromkeys(per_type["system"]))
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(types) * max(1, len(systems)) / 2), 3.6))
    for i, system in enumerate(systems):
        rows = per_type[per_type["system"] == system]
        values = [float(rows[rows["probe_type"] == t]["accuracy"].iloc[0])
                  if (rows["probe_type"] == t).any() and rows[rows["probe_type"] == t]["accuracy"].notna().any()
                  else 0.0 for t in types]
        ax.bar([x + i * width for x in range(len(types))], values, width, label=system)
    ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(types))])
    ax.set_xticklabels([t.replace("_", " ") for t in types], rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy per probe type")
    ax.legend(fontsize=8)
    written.append(_save(fig, folder, "probe_types.png"))
    plt.close("all")
    return written
