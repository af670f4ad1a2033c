"""Tables and lists whose cursor is also a character: ``▶`` in the padding before the cursor cell.

Textual shows the cursor as a background colour only; under NO_COLOR, on a monochrome terminal or
through a lossy SSH colour mapping the row under the cursor could not be told from the others. The
mark takes the cell's left padding (one column every cell has), so no width changes and a table with
no focus still shows where its cursor stands.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widgets import DataTable, OptionList
from textual.widgets.data_table import RowKey

from memprobe_tui.widgets.pass_style import StylePerPass

CURSOR_MARK = "▶"


class MarkedCursorTable(StylePerPass, DataTable[object]):
    """A DataTable drawing :data:`CURSOR_MARK` before its cursor row (row cursor) or cell (cell cursor)."""

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        # Textual measures every cell of every new row to size its auto-width columns. These tables
        # give each column its width (widgets/table_fill.py), so that measuring decided nothing and
        # cost a refilled store of ~100 items 7–9 ms per step (bench/tui.py); the virtual size is
        # still computed. Rows with labels or an automatic height are measured as before.
        rows = list(new_rows)
        if not any(column.auto_width for column in self.columns.values()) and all(
                row is None or (row.label is None and not row.auto_height) for row in map(self.rows.get, rows)):
            rows = []
        super()._update_dimensions(rows)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        strip = super()._render_line(y, x1, x2, base_style)
        if not self.show_cursor or self.cursor_type not in ("row", "cell") or self.cell_padding < 1:
            return strip
        try:
            row_key, line_in_row = self._get_offsets(y)
        except LookupError:
            return strip
        if line_in_row != 0 or row_key is self._header_row_key or not self.row_count:
            return strip
        if self._row_locations.get(row_key) != self.cursor_row:
            return strip
        column = self.cursor_column if self.cursor_type == "cell" else 0
        widths = [c.get_render_width(self) for c in self.ordered_columns]
        x = sum(widths[:column]) + self._row_label_column_width
        if column >= self.fixed_columns:  # scrollable cells move with the horizontal scroll
            x -= x1
        if not 0 <= x < strip.cell_length:
            return strip
        under = strip.crop(x, x + 1)
        style = next((s.style for s in under if s.style is not None), None)
        return Strip.join([strip.crop(0, x), Strip([Segment(CURSOR_MARK, style)], 1), strip.crop(x + 1)])


class MarkedOptionList(OptionList):
    """An OptionList drawing :data:`CURSOR_MARK` over the first column of its highlighted option
    (its prompts start with a space for it)."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        try:
            option_index, line_offset = self._lines[self.scroll_offset.y + y]
        except IndexError:
            return strip
        if option_index != self.highlighted or line_offset != 0 or strip.crop(0, 1).text != " ":
            return strip
        style = next((s.style for s in strip.crop(0, 1) if s.style is not None), None)
        return Strip.join([Strip([Segment(CURSOR_MARK, style)], 1), strip.crop(1)])
