"""Plots of a protocol-B run (``P`` on the episode list): each system's accuracy per paradigm, its
plasticity and stability, and every figure as text below them (bars differ by colour only where
the terminal has colour, so each system's bars are also drawn with its own character). They are of
one score layer: the one the episode list showed when ``P`` opened them, and ``L`` shows the next."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static
from textual_plotext import PlotextPlot

from memprobe_engine.paradigms.read.queries import (
    ALL_PARADIGMS,
    Accuracy,
    ParadigmFigures,
    episode_rows,
    paradigm_figures,
    score_layers,
)
from memprobe_engine.replay import ReplaySession
from memprobe_tui.export import ExportDoc
from memprobe_tui.layers import cycle_layer, layer_title
from memprobe_tui.messages import Loaded
from memprobe_tui.paradigms.probe_inspector import NO_LAYERS
from memprobe_tui.screens.base import ReplayScreen

#: The character each system's bars are drawn with (in recording order), so a monochrome terminal
#: still tells the systems apart; the legend shows the same character.
BAR_MARKS = ("█", "▒", "░", "#", "=", "+", "*", "o")
#: The two series of the lower plot, by character as well.
SP_MARKS = ("█", "░")


def mark_of(index: int) -> str:
    return BAR_MARKS[index % len(BAR_MARKS)]


def _cell(acc: Accuracy) -> str:
    return f"{acc.accuracy:.2f}" if acc.accuracy is not None else "—"


def figure_lines(figures: list[ParadigmFigures]) -> list[Text]:
    """The figures as a text table: paradigms down, systems across, each cell ``acc plast stab (n)``."""
    systems = list(dict.fromkeys(f.system for f in figures))
    paradigms = list(dict.fromkeys(f.paradigm for f in figures))
    cell = {(f.system, f.paradigm): f for f in figures}
    width = max([len(p) for p in paradigms] + [len("paradigm")])
    column = max([20, *(len(s) + 3 for s in systems)])
    head = Text(f"{'paradigm':<{width}}", style="bold")
    for index, system in enumerate(systems):
        head.append(f" {mark_of(index)} {system:<{column - 3}}", style="bold")
    lines = [head, Text(" " * width + "".join(f" {_row('acc', 'plast', 'stab', 'n'):<{column - 1}}" for _ in systems),
                        style="dim")]
    for paradigm in paradigms:
        line = Text(f"{paradigm:<{width}}", style="bold" if paradigm == ALL_PARADIGMS else "")
        for system in systems:
            found = cell.get((system, paradigm))
            shown = "—" if found is None else _row(_cell(found.accuracy), _cell(found.plasticity),
                                                   _cell(found.stability), str(found.accuracy.scored))
            line.append(f" {shown:<{column - 1}}")
        lines.append(line)
    lines.append(Text("plast: should-update probes · stab: should-preserve probes · —: none scored", style="dim"))
    return lines


def _row(acc: str, plast: str, stab: str, n: str) -> str:
    return f"{acc:<4} {plast:<5} {stab:<4} ({n})"


class ParadigmPlotsScreen(ReplayScreen):
    """Opened with ``P`` from the episode list of a protocol-B recording."""

    HELP = """\
