"""Updating widgets whose region the screen's CSS fixes, without a layout of the whole screen.

Textual lays out the screen again when a scrolling widget's content size changes (its
``virtual_size`` is a layout reactive) and when a Static gets new text (``update`` defaults to a
layout). A layout re-renders every widget of the screen, though a pane sized ``1fr`` or ``40%``
keeps its region whatever it holds; at 80×24 that was most of a stepping key's cost
(bench/tui.py, bench/tui_paradigms.py). A scrollbar that appears or goes still lays out (its own
reactive does).
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static


def content_size_changed(widget: Widget, size: Size) -> None:
    """What a fixed-region widget's ``watch_virtual_size`` does instead of a layout: update the
    scrollbars and redraw the widget itself."""
    widget._scroll_update(size)
    widget.refresh()


def update_text(static: Static, text: str | Text) -> None:
    """``static.update(text)``, laying the screen out only when the new text needs a different
    height than the widget has (a Static of ``height: auto``), measured as the layout would."""
    width, height = static.content_region.width, static.content_region.height
    static.update(text, layout=False)
    if width <= 0 or static.get_content_height(static.container_size, static.app.size, width) != height:
        static.refresh(layout=True)


def clamp_lines(static: Static, text: str | Text, max_lines: int) -> Text:
    """``text`` as ``static`` wraps it, in at most ``max_lines`` lines, the last one ending in ``…``
    when more followed (a ``max-height`` used to hide the rest with no mark; issue 36)."""
    whole = Text(text) if isinstance(text, str) else text
    width = static.content_region.width
    if width <= 0:
        return whole
    lines = whole.wrap(static.app.console, width)
    if len(lines) <= max_lines:
        return whole
    last = lines[max_lines - 1].copy()
    last.rstrip()
    last.truncate(width - 1)
    last.append("…")
    return Text("\n").join([*lines[: max_lines - 1], last])
