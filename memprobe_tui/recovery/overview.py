"""Run overview: systems × users with B (full store / top-k), A, C, D and footprint; live progress.

The recording's session work (index pass, follow timer, closing) is :class:`RecordingOverview`'s. This
screen follows every recording: every second while the run is live, and every few seconds after it
ended, because a re-score (from the TUI or ``memprobe rescore``) appends to a finished recording too.
"""

from __future__ import annotations

import datetime as dt
import gc
from typing import ClassVar

from textual.binding import Binding, BindingType

from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.read import ScoreBoard, score_board
from memprobe_engine.replay import ReplaySession, UnitInfo, units
from memprobe_tui.export import ExportDoc, table_doc
from memprobe_tui.messages import Loaded
from memprobe_tui.recovery.score_table import ALL_USERS, SORTS, ScoreTable
from memprobe_tui.screens.recording_overview import FOLLOW_EVERY_S, RecordingOverview
from memprobe_tui.widgets.search_prompt import SearchPrompt
from memprobe_tui.widgets.table_search import table_cells
from memprobe_tui.recovery.layers import NO_LAYERS, layer_title, next_layer
from memprobe_tui.recovery.navigation import open_dimension, open_transcript

HELP = """\
**Run overview**: one row per memory system (its mean over users, user `*`), then one row per
user × system (a *unit*: one simulated user's whole trajectory with one memory system).

| column | meaning |
| --- | --- |
| Status | `done/total` units for a system row; per unit: ok, running, pending, error, stopped (open with no live writer) |
| B full | hidden-state recovery B with the **full store** given to the slot-filler (dump_all): the judge's 0–1 score per dimension, averaged per category, then over categories |
| B top-k | the same when the slot-filler sees only the **top-k retrieved** items (retrieve) |
| A % | task completion: % of episodes that ended with the simulated user satisfied |
| C | mean turns per task (lower: the assistant needed fewer turns) |
| D | mean preference score (1–5) the preference judge gave the assistant's turns |
| Items | memory items at the end of the trajectory (footprint E) |
| Chars | mean characters per item (footprint E) |

| mark | meaning |
| --- | --- |
| † | the full store overflowed the reader's context: a diagnostic, excluded from B |
| * | includes re-scored dimensions (the latest score counts; the inspector shows both) |
| — | not produced yet, or nothing judged |

`L` shows another judgment layer: the run's own judgments (`main`) first, then each layer
`memprobe rescore --as NAME` added (B from that layer's scores: the cases it judged).
`f` keeps only rows whose system or user contains a text; `o` cycles the sort (by B full, B top-k,
A, C, D, Items, Chars: highest first, within and across systems); `/` searches the rows. `x` opens
the dimension × system grid, `P` the plots, `i` the run's settings.
"""


Numbers = tuple[ScoreBoard, list[UnitInfo]]