**Plots of a protocol-B run.** Top: each system's **accuracy per paradigm** (the share of its
scored probes answered correctly; partial credit is not correct), and over all paradigms. Bottom:
each system's **plasticity** (accuracy on the probes of should-update episodes, `█`) and
**stability** (on should-preserve episodes, `░`), all paradigms pooled. A system's bars in the top
plot are drawn with its own character (the table's header names it), so a terminal without colour
still tells them apart. The table under the plots gives every figure in numbers, per paradigm:
`accuracy plasticity stability (probes scored)`; `—` where no such probe was scored (a bar of 0
draws nothing; its number still shows). Execution errors are in no denominator, as in
`memprobe report`. `L` shows the figures of the next score layer (the run's own, `main`, then each
named one: `memprobe reader-ablation`'s `reader:SPEC`, a scoring mode's `scoring:corrected`); the
plots open in the layer the episode list showed.
"""

    DEFAULT_CSS = """
    ParadigmPlotsScreen PlotextPlot { height: 1fr; }
    ParadigmPlotsScreen #values { height: auto; max-height: 8; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("L", "layer", "Scores", show=False, id="plots.layer"),  # named layers: reader-ablation
    ]

    def __init__(self, session: ReplaySession, judgment_layer: str | None = None) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.figures: list[ParadigmFigures] | None = None
        #: The score layer shown (None: the run's own, ``main``; ``L`` cycles the named ones).
        self.judgment_layer = judgment_layer
        self.named_layers: list[str] = []

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield PlotextPlot(id="accuracy")
        yield PlotextPlot(id="balance")
        yield Static(id="values")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        super().reload()
        self.set_title("plots · accuracy, plasticity, stability · computing…")
        self._load()

    def action_layer(self) -> None:
        """The next score layer (main, then each named one): every figure again from that layer."""
        changed, self.judgment_layer = cycle_layer(self, self.named_layers, self.judgment_layer, NO_LAYERS)
        if changed:
            self._load()

    @work(thread=True, exclusive=True, group="plots", exit_on_error=False, name="paradigm plot data")
    def _load(self) -> None:
        layer = self.judgment_layer
        self.named_layers = score_layers(self.session)
        self.post_message(Loaded("paradigm plots", (layer, paradigm_figures(episode_rows(self.session, layer=layer)))))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        layer, figures = message.data
        if layer != self.judgment_layer:  # a load for the layer shown before L was pressed again
            return
        self.figures = figures
        systems = list(dict.fromkeys(f.system for f in figures))
        self._draw_accuracy(figures, systems)
        self._draw_balance(figures, systems)
        values = Text("\n").join(figure_lines(figures)) if figures else Text("no probe scored yet")
        self.query_one("#values", Static).update(values)
        paradigms = len({f.paradigm for f in figures} - {ALL_PARADIGMS})
        self.set_title(layer_title(self.named_layers, layer, f"plots · {len(systems)} systems · {paradigms} paradigms · "
                                   f"{self.session.header.run_id}", noun="scores"))

    def _draw_accuracy(self, figures: list[ParadigmFigures], systems: list[str]) -> None:
        plot = self.query_one("#accuracy", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        paradigms = list(dict.fromkeys(f.paradigm for f in figures))
        cell = {(f.system, f.paradigm): f.accuracy.accuracy or 0.0 for f in figures}
        if systems and paradigms:
            values = [[cell.get((s, p), 0.0) for p in paradigms] for s in systems]
            # No legend: plotext draws it over the plot's top-left bars (at 80×24 it hid the first
            # paradigm's); the table below names each system's character. plotext takes a marker per
            # series, though its stub says one.
            plt.multiple_bar(paradigms, values,
                             marker=[mark_of(i) for i in range(len(systems))])  # type: ignore[arg-type]
            plt.ylim(0, 1)
        plt.title("accuracy per paradigm" + ("" if systems else ": nothing scored yet"))
        plot.refresh()

    def _draw_balance(self, figures: list[ParadigmFigures], systems: list[str]) -> None:
        plot = self.query_one("#balance", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        pooled = {f.system: f for f in figures if f.paradigm == ALL_PARADIGMS}
        if systems:
            values = [[pooled[s].plasticity.accuracy or 0.0 for s in systems],
                      [pooled[s].stability.accuracy or 0.0 for s in systems]]
            plt.multiple_bar(systems, values, marker=list(SP_MARKS))  # type: ignore[arg-type]  # title names them
            plt.ylim(0, 1)
        missing = [name for name, attr in (("plasticity", "plasticity"), ("stability", "stability"))
                   if systems and all(getattr(pooled[s], attr).scored == 0 for s in systems)]
        plt.title("plasticity █ and stability ░ per system"
                  + (f" (no {' or '.join(missing)} probe scored)" if missing else ""))
        plot.refresh()

    def export_document(self) -> ExportDoc | None:
        if self.figures is None:
            return None
        lines = [f"# Accuracy, plasticity and stability of {self.session.header.run_id}", "",
                 f"Scores: {self.judgment_layer or 'main'} (the run's own: main).", "",
                 "| system | paradigm | accuracy | plasticity | stability | probes scored |",
                 "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {f.system} | {f.paradigm} | {_cell(f.accuracy)} | {_cell(f.plasticity)} | {_cell(f.stability)} "
                  f"| {f.accuracy.scored} |" for f in self.figures]
        data = [{"system": f.system, "paradigm": f.paradigm, "accuracy": f.accuracy.accuracy,
                 "plasticity": f.plasticity.accuracy, "stability": f.stability.accuracy,
                 "scored": f.accuracy.scored} for f in self.figures]
        return ExportDoc(self.export_name("paradigm-plots"), "\n".join(lines) + "\n",
                         {"layer": self.judgment_layer or "main", "figures": data})
