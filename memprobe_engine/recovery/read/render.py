"""Terminal rendering of protocol A's report tables (rich, within 100 columns).

The tables in :mod:`memprobe_engine.recovery.read.tables` keep numbers numeric; this module is the only
place that turns them into text — ``mean ± std`` with three decimals, a dagger on diagnostic
(overflowed) full-store numbers, ``–`` for a value that does not exist — so that exports and the
terminal never disagree about the numbers themselves. Files are written by ``memprobe_engine/exports``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from memprobe_engine.recovery.read.tables import DAGGER, LABELS, QUANTILES
from memprobe_engine.report.output import DASH, WIDTH, fmt_num, missing

MODE_NAMES = {"dump_all": "Full store", "retrieve": "Top-k"}
CATEGORY_NAMES = {"skill_memory": "Skill", "knowledge_memory": "Knowledge", "episodic_memory": "Episodic",
                  "self_model": "Self-model", "assistance_preference": "Preference"}
#: Table 4's column headings for the attribution labels.
LABEL_NAMES = {"ok": "Recovered", "memory_failure": "Memory", "task_design_failure": "Task",
               "agent_elicitation_failure": "Agent", "simulator_too_strict": "User", "excluded": "Excl."}
NOT_APPLICABLE = "n/a"
NOTE = f"{DAGGER} diagnostic: the full store overflowed the reader's context on some cases; not comparable."


def fmt_mean_std(mean: object, std: object, note: str = "") -> str:
    """``0.611±0.062`` (``note`` after the mean); the std is dropped when undefined (one user).

    No spaces around ``±``: Table 2 holds five such cells and must still fit 100 columns."""
    if missing(mean):
        return DASH
    text = f"{float(mean):.3f}{note}"  # type: ignore[arg-type]
    return text if missing(std) else f"{text}±{float(std):.3f}"  # type: ignore[arg-type]


def _table(title: str, headers: list[str]) -> Table:
    # One space of padding plus the (blank) column separator: two spaces between columns, none at the edges.
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0),
                  pad_edge=False)
    table.add_column(headers[0], no_wrap=True)
    for header in headers[1:]:
        table.add_column(header, justify="right", no_wrap=True)
    return table


def render_table2(df: pd.DataFrame) -> Table:
    table = _table("Table 2: main results (B mean ± std over users)",
                   ["System", "A %", "D", "C", "B full", "B top-k", "N", "chars", "excl."])
    for r in df.itertuples(index=False):
        # A fixed-dialogue run had no live rollout: A, D and C are not applicable (never 0, never blank).
        live = str(getattr(r, "rollout", "live")) == "live"
        a, d, c = ((fmt_num(r.A_pct), fmt_mean_std(r.D_mean, r.D_std), fmt_mean_std(r.C_mean, r.C_std)) if live
                   else (NOT_APPLICABLE,) * 3)
        table.add_row(str(r.system), a, d, c, fmt_mean_std(r.B_full_mean, r.B_full_std, str(r.B_full_note)),
                      fmt_mean_std(r.B_topk_mean, r.B_topk_std), fmt_num(r.N_items, 0),
                      fmt_num(r.chars_per_item, 0), str(r.excluded_cases))
    return table


def render_table3(df: pd.DataFrame) -> Table:
    categories = [c.removesuffix("_mean") for c in df.columns if c.endswith("_mean")]
    table = _table("Table 3: B per category (mean ± std over users)",
                   ["System", "Mode", *[CATEGORY_NAMES.get(c, c) for c in categories]])
    for r in df.to_dict("records"):
        table.add_row(str(r["system"]), MODE_NAMES.get(str(r["mode"]), str(r["mode"])) + str(r["note"]),
                      *[fmt_mean_std(r[f"{c}_mean"], r[f"{c}_std"]) for c in categories])
    return table


def render_table4(df: pd.DataFrame) -> Table:
    table = _table("Table 4: failure attribution", ["System", *[LABEL_NAMES[label] for label in LABELS],
                                                     "Recovery rate"])
    for r in df.to_dict("records"):
        name = f"{r['system']}{' (top-k)' if r['mode'] == 'retrieve' else ''}{r['note']}"
        table.add_row(name, *[str(r[label]) for label in LABELS], fmt_num(r["recovery_rate_pct"], 2, "%"))
    return table


def render_table13(df: pd.DataFrame) -> Table:
    table = _table("Table 13: attribution per category (dump_all)",
                   ["System", "Category", *[LABEL_NAMES[label] for label in LABELS], "Total"])
    previous = None
    for r in df.to_dict("records"):
        table.add_row("" if r["system"] == previous else str(r["system"]),
                      CATEGORY_NAMES.get(str(r["category"]), str(r["category"])),
                      *[str(r[label]) for label in LABELS], str(r["total"]))
        previous = r["system"]
    return table


def render_table14(df: pd.DataFrame) -> Table:
    table = _table("Table 14: N items per user", ["System", "mean", *[label for label, _ in QUANTILES]])
    for r in df.to_dict("records"):
        table.add_row(str(r["system"]), fmt_num(r["items_mean"], 1),
                      *[str(r[f"items_{label}"]) for label, _ in QUANTILES])
    return table


def render_table14_chars(df: pd.DataFrame) -> Table:
    stats = ["mean", *[label for label, _ in QUANTILES]]
    table = _table("Table 14 (cont.): chars per item, per user", ["System", *stats])
    for r in df.to_dict("records"):
        table.add_row(str(r["system"]), *[fmt_num(r[f"chars_{s}"], 1) for s in stats])
    return table


RENDERERS: dict[str, list[Callable[[pd.DataFrame], Table]]] = {
    "table2": [render_table2], "table3": [render_table3], "table4": [render_table4],
    "table13": [render_table13], "table14": [render_table14, render_table14_chars]}


def render(tables: Mapping[str, pd.DataFrame]) -> list[Table]:
    """Rich tables for every known table in ``tables``, in order."""
    return [renderer(df) for name, df in tables.items() for renderer in RENDERERS.get(name, [])]


def print_tables(tables: Mapping[str, pd.DataFrame], console: Console | None = None,
                 footer: str | None = None) -> None:
    """Print ``tables`` to ``console`` (a 100-column console by default), with the dagger note;
    ``footer`` (the exclusion policy the numbers follow) is printed under every table."""
    console = console or Console(width=WIDTH, highlight=False)
    for table in render(tables):
        console.print(table)
        if footer:
            console.print(footer, style="dim")
        console.print()
    if any(DAGGER in str(v) for df in tables.values() for c in ("B_full_note", "note") if c in df for v in df[c]):
        console.print(NOTE)
