"""Plots of a run's scores (textual-plotext): per-category B bars, one bar per system, and the
distribution of judge scores per system — under the full store or top-k (``a``, the access mode, switches)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static
from textual_plotext import PlotextPlot

from memprobe_engine.recovery.read import MODES, score_board
from memprobe_engine.recovery.read.grid import category_scores, score_distribution
from memprobe_engine.replay import ReplaySession
from memprobe_tui.export import ExportDoc
from memprobe_tui.messages import Loaded
from memprobe_tui.screens.base import ReplayScreen

MODE_NAMES = {"dump_all": "full store", "retrieve": "top-k"}


def short_names(categories: list[str]) -> list[str]:
    """Axis labels that fit under a bar group at 80 columns: the first word of each category
    (``knowledge_memory`` → ``knowledge``) where those are unique, else the names cut to 12."""
    first = [c.split("_")[0] for c in categories]
    return first if len(set(first)) == len(first) else [c[:12] for c in categories]


def bar_values(bars: dict[str, dict[str, float]]) -> Text:
    """Every bar as a number, one line per system (a 0 bar is drawn as nothing at all)."""
    categories = sorted({c for per in bars.values() for c in per})
    text = Text()
    for system in sorted(bars):
        if text:
            text.append("\n")
        text.append(f"{system}: ", style="bold")
        text.append("  ".join(f"{short} {bars[system][c]:.2f}" if c in bars[system] else f"{short} —"
                              for c, short in zip(categories, short_names(categories))))
    return text


class PlotsScreen(ReplayScreen):
    """Opened with ``P`` from the overview."""

    HELP = """\
**Plots.** Top: B per **category** of hidden dimension, one bar per memory system — the mean judge
score (0–1) of that category's dimensions, users pooled. Bottom: how the judge scores of each system
are **distributed** (how many dimensions scored 0, 0.25, …, 1). `a` (access mode) switches between the full store
(dump_all) and the top-k retrieval (retrieve). Under the bars, each system's B per category in
numbers (a bar of 0 draws nothing; its number still shows). `memprobe report --plots DIR` writes
the same figures as PNG files.
"""

    DEFAULT_CSS = """
    PlotsScreen PlotextPlot { height: 1fr; }
    PlotsScreen #values { height: auto; max-height: 6; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "toggle_mode", "Full/top-k", id="plots.mode"),
    ]

    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.mode = MODES[0]
        self.data: tuple[dict[str, dict[str, float]], dict[str, list[float]]] | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield PlotextPlot(id="bars")
        yield Static(id="values")
        yield PlotextPlot(id="hist")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        super().reload()
        self.set_title(f"plots · {MODE_NAMES[self.mode]} · computing…")
        self._load(self.mode)

    @work(thread=True, exclusive=True, group="plots", exit_on_error=False, name="plot data")
    def _load(self, mode: str) -> None:
        board = score_board(self.session)
        self.post_message(Loaded("plots", (category_scores(board, mode), score_distribution(board, mode))))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        self.data = message.data
        bars, dist = message.data
        self._draw_bars(bars)
        self._draw_hist(dist)
        self.query_one("#values", Static).update(bar_values(bars))
        self.set_title(f"plots · {MODE_NAMES[self.mode]} · {len(bars)} systems · a: "
                       f"{MODE_NAMES[MODES[(MODES.index(self.mode) + 1) % len(MODES)]]}")

    def _draw_bars(self, bars: dict[str, dict[str, float]]) -> None:
        plot = self.query_one("#bars", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        categories = sorted({c for per in bars.values() for c in per})
        systems = sorted(bars)
        if categories and systems:
            values = [[bars[s].get(c, 0.0) for c in categories] for s in systems]
            plt.multiple_bar(short_names(categories), values, labels=systems)  # type: ignore[call-arg]  # the stub says label; plotext takes labels
            plt.ylim(0, 1)
        plt.title(f"B per category ({MODE_NAMES[self.mode]})" + ("" if categories else ": nothing judged yet"))
        plot.refresh()

    def _draw_hist(self, dist: dict[str, list[float]]) -> None:
        # Judge scores take a few values (0, 0.25, …, 1): count each value per system, grouped bars.
        plot = self.query_one("#hist", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        values = sorted({round(v, 2) for scores in dist.values() for v in scores})
        if values:
            counts = [[sum(1 for v in dist[s] if round(v, 2) == x) for x in values] for s in sorted(dist)]
            plt.multiple_bar([f"{x:g}" for x in values], counts, labels=sorted(dist))  # type: ignore[call-arg]
        plt.title(f"how many dimensions got each judge score ({MODE_NAMES[self.mode]})"
                  + ("" if values else ": nothing judged yet"))
        plot.refresh()

    def action_toggle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self.reload()

    def export_document(self) -> ExportDoc | None:
        if self.data is None:
            return None
        bars, dist = self.data
        lines = [f"# Scores of {self.session.header.run_id} ({MODE_NAMES[self.mode]})", "",
                 "| system | category | B |", "| --- | --- | --- |"]
        lines += [f"| {s} | {c} | {v:.3f} |" for s, per in sorted(bars.items()) for c, v in sorted(per.items())]
        return ExportDoc(self.export_name(f"plots-{self.mode}"), "\n".join(lines) + "\n",
                         {"mode": self.mode, "category_b": bars, "scores": dist})
