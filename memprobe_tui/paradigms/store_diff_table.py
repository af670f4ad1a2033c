"""The store change of one session as a table (diff mark, id, group, text), redrawn per step.

Like :class:`memprobe_tui.widgets.store_table.StoreTable` (same marks, styles and cuts), but its
columns are made once with fixed widths and a step replaces only the rows: re-creating and
re-measuring the columns on every step doubled the stepper's cost per key press. The text column
takes what the others leave of the pane's width (made again when the width changes), so a text is
cut with ``…`` rather than by the pane's edge; the memory view (``m``) shows an item whole.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.reactive import Reactive

from memprobe_engine.replay.memory_view import StoreRow
from memprobe_tui.widgets.cursor_mark import MarkedCursorTable
from memprobe_tui.widgets.fixed_region import content_size_changed
from memprobe_tui.widgets.store_table import ID_SHOWN, MARK_STYLES, cut, group_and_text, row_key, short_id

#: (label, key, width) of the columns before the text (an id's first 8 characters and ``…``).
COLUMNS: tuple[tuple[str, str, int], ...] = (("±", "mark", 1), ("id", "id", ID_SHOWN + 1), ("group", "group", 10))
#: Cells of the table's width the text column cannot use: each column's padding, the scroll bar.
_OTHERS = sum(width + 2 for _, _, width in COLUMNS) + 2 + 2
#: The text column's width before the table has one (long non-ASCII texts cost Rich a grapheme
#: split per cell on every redraw: never wider).
TEXT_MAX = 160


class StoreDiffTable(MarkedCursorTable):
    """Row keys are item ids (deleted ones prefixed with ``-``), as in StoreTable."""

    #: The screen fixes this table's region: a new row count or width redraws it and its scrollbars,
    #: without a layout of the whole screen (widgets/fixed_region.py).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        content_size_changed(self, size)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._text_width = 0
        self._shown: tuple[list[StoreRow], str | None] = ([], None)

    def _columns(self) -> None:
        """(Re)make the columns, the text column as wide as the table leaves it."""
        self._text_width = max(10, min(TEXT_MAX, self.size.width - _OTHERS)) if self.size.width else TEXT_MAX
        self.clear(columns=True)
        for label, key, width in COLUMNS:
            self.add_column(label, key=key, width=width)
        self.add_column("text", key="text", width=self._text_width)

    def on_resize(self) -> None:
        if self.size.width and max(10, min(TEXT_MAX, self.size.width - _OTHERS)) != self._text_width:
            self._columns()
            self.show(*self._shown)

    def show(self, rows: list[StoreRow], group_field: str | None) -> None:
        if not self.columns:
            self._columns()
        self._shown = (rows, group_field)
        keep = self.cursor_row
        self.clear()
        for row in rows:
            style = MARK_STYLES[row.mark]
            group, text = group_and_text(row, group_field)
            self.add_row(Text(row.mark, style=style), Text(short_id(row.item_id), style=style),
                         Text(cut(group, 10), style="dim" if row.mark == " " else style),
                         # cut to the column's width already: no word wrapping to compute (3x cheaper)
                         Text(cut(text, self._text_width), style="strike dim" if row.mark == "-" else "",
                              no_wrap=True),
                         key=row_key(row))
        if self.row_count:
            self.move_cursor(row=min(keep, self.row_count - 1))
