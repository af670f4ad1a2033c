"""The re-run panel: a status line and the re-score's streamed output (a Log: Line API, appends
are cheap however long the stream gets)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log, Static


class RerunPanel(Vertical):
    """Hidden until a re-run starts; stays visible afterwards with its outcome."""

    DEFAULT_CSS = """
    RerunPanel {
        height: 10;
        border-top: solid $accent;
        display: none;
    }
    RerunPanel.shown {
        display: block;
    }
    RerunPanel > #rerun-status {
        height: 1;
        padding: 0 1;
        background: $accent 20%;
    }
    RerunPanel > Log {
        height: 1fr;
        background: $surface;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="rerun-status")
        log = Log(id="rerun-log", highlight=False)
        log.can_focus = False  # the screen owns the keys (j/k scroll the inspector, Esc cancels)
        yield log

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._stage: str | None = None

    def start(self, title: str) -> None:
        self.add_class("shown")
        self._stage = None
        self.query_one(Log).clear()
        self.status(f"⟳ {title} — running (Esc cancels)")

    def status(self, text: str) -> None:
        self.query_one("#rerun-status", Static).update(text)

    def write(self, text: str, stage: str | None = None) -> None:
        """Append streamed text; a new ``stage`` starts its own headed section."""
        if stage is not None and stage != self._stage:
            self._stage = stage
            self.line(f"── {stage}")
        self.query_one(Log).write(text)

    def line(self, text: str) -> None:
        """A line of its own (a note, a stage header), even in the middle of streamed text."""
        log = self.query_one(Log)
        # Only ``write`` is used: Log's write_line adds lines behind the line write() extends.
        open_line = bool(log.lines and log.lines[-1])
        log.write(("\n" if open_line else "") + text + "\n")
