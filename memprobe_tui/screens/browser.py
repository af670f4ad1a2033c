"""Recordings browser (``memprobe tui [DIR]``): every recording in a folder, newest first, named by
its folder, with status, headline B (systems under test: the nomem baseline left out; protocol B:
accuracy per memory system, the baselines left out), systems, users, run id, suite and size. The
list comes from headers at once; each headline needs an index pass, so a worker fills them in one
by one. While any run is live the list refreshes itself, and only the recordings that changed get
their headline recomputed. The command palette opens a recording too (:class:`BrowserCommands`)."""

from __future__ import annotations

import datetime as dt
from functools import partial
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.worker import get_current_worker

from memprobe_engine.replay import RecordingEntry, list_recordings
from memprobe_engine.protocols import headline_and_damage, headline_text, open_session
from memprobe_tui.messages import Loaded
from memprobe_tui.palette_match import Candidate, CandidateCommands
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.table_fill import ColumnSpec
from memprobe_tui.widgets.table_search import SearchableTable

# The columns one decides by come first, so they stay visible at 80 columns (the list is newest
# first already: `created` can wait); the folder, the systems and the run id may be cut (…) to a
# least width, and what does not fit is named whole under the table, for the cursor's row.
COLUMNS: list[ColumnSpec] = [("folder", "folder", 20), ("status", "status"), ("B full/top-k", "b"),
                             ("systems", "systems", 10), ("users", "users"), ("created", "created"),
                             ("run id", "run", 12), ("suite", "suite"), ("size", "size")]
REFRESH_EVERY_S = 2.0
_STATUS_STYLE = {"completed": "green", "running": "yellow", "incomplete": "red", "failed": "bold red",
                 "interrupted": "red", "unreadable": "bold red"}


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def shown_folder(folder: Path) -> str:
    """The folder as the title names it: as given when relative; an absolute one (``memprobe tui
    serve`` passes the folder resolved) relative to the working folder when under it, else by its
    name — a served page shows no path of the server's disk."""
    if not folder.is_absolute():
        return str(folder)
    try:
        return str(folder.relative_to(Path.cwd())) or "."
    except ValueError:
        return folder.name or str(folder)


def _status(entry: RecordingEntry, damaged: int | None) -> Text:
    if damaged:
        return Text(f"damaged ({damaged})", style="bold red")
    return Text(entry.status, style=_STATUS_STYLE.get(entry.status, ""))


