"""Terminal tables and PNG figures of ``memprobe compare``."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from rich import box
from rich.table import Column, Table

from memprobe_engine.report.compare_a import CompareA
from memprobe_engine.report.compare_b import CompareB
from memprobe_engine.report.compare_layers import LayerComparison
from memprobe_engine.report.render import fmt_num

#: How a case's change reads in text (never colour alone: a monochrome terminal still shows it).
CHANGE_MARKS = {"improved": "▲ improved", "regressed": "▼ regressed", "unchanged": "= same",
                "excluded": "· excluded", "gained": "▲ gained", "lost": "▼ lost"}
_STYLES = {"improved": "green", "gained": "green", "regressed": "red", "lost": "red"}
#: Table 4's column names for the attribution labels, and short names of modes and categories.
LABEL_NAMES = {"ok": "ok", "memory_failure": "memory", "task_design_failure": "task",
               "agent_elicitation_failure": "agent", "simulator_too_strict": "user", "excluded": "excl."}
MODE_NAMES = {"dump_all": "full", "retrieve": "top-k"}
CATEGORY_NAMES = {"skill_memory": "skill", "knowledge_memory": "knowledge", "episodic_memory": "episodic",
                  "self_model": "self-model", "assistance_preference": "preference"}


def _pair_title(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{a} → {b}" for a, b in pairs)


def _mark(change: str) -> str:
    style = _STYLES.get(change)
    text = CHANGE_MARKS.get(change, change)
    return f"[{style}]{text}[/]" if style else text


def _num(value: object, decimals: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt_num(value, decimals)


def _signed(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):+.3f}"  # type: ignore[arg-type]


def _interval(low: object, high: object, users: int | None = None) -> str:
    if users is not None and users < 2:
        return "- (1 user)"
    if low is None or (isinstance(low, float) and math.isnan(low)):
        return "-"
    return f"[{float(low):+.3f}, {float(high):+.3f}]"  # type: ignore[arg-type]


def _p(value: float) -> str:
    return f"{value:.3g}"


def case_table(result: CompareA, changed_only: bool = False) -> Table:
    many = len(result.pairs) > 1
    table = Table(*(["pair"] if many else []), "user", Column("dimension", overflow="fold"), "mode", "base", "other",
                  "Δ", "change",
                  "attribution", title=f"Cases of {_pair_title(result.pairs)} (attribution base → other)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.cases.itertuples():
        if changed_only and r.change in ("unchanged", "excluded"):
            continue
        labels = f"{LABEL_NAMES.get(str(r.base_label), r.base_label or '-')}→" \
                 f"{LABEL_NAMES.get(str(r.other_label), r.other_label or '-')}"
        table.add_row(*([f"{r.base_system}→{r.other_system}"] if many else []), str(r.user_id), str(r.dimension),
                      MODE_NAMES.get(str(r.mode), str(r.mode)), _num(r.base_score, 2), _num(r.other_score, 2),
                      _signed(r.delta), _mark(str(r.change)), labels)
    return table


def category_table(result: CompareA) -> Table:
    many = len(result.pairs) > 1
    table = Table(*(["pair"] if many else []), "mode", "category", "n", "base", "other", "ΔB", "95% CI",
                  "lost", "gained", "p",
                  title=f"ΔB of {_pair_title(result.pairs)} per category (other − base; CI: paired bootstrap over "
                        f"users; lost/gained: recovered at ≥ 0.75 in one run only; p: exact McNemar)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.categories.itertuples():
        table.add_row(*([f"{r.base_system}→{r.other_system}"] if many else []), MODE_NAMES.get(str(r.mode), str(r.mode)),
                      CATEGORY_NAMES.get(str(r.category), str(r.category)), str(r.users), _num(r.base_B),
                      _num(r.other_B), _signed(r.delta_B), _interval(r.ci_low, r.ci_high, int(r.users)),
                      str(r.lost), str(r.gained), _p(float(r.mcnemar_p)))
    return table


def probe_table(result: CompareB, changed_only: bool = False) -> Table:
    table = Table("pair", "episode", "probe", "type", "base", "other", "change",
                  title="Probes (correct at score 1)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.probes.itertuples():
        if changed_only and r.change in ("unchanged", "excluded"):
            continue
        table.add_row(f"{r.base_system}→{r.other_system}", str(r.episode_id), str(r.probe_index), str(r.probe_type),
                      _num(r.base_score, 2), _num(r.other_score, 2), _mark(str(r.change)))
    return table


def metric_table(result: CompareB) -> Table:
    table = Table("pair", "metric", "base", "other", "Δ", "95% CI (episodes)", "p", "episodes",
                  title="Protocol B: other − base, paired episode bootstrap", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.metrics.itertuples():
        table.add_row(f"{r.base_system}→{r.other_system}", str(r.metric), _num(r.base), _num(r.other),
                      _signed(r.delta), _interval(r.ci_low, r.ci_high), _p(float(r.p)), str(r.episodes))
    return table


def flip_summary_b(result: CompareB) -> str:
    counts = result.probes["change"].value_counts()
    return (f"probes: {int(counts.get('gained', 0))} gained, {int(counts.get('lost', 0))} lost, "
            f"{int(counts.get('unchanged', 0))} unchanged, {int(counts.get('excluded', 0))} excluded")


def layer_tables(result: LayerComparison) -> list[Table]:
    agreement = Table("layer", "cases", "exact", "within one level", "weighted κ (linear)", "Kendall τ (systems' B)",
                      title="Judge agreement: the run's own judgments against each layer", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.agreement.itertuples():
        tau = "- (one system)" if r.systems < 2 else _num(r.kendall_tau)
        agreement.add_row(str(r.layer), str(r.cases), f"{float(r.exact):.1%}", f"{float(r.within_one_level):.1%}",
                          _num(r.weighted_kappa), tau)
    systems = Table("layer", "system", "cases", "mean (run)", "mean (layer)", "B (run)", "B (layer)",
                    title="Each system under each layer, on the cases both scored", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.systems.itertuples():
        systems.add_row(str(r.layer), str(r.system), str(r.cases), _num(r.run_mean), _num(r.layer_mean),
                        _num(r.run_B), _num(r.layer_B))
    return [agreement, systems]


def compare_plots(result: CompareA | CompareB, folder: Path) -> list[Path]:
    """``compare_delta.png`` (Δ with 95 % intervals) and, for protocol A, ``compare_scatter.png``
    (each case's base score against its other score, jittered so equal pairs stay visible)."""
    import numpy as np

    from memprobe_engine.report.plots import _pyplot, _save
    from memprobe_engine.exports.files import output_folder

    plt = _pyplot()
    folder = output_folder(folder)
    written: list[Path] = []
    frame = result.categories if isinstance(result, CompareA) else result.metrics
    if frame.empty:
        return written
    labels_col, delta_col = ("category", "delta_B") if isinstance(result, CompareA) else ("metric", "delta")
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
    written.append(_save(fig, folder, "compare_delta.png"))
    if isinstance(result, CompareA) and not result.cases.empty:
        usable = result.cases.dropna(subset=["base_score", "other_score"])
        rng = np.random.default_rng(0)
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.scatter(usable["base_score"].astype(float) + rng.uniform(-0.04, 0.04, len(usable)),
                   usable["other_score"].astype(float) + rng.uniform(-0.04, 0.04, len(usable)), s=12, alpha=0.6)
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
        ax.set_xlabel("base score")
        ax.set_ylabel("other score")
        written.append(_save(fig, folder, "compare_scatter.png"))
    return written


def frames_of(result: CompareA | CompareB | LayerComparison) -> dict[str, pd.DataFrame]:
    return result.as_dict()
