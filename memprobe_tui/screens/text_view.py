"""Full-screen view of one long text (a prompt, a response, a message, an item): the same lines as
the pane it came from, over the whole terminal, with the pane's reading keys and search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from memprobe_engine.replay import ReplaySession
from memprobe_tui.export import ExportDoc
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.detail_log import DetailLog


class TextViewScreen(ReplayScreen):
    """``z``, ``q`` or Esc return to the screen below; ``query`` re-applies that pane's search."""

    HELP = """\
A long text over the whole terminal. Scroll with j/k or ↑/↓ (a line), PageUp/PageDown or
space/b (a page), Ctrl+D/Ctrl+U (half a page), Home/End or g/G (top, bottom).
`/` searches the text; n/N move to the next/previous match; Esc clears the search, then closes.
`y` copies the text to the terminal's clipboard (OSC 52, works over SSH); `w`/`W` export it as
Markdown/JSON.
"""

    DEFAULT_CSS = """
    TextViewScreen DetailLog { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("z,q", "back", "Close", key_display="z", id="textview.close"),
    ]

    def __init__(self, title: str, lines: Sequence[RenderableType], query: str = "", *,
                 session: ReplaySession | None = None, export_as: str = "", data: object = None) -> None:
        super().__init__(session)  # the recording of the screen below: exports are named after its run
        self._title, self._lines, self._query = title, list(lines), query
        self._export_as, self._data = export_as, data

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield DetailLog(id="fulltext", zoomable=False)
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.set_title(f"{self._title} · full screen" if self._title else "full screen")
        log = self.query_one(DetailLog)
        log.zoom_title = self._title
        log.show(self._lines)
        log.focus()
        if self._query:
            self.call_after_refresh(log.search, self._query)

    def export_document(self) -> ExportDoc | None:
        doc = super().export_document()
        if doc is None:
            return None
        name = self.export_name(self._export_as or self._title or "text")
        return ExportDoc(name, doc.markdown, doc.data if self._data is None else self._data)

    def action_back(self) -> None:
        self.app.pop_screen()  # always closable, even over the first screen
