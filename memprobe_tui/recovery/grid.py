"""Dimension × system grid: every judged dimension (grouped by category) against every system,
each cell the mean current judge score over users, full store / top-k, coloured by score.

Colour only repeats what the number says (NO_COLOR and monochrome terminals lose nothing); the
best system of a row is also marked with ``▲``, the worst with ``▼`` (neither on a full tie).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from memprobe_engine.recovery.read import score_board
from memprobe_engine.recovery.read.grid import ScoreGrid, score_grid
from memprobe_engine.replay import ReplaySession
from memprobe_tui.export import ExportDoc, table_doc
from memprobe_tui.messages import Loaded
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.table_fill import fill_table
from memprobe_tui.widgets.table_search import SearchableTable, table_cells
from memprobe_tui.recovery.navigation import open_dimension


def score_style(score: float | None) -> str:
    """Green high, yellow middling, red low (scores are 0–1)."""
    if score is None:
        return "dim"
    return "green" if score >= 0.67 else ("yellow" if score >= 0.34 else "red")


def cell_text(full: float | None, top_k: float | None, rank: str = "") -> Text:
    """``full/top-k`` and the row's rank mark: ``▲`` best, ``▼`` worst, nothing in between or on a tie."""
    text = Text()
    text.append("—" if full is None else f"{full:.2f}", style=score_style(full))
    text.append("/", style="dim")
    text.append("—" if top_k is None else f"{top_k:.2f}", style=score_style(top_k))
    if rank:
        text.append(f" {rank}", style="bold")
    return text


def rank_mark(score: float | None, row_scores: list[float]) -> str:
    """▲ for the row's highest full-store score, ▼ for its lowest; nothing when every system scored
    the same (a full tie has no best) or the cell was not scored."""
    if score is None or len(set(row_scores)) < 2:
        return ""
    return "▲" if score == max(row_scores) else ("▼" if score == min(row_scores) else "")


def grid_rows(grid: ScoreGrid) -> list[tuple[str, tuple[str | Text, ...]]]:
    rows: list[tuple[str, tuple[str | Text, ...]]] = []
    for category, dimension in grid.dimensions:
        means = {s: c.scores.get("dump_all") for s in grid.systems if (c := grid.cell(dimension, s)) is not None}
        scored = [v for v in means.values() if v is not None]
        cells: list[str | Text] = [category, dimension]
        for system in grid.systems:
            cell = grid.cell(dimension, system)
            if cell is None:
                cells.append(Text("·", style="dim"))
                continue
            full = cell.scores.get("dump_all")
            cells.append(cell_text(full, cell.scores.get("retrieve"), rank_mark(full, scored)))
        rows.append((dimension, tuple(cells)))
    return rows


class GridScreen(ReplayScreen):
    """Opened with ``x`` from the overview; Enter opens the dimension for the first user."""

    HELP = """\
**Dimension × system grid.** One row per hidden dimension (grouped by its category), one column per
memory system. A cell is `full/top-k`: the mean judge score over the run's users for that
dimension, when the slot-filler read the **full store** (dump_all) and when it read only the
**top-k retrieved items** (retrieve). Scores are 0–1; the latest re-score counts where there is one.

| mark | meaning |
| --- | --- |
| green / yellow / red | ≥ 0.67 / ≥ 0.34 / below (colour repeats the number) |
| ▲ / ▼ | the best / worst full-store score of the row (ties share a mark; no mark when all are equal) |
| ▶ | the cursor (h/l or ←/→ move it between systems, j/k between dimensions) |
| — | judged, but excluded under that mode (overflow, unparseable output) |
| · | not judged for this system |
"""

    DEFAULT_CSS = """
    GridScreen SearchableTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", priority=True, id="grid.open"),
        Binding("j", "cursor(1)", "Down", show=False, id="grid.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="grid.up"),
        Binding("h", "column(-1)", "Left", show=False, id="grid.left"),
        Binding("l", "column(1)", "Right", show=False, id="grid.right"),
    ]

    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.grid: ScoreGrid | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        table = SearchableTable(id="grid", cursor_type="cell")
        yield table
        yield table.row_detail
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.set_title("dimension × system · computing…")
        self.query_one(SearchableTable).focus()
        self.reload()

    def reload(self) -> None:
        super().reload()
        self._load()

    @work(thread=True, exclusive=True, group="grid", exit_on_error=False, name="score grid")
    def _load(self) -> None:
        self.post_message(Loaded("grid", score_grid(score_board(self.session))))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        grid: ScoreGrid = message.data
        self.grid = grid
        columns = [("category", "category"), ("dimension", "dimension")] + [(s, s) for s in grid.systems]
        table = self.query_one(SearchableTable)
        fill_table(table, columns, grid_rows(grid))
        if table.cursor_column < 2 and grid.systems:  # start on the first system's cell, not the category
            table.move_cursor(column=2)
        self.set_title(f"dimension × system · {len(grid.dimensions)} dimensions · {len(grid.systems)} systems · "
                       "cells: full/top-k")

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(SearchableTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    def action_column(self, delta: int) -> None:
        table = self.query_one(SearchableTable)
        table.move_cursor(column=max(0, min(len(table.columns) - 1, table.cursor_column + delta)))

    def action_open(self) -> None:
        table = self.query_one(SearchableTable)
        if self.grid is None or not table.row_count:
            return
        dimension = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        column = table.cursor_coordinate.column
        systems = self.grid.systems
        system = systems[column - 2] if column >= 2 and column - 2 < len(systems) else next(
            (s for s in systems if self.grid.cell(dimension, s) is not None), None)
        user = next((u for (u, s, d, _) in score_board(self.session).pairs if d == dimension and s == system), None)
        if system is not None and user is not None:
            open_dimension(self.app, self.session, user, system, dimension)

    def export_document(self) -> ExportDoc | None:
        table = self.query_one(SearchableTable)
        return table_doc(self.export_name("grid"), f"Dimension × system ({self.session.header.run_id}), "
                         "cells full/top-k", *table_cells(table))
