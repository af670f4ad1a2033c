"""What every protocol's ``memprobe compare`` output shares: how a change, a number, a signed
difference and an interval read in a terminal table, and the Δ-with-interval figure."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from memprobe_engine.report.output import fmt_num


#: How a case's change reads in text (never colour alone: a monochrome terminal still shows it).
CHANGE_MARKS = {"improved": "▲ improved", "regressed": "▼ regressed", "unchanged": "= same",
                "excluded": "· excluded", "gained": "▲ gained", "lost": "▼ lost"}
_STYLES = {"improved": "green", "gained": "green", "regressed": "red", "lost": "red"}

def pair_title(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{a} → {b}" for a, b in pairs)


def change_mark(change: str) -> str:
    style = _STYLES.get(change)
    text = CHANGE_MARKS.get(change, change)
    return f"[{style}]{text}[/]" if style else text


def num(value: object, decimals: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt_num(value, decimals)


def signed(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):+.3f}"  # type: ignore[arg-type]


def interval(low: object, high: object, users: int | None = None) -> str:
    if users is not None and users < 2:
        return "- (1 user)"
    if low is None or (isinstance(low, float) and math.isnan(low)):
        return "-"
    return f"[{float(low):+.3f}, {float(high):+.3f}]"  # type: ignore[arg-type]


def p_value(value: float) -> str:
    return f"{value:.3g}"




def delta_plot(frame: pd.DataFrame, labels_col: str, delta_col: str, folder: Path) -> list[Path]:
    """``compare_delta.png``: each row's Δ with its 95 % interval (columns ``ci_low``, ``ci_high``)."""
    import numpy as np

    from memprobe_engine.report.figures import pyplot, save_figure
    from memprobe_engine.report.output import output_folder

    plt = pyplot()
    folder = output_folder(folder)
    if frame.empty:
        return []
    rows = frame.reset_index(drop=True)
    labels = [f"{r.base_system}→{r.other_system} {getattr(r, 'mode', '')} {getattr(r, labels_col)}".strip()
              for r in rows.itertuples()]
    deltas = rows[delta_col].astype(float).to_numpy()
    low = np.nan_to_num(deltas - rows["ci_low"].astype(float).to_numpy())
    high = np.nan_to_num(rows["ci_high"].astype(float).to_numpy() - deltas)
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.35 * len(rows) + 1)))
    ax.errorbar(deltas, range(len(rows)), xerr=[low, high], fmt="o", capsize=3)
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_xlabel("other − base (95% paired bootstrap interval)")
    return [save_figure(fig, folder, "compare_delta.png")]
