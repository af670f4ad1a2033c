"""Fill a DataTable with columns sized to their content, in one go — and, given the width the table
has, fitted to it: no column runs past the screen's edge.

DataTable measures auto-width columns on idle but may already have cached rows rendered at the
old widths (a redraw only follows the next cursor move), so tables filled from a worker's message
showed truncated cells. Sizing the columns up front avoids that and keeps snapshots stable.

Fitting (issue 36: at 80 columns the browser showed ``nomem,l``, compare's attribution column
``attribu``, the episode list ``authoritative_upda``, each cut by the screen's edge): a column may
name the fewest cells a cut leaves it (its *least*). When the columns do not fit, the ones with a
least give up cells, the one with the most to spare first, and every cell or label so cut ends in
``…``. Where even that is too wide, the columns that do not fit at their least are left out, from
the right (a table lists the columns one decides by first); the screen's row detail line
(:class:`memprobe_tui.widgets.row_detail.RowDetail`) then names the cursor row's cut and left-out
values whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text
#: (label, key) or (label, key, least): a column that may be cut, never below ``least`` cells.
ColumnSpec = tuple[str, str] | tuple[str, str, int]
MAX_WIDTH = 300  # very long cells scroll horizontally rather than growing a column without bound
#: Cells a column takes beyond its width (DataTable's padding, one cell each side).
PADDING = 2


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


def plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def cut_cell(cell: Cell, width: int) -> Cell:
    """``cell`` in at most ``width`` cells, a cut ending in ``…`` (a Text keeps its styles)."""
    if _width(cell) <= width:
        return cell
    if isinstance(cell, Text):
        cut = cell.copy()
        cut.truncate(width, overflow="ellipsis")
        return cut
    text = cell
    while cell_len(text) > max(0, width - 1):
        text = text[:-1]
    return text + "…"


@dataclass
class Fit:
    """How a table's columns met its width: each column's width (None: left out) and which columns
    hold text the screen does not show whole (cut in some row, or left out)."""

    widths: list[int | None]
    partial: list[int] = field(default_factory=list)


def fit_widths(natural: Sequence[int], least: Sequence[int | None], room: int | None, *, drop: bool) -> list[int | None]:
    """Column widths within ``room`` cells (None: no limit); ``drop``: columns that do not fit at their
    least may be left out (None), from the right. Cut columns give up cells from the right too."""
    widths: list[int | None] = list(natural)
    if room is None:
        return widths
    floor = [n if low is None else min(n, low) for n, low in zip(natural, least, strict=True)]
    if drop:
        used = 0
        for index, smallest in enumerate(floor):
            if index and used + smallest + PADDING > room:
                widths[index:] = [None] * (len(widths) - index)
                break
            used += smallest + PADDING
    over = sum(w + PADDING for w in widths if w is not None) - room
    for index in reversed(range(len(widths))):  # the columns listed last give up cells first
        width = widths[index]
        if over <= 0:
            break
        if width is not None and width > floor[index]:
            given = min(over, width - floor[index])
            widths[index] = width - given
            over -= given
    return widths


def fill_table(table: DataTable[object], columns: Sequence[ColumnSpec],
               rows: Sequence[tuple[str, Sequence[Cell]]], *, room: int | None = None, drop: bool = False) -> Fit:
    """Replace every column and row: ``columns`` = (label, key[, least]); ``rows`` = (row key, cells).
    ``room``: the cells the columns may take in all (None: as wide as their content)."""
    keep = table.cursor_row
    table.clear(columns=True)
    natural = [min(MAX_WIDTH, max([cell_len(spec[0]), *(_width(cells[index]) for _, cells in rows)]))
               for index, spec in enumerate(columns)]
    least = [spec[2] if len(spec) == 3 else None for spec in columns]
    fit = Fit(fit_widths(natural, least, room, drop=drop))
    for index, (spec, width) in enumerate(zip(columns, fit.widths, strict=True)):
        if width is None or width < natural[index]:
            fit.partial.append(index)
        if width is not None:
            table.add_column(plain(cut_cell(spec[0], width)), key=spec[1], width=width)
    for key, cells in rows:
        table.add_row(*(cut_cell(cell, width) for cell, width in zip(cells, fit.widths, strict=True)
                        if width is not None), key=key)
    if table.row_count:
        table.move_cursor(row=min(keep, table.row_count - 1))
    return fit
