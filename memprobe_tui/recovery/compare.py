"""``memprobe replay BASE --compare OTHER``: every protocol-A case of two runs, and one case side by side.

The case grid lists (user, dimension, mode) with both scores and the change, coloured and marked in
text (▲ improved, ▼ regressed, = same, · excluded) so a monochrome terminal loses nothing; ``v``
keeps only regressed cases. Enter opens :class:`CaseCompareScreen`: both dialogues of the task, both
final stores diffed by item text, both slot-fills, judge reasons and attribution stages. The
comparison itself is ``memprobe compare``'s (``recovery/read/compare.py``), so the two agree.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from memprobe_engine.recovery.read.compare import CompareA, compare_recovery
from memprobe_engine.recovery.read.compare_case import CaseComparison, CaseSide, compare_case
from memprobe_engine.replay import ReplaySession
from memprobe_engine.replay.memory_view import step_numbered
from memprobe_engine.report.compare_inputs import Selection
from memprobe_engine.recovery.read.compare_render import LABEL_NAMES, MODE_NAMES
from memprobe_engine.report.compare_render import CHANGE_MARKS
from memprobe_tui.messages import Loaded
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.table_fill import ColumnSpec
from memprobe_tui.widgets.table_search import SearchableTable

CHANGE_STYLES = {"improved": "green", "regressed": "bold red", "unchanged": "", "excluded": "dim"}


def change_text(change: str) -> Text:
    return Text(CHANGE_MARKS.get(change, change), style=CHANGE_STYLES.get(change, ""))


def _score(value: object) -> str:
    return "—" if value is None or value != value else f"{float(value):.2f}"  # type: ignore[arg-type]


class CompareScreen(ReplayScreen):
    """The case grid of two runs; ``v`` regressed only, Enter the side-by-side view."""

    HELP = """\
**Two runs compared.** One row per (user, dimension, mode) both runs scored: the base run's score,
the other run's, and the change. `▲ improved` / `▼ regressed` / `= same`; `· excluded` when either
side has no usable score. *attribution* is each run's label (Table 4's names: ok, memory, task,
agent, user), base → other. `v` shows only regressed cases; Enter opens the case side by side.
"""

    DEFAULT_CSS = """
    CompareScreen SearchableTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Side by side", priority=True, id="compare.open"),
        Binding("v", "toggle_regressed", "Regressed only", id="compare.regressed"),  # r: re-run elsewhere
        Binding("j", "cursor(1)", "Down", show=False, id="compare.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="compare.up"),
    ]

    def __init__(self, session: ReplaySession, other: ReplaySession, *, base_system: str | None = None,
                 other_system: str | None = None) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.other = other
        self.base_system, self.other_system = base_system, other_system
        self.result: CompareA | None = None
        self.regressed_only = False

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        table = SearchableTable(id="cases", cursor_type="row")
        yield table
        yield table.row_detail
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.set_title("compare · pairing the two runs…")
        self.query_one(SearchableTable).focus()
        self._load()

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False, name="compare runs")
    def _load(self) -> None:
        result = compare_recovery(Selection(self.session.directory, self.base_system),
                                  Selection(self.other.directory, self.other_system))
        self.post_message(Loaded("compare", result))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.what != "compare":
            return
        self.result = message.data
        self._fill()

    def _fill(self) -> None:
        if self.result is None:
            return
        cases = self.result.cases
        shown = cases[cases["change"] == "regressed"] if self.regressed_only else cases
        many_users = cases["user_id"].nunique() > 1  # one user: its name is in the title, not a column
        rows: list[tuple[str, tuple[str | Text, ...]]] = []
        for index, r in shown.iterrows():
            labels = f"{LABEL_NAMES.get(str(r.base_label), r.base_label or '-')}→" \
                     f"{LABEL_NAMES.get(str(r.other_label), r.other_label or '-')}"
            rows.append((str(index), (change_text(str(r.change)), *([str(r.user_id)] if many_users else []),
                                      str(r.dimension), MODE_NAMES.get(str(r["mode"]), str(r["mode"])),
                                      _score(r.base_score), _score(r.other_score), labels)))
        columns: list[ColumnSpec] = [("change", "change"), *([("user", "user", 8)] if many_users else []),
                                     ("dimension", "dimension", 16), ("mode", "mode"), ("base", "base"),
                                     ("other", "other"), ("attribution", "attribution")]
        self.query_one(SearchableTable).fill(columns, rows, drop=True)
        counts = cases["change"].value_counts()
        pairs = ", ".join(f"{a}→{b}" for a, b in self.result.pairs)
        who = "" if many_users else f" · {cases['user_id'].iloc[0]}" if len(cases) else ""
        self.set_title(f"compare {pairs}{who} · ▲{int(counts.get('improved', 0))} ▼{int(counts.get('regressed', 0))} "
                       f"={int(counts.get('unchanged', 0))}" + (" · regressed only" if self.regressed_only else ""))

    def action_toggle_regressed(self) -> None:
        self.regressed_only = not self.regressed_only
        self._fill()

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(SearchableTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    def action_open(self) -> None:
        table = self.query_one(SearchableTable)
        if self.result is None or not table.row_count:
            return
        index = int(str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value))
        row = self.result.cases.loc[index]
        self.app.push_screen(CaseCompareScreen(self.session, self.other, str(row.base_system), str(row.other_system),
                                               user_id=str(row.user_id), dimension=str(row.dimension),
                                               mode=str(row["mode"]), change=str(row.change)))


