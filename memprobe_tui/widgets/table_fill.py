"""Fill a DataTable with columns sized to their content, in one go.

DataTable measures auto-width columns on idle but may already have cached rows rendered at the
old widths (a redraw only follows the next cursor move), so tables filled from a worker's message
showed truncated cells. Sizing the columns up front avoids that and keeps snapshots stable.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text
MAX_WIDTH = 300  # very long cells scroll horizontally rather than growing a column without bound


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


def fill_table(table: DataTable[object], columns: Sequence[tuple[str, str]],
               rows: Sequence[tuple[str, Sequence[Cell]]]) -> None:
    """Replace every column and row: ``columns`` = (label, key); ``rows`` = (row key, cells)."""
    keep = table.cursor_row
    table.clear(columns=True)
    for index, (label, key) in enumerate(columns):
        width = max([cell_len(label), *(_width(cells[index]) for _, cells in rows)])
        table.add_column(label, key=key, width=min(width, MAX_WIDTH))
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if table.row_count:
        table.move_cursor(row=min(keep, table.row_count - 1))
