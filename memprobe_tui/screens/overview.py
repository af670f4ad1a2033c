"""Run overview: systems × users with B (full store / top-k), A, C, D and footprint; live progress.

This screen owns the recording's session work: it starts the index pass (a thread worker reporting
progress) and, while the run has no run_end, a follow timer that picks up appended events and tells
whichever screen is on top to redraw.
"""

from __future__ import annotations

import datetime as dt
import gc
import threading
import time
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widgets import ProgressBar
from textual.worker import get_current_worker

from memprobe_engine.replay import ReplaySession, score_board, units
from memprobe_tui.messages import IndexProgress, Loaded, RecordingGrew
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.score_table import ALL_USERS, ScoreTable

FOLLOW_EVERY_S = 1.0


class OverviewScreen(ReplayScreen):
    """The first screen of a recording."""

    DEFAULT_CSS = """
    OverviewScreen ProgressBar { height: 1; padding: 0 1; }
    OverviewScreen ProgressBar.done { display: none; }
    OverviewScreen ScoreTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "transcript", "Transcript", priority=True, id="overview.transcript"),
        Binding("d", "dimension", "Dimensions", id="overview.dimension"),
        Binding("m", "memory", "Memory", id="overview.memory"),
        Binding("j", "cursor(1)", "Down", show=False, id="overview.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="overview.up"),
    ]

    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self._follow_timer: Timer | None = None
        self._frozen = False

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield ProgressBar(total=max(1, len(self.session)), show_eta=False, id="index-progress")
        yield ScoreTable(id="scores")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self._title("indexing…")
        self.show_damage()
        self.query_one(ScoreTable).focus()
        # Start the pass after the first frame: its thread competes for the GIL, and the screen
        # (title, progress bar) should be up before the heavy work begins.
        self.call_after_refresh(self._index)

    def _title(self, state: str) -> None:
        header = self.session.header
        created = dt.datetime.fromtimestamp(header.created).strftime("%Y-%m-%d")
        suite = "" if header.suite in header.run_id else f" ({header.suite})"
        self.set_title(f"{state} · {len(self.session):,} events · {header.run_id}{suite} · {created}")

    def on_unmount(self) -> None:
        # A recording opened from the browser is this screen's to close; the one `memprobe replay`
        # opened is closed by the command. Closing waits for running passes: do it off the UI thread.
        if getattr(self.app, "session", None) is not self.session:
            self.workers.cancel_node(self)
            threading.Thread(target=self.session.close, name="close recording", daemon=True).start()

    # -- workers -------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="index", exit_on_error=False, name="index pass")
    def _index(self) -> None:
        worker = get_current_worker()
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] > 0.1:  # a message per window would flood the UI on fast disks
                last[0] = now
                self.post_message(IndexProgress(done, total))

        self.session.build_index(progress, lambda: worker.is_cancelled)
        self.post_message(Loaded("overview", (score_board(self.session), units(self.session))))

    def reload(self) -> None:
        """Recompute the table: another screen indexed new events (a re-score appended them)."""
        super().reload()
        if self.session.indexed:
            self._recompute()

    @work(thread=True, exclusive=True, group="board", exit_on_error=False, name="overview numbers")
    def _recompute(self) -> None:
        self.post_message(Loaded("overview", (score_board(self.session), units(self.session))))

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False, name="follow")
    def _follow(self) -> None:
        added = self.session.follow()
        if added:
            self.post_message(Loaded("overview", (score_board(self.session), units(self.session))))
            self.post_message(RecordingGrew(added))

    def _poll(self) -> None:
        if self.session.live:
            if not any(w.group == "follow" and w.is_running for w in self.workers):
                self._follow()  # a burst of appends may take longer than one tick: never stack passes
        elif self._follow_timer is not None:
            self._follow_timer.stop()  # the run ended: nothing more will be appended

    # -- message handlers ----------------------------------------------------------------------
    def on_index_progress(self, message: IndexProgress) -> None:
        bar = self.query_one(ProgressBar)
        bar.update(total=max(1, message.total), progress=message.done)

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        board, unit_list = message.data
        # The index of a big recording is hundreds of thousands of long-lived objects; a full
        # garbage collection walking them stalls a keypress by ~0.1 s. Freezing moves what exists
        # now out of the collector's sight (it is never garbage while the recording is open). Once:
        # what follow mode adds later is small.
        if not self._frozen:
            self._frozen = True
            gc.freeze()
        self.query_one(ProgressBar).add_class("done")
        self.query_one(ScoreTable).show(board, unit_list, self.session.writer_alive())
        done = sum(u.status == "ok" for u in unit_list)
        if self.session.live:
            state = f"live: {done}/{len(unit_list)} units done" if self.session.writer_alive() else \
                f"no run_end: {done}/{len(unit_list)} units done (interrupted?)"
            if self._follow_timer is None:
                self._follow_timer = self.set_interval(FOLLOW_EVERY_S, self._poll)
        else:
            state = f"{self.session.index.run_status}: {done}/{len(unit_list)} units"
        self._title(state)
        self.seen_version = self.session.version
        self.show_damage()

    def on_recording_grew(self, message: RecordingGrew) -> None:
        self.show_damage()
        top = self.app.screen
        if top is not self and isinstance(top, ReplayScreen) and top.session is self.session:
            top.post_message(RecordingGrew(message.added))

    # -- actions -------------------------------------------------------------------------------
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
            self.nav.open_transcript(self.session, *cell)
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
            self.nav.open_dimension(self.session, *cell, None)

    def action_memory(self) -> None:
        if (cell := self._cell()) is not None:
            self.nav.open_memory(self.session, *cell, None)

