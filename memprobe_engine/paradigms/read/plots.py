"""PNG figures of a protocol-B report (``memprobe report --plots DIR``): every system as a point on the
stability–plasticity plane (``stability_plasticity.png``) and accuracy per probe type (``probe_types.png``),
from the metrics of :mod:`memprobe_engine.paradigms.metrics`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memprobe_engine.report.figures import pyplot, save_figure
from memprobe_engine.report.output import output_folder


def paradigm_plots(probes: pd.DataFrame, folder: Path) -> list[Path]:
    """The protocol-B figures (the stability–plasticity plane, accuracy per probe type)."""
    from memprobe_engine.paradigms.metrics import PROBE_ORDER, breakdown, system_metrics

    plt = pyplot()
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
    written.append(save_figure(fig, folder, "stability_plasticity.png"))

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
    written.append(save_figure(fig, folder, "probe_types.png"))
    plt.close("all")
    return written
