"""What every protocol's first screen shares: it owns the recording's session work.

It starts the index pass (a thread worker reporting progress to a progress bar), recomputes its numbers
when another screen indexed new events, follows a recording that may still grow (a timer picks up
appended events and tells the screen on top to redraw), and closes a recording the browser opened when
it is left. A protocol's overview says only what its numbers are (:meth:`numbers`, computed in a worker)
and how to show them (:meth:`show_numbers`), and when to start following (:meth:`start_following`).
Keys typed before the numbers are first shown are held by the app and applied then
(``memprobe_tui.typeahead``): until then the table is empty and a cursor key or Enter would be lost.
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar, Generic, TypeVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import ProgressBar
from textual.worker import Worker, WorkerState, get_current_worker

from memprobe_engine.replay import ReplaySession
from memprobe_tui.messages import IndexProgress, Loaded, RecordingGrew
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.table_search import SearchableTable

#: Seconds between looks at a followed recording.
FOLLOW_EVERY_S = 1.0

NumbersT = TypeVar("NumbersT")


class RecordingOverview(ReplayScreen, Generic[NumbersT]):
    """The first screen of a recording: a progress bar (hidden once the numbers came), then the table."""

    DEFAULT_CSS = """
    RecordingOverview ProgressBar { height: 1; padding: 0 1; }
    RecordingOverview ProgressBar.done { display: none; }
    """

    #: The name the worker's numbers are posted under (``Loaded.what``).
    NUMBERS: ClassVar[str] = "overview"
    #: The recompute worker's name (a failed worker is reported by it).
    RECOMPUTE: ClassVar[str] = "overview numbers"
    #: Once the run has ended (only re-scores append), look every this many ticks; None: stop looking.
    IDLE_TICKS: ClassVar[int | None] = 1

    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self._follow_timer: Timer | None = None
        self._ticks = 0
        self.holds_keys = True

    # -- what a protocol's overview says -----------------------------------------------------
    def numbers_table(self) -> Widget:
        """The widget that shows the numbers (below the progress bar)."""
        raise NotImplementedError

    def numbers(self) -> NumbersT:
        """The screen's numbers from the current index (runs in a worker thread)."""
        raise NotImplementedError

    def show_numbers(self, data: NumbersT) -> None:
        """Draw :meth:`numbers`' result (on the UI thread)."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield ProgressBar(total=max(1, len(self.session)), show_eta=False, id="index-progress")
        table = self.numbers_table()
        yield table
        if isinstance(table, SearchableTable):
            yield table.row_detail  # names what the width cut or left out of the cursor row
        yield from self.compose_bottom()

    # -- the session work ------------------------------------------------------------------------
    def start_index(self) -> None:
        """Start the pass after the first frame: its thread competes for the GIL, and the screen (title,
        progress bar) should be up before the heavy work begins."""
        self.call_after_refresh(self._index)

    def on_unmount(self) -> None:
        # A recording opened from the browser is this screen's to close; the one `memprobe replay`
        # opened is closed by the command. Closing waits for running passes: do it off the UI thread.
        if getattr(self.app, "session", None) is not self.session:
            self.workers.cancel_node(self)
            threading.Thread(target=self.session.close, name="close recording", daemon=True).start()

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
        self.post_message(Loaded(self.NUMBERS, self.numbers()))
        # A screen opened before the pass ended drew from a partial index: redraw it now.
        self.post_message(RecordingGrew(0))
        if not worker.is_cancelled:
            self.session.scan_memory()  # while the overview is read: the first store view then opens at once

    def reload(self) -> None:
        """Recompute the numbers: another screen indexed new events (a re-score appended them)."""
        super().reload()
        if self.session.indexed:
            self.recompute()

    def recompute(self) -> None:
        """Recompute the numbers in a worker (one at a time: a newer request replaces a running one)."""
        self.run_worker(self._post_numbers, thread=True, exclusive=True, group="board", exit_on_error=False,
                        name=self.RECOMPUTE)

    def _post_numbers(self) -> None:
        self.post_message(Loaded(self.NUMBERS, self.numbers()))

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False, name="follow")
    def _follow(self) -> None:
        added = self.session.follow()
        if added:
            self.post_message(Loaded(self.NUMBERS, self.numbers()))
            self.post_message(RecordingGrew(added))

    def start_following(self, every: float = FOLLOW_EVERY_S) -> None:
        """Start following (once; later calls keep the timer running): call it when the numbers are drawn
        and the recording may still grow."""
        if self._follow_timer is None:
            self._follow_timer = self.set_interval(every, self._poll)

    def _poll(self) -> None:
        self._ticks += 1
        if not self.session.live:
            if self.IDLE_TICKS is None:  # the run ended: nothing more to follow
                if self._follow_timer is not None:
                    self._follow_timer.stop()
                return
            if self._ticks % self.IDLE_TICKS:
                return  # the run ended: only re-scores append now, look less often
        if not any(w.group == "follow" and w.is_running for w in self.workers):
            self._follow()  # a burst of appends may take longer than one tick: never stack passes

    def on_index_progress(self, message: IndexProgress) -> None:
        self.query_one(ProgressBar).update(total=max(1, message.total), progress=message.done)

    @on(Loaded)
    def _numbers_loaded(self, message: Loaded) -> None:
        if message.what == self.NUMBERS:
            self.query_one(ProgressBar).add_class("done")
            self.show_numbers(cast(NumbersT, message.data))
            self.seen_version = self.session.version
            self.show_damage()
            self.stop_holding_keys()

    def stop_holding_keys(self) -> None:
        """The table is there (or never will be): the keys typed meanwhile apply now."""
        if self.holds_keys:
            self.holds_keys = False
            self.nav.release_keys()

    @on(Worker.StateChanged)
    def _index_ended(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "index" and event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            self.stop_holding_keys()  # the failure is reported; the keys act on what is shown

    def on_recording_grew(self, message: RecordingGrew) -> None:
        # ReplayScreen's handler (called after this one) recomputes this screen; the screen on top
        # of it, if it reads the same recording, is told to redraw too.
        self.show_damage()
        top = self.app.screen
        if top is not self and isinstance(top, ReplayScreen) and top.session is self.session:
            top.post_message(RecordingGrew(message.added))
