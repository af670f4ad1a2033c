"""A memory store as a table: diff mark, id, group field, text; deleted items kept, struck out."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.geometry import Size
from textual.reactive import Reactive

from memprobe_engine.replay.memory_view import StoreRow, item_text, step_numbered
from memprobe_tui.widgets.fixed_region import content_size_changed
from memprobe_tui.widgets.table_fill import fill_table
from memprobe_tui.widgets.table_search import SearchableTable

MARK_STYLES = {"+": "bold green", "~": "bold yellow", "-": "red strike", " ": ""}
MARK_NAMES = {"+": "added", "~": "updated", "-": "deleted", " ": ""}
COLUMNS = [("±", "mark"), ("id", "id"), ("group", "group"), ("text", "text")]
#: Characters of an id shown in the table (a UUID's first block); the detail pane names it in full.
ID_SHOWN = 8


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, a cut ending in ``…``."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def short_id(item_id: str) -> str:
    return cut(item_id, ID_SHOWN + 1)


def row_key(row: StoreRow) -> str:
    """The row key of a store row: its item id, prefixed with ``-`` when the item was deleted."""
    return ("-" if row.mark == "-" else "") + row.item_id


def group_and_text(row: StoreRow, group_field: str | None) -> tuple[str, str]:
    """A store row's group cell (``group_field``'s value; a list joined by commas) and its text on one
    line, a task's native ``[Task 0]`` named as the steps name it (``[T1 task]``)."""
    value = row.item.get(group_field, "") if group_field else ""
    group = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return group, step_numbered(" ".join(item_text(row.item).split()))


class StoreTable(SearchableTable):
    """Row keys are item ids (deleted ones prefixed with ``-``, so an id can appear once each way)."""

    SEARCHABLE: ClassVar[bool] = False  # the memory screen's ``/`` filters the store instead

    #: The screen fixes this table's region: a new row count or width redraws it and its scrollbars,
    #: without a layout of the whole screen (widgets/fixed_region.py).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        content_size_changed(self, size)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, zebra_stripes=False)
        self._shown: tuple[list[StoreRow], str | None, dict[str, str] | None, dict[str, str] | None, int] | None = None

    def on_resize(self) -> None:
        """The text column's width follows the table's: shown again at the new width."""
        if self._shown is not None and self._shown[4] != self.size.width:
            self.show(*self._shown[:4])

    def show(self, rows: list[StoreRow], group_field: str | None, written: dict[str, str] | None = None,
             read: dict[str, str] | None = None) -> None:
        """``written``: item id → the steps that wrote it; ``read``: item id → a mark (shown in a
        ``read`` column only when given)."""
        self._shown = (rows, group_field, written, read, self.size.width)
        written, read = written or {}, read or {}
        columns = [COLUMNS[0], *([("read", "read")] if read else []), COLUMNS[1], ("written", "written"), *COLUMNS[2:]]
        cells: list[tuple[str, tuple[Text, ...]]] = []
        # The text column gets what the others leave of the table's width, and a cut ends in "…"
        # (before, it ran 300 characters wide and the screen's edge cut it mid-word).
        def widest(values: list[str], label: str) -> int:
            return max([len(label), *(len(v) for v in values)])

        groups = [group_and_text(r, group_field)[0] for r in rows]
        fixed = widest([r.mark for r in rows], "±") + (widest(list(read.values()), "read") if read else 0) \
            + widest([short_id(r.item_id) for r in rows], "id") \
            + widest([cut(written.get(r.item_id, ""), 14) for r in rows], "written") \
            + widest([cut(g, 12) for g in groups], "group") + 2 * len(columns) + 2  # cell padding, scroll bar
        room = max(20, self.size.width - fixed) if self.size.width else 300
        for row in rows:
            style = MARK_STYLES[row.mark]
            group, text = group_and_text(row, group_field)
            marks = (Text(read.get(row.item_id, ""), style="bold magenta"),) if read else ()
            cells.append((row_key(row), (
                Text(row.mark, style=style), *marks, Text(short_id(row.item_id), style=style),
                Text(cut(written.get(row.item_id, ""), 14), style="cyan"),
                Text(cut(group, 12), style="dim" if row.mark == " " else style),
                # within its column's width (table_fill): no word wrapping to compute on each draw
                Text(cut(text, room), style="strike dim" if row.mark == "-" else "", no_wrap=True))))
        fill_table(self, columns, cells)

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
