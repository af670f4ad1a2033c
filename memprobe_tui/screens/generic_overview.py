"""The overview of a recording whose protocol has no screens of its own: its units (one row per unit
span: unit, system, status, lines) and the metrics the run recorded, with Enter opening the unit's
memory store. Every protocol's recording can be read this far without any code of its own."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from memprobe_engine.events.run import Metric
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.replay import ReplaySession
from memprobe_engine.replay.index import SpanRec
from memprobe_tui.tui_entry import TuiEntry
from memprobe_tui.screens.recording_overview import RecordingOverview
from memprobe_tui.widgets.table_fill import fill_table

#: A unit row: unit, system, status, first line, last line (None while open).
UnitRow = tuple[str, str, str, int, int | None]


class MetricFold:
    """The run's ``metric`` events, kept by the index pass (an :class:`~memprobe_engine.replay.index.IndexFold`)."""

    kinds = frozenset({"metric"})

    def __init__(self) -> None:
        self.metrics: list[Metric] = []

    def add(self, event: AnyEvent) -> None:
        if isinstance(event, Metric):
            self.metrics.append(event)

    def add_span(self, span: SpanRec) -> None:
        return None


def overview_numbers(session: ReplaySession) -> tuple[list[UnitRow], list[Metric]]:
    """Every unit span in recording order, and every metric the run recorded."""
    fold = session.index.attach("generic.metrics", MetricFold(), session.reader)
    with session.index.lock:
        rows = [(s.unit or s.user_id or s.name, s.system or "—", s.status or "running", s.line, s.end_line)
                for s in session.index.spans.values() if s.kind == "unit"]
        return rows, list(fold.metrics)


Numbers = tuple[list[UnitRow], list[Metric]]


class GenericOverviewScreen(RecordingOverview[Numbers]):
    """Rows: the run's units, then its metrics."""

    HELP = """\
A recording of a protocol without screens of its own: one row per **unit** (the span a run resumes
by) with its system and status, then every **metric** the run recorded (name, scope, value).

Enter on a unit opens its memory store at the end of the unit (`n`/`p` step through its writes);
`i` shows the run's settings.
"""

    DEFAULT_CSS = """
    GenericOverviewScreen DataTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "memory", "Memory", priority=True, id="generic.memory"),
    ]

    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session)
        self.units: list[UnitRow] = []

    def numbers_table(self) -> DataTable[object]:
        return DataTable(id="units", cursor_type="row")

    def on_mount(self) -> None:
        header = self.session.header
        self.set_title(f"indexing… · {len(self.session):,} events · {header.run_id} ({header.suite})")
        self.show_damage()
        self.query_one(DataTable).focus()
        self.start_index()

    def numbers(self) -> Numbers:
        return overview_numbers(self.session)

    def show_numbers(self, data: Numbers) -> None:
        units, metrics = data
        self.units = units
        rows: list[tuple[str, tuple[str | Text, ...]]] = [
            (f"unit {i}", (unit, system, status, f"{first + 1}–{'' if last is None else last + 1}"))
            for i, (unit, system, status, first, last) in enumerate(units)]
        rows += [(f"metric {i}", (Text(m.name, style="bold"), ", ".join(f"{k}={v}" for k, v in sorted(m.scope.items())),
                                  "metric", "—" if m.value is None else f"{m.value:.4g}"))
                 for i, m in enumerate(metrics)]
        table: DataTable[object] = self.query_one(DataTable)
        fill_table(table, [("unit / metric", "unit"), ("system / scope", "system"), ("status", "status"),
                           ("lines / value", "lines")], rows)
        header = self.session.header
        state = "live" if self.session.live else "done"
        self.set_title(f"{len(self.units)} units · {len(metrics)} metrics · {state} · {header.run_id} "
                       f"({header.suite})")
        if self.session.live:
            self.start_following()

    def action_memory(self) -> None:
        row = self.query_one(DataTable).cursor_row
        if 0 <= row < len(self.units):
            unit, system, _, _, _ = self.units[row]
            self.nav.open_memory(self.session, unit, system, None)


GENERIC_ENTRY = TuiEntry(overview=GenericOverviewScreen, screens=(GenericOverviewScreen,))
