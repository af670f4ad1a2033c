"""The store change of one session as a table (diff mark, id, group, text), redrawn per step.

Like :class:`memprobe_tui.widgets.store_table.StoreTable` (same marks and styles), but its columns
are made once with fixed widths and a step replaces only the rows: re-creating and re-measuring the
columns on every step doubled the stepper's cost per key press.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.reactive import Reactive

from memprobe_engine.replay.memory_view import StoreRow
from memprobe_tui.widgets.cursor_mark import MarkedCursorTable
from memprobe_tui.widgets.fixed_region import content_size_changed
from memprobe_tui.widgets.store_table import MARK_STYLES, group_and_text, row_key

#: (label, key, width); texts are cut at 160 cells (the memory view shows an item whole): long
#: non-ASCII texts cost Rich a grapheme split per cell on every redraw.
COLUMNS: tuple[tuple[str, str, int], ...] = (("±", "mark", 1), ("id", "id", 14), ("group", "group", 10),
                                             ("text", "text", 160))


class StoreDiffTable(MarkedCursorTable):
    """Row keys are item ids (deleted ones prefixed with ``-``), as in StoreTable."""

    #: The screen fixes this table's region: a new row count or width redraws it and its scrollbars,
    #: without a layout of the whole screen (widgets/fixed_region.py).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        content_size_changed(self, size)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)

    def on_mount(self) -> None:
        for label, key, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def show(self, rows: list[StoreRow], group_field: str | None) -> None:
        keep = self.cursor_row
        self.clear()
        for row in rows:
            style = MARK_STYLES[row.mark]
            group, text = group_and_text(row, group_field)
            self.add_row(Text(row.mark, style=style), Text(row.item_id[:14], style=style),
                         Text(group[:10], style="dim" if row.mark == " " else style),
                         # cut to the column's width already: no word wrapping to compute (3x cheaper)
                         Text(text[:160], style="strike dim" if row.mark == "-" else "", no_wrap=True),
                         key=row_key(row))
        if self.row_count:
            self.move_cursor(row=min(keep, self.row_count - 1))
