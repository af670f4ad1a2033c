"""A focusable, scrollable, wrapping text pane built on RichLog (Line API: long texts cost only the
lines on screen), with the reading keys every text view shares.

Keys (when the pane has focus; Tab moves focus between a screen's panes): j/k or ↑/↓ a line,
PageUp/PageDown (and space/b) a page, Ctrl+D/Ctrl+U half a page, Home/End or g/G the top/bottom,
Enter or z the same text full screen, ``/`` search with n/N for the next/previous match (Esc clears
the search). Keys the pane does not use fall through to the screen, so n/p still step turns
while no search is active.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import RichLog

from memprobe_tui.messages import ShowText
from memprobe_tui.widgets.pass_style import StylePerPass
from memprobe_tui.widgets.search_prompt import Matches, SearchPrompt

MATCH_STYLE = "reverse"  # visible without colour (NO_COLOR, monochrome terminals)


def plain_text(lines: Iterable[RenderableType]) -> str:
    """The text of rendered lines, for copy and export (Markdown as its source)."""
    return "\n".join(line.plain if isinstance(line, Text) else line.markup if isinstance(line, Markdown) else str(line)
                     for line in lines)


class DetailLog(StylePerPass, RichLog):
    """Replaces its whole content at once, scrolled to the top (a detail, not a growing log)."""

    #: The pane's region never depends on its content (the screen sets its height), so a new content
    #: size needs its scrollbars updated, not a layout of the whole screen: with Textual's
    #: ``layout=True`` every stepping key re-laid out the screen (bench/tui.py: j step 48 -> ~20 ms
    #: at 80x24). A scrollbar that appears or goes still lays out (its own reactive does).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)
        self.refresh()

    DEFAULT_CSS = """
    DetailLog {
        height: 1fr;
        border-top: solid $primary 40%;
        border-title-align: right;
        padding: 0 1;
        background: $surface;
    }
    DetailLog:focus {
        border-top: heavy $accent;
        background-tint: $foreground 3%;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False, id="pane.down"),
        Binding("k", "scroll_up", "Up", show=False, id="pane.up"),
        Binding("space", "page_down", "Page down", show=False, id="pane.page_down"),
        Binding("b", "page_up", "Page up", show=False, id="pane.page_up"),
        Binding("ctrl+d", "half_page(1)", "Half page down", show=False, id="pane.half_down"),
        Binding("ctrl+u", "half_page(-1)", "Half page up", show=False, id="pane.half_up"),
        Binding("g", "scroll_home", "Top", show=False, id="pane.top"),
        Binding("G", "scroll_end", "Bottom", show=False, id="pane.bottom"),
        Binding("enter,z", "zoom", "Full screen", show=False, id="pane.zoom"),  # in help; the footer keeps 80 columns
        Binding("slash", "search", "Search", key_display="/", id="pane.search"),
        Binding("n", "next_match(1)", "Next match", show=False, id="pane.next_match"),
        Binding("N", "next_match(-1)", "Prev match", show=False, id="pane.prev_match"),
        Binding("escape", "clear_search", "Clear search", show=False, id="pane.clear_search"),
    ]

    def __init__(self, *, id: str | None = None, zoomable: bool = True) -> None:
        super().__init__(id=id, wrap=True, markup=False, highlight=False, auto_scroll=False, min_width=20)
        self.zoomable = zoomable
        self.zoom_title = ""  # the full-screen view's title; the screen's title bar when empty
        self.matches = Matches()
        self._source: list[RenderableType] = []
        self._wrapped_at = 0  # the content width the lines were wrapped to (0: not yet)

    # -- content -------------------------------------------------------------------------------
    def show(self, lines: Iterable[RenderableType]) -> None:
        """Replace the content (a new search starts from nothing: the old hits meant other text)."""
        self._source = list(lines)
        self.matches.clear()
        self.border_title = ""
        self._render_source()
        self.scroll_home(animate=False)

    def _render_source(self) -> None:
        self.clear()
        pattern = re.compile(re.escape(self.matches.query), re.IGNORECASE) if self.matches.query else None
        lines: list[RenderableType] = []
        for line in self._source:
            if pattern is not None and isinstance(line, Text):
                line = line.copy()
                line.highlight_regex(pattern, style=MATCH_STYLE)
            lines.append(line)
        self._wrapped_at = self.scrollable_content_region.width
        # One write of the whole detail: each RichLog.write measures, renders and resizes the log
        # (a layout refresh), so writing line by line cost a stepping key most of its time.
        if lines:
            self.write(Group(*lines))

    def on_resize(self, event: Resize) -> None:
        # RichLog wraps each line once, at the width it had when written: after the terminal (or a
        # split) changed width, wrap the same lines again, keeping the reader at the same place.
        width = self.scrollable_content_region.width
        if self._wrapped_at == 0:  # the first size: RichLog now writes what waited for it, at this width
            self._wrapped_at = width
            return
        if not self._source or self._wrapped_at == width:
            return
        ratio = self.scroll_y / self.max_scroll_y if self.max_scroll_y else 0.0
        self._render_source()
        self.call_after_refresh(lambda: self.scroll_to(y=round(ratio * self.max_scroll_y), animate=False))

    @property
    def source(self) -> list[RenderableType]:
        """The lines as given to :meth:`show` (for the full-screen view, copy and export)."""
        return list(self._source)

    def text(self) -> str:
        return plain_text(self._source)

    # -- actions -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Inactive keys fall through to the screen's bindings (n: next turn; Esc: back).
        if action in ("next_match", "clear_search"):
            return self.matches.active
        if action == "zoom":
            return self.zoomable
        return True

    def action_half_page(self, direction: int) -> None:
        self.scroll_to(y=max(0, self.scroll_y + direction * max(1, self.scrollable_content_region.height // 2)),
                       animate=False)

    def action_zoom(self) -> None:
        title = self.zoom_title or str(getattr(self.screen, "title_text", "") or "")
        self.post_message(ShowText(title, self._source, self.matches.query))

    def action_search(self) -> None:
        self.app.push_screen(SearchPrompt(value=self.matches.query), self.search)

    def search(self, query: str | None) -> None:
        """Highlight every match of ``query`` and scroll to the first one below the top line."""
        if not query:
            return
        self.matches.query = query
        self._render_source()
        needle = query.lower()
        hits = [y for y, strip in enumerate(self.lines) if needle in strip.text.lower()]
        self._go(self.matches.set(query, hits, near=int(self.scroll_y)))

    def action_next_match(self, delta: int) -> None:
        self._go(self.matches.step(delta))

    def action_clear_search(self) -> None:
        self.matches.clear()
        self.border_title = ""
        offset = self.scroll_offset
        self._render_source()
        self.scroll_to(offset.x, offset.y, animate=False)

    def _go(self, line: int | None) -> None:
        self.border_title = self.matches.label()
        if line is not None:  # the match a third of the way down, so its context shows
            self.scroll_to(y=max(0, line - self.scrollable_content_region.height // 3), animate=False)
