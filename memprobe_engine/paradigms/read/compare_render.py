"""Protocol B's ``memprobe compare`` in a terminal: probe flips and Δ metrics with episode-bootstrap
intervals, and the Δ figure."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.table import Table

from memprobe_engine.paradigms.read.compare import CompareB
from memprobe_engine.report.compare_render import change_mark, interval, num, p_value, signed


def probe_table(result: CompareB, changed_only: bool = False) -> Table:
    table = Table("pair", "episode", "probe", "type", "base", "other", "change",
                  title="Probes (correct at score 1)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.probes.itertuples():
        if changed_only and r.change in ("unchanged", "excluded"):
            continue
        table.add_row(f"{r.base_system}→{r.other_system}", str(r.episode_id), str(r.probe_index), str(r.probe_type),
                      num(r.base_score, 2), num(r.other_score, 2), change_mark(str(r.change)))
    return table


def metric_table(result: CompareB) -> Table:
    table = Table("pair", "metric", "base", "other", "Δ", "95% CI (episodes)", "p", "episodes",
                  title="Protocol B: other − base, paired episode bootstrap", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.metrics.itertuples():
        table.add_row(f"{r.base_system}→{r.other_system}", str(r.metric), num(r.base), num(r.other),
                      signed(r.delta), interval(r.ci_low, r.ci_high), p_value(float(r.p)), str(r.episodes))
    return table


def flip_summary_b(result: CompareB) -> str:
    counts = result.probes["change"].value_counts()
    return (f"probes: {int(counts.get('gained', 0))} gained, {int(counts.get('lost', 0))} lost, "
            f"{int(counts.get('unchanged', 0))} unchanged, {int(counts.get('excluded', 0))} excluded")



def compare_plots(result: CompareB, folder: Path) -> list[Path]:
    """``compare_delta.png``: Δ of each metric with its 95 % episode-bootstrap interval."""
    from memprobe_engine.report.compare_render import delta_plot

    return delta_plot(result.metrics, "metric", "delta", folder)
