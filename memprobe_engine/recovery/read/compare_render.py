"""Protocol A's ``memprobe compare`` in a terminal: every case with its change, ΔB per category with
paired intervals and McNemar p, the judge-layer agreement tables, and the figures."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.table import Column, Table

from memprobe_engine.recovery.read.compare import CompareA
from memprobe_engine.recovery.read.compare_layers import LayerComparison
from memprobe_engine.report.compare_render import change_mark, interval, num, p_value, pair_title, signed

#: Table 4's column names for the attribution labels, and short names of modes and categories.
LABEL_NAMES = {"ok": "ok", "memory_failure": "memory", "task_design_failure": "task",
               "agent_elicitation_failure": "agent", "simulator_too_strict": "user", "excluded": "excl."}
MODE_NAMES = {"dump_all": "full", "retrieve": "top-k"}
CATEGORY_NAMES = {"skill_memory": "skill", "knowledge_memory": "knowledge", "episodic_memory": "episodic",
                  "self_model": "self-model", "assistance_preference": "preference"}



def case_table(result: CompareA, changed_only: bool = False) -> Table:
    many = len(result.pairs) > 1
    table = Table(*(["pair"] if many else []), "user", Column("dimension", overflow="fold"), "mode", "base", "other",
                  "Δ", "change",
                  "attribution", title=f"Cases of {pair_title(result.pairs)} (attribution base → other)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.cases.itertuples():
        if changed_only and r.change in ("unchanged", "excluded"):
            continue
        labels = f"{LABEL_NAMES.get(str(r.base_label), r.base_label or '-')}→" \
                 f"{LABEL_NAMES.get(str(r.other_label), r.other_label or '-')}"
        table.add_row(*([f"{r.base_system}→{r.other_system}"] if many else []), str(r.user_id), str(r.dimension),
                      MODE_NAMES.get(str(r.mode), str(r.mode)), num(r.base_score, 2), num(r.other_score, 2),
                      signed(r.delta), change_mark(str(r.change)), labels)
    return table


def category_table(result: CompareA) -> Table:
    many = len(result.pairs) > 1
    table = Table(*(["pair"] if many else []), "mode", "category", "n", "base", "other", "ΔB", "95% CI",
                  "lost", "gained", "p",
                  title=f"ΔB of {pair_title(result.pairs)} per category (other − base; CI: paired bootstrap over "
                        f"users; lost/gained: recovered at ≥ 0.75 in one run only; p: exact McNemar)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.categories.itertuples():
        table.add_row(*([f"{r.base_system}→{r.other_system}"] if many else []), MODE_NAMES.get(str(r.mode), str(r.mode)),
                      CATEGORY_NAMES.get(str(r.category), str(r.category)), str(r.users), num(r.base_B),
                      num(r.other_B), signed(r.delta_B), interval(r.ci_low, r.ci_high, int(r.users)),
                      str(r.lost), str(r.gained), p_value(float(r.mcnemar_p)))
    return table


def layer_tables(result: LayerComparison) -> list[Table]:
    agreement = Table("layer", "cases", "exact", "within one level", "weighted κ (linear)", "Kendall τ (systems' B)",
                      title="Judge agreement: the run's own judgments against each layer", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.agreement.itertuples():
        tau = "- (one system)" if r.systems < 2 else num(r.kendall_tau)
        agreement.add_row(str(r.layer), str(r.cases), f"{float(r.exact):.1%}", f"{float(r.within_one_level):.1%}",
                          num(r.weighted_kappa), tau)
    systems = Table("layer", "system", "cases", "mean (run)", "mean (layer)", "B (run)", "B (layer)",
                    title="Each system under each layer, on the cases both scored", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for r in result.systems.itertuples():
        systems.add_row(str(r.layer), str(r.system), str(r.cases), num(r.run_mean), num(r.layer_mean),
                        num(r.run_B), num(r.layer_B))
    return [agreement, systems]



def compare_plots(result: CompareA, folder: Path) -> list[Path]:
    """``compare_delta.png`` (ΔB per category with 95 % intervals) and ``compare_scatter.png`` (each case's
    base score against its other score, jittered so equal pairs stay visible)."""
    import numpy as np

    from memprobe_engine.report.compare_render import delta_plot
    from memprobe_engine.report.figures import pyplot, save_figure

    written = delta_plot(result.categories, "category", "delta_B", folder)
    if written and not result.cases.empty:
        plt = pyplot()
        usable = result.cases.dropna(subset=["base_score", "other_score"])
        rng = np.random.default_rng(0)
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.scatter(usable["base_score"].astype(float) + rng.uniform(-0.04, 0.04, len(usable)),
                   usable["other_score"].astype(float) + rng.uniform(-0.04, 0.04, len(usable)), s=12, alpha=0.6)
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
        ax.set_xlabel("base score")
        ax.set_ylabel("other score")
        written.append(save_figure(fig, folder, "compare_scatter.png"))
    return written
