"""The paradigm overview table: one row per episode of one system, a cell per probe score."""

from __future__ import annotations

from rich.text import Text

from memprobe_engine.paradigms.read.queries import PROBE_ABBREV, EpisodeRow, ScoreCell
from memprobe_tui.paradigms.render import fmt_score, score_style
from memprobe_tui.widgets.table_fill import ColumnSpec
from memprobe_tui.widgets.table_search import SearchableTable

#: Short forms for the columns one reads at 80 columns.
EXPECTED_ABBREV = {"should_update": "update", "should_preserve": "preserve"}
_STATUS_STYLE = {"ok": "green", "error": "bold red", "cancelled": "red", "interrupted": "yellow"}


def probe_cell(cell: ScoreCell | None) -> Text:
    """``cur 1``, ``cfl .75``, ``chg ✗`` (excluded), ``tmp …`` (not scored yet); ``*`` marks a re-score."""
    if cell is None:
        return Text("")
    text = Text(f"{PROBE_ABBREV.get(cell.probe_type, cell.probe_type[:4])} ")
    current = cell.current
    if current is None:
        text.append("…", style="dim")
    elif current.get("excluded"):
        text.append("excl", style="yellow")
    else:
        value = cell.value
        text.append(fmt_score(value).replace("0.", "."), style=f"bold {score_style(value)}")
    if cell.rescores:
        text.append("*", style="cyan")
    return text


class EpisodeTable(SearchableTable):
    """Row keys are episode ids; the probe columns follow the widest episode's probe count; ``/``
    searches the rows (n/N the next/previous match)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)

    def show(self, rows: list[EpisodeRow]) -> None:
        width = max((len(r.probes) for r in rows), default=0)
        columns: list[ColumnSpec] = [
            ("episode", "episode"), ("acc", "acc"), *((f"P{i + 1}", f"p{i}") for i in range(width)),
            ("paradigm", "paradigm"), ("condition", "condition", 9), ("expected", "expected"),
            ("split", "split"), ("sess", "sessions"), ("status", "status")]
        cells = []
        for row in rows:
            probes = [probe_cell(row.probes[i] if i < len(row.probes) else None) for i in range(width)]
            status = row.status or "running"
            cells.append((row.episode_id, (
                Text(row.episode_id, style="bold"),
                Text(fmt_score(row.accuracy), style=score_style(row.accuracy)), *probes,
                row.paradigm, row.condition, EXPECTED_ABBREV.get(row.expected_behavior, row.expected_behavior),
                "—" if row.split is None else ("yes" if row.split else "no"), row.sessions_text(),
                Text(status, style=_STATUS_STYLE.get(status, "yellow")))))
        self.fill(columns, cells, drop=True)

    def selected(self) -> str | None:
        """The episode id of the cursor row."""
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
