"""``/`` search with n/N for every table (the overview, the browser, a memory store, the grid):
the cursor jumps to the next row whose cells contain the text. A mixin, so any DataTable gets it
with one base class; inactive keys fall through to the screen (n still steps turns there)."""

from __future__ import annotations

from typing import ClassVar, Literal

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from memprobe_tui.widgets.cursor_mark import MarkedCursorTable
from memprobe_tui.widgets.search_prompt import Matches, SearchPrompt


def row_texts(table: DataTable[object]) -> list[str]:
    """Each row's cells as one lower-cased string (what a search matches against)."""
    out = []
    for index in range(table.row_count):
        cells = table.get_row_at(index)
        out.append(" ".join(c.plain if isinstance(c, Text) else str(c) for c in cells).lower())
    return out


def table_cells(table: DataTable[object]) -> tuple[list[str], list[list[str]]]:
    """(column labels, rows of plain cell text): what an export of the table writes."""
    columns = [str(c.label) for c in table.columns.values()]
    rows = [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
    return columns, rows


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
        self.app.refresh_bindings()

    def action_next_match(self, delta: int) -> None:
        self._go(self.matches.step(delta))

    def action_clear_search(self) -> None:
        self.matches.clear()
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
