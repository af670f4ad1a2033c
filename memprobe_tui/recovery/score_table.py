"""The run overview table: one row per system (mean over users) and per user × system."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from memprobe_engine.recovery.read import ScoreBoard, UnitScores
from memprobe_engine.replay import UnitInfo
from memprobe_tui.widgets.table_fill import fill_table
from memprobe_tui.widgets.table_search import SearchableTable

COLUMNS = ("System", "User", "Status", "B full", "B top-k", "A %", "C", "D", "Items", "Chars")
_STATUS_STYLE = {"ok": "green", "running": "yellow", "pending": "dim", "error": "bold red", "cancelled": "red",
                "stopped": "red", "interrupted": "yellow"}
ALL_USERS = "*"


def _num(value: float | None, fmt: str = "{:.3f}") -> str:
    return "—" if value is None else fmt.format(value)


def _b(scores: UnitScores, mode: str) -> Text:
    text = Text(_num(scores.b.get(mode)))
    if scores.overflow.get(mode):
        text.append("†", style="yellow")  # store overflowed the reader's context: diagnostic only
    if mode == "dump_all" and scores.rescored:
        text.append("*", style="cyan")  # includes re-scored cases (latest shown; the inspector has both)
    return text


def score_cells(row: UnitScores, status: Text) -> tuple[str | Text, ...]:
    return (row.system, row.user_id, status, _b(row, "dump_all"),
            _b(row, "retrieve"), _num(row.a, "{:.1f}"), _num(row.c, "{:.2f}"), _num(row.d, "{:.2f}"),
            _num(row.items, "{:d}") if row.items is not None else "—", _num(row.chars, "{:.0f}"))


#: Sort orders of the overview (``o`` cycles them): column -> the value rows are sorted by, highest first.
SORTS: dict[str, Callable[[UnitScores], float | None]] = {
    "B full": lambda r: r.b.get("dump_all"), "B top-k": lambda r: r.b.get("retrieve"), "A %": lambda r: r.a,
    "C": lambda r: r.c, "D": lambda r: r.d, "Items": lambda r: None if r.items is None else float(r.items),
    "Chars": lambda r: r.chars,
}


def _order(value: float | None) -> tuple[bool, float]:
    return (value is None, -(value or 0.0))  # highest first, missing values last


class ScoreTable(SearchableTable):
    """Row keys are ``system\\tuser`` (``user`` is ``*`` for a system's mean row)."""

    def show(self, board: ScoreBoard, units: list[UnitInfo], writer_alive: bool = True,
             only: str = "", sort: str | None = None) -> None:
        """Redraw every row, keeping the cursor on the same row. An open unit span with no live
        writer is shown as ``stopped``: that run died before finishing the unit. ``only`` keeps the
        rows whose system or user contains it; ``sort`` (a key of :data:`SORTS`) orders systems by
        their mean and users within a system, highest first."""
        rows: list[tuple[str, tuple[str | Text, ...]]] = []
        systems = sorted({u.system for u in units} | {s for _, s in board.units})
        needle = only.lower()
        if sort in SORTS:
            systems.sort(key=lambda name: _order(SORTS[sort](board.system_means(name))))
        for system in systems:
            members = [u for u in units if u.system == system]
            if needle and needle not in system.lower():
                members = [u for u in members if needle in u.user_id.lower()]
                if not members:
                    continue
            if sort in SORTS:
                empty = UnitScores(user_id="", system=system)
                members.sort(key=lambda u: _order(SORTS[sort](board.units.get((u.user_id, system)) or empty)))
            done = sum(u.status == "ok" for u in members)
            status = Text(f"{done}/{len(members)}", style="bold")
            rows.append((f"{system}\t{ALL_USERS}", score_cells(board.system_means(system), status)))
            for unit in members:
                row = board.units.get((unit.user_id, system)) or UnitScores(user_id=unit.user_id, system=system)
                status_name = "stopped" if unit.status == "running" and not writer_alive else unit.status
                cells = score_cells(row, Text(status_name, style=_STATUS_STYLE.get(status_name, "")))
                rows.append((f"{system}\t{unit.user_id}", cells))
        fill_table(self, [(name, name) for name in COLUMNS], rows)

    def selected(self) -> tuple[str, str] | None:
        """(system, user or ``*``) of the cursor row."""
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value or ""
        system, _, user = key.partition("\t")
        return system, user
