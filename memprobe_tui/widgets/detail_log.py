"""A scrollable, wrapping detail pane built on RichLog (Line API: long texts cost only the lines
on screen)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from textual.widgets import RichLog


class DetailLog(RichLog):
    """Replaces its whole content at once, scrolled to the top (a detail, not a growing log)."""

    DEFAULT_CSS = """
    DetailLog {
        height: 1fr;
        border-top: solid $primary 40%;
        padding: 0 1;
        background: $surface;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, wrap=True, markup=False, highlight=False, auto_scroll=False, min_width=20)
        self.can_focus = False

    def show(self, lines: Iterable[RenderableType]) -> None:
        self.clear()
        for line in lines:
            self.write(line)
        self.scroll_home(animate=False)