class BrowserScreen(ReplayScreen):
    """The first screen of ``memprobe tui``."""

    DEFAULT_CSS = """
    BrowserScreen DataTable { height: 1fr; }
    """

    HELP = """\
**Recordings** in a folder, newest first. `folder` is the recording's directory (runs made with
the same command differ only there), `status` completed / running (a live writer) / incomplete
(no run_end and no writer: a crash or Ctrl-C — `memprobe run` with the same command resumes it) /
failed / unreadable (the reason is shown instead of numbers).

`B full/top-k` is the headline hidden-state recovery score of the run: the mean over the memory
systems under test of each system's B (0–1), with the full store / with top-k retrieval. The
`nomem` baseline is left out (it is the no-memory reference), unless the run holds nothing else.
A protocol-B (paradigm) run shows `acc` instead: per memory system, the share of its probes
answered correctly (`acc amem 0.625`); the baselines (reference input protocols, heuristics) are
not pooled in, unless the run holds nothing else. `…` while it is being computed, `—` when nothing
is judged yet.

The list refreshes by itself every few seconds while a run is live; F5 rescans now; `/` searches
the rows; Enter opens a recording, and so does the command palette (Ctrl+P: `open recording …`).
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", priority=True, id="browser.open"),
        Binding("f5", "rescan", "Rescan", id="browser.rescan"),  # r means re-run on every screen
        Binding("j", "cursor(1)", "Down", show=False, id="browser.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="browser.up"),
    ]

    def __init__(self, folder: Path) -> None:
        super().__init__(None)
        self.folder = folder
        self.entries: list[RecordingEntry] = []
        self.headlines: dict[Path, str] = {}
        self.damage: dict[Path, int] = {}
        self._seen: dict[Path, tuple[int, str]] = {}  # path -> (size, status) its headline was computed at

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        table = SearchableTable(id="recordings")
        yield table
        yield table.row_detail
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.action_rescan()
        self.set_interval(REFRESH_EVERY_S, self._refresh_live)

    def action_rescan(self) -> None:
        self.set_title(f"recordings in {shown_folder(self.folder)} · scanning…")
        self._seen.clear()
        self._scan()

    def _refresh_live(self) -> None:
        busy = any(w.group == "scan" and w.is_running for w in self.workers)
        if not busy and any(e.status == "running" for e in self.entries):
            self._scan()  # only recordings whose size or status changed are re-read

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False, name="recordings scan")
    def _scan(self) -> None:
        entries = list_recordings(self.folder)
        self.post_message(Loaded("entries", entries))
        worker = get_current_worker()
        for entry in entries:  # newest first, so the rows one looks at fill in first
            if worker.is_cancelled:
                return
            state = (entry.size_bytes, entry.status)
            if entry.problem is None and self._seen.get(entry.path) != state:
                self._seen[entry.path] = state  # an unchanged recording keeps its headline
                board, damage = headline_and_damage(entry.path)
                text = headline_text(entry.path, board)
                self.post_message(Loaded("headline", (entry.path, text, damage)))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.what == "entries":
            self.entries = message.data
            present = {e.path for e in self.entries}
            self.headlines = {p: h for p, h in self.headlines.items() if p in present and p in self._seen}
            self.damage = {p: d for p, d in self.damage.items() if p in self.headlines}
            self._fill()
            self.set_title(f"recordings in {shown_folder(self.folder)} · {len(self.entries)} found"
                           + ("" if self.entries else " — runs write here with `memprobe run --record DIR`"))
        elif message.what == "session":
            self.nav.open_overview(message.data)
        elif message.what == "headline":
            path, text, damage = message.data
            self.headlines[path] = text
            if damage is not None and not damage.clean:
                # The same counts as `memprobe recording verify` and the replay banner.
                self.damage[path] = damage.count
            self._fill()

    def _fill(self) -> None:
        rows = []
        for e in self.entries:
            created = dt.datetime.fromtimestamp(e.created).strftime("%Y-%m-%d %H:%M")
            rows.append((str(e.path), (
                e.path.name, _status(e, self.damage.get(e.path)),
                self.headlines.get(e.path, "—" if e.problem else "…"), ",".join(e.systems) or "—",
                "—" if e.users is None else str(e.users), created, e.run_id if not e.problem else "—", e.suite,
                _size(e.size_bytes))))
        self.query_one(SearchableTable).fill(COLUMNS, rows, drop=True)

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(DataTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key is not None:
            self._open(Path(key))

    def open_path(self, path: Path) -> None:
        """Open the recording at ``path`` (Enter on its row, or the command palette)."""
        self._open(path)

    @work(thread=True, exclusive=True, group="open", exit_on_error=False, name="open recording")
    def _open(self, path: Path) -> None:
        # Opening indexes line offsets (a quarter second per million events): off the UI thread.
        self.post_message(Loaded("session", open_session(path)))


class BrowserCommands(CandidateCommands):
    """The command palette on the browser: ``open recording <folder>`` for every recording listed."""

    async def startup(self) -> None:
        screen = self.screen
        if isinstance(screen, BrowserScreen):
            self._candidates = browser_candidates(screen)


def browser_candidates(screen: BrowserScreen) -> list[Candidate]:
    found: list[Candidate] = []
    for entry in screen.entries:
        if entry.problem:
            continue
        about = " · ".join(part for part in (entry.status, screen.headlines.get(entry.path, ""),
                                             ",".join(entry.systems), entry.run_id) if part)
        found.append((f"open recording {entry.path.name}", partial(screen.open_path, entry.path), about))
    return found
