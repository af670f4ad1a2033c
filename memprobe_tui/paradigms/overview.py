"""Paradigm run overview: the episodes of one system — paradigm, condition, expected behaviour, split,
the score of every probe and the episode's accuracy — with ``s`` switching systems; live progress.

The first screen of a protocol-B recording. The recording's session work (index pass, follow timer,
closing) is :class:`RecordingOverview`'s; this screen follows the run only while it has no run_end.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType

from memprobe_engine.paradigms.read.queries import (
    EpisodeRow,
    episode_rows,
    paradigm_systems,
    score_layers,
    system_accuracy,
)
from memprobe_engine.replay import ReplaySession
from memprobe_tui.layers import cycle_layer, layer_title
from memprobe_tui.messages import Loaded, ShowText
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.paradigms.episode_table import EpisodeTable
from memprobe_tui.paradigms.probe_inspector import NO_LAYERS, ProbeScreen
from memprobe_tui.paradigms.render import fmt_score
from memprobe_tui.screens.recording_overview import RecordingOverview
from memprobe_tui.widgets.search_prompt import SearchPrompt

#: The systems, the one shown, its episodes, and the recording's named score layers.
Numbers = tuple[list[str], str | None, list[EpisodeRow], list[str]]


class ParadigmOverviewScreen(RecordingOverview[Numbers]):
    """Rows: the episodes of the current system in run order."""

    HELP = """\
The episodes of one memory system in a **protocol-B (paradigm)** run. `s` shows the next system.

- **acc**: the episode's accuracy — the share of its scored probes that are correct (score 1; partial
  credit is not correct, as in the paper and the report); execution errors are left out. The title
  gives the system's accuracy over all its probes and the mean score (partial credit counted).
- **P1…**: each probe's score, by type: `cur` current value, `prev` previous value, `chg` change
  detection, `src` source, `cfl` conflict, `tmp` temporal. Partial credit shows as `.5`, `.75`;
  `excl` is an execution error (excluded from denominators); `…` not scored yet; `*` re-scored
  (the latest score is shown, the inspector has both).
- **expected**: whether the memory should *update* to the new value or *preserve* the old one.
- **split**: the perturbation came in two parts (trigger, then the accepted value).

