"""``/`` search with n/N for every table (the overview, the browser, a memory store, the grid):
the cursor jumps to the next row whose cells contain the text. A mixin, so any DataTable gets it
with one base class; inactive keys fall through to the screen (n still steps turns there).

Its :meth:`SearchableTable.fill` fits the columns to the table's width (widgets/table_fill.py),
again when the width changes; search and export read the cells whole, as filled, not as cut."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from memprobe_tui.widgets.cursor_mark import MarkedCursorTable
from memprobe_tui.widgets.row_detail import RowDetail
from memprobe_tui.widgets.search_prompt import Matches, SearchPrompt
from memprobe_tui.widgets.table_fill import Cell, ColumnSpec, Fit, fill_table, plain

Rows = Sequence[tuple[str, Sequence[Cell]]]


def row_texts(table: DataTable[object]) -> list[str]:
    """Each row's cells as one lower-cased string (what a search matches against), whole."""
    return [" ".join(cells).lower() for cells in table_cells(table)[1]]


def table_cells(table: DataTable[object]) -> tuple[list[str], list[list[str]]]:
    """(column labels, rows of plain cell text): what an export of the table writes — every column
    and every cell whole, also those the table's width cut or left out."""
    if isinstance(table, SearchableTable) and table.filled is not None:
        columns, rows, _ = table.filled
        return [spec[0] for spec in columns], [[plain(c) for c in cells] for _, cells in rows]
    labels = [str(c.label) for c in table.columns.values()]
    return labels, [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)]
                    for i in range(table.row_count)]


class SearchableTable(MarkedCursorTable):
    """A row-cursor DataTable with ``/``, ``n``/``N``, Home/End and ``g``/``G``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search", key_display="/", id="table.search"),
        Binding("n", "next_match(1)", "Next match", show=False, id="table.next_match"),
        Binding("N", "next_match(-1)", "Prev match", show=False, id="table.prev_match"),
        Binding("escape", "clear_search", "Clear search", show=False, id="table.clear_search"),
        Binding("g", "scroll_top", "First row", show=False, id="table.first"),
        Binding("G", "scroll_bottom", "Last row", show=False, id="table.last"),
        Binding("ctrl+d", "half_page(1)", "Half page down", show=False, id="table.half_down"),
        Binding("ctrl+u", "half_page(-1)", "Half page up", show=False, id="table.half_up"),
    ]

    #: False where the screen's own ``/`` filters the rows instead (the memory store).
    SEARCHABLE: ClassVar[bool] = True

    def __init__(self, *, id: str | None = None, zebra_stripes: bool = True,
                 cursor_type: Literal["row", "cell"] = "row") -> None:
        super().__init__(id=id, cursor_type=cursor_type, zebra_stripes=zebra_stripes)
        self.matches = Matches()
        #: What :meth:`fill` was given last (columns, rows, may columns be left out), and how it fitted.
        self.filled: tuple[Sequence[ColumnSpec], Rows, bool] | None = None
        self.fit: Fit | None = None
        self._filled_at = 0
        #: The line under the table naming the cursor row's cut and left-out values whole; a screen
        #: that composes it lets :meth:`fill` leave columns out (``drop``).
        self.row_detail = RowDetail()

    # -- filling, fitted to the width ------------------------------------------------------------
    def fill(self, columns: Sequence[ColumnSpec], rows: Rows, *, drop: bool = False) -> None:
        """Replace every column and row, fitted to the table's width (see widgets/table_fill.py);
        ``drop``: columns that do not fit even cut may be left out (the row detail names them)."""
        self.filled = (columns, rows, drop)
        self._filled_at = self.size.width
        room = None
        if self.size.width:  # not laid out yet: the first resize fits it
            scroll_bar = 2 if len(rows) + 1 > self.size.height else 0
            room = self.size.width - scroll_bar
        self.fit = fill_table(self, columns, rows, room=room, drop=drop and self.row_detail.is_attached)
        self._show_row_detail()

    def on_resize(self) -> None:
        if self.filled is not None and self._filled_at != self.size.width:
            self.fill(*self.filled[:2], drop=self.filled[2])

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        if old.row != new.row:
            self._show_row_detail()

    def _show_row_detail(self) -> None:
        if not self.row_detail.is_attached:
            return
        search = self.matches.label()
        if self.filled is None or self.fit is None or not self.fit.partial:
            self.row_detail.show([], search)
            return
        columns, rows, _ = self.filled
        row = self.cursor_row
        cells = rows[row][1] if 0 <= row < len(rows) else []
        self.row_detail.show([(columns[i][0], plain(cells[i])) for i in self.fit.partial if i < len(cells)], search)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("search", "next_match", "clear_search"):
            return self.SEARCHABLE and (action == "search" or self.matches.active)
        return True

    def action_search(self) -> None:
        self.app.push_screen(SearchPrompt("search the rows of this table", self.matches.query), self.search)

    def search(self, query: str | None) -> None:
        if not query:
            return
        needle = query.lower()
        hits = [i for i, text in enumerate(row_texts(self)) if needle in text]
        self._go(self.matches.set(query, hits, near=self.cursor_row))
        self._show_row_detail()  # the search and its hits stay in sight under the table
        self.app.refresh_bindings()

    def action_next_match(self, delta: int) -> None:
        self._go(self.matches.step(delta))
        self._show_row_detail()

    def action_clear_search(self) -> None:
        self.matches.clear()
        self._show_row_detail()
        self.app.refresh_bindings()

    def action_half_page(self, direction: int) -> None:
        step = max(1, self.scrollable_content_region.height // 2)
        self.move_cursor(row=max(0, min(self.row_count - 1, self.cursor_row + direction * step)))

    def _go(self, row: int | None) -> None:
        if row is None:
            self.notify(f"“{self.matches.query}” is in no row.", timeout=4)
        else:
            self.move_cursor(row=row, column=self.cursor_column)
            self.notify(self.matches.label(), timeout=2)
