"""The line under a table that names the cursor row's values the table's width cut (``…``) or left
out, whole: ``condition: authoritative_update · expected: update · split: no``; and, while a ``/``
search of the table is active, its text and hits: ``/memory 2/5 · n/N · Esc clears`` (issue 36: no
sign said a search was active, nor how many rows it found). Hidden when it has nothing to say, so a
wide terminal keeps its rows."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from memprobe_tui.widgets.fixed_region import update_text


class RowDetail(Static):
    """Composed by a screen right after its table (``yield table.row_detail``)."""

    DEFAULT_CSS = """
    RowDetail {
        height: auto;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
        display: none;
    }
    RowDetail.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__("")
        self._shown: tuple[list[tuple[str, str]], str] | None = None

    def show(self, values: list[tuple[str, str]], search: str = "") -> None:
        """``values``: (column label, the cursor row's whole value) of every column not shown whole;
        ``search``: the table's search and its hits (empty: no search)."""
        if (values, search) == self._shown:
            return
        self._shown = (values, search)
        self.set_class(bool(values or search), "shown")
        update_text(self, self._text(values, search))

    def on_resize(self) -> None:
        if self._shown:
            update_text(self, self._text(*self._shown))

    def _text(self, values: list[tuple[str, str]], search: str) -> Text:
        """The search first, then one ``label: value`` after the other, a line broken between two of
        them, not inside one."""
        width = self.content_region.width or 10_000
        text, used = Text(), 0
        pairs = [Text(search, style="reverse")] if search else []
        pairs += [Text.assemble((f"{label}: ", "bold"), value or "—") for label, value in values]
        for pair in pairs:
            if used and used + 3 + pair.cell_len > width:
                text.append("\n")
                used = 0
            elif used:
                text.append(" · ", style="dim")
                used += 3
            text.append_text(pair)
            used += pair.cell_len
        return text