Enter steps through the episode's sessions; `d` opens its first probe in the probe inspector;
`x` compares the systems: each episode's accuracy under every system, side by side; `P` plots each
system's accuracy per paradigm, its plasticity and stability. `f` keeps only the episodes whose id,
paradigm, condition, expected behaviour or status contains a text; `o` cycles the order (by
accuracy, highest first; by paradigm, condition, expected behaviour; back to run order); `/`
searches the rows. `L` shows another score layer: the run's own scores (`main`) first, then each
named layer (`memprobe reader-ablation`'s `reader:SPEC`, a scoring mode's `scoring:corrected`): the
scores, accuracy and `d`'s probe inspector from that layer (a probe it never scored shows `…`).
"""

    DEFAULT_CSS = """
    ParadigmOverviewScreen EpisodeTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "episode", "Sessions", priority=True, id="paradigm.episode"),
        Binding("d", "probe", "Probes", id="paradigm.probe"),  # as d opens the dimension inspector in A; p: previous
        Binding("s", "switch_system", "System", id="paradigm.system"),
        Binding("j", "cursor(1)", "Down", show=False, id="paradigm.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="paradigm.up"),
        Binding("x", "grid", "Systems", id="paradigm.across"),  # x: a grid, as on protocol A's overview
        Binding("P", "plots", "Plots", id="paradigm.plots"),
        Binding("f", "filter", "Filter", show=False, id="paradigm.filter"),
        Binding("o", "sort", "Sort", show=False, id="paradigm.sort"),
        Binding("L", "layer", "Scores", show=False, id="paradigm.layer"),  # named layers: reader-ablation
    ]
    NUMBERS = "paradigm overview"
    RECOMPUTE = "episode list"
    IDLE_TICKS = None  # no run_end: follow; once it came, stop

    def __init__(self, session: ReplaySession, system: str | None = None) -> None:
        super().__init__(session)
        self.system = system
        self.systems: list[str] = []
        self.rows: list[EpisodeRow] = []
        #: ``f``: keep the episodes whose id, paradigm, condition, expected behaviour or status holds it.
        self.only = ""
        #: ``o``: the order of the list (None: run order).
        self.sort: str | None = None
        #: The score layer shown (None: the run's own, ``main``; ``L`` cycles the named ones).
        self.judgment_layer: str | None = None
        self.named_layers: list[str] = []

    def numbers_table(self) -> EpisodeTable:
        return EpisodeTable(id="episodes")

    def on_mount(self) -> None:
        self.set_title(f"indexing… · {len(self.session):,} events · {self.session.header.run_id} (paradigms)")
        self.show_damage()
        self.query_one(EpisodeTable).focus()
        self.start_index()

    def numbers(self) -> Numbers:
        systems = paradigm_systems(self.session)
        system = self.system if self.system in systems else (systems[0] if systems else None)
        rows = episode_rows(self.session, system, self.judgment_layer) if system is not None else []
        return systems, system, rows, score_layers(self.session)

    def show_numbers(self, data: Numbers) -> None:
        self.systems, self.system, self.rows, self.named_layers = data
        shown = listed(self.rows, self.only, self.sort)
        self.query_one(EpisodeTable).show(shown)
        totals = system_accuracy(self.rows)
        header = self.session.header
        if self.session.live:
            state = "live" if self.session.writer_alive() else "no run_end (interrupted?)"
            self.start_following()
        else:
            state = self.session.index.run_status or "?"
        which = f"{self.system} ({self.systems.index(self.system) + 1}/{len(self.systems)})" if self.system else \
            "no episodes recorded yet"
        excl = f", {totals.excluded} excl" if totals.excluded else ""
        # The list's own state first: the title is cut at the terminal's width.
        narrowed = (f" · only “{self.only}”: {len(shown)} of {len(self.rows)}" if self.only else "") + \
            (f" · by {self.sort}" if self.sort else "")
        self.set_title(layer_title(self.named_layers, self.judgment_layer,
                                   f"{which}{narrowed} · acc {fmt_score(totals.accuracy)} (mean "
                                   f"{fmt_score(totals.mean_score)}) over {totals.scored} probes{excl} · "
                                   f"{len(self.rows)} episodes · {state} · {header.run_id}", "scores"))

    # -- actions -------------------------------------------------------------------------------
    def action_cursor(self, delta: int) -> None:
        table = self.query_one(EpisodeTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    def action_switch_system(self) -> None:
        if len(self.systems) > 1 and self.system in self.systems:
            self.system = self.systems[(self.systems.index(self.system) + 1) % len(self.systems)]
            self.recompute()

    def action_layer(self) -> None:
        """The next score layer (main, then each named one): the rows' scores again from that layer."""
        changed, self.judgment_layer = cycle_layer(self, self.named_layers, self.judgment_layer, NO_LAYERS)
        if changed:
            self.recompute()

    def _selected(self) -> EpisodeRow | None:
        episode_id = self.query_one(EpisodeTable).selected()
        return next((r for r in self.rows if r.episode_id == episode_id), None)

    def action_episode(self) -> None:
        row = self._selected()
        if row is not None:
            self.app.push_screen(EpisodeScreen(self.session, row.episode_id, row.system,
                                               judgment_layer=self.judgment_layer))

    def action_probe(self) -> None:
        row = self._selected()
        if row is None:
            return
        if not row.probes:
            self.notify(f"{row.episode_id} has no probe recorded under {row.system} yet.")
            return
        self.app.push_screen(ProbeScreen(self.session, row.episode_id, row.system, row.probes[0].probe_index,
                                         judgment_layer=self.judgment_layer))

    def action_grid(self) -> None:
        """Every episode's accuracy under every system, side by side (the list shows one system)."""
        self._across()

    def action_plots(self) -> None:
        from memprobe_tui.paradigms.plots import ParadigmPlotsScreen

        self.app.push_screen(ParadigmPlotsScreen(self.session, judgment_layer=self.judgment_layer))

    def action_filter(self) -> None:
        self.app.push_screen(SearchPrompt("keep episodes whose id, paradigm, condition, expected or status "
                                          "contains… (empty: all)", self.only,
                                          label="Enter: filter · empty Enter: show all · Esc: cancel"),
                             self._filter)

    def _filter(self, text: str | None) -> None:
        self.only = (text or "").strip()  # the prompt answers None for an empty Enter: every episode again
        self._redraw_list()

    def action_sort(self) -> None:
        order: list[str | None] = [None, *SORTS]
        self.sort = order[(order.index(self.sort) + 1) % len(order)]
        self.notify(f"sorted by {self.sort}" + (", highest first" if self.sort == "accuracy" else "")
                    if self.sort else "run order", timeout=3)
        self._redraw_list()

    def _redraw_list(self) -> None:
        if self.systems or self.rows:
            self.post_message(Loaded(self.NUMBERS, (self.systems, self.system, self.rows, self.named_layers)))

    @work(thread=True, exclusive=True, group="across", exit_on_error=False, name="systems side by side")
    def _across(self) -> None:
        rows = episode_rows(self.session, layer=self.judgment_layer)
        self.post_message(ShowText(layer_title(self.named_layers, self.judgment_layer,
                                               f"accuracy per episode × system · {self.session.header.run_id}",
                                               "scores"),
                                   across_lines(rows)))



#: ``o`` cycles through these orders (after the run's own); ties keep the run order.
SORTS: tuple[str, ...] = ("accuracy", "paradigm", "condition", "expected")


def listed(rows: list[EpisodeRow], only: str, sort: str | None) -> list[EpisodeRow]:
    """The rows the list shows: those that contain ``only`` (case-insensitive), in ``sort`` order."""
    needle = only.lower()
    kept = [r for r in rows if not needle or any(needle in str(v).lower() for v in (
        r.episode_id, r.paradigm, r.condition, r.expected_behavior, r.status or "running"))]
    if sort == "accuracy":  # highest first; unscored episodes last
        return sorted(kept, key=lambda r: (r.accuracy is None, -(r.accuracy or 0.0)))
    if sort is not None:
        field = {"expected": "expected_behavior"}.get(sort, sort)
        return sorted(kept, key=lambda r: str(getattr(r, field)))
    return kept


def across_lines(rows: list[EpisodeRow]) -> list[Text]:
    """A text table: episodes down, systems across, each cell ``acc (scored)``; totals last."""
    systems = list(dict.fromkeys(r.system for r in rows))
    episodes = list(dict.fromkeys(r.episode_id for r in rows))
    cell = {(r.episode_id, r.system): r for r in rows}
    width = max([len(e) for e in episodes] + [len("all episodes")])
    lines = [Text(f"{'episode':<{width}}  " + "  ".join(f"{s:>14}" for s in systems), style="bold")]
    for episode in episodes:
        first = next(r for r in rows if r.episode_id == episode)
        text = Text(f"{episode:<{width}}  ")
        for system in systems:
            row = cell.get((episode, system))
            acc = system_accuracy([row]) if row is not None else None
            shown = "—" if acc is None else f"{fmt_score(acc.accuracy)} ({acc.scored})"
            text.append(f"{shown:>14}  ")
        text.append(f"{first.paradigm} · {first.condition}", style="dim")
        lines.append(text)
    total = Text(f"{'all episodes':<{width}}  ", style="bold")
    for system in systems:
        acc = system_accuracy([r for r in rows if r.system == system])
        total.append(f"{fmt_score(acc.accuracy) + f' ({acc.scored})':>14}  ", style="bold")
    lines.append(total)
    lines.append(Text("acc: share of the scored probes answered correctly (n scored in brackets)", style="dim"))
    return lines
