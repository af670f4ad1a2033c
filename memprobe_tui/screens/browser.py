"""Recordings browser (``memprobe tui [DIR]``): every recording in a folder, newest first, with its
suite, systems, users, status and headline B. The list comes from headers at once; each headline
needs an index pass, so a worker fills them in one by one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.worker import get_current_worker

from memprobe_engine.replay import RecordingEntry, ReplaySession, list_recordings
from memprobe_engine.replay.catalog import headline_and_damage
from memprobe_tui.messages import Loaded
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.table_fill import fill_table

# The columns one decides by come first, so they stay visible at 80 columns.
COLUMNS = [("run", "run"), ("status", "status"), ("B full/top-k", "b"), ("created", "created"),
           ("systems", "systems"), ("users", "users"), ("suite", "suite"), ("size", "size")]
_STATUS_STYLE = {"completed": "green", "running": "yellow", "incomplete": "red", "failed": "bold red",
                 "interrupted": "red", "unreadable": "bold red"}


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _status(entry: RecordingEntry, damaged: int | None) -> Text:
    if damaged:
        return Text(f"damaged ({damaged})", style="bold red")
    return Text(entry.status, style=_STATUS_STYLE.get(entry.status, ""))


class BrowserScreen(ReplayScreen):
    """The first screen of ``memprobe tui``."""

    DEFAULT_CSS = """
    BrowserScreen DataTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", priority=True, id="browser.open"),
        Binding("r", "rescan", "Rescan", id="browser.rescan"),
        Binding("j", "cursor(1)", "Down", show=False, id="browser.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="browser.up"),
    ]

    def __init__(self, folder: Path) -> None:
        super().__init__(None)
        self.folder = folder
        self.entries: list[RecordingEntry] = []
        self.headlines: dict[Path, str] = {}
        self.damage: dict[Path, int] = {}

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield DataTable[object](id="recordings", cursor_type="row", zebra_stripes=True)
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.action_rescan()

    def action_rescan(self) -> None:
        self.set_title(f"recordings in {self.folder} · scanning…")
        self._scan()

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False, name="recordings scan")
    def _scan(self) -> None:
        entries = list_recordings(self.folder)
        self.post_message(Loaded("entries", entries))
        worker = get_current_worker()
        for entry in entries:  # newest first, so the rows one looks at fill in first
            if worker.is_cancelled:
                return
            if entry.problem is None:
                board, damage = headline_and_damage(entry.path)
                self.post_message(Loaded("headline", (entry.path, board, damage)))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.what == "entries":
            self.entries = message.data
            self.headlines.clear()
            self.damage.clear()
            self._fill()
            self.set_title(f"recordings in {self.folder} · {len(self.entries)} found"
                           + ("" if self.entries else " — runs write here with `memprobe run --record DIR`"))
        elif message.what == "session":
            self.nav.open_overview(message.data)
        elif message.what == "headline":
            path, b, damage = message.data
            self.headlines[path] = "/".join("—" if b.get(m) is None else f"{b[m]:.3f}" for m in ("dump_all", "retrieve"))
            if damage is not None and not damage.clean:
                # The same counts as `memprobe recording verify` and the replay banner.
                self.damage[path] = damage.count
            self._fill()

    def _fill(self) -> None:
        rows = []
        for e in self.entries:
            created = dt.datetime.fromtimestamp(e.created).strftime("%Y-%m-%d %H:%M")
            rows.append((str(e.path), (
                e.run_id if not e.problem else e.path.name, _status(e, self.damage.get(e.path)),
                self.headlines.get(e.path, "—" if e.problem else "…"), created, ",".join(e.systems) or "—",
                "—" if e.users is None else str(e.users), e.suite, _size(e.size_bytes))))
        fill_table(self.query_one(DataTable), COLUMNS, rows)

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

    @work(thread=True, exclusive=True, group="open", exit_on_error=False, name="open recording")
    def _open(self, path: Path) -> None:
        # Opening indexes line offsets (a quarter second per million events): off the UI thread.
        self.post_message(Loaded("session", ReplaySession.open(path)))