class OverviewScreen(RecordingOverview[Numbers]):
    """The first screen of a recording."""

    DEFAULT_CSS = """
    OverviewScreen ScoreTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "transcript", "Transcript", priority=True, id="overview.transcript"),
        Binding("d", "dimension", "Dimensions", id="overview.dimension"),
        Binding("m", "memory", "Memory", id="overview.memory"),
        Binding("x", "grid", "Grid", id="overview.grid"),
        Binding("P", "plots", "Plots", id="overview.plots"),
        Binding("f", "filter", "Filter", show=False, id="overview.filter"),
        Binding("o", "sort", "Sort", show=False, id="overview.sort"),
        Binding("L", "layer", "Judgments", show=False, id="overview.layer"),
        Binding("j", "cursor(1)", "Down", show=False, id="overview.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="overview.up"),
    ]
    HELP = HELP
    IDLE_TICKS = 3  # a finished recording is checked every third tick

    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session)
        self._frozen = False
        self._data: Numbers | None = None
        self.only = ""
        self.sort: str | None = None
        #: The judgment layer B is read from (None: the run's own, ``main``).
        self.judgment_layer: str | None = None

    def numbers_table(self) -> ScoreTable:
        return ScoreTable(id="scores")

    def on_mount(self) -> None:
        self._title("indexing…")
        self.show_damage()
        self.query_one(ScoreTable).focus()
        self.start_index()

    def _title(self, state: str) -> None:
        header = self.session.header
        created = dt.datetime.fromtimestamp(header.created).strftime("%Y-%m-%d")
        suite = "" if header.suite in header.run_id else f" ({header.suite})"
        # Said early in the title, so an 80-column terminal still shows that no live rollout ran.
        source = RecoveryConfig.of(header).dialogues
        fixed = f" · fixed dialogues ({source.system})" if source is not None else ""
        runs = len(self.session.index.events("run_start")) if self.session.indexed else 0
        resumed = f" · {runs} runs (i: history)" if runs > 1 else ""  # a failed attempt, then its resume
        self.set_title(self._title_with_layer(
            f"{state}{fixed}{resumed} · {len(self.session):,} events · {header.run_id}{suite} · {created}"))

    def numbers(self) -> Numbers:
        return score_board(self.session, self.judgment_layer), units(self.session)

    def show_numbers(self, data: Numbers) -> None:
        board, unit_list = data
        # The index of a big recording is hundreds of thousands of long-lived objects; a full
        # garbage collection walking them stalls a keypress by ~0.1 s. Freezing moves what exists
        # now out of the collector's sight (it is never garbage while the recording is open). Once:
        # what follow mode adds later is small.
        if not self._frozen:
            self._frozen = True
            gc.freeze()
        self._data = (board, unit_list)
        self._show_table()
        done = sum(u.status == "ok" for u in unit_list)
        if self.session.live:
            state = f"live: {done}/{len(unit_list)} units done" if self.session.writer_alive() else \
                f"no run_end: {done}/{len(unit_list)} units done (interrupted?)"
        else:
            state = f"{self.session.index.run_status}: {done}/{len(unit_list)} units"
        self.start_following(FOLLOW_EVERY_S)  # read here, when called: a test shortens it
        if self.only or self.sort:
            state += (f" · only “{self.only}”" if self.only else "") + (f" · sorted by {self.sort}" if self.sort else "")
        self._title(state)

    def _title_with_layer(self, title: str) -> str:
        return layer_title(self.session, self.judgment_layer, title) if self.session.indexed else title

    def _show_table(self) -> None:
        if self._data is not None:
            board, unit_list = self._data
            self.query_one(ScoreTable).show(board, unit_list, self.session.writer_alive(), self.only, self.sort)

    # -- actions -------------------------------------------------------------------------------
    def action_filter(self) -> None:
        self.app.push_screen(SearchPrompt("keep rows whose system or user contains… (empty: all rows)", self.only,
                                          label="Enter: filter · empty Enter: show all · Esc: cancel"),
                             self._filter)

    def _filter(self, text: str | None) -> None:
        self.only = text or ""
        self._redraw_state()

    def action_layer(self) -> None:
        """B from the next judgment layer (main, then each named one): numbers again from the index."""
        layer = next_layer(self.session, self.judgment_layer)
        if layer is None and self.judgment_layer is None:
            self.notify(NO_LAYERS, timeout=5)
        else:
            self.judgment_layer = layer
            self.notify(f"judgments {layer or 'main'}", timeout=3)
            self.recompute()

    def action_sort(self) -> None:
        order: list[str | None] = [None, *SORTS]
        self.sort = order[(order.index(self.sort) + 1) % len(order)]
        self.notify(f"sorted by {self.sort}, highest first" if self.sort else "recording order", timeout=3)
        self._redraw_state()

    def _redraw_state(self) -> None:
        if self._data is not None:
            self.post_message(Loaded(self.NUMBERS, self._data))

    def action_grid(self) -> None:
        from memprobe_tui.recovery.grid import GridScreen

        self.app.push_screen(GridScreen(self.session))

    def action_plots(self) -> None:
        from memprobe_tui.recovery.plots import PlotsScreen

        self.app.push_screen(PlotsScreen(self.session))

    def export_document(self) -> ExportDoc | None:
        columns, rows = table_cells(self.query_one(ScoreTable))
        return table_doc(self.export_name("overview"), f"Overview of {self.session.header.run_id}", columns, rows)

    def _cell(self) -> tuple[str, str] | None:
        picked = self.query_one(ScoreTable).selected()
        if picked is None:
            return None
        system, user = picked
        if user == ALL_USERS:  # a system's mean row opens its first user
            members = [u.user_id for u in units(self.session) if u.system == system]
            if not members:
                return None
            user = members[0]
        return user, system

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(ScoreTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    def action_transcript(self) -> None:
        if (cell := self._cell()) is not None:
            open_transcript(self.app, self.session, *cell)
        elif (seq := self._first_llm_call()) is not None:  # not a benchmark run (e.g. `llm ask --record`)
            self.nav.open_llm_call(self.session, seq)

    def _first_llm_call(self, limit: int = 10_000) -> int | None:
        for line in range(min(limit, len(self.session))):  # byte test: no parsing until found
            if b'"kind":"llm_call"' in self.session.raw(line):
                event = self.session.event_or_none(line)
                return None if event is None else int(event.seq)
        return None

    def action_dimension(self) -> None:
        if (cell := self._cell()) is not None:
            open_dimension(self.app, self.session, *cell, None, self.judgment_layer)

    def action_memory(self) -> None:
        if (cell := self._cell()) is not None:
            self.nav.open_memory(self.session, *cell, None)