#: Characters of a store item the side-by-side view shows (the memory view, ``m`` on a run, has it whole).
ITEM_CHARS = 160


def word_cut(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters, cut after a whole word and ending in
    ``…`` (a store item used to stop mid-word, with no mark that more followed)."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    head = flat[: width - 1]
    space = head.rfind(" ")
    return (head[:space] if space > width // 2 else head).rstrip(" ,;:.") + "…"


def side_text(side: CaseSide, mode: str, only_here: list[str], shared: int) -> Text:
    """One column of the side-by-side view: fill, judge, attribution, store diff, dialogue."""
    text = Text()
    text.append(f"{side.system}\n", style="bold")
    detail = side.mode(mode)
    fill = detail.slot_fill if detail else None
    judge = detail.judge if detail else None
    score = detail.pair.score if detail and detail.pair else (judge.score if judge else None)
    text.append("score ", style="bold")
    text.append(f"{_score(score)}\n")
    text.append("fill ", style="bold")
    text.append(f"{fill.label if fill else '—'}\n")
    if fill and fill.reason:
        text.append(f"  {fill.reason}\n", style="dim")
    text.append("judge ", style="bold")
    text.append(f"{(judge.reason if judge else None) or '—'}\n")
    for stage in (detail.stages if detail else []):
        text.append(f"stage {stage.stage} ", style="bold")
        text.append(f"{stage.verdict}: {stage.reason or ''}\n")
    if detail and detail.label is not None:
        text.append("label ", style="bold")
        text.append(f"{detail.label.label}\n")
    text.append(f"\nfinal store: {len(side.store_texts)} items, {shared} also in the other run, "
                f"{len(only_here)} only here\n", style="bold")
    for item in only_here[:12]:
        text.append("+ ", style="green")
        text.append(f"{word_cut(step_numbered(item), ITEM_CHARS)}\n")
    if len(only_here) > 12:
        text.append(f"… {len(only_here) - 12} more only here\n", style="dim")
    text.append("\ndialogue of the task\n", style="bold")
    for role, content in side.dialogue:
        text.append(f"{role}: ", style="bold cyan" if role == "user" else "bold")
        text.append(f"{content}\n")
    return text


class CaseCompareScreen(ReplayScreen):
    """One case of two runs side by side."""

    HELP = """\
**One case, two runs.** Left the base run, right the other. Each column: the judge score, the
slot-fill (label and reason), the judge's reason, the attribution stages and label, the final store
diffed against the other run's by item text (`+` items only this run kept; the count of items both
kept), and the dialogue of the dimension's task. Esc goes back to the case list.
"""

    DEFAULT_CSS = """
    CaseCompareScreen Horizontal { height: 1fr; }
    CaseCompareScreen VerticalScroll { width: 1fr; border-right: solid $panel; }
    """

    def __init__(self, session: ReplaySession, other: ReplaySession, base_system: str, other_system: str, *,
                 user_id: str, dimension: str, mode: str, change: str) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.other = other
        self.base_system, self.other_system = base_system, other_system
        self.user_id, self.dimension, self.mode, self.change = user_id, dimension, mode, change

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        with Horizontal():
            with VerticalScroll(id="base-side"):
                yield Static("loading…", id="base")
            with VerticalScroll(id="other-side"):
                yield Static("", id="other")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.set_title(f"{CHANGE_MARKS.get(self.change, self.change)} · {self.user_id} · {self.dimension} · "
                       f"{MODE_NAMES.get(self.mode, self.mode)}")
        self._load()

    @work(thread=True, exclusive=True, group="case-compare", exit_on_error=False, name="case side by side")
    def _load(self) -> None:
        found = compare_case(self.session, self.base_system, self.other, self.other_system, user_id=self.user_id,
                             dimension=self.dimension, mode=self.mode)
        self.post_message(Loaded("case", found))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.what != "case":
            return
        found: CaseComparison = message.data
        self.query_one("#base", Static).update(side_text(found.base, self.mode, found.only_base, found.shared))
        self.query_one("#other", Static).update(side_text(found.other, self.mode, found.only_other, found.shared))
