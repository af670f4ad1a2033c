"""Memory store at a step: the store of one system rebuilt at any point of the recording (time
travel through the engine's StoreTimeline), diffed against the step before — added, updated and
deleted items highlighted — with a category filter, search, and an item's fields, links and history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input, Static

from memprobe_engine.errors import MemProbeError
from memprobe_engine.replay import ReplaySession, StepRef, step_seq_range
from memprobe_engine.replay.memory_steps import MemoryStep, describe, next_op, next_turn, step_of
from memprobe_engine.replay.memory_view import StoreView, item_history, item_writes, matches, op_names, store_view
from memprobe_engine.replay.store_steps import Labelled, labeller
from memprobe_tui.protocols import read_spec
from memprobe_tui.messages import Loaded
from memprobe_tui.render import item_detail
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.fixed_region import clamp_lines, update_text
from memprobe_tui.widgets.store_table import StoreTable

#: Lines the info above the table may take (what is cut ends in ``…``; the help, ``?``, has it whole).
INFO_LINES = 4


class MemoryScreen(ReplayScreen):
    """``seqs`` = (before, after): show the store after seq ``after`` diffed against ``before``.
    None shows the final store against the one before its last operation."""

    DEFAULT_CSS = """
    MemoryScreen #info { height: auto; padding: 0 1; color: $text-muted; }
    MemoryScreen #search { display: none; height: 3; }
    MemoryScreen #search.shown { display: block; }
    MemoryScreen StoreTable { height: 1fr; }
    MemoryScreen DetailLog { height: 1fr; }
    """

    HELP = """\
**Memory store** of one system for one user, rebuilt at a step of the recording (time travel) and
compared with the store just before that step. A step is a **turn** (protocol B: a session or a
probe), read as `step T3.1 (all 2 ops, seq 73–78)`: all its memory ops against the store before it;
or one **op**, read as `op 2/2 of T3.1 (add, seq 78)`: against the store before that op. A turn
and one of its ops never read alike. Info line: the step, then
`+a ~u -d` items added, updated and deleted by it, the category filter, the search text. A turn
reads the same numbers however it was reached (`m`, `n`/`p`); an op too (`m` on a memory event, `[`/`]`).

| mark | meaning |
| --- | --- |
| + | added at this step |
| ~ | updated at this step: the detail shows old → new, removed words as `[-…-]`, added as `{+…+}` |
| - | deleted at this step (kept in the list, struck out) |
| (blank) | unchanged |

`n`/`p` move a turn, `[`/`]` one memory operation (from a turn, `[` is that turn's last op); `F` cycles the category (or collection) filter,
`v` shows only changed items, `/` filters by text in ids and fields. Tab moves to the detail pane
(the item's fields, links and the history of operations that touched it), which scrolls and goes
full screen with z. Esc returns to the transcript at the turn shown here.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "step_turn(1)", "Turn", key_display="n/p", id="memory.next_turn"),
        Binding("p", "step_turn(-1)", "Prev turn", show=False, id="memory.prev_turn"),
        Binding("right_square_bracket", "step_op(1)", "Op", key_display="[/]", id="memory.next_op"),
        Binding("left_square_bracket", "step_op(-1)", "Prev op", show=False, id="memory.prev_op"),
        Binding("F", "cycle_group", "Category", id="memory.filter"),  # f: a text filter elsewhere
        Binding("slash", "search", "Search", id="memory.search"),
        Binding("v", "changes_only", "Changes", id="memory.changes"),  # c: an LLM call elsewhere
        Binding("j", "cursor(1)", "Down", show=False, id="memory.down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="memory.up"),
    ]

    def __init__(self, session: ReplaySession, user_id: str, system: str, seqs: tuple[int, int] | None, *,
                 read: dict[str, str] | None = None, context: str | None = None) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.user_id, self.system, self.seqs = user_id, system, seqs
        self.seqs_opened = seqs  # the context line holds only at the point it names
        #: Item id → mark in the "read" column (the inspector's ``m``: rank in retrieve's top-k).
        self.read = read or {}
        self.context = context
        #: Item id → the steps that wrote it (``T1.2→T3.1``), since the store's last reset.
        self.written: dict[str, str] = {}
        self.label: Callable[[int], str] | None = None
        self._place_cursor = True
        self.view: StoreView | None = None
        self.op_seqs: list[int] | None = None
        #: The step shown (turn, op, point or span): every key that moves builds it the same way.
        self.step: MemoryStep | None = None
        self._op_names: dict[int, str] = {}
        #: The step a key asked for while its store is still rebuilding: the next key moves on from
        #: it (``p p p n n n`` comes back to where it began), and a slower, older rebuild is dropped.
        self._target: MemoryStep | None = None
        self.group: tuple[str, str] | None = None
        self.search = ""
        self.changes_only = False
        self.history: dict[str, list[Any]] = {}
        #: What the detail pane shows now (view, row key, history known, note): a stepping key
        #: highlights rows several times (the table refilled, the cursor placed), and each detail
        #: written costs a render of the pane.
        self._detail_shown: tuple[object, ...] | None = None
        self._ranges: tuple[int, list[tuple[int, int]], list[str], list[str]] | None = None
        #: The info line(s) above the table, whole (the screen shows at most INFO_LINES of them).
        self.info_text = ""

    def help_notes(self) -> list[str]:
        return [*super().help_notes(), self.info_text]

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="info")
        yield Input(placeholder="search item ids and fields (Enter keeps, Esc clears)", id="search")
        yield StoreTable(id="store")
        yield DetailLog(id="detail")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.set_title(f"{self.system} store · {self.user_id} · rebuilding…")
        self.query_one(StoreTable).focus()
        self.reload()

    def reload(self) -> None:
        super().reload()
        self._load(self.seqs)

    # -- loading -------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="store", exit_on_error=False, name="store rebuild")
    def _load(self, request: tuple[int, int] | MemoryStep | None) -> None:
        op_seqs = self.session.memory_seqs(self.user_id, self.system)
        step = request if isinstance(request, MemoryStep) else step_of(request, self._step_ranges(), op_seqs)
        seqs = step.seqs
        try:
            view = store_view(self.session, self.user_id, self.system, seqs[1], seqs[0])
        except MemProbeError as err:  # damage before this point: say so here, and let n/p move on
            self.post_message(Loaded("store_failed", (seqs, op_seqs, str(err), step)))
            raise  # the toast (base screen) names the file and the fix
        spec = read_spec(self.session)
        label = self.label or labeller(self.session, self._labelled(), spec.after_steps)
        writes = item_writes(self.session, self.user_id, self.system, seqs[1])
        written = {}
        for row in view.rows:
            steps = list(dict.fromkeys(label(seq) for seq in writes.of(row.item_id)))
            written[row.item_id] = (steps[0] + (f"→{steps[-1]}" if len(steps) > 1 else "")) if steps else ""
        # The cursor lands on the changed item: its history comes with the store, so the detail
        # pane is written once per step rather than again when a second worker brings it.
        changed = next((row.item_id for row in view.rows if row.mark != " "), None)
        history = {changed: item_history(self.session, self.user_id, self.system, changed, seqs[1])} \
            if changed is not None else {}
        names = op_names(self.session, self.user_id, self.system)
        self.post_message(Loaded("store", (seqs, op_seqs, view, written, label, history, step, names)))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False, name="item history")
    def _load_history(self, item_id: str, upto: int) -> None:
        self.post_message(Loaded("history", (item_id, item_history(self.session, self.user_id, self.system,
                                                                      item_id, upto))))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.what == "store":
            if self._target is not None and message.data[6] != self._target:
                return  # an older key's rebuild, overtaken by a newer one
            self._target = None
            self.seqs, self.op_seqs, self.view, self.written, self.label, history, self.step, self._op_names = \
                message.data
            self.history.clear()
            self.history.update(history)
            self._place_cursor = True
            self._redraw()
        elif message.what == "store_failed":
            if self._target is not None and message.data[3] != self._target:
                return
            self._target = None
            self.seqs, self.op_seqs, why, self.step = message.data
            self.view = None
            self.query_one(StoreTable).show([], None)
            self.set_title(f"{self.system} store · {self.user_id} · after seq {self.seqs[1]} · cannot be rebuilt")
            self.query_one("#info", Static).update(f"⚠ {why}")
            self._detail_shown = None
            self.query_one(DetailLog).show(["n/p step to another turn; an earlier point may still rebuild."])
        elif message.what == "history":
            item_id, events = message.data
            self.history[item_id] = events
            self._show_item()

    # -- drawing -------------------------------------------------------------------------------
    def _labelled(self, short: bool = True) -> Labelled:
        return read_spec(self.session).store_steps(self.session, self.user_id, self.system, short=short)

    def _steps(self) -> list[StepRef]:
        return [step for step, _ in self._labelled()]

    def _step_ranges(self) -> list[tuple[int, int]]:
        """(first seq, last seq) of every step, kept while the index learns no new line: reading two
        lines per step for all ~300 steps of a unit cost each n/p ~3 ms before its rebuild began."""
        return self._turns()[1]

    def _turns(self) -> tuple[int, list[tuple[int, int]], list[str], list[str]]:
        """(index generation, each turn's seq range, short label, long label)."""
        generation = self.session.index.scanned_lines
        cached = self._ranges
        if cached is None or cached[0] != generation:
            shorts = self._labelled()
            longs = [label for _, label in self._labelled(short=False)]
            cached = self._ranges = (generation, [step_seq_range(self.session, s) for s, _ in shorts],
                                     [label for _, label in shorts], longs)
        return cached

    def _step_names(self, step: MemoryStep) -> tuple[str, str]:
        """(title, info start) naming the step shown: a turn, an op of a turn, a point, a span."""
        _, _, shorts, longs = self._turns()
        inside = step.turn is not None and step.turn < len(longs)
        label = longs[step.turn] if inside and step.turn is not None else (
            self._where(step.after_seq) if step.after_seq >= 0 else None)
        short = shorts[step.turn] if inside and step.turn is not None else None
        return describe(step, label, short, self._op_names.get(step.after_seq))

    def _where(self, seq: int) -> str:
        if seq < 0 or self.session.line_of_seq(seq) is None:
            return "start"
        steps = self._labelled(short=False)
        return labeller(self.session, steps, read_spec(self.session).final_step if steps else "after the probes")(seq)

    def _empty_note(self) -> str:
        """Why a store with no memory operations is empty (not a failure to rebuild it)."""
        note = read_spec(self.session).empty_store_note(self.session.header, self.system)
        if note is not None:
            return note
        return f"{self.system} recorded no memory operation for {self.user_id}: it keeps no store (e.g. nomem)."

    def _redraw(self) -> None:
        view = self.view
        if view is None or self.seqs is None:
            return
        rows = [r for r in view.rows if matches(r, self.group, self.search) and (not self.changes_only or r.mark != " ")]
        field, _ = view.groups()
        table = self.query_one(StoreTable)
        table.show(rows, field, self.written, self.read)
        if self._place_cursor and rows:  # on the changed (or read) item, not on row 1
            self._place_cursor = False
            wanted = next((i for i, r in enumerate(rows) if r.mark != " "), None)
            if wanted is None and self.read:  # the item the slot-filler ranked first
                marked = [i for i, r in enumerate(rows) if r.item_id in self.read]
                wanted = min(marked, key=lambda i: (len(self.read[rows[i].item_id]), self.read[rows[i].item_id]),
                             default=None)
            table.move_cursor(row=wanted or 0)
        step = self.step or step_of(self.seqs, self._step_ranges(), self.op_seqs or [])
        where, against = self._step_names(step)
        self.set_title(f"{self.system} store · {self.user_id} · {where} · {view.size} items")
        counts = "" if step.kind == "point" else f" +{view.added} ~{view.updated} -{view.deleted}"
        group = f"{self.group[0]}={self.group[1]}" if self.group else (f"{field}=all" if field else "no groups")
        shown = f" · showing {len(rows)}" if len(rows) != len(view.rows) else ""
        note = f"\n⚠ {view.note}" if view.note else ("\n" + self._empty_note() if not self.op_seqs else "")
        context = f"{self.context}\n" if self.context and self.seqs_opened and self.seqs[1] == self.seqs_opened[1] else ""
        info = self.query_one("#info", Static)
        self.info_text = (f"{context}{against}{counts} · {group}{' · /' + self.search if self.search else ''}"
                          f"{' · changes only' if self.changes_only else ''}{shown}{note}")
        update_text(info, clamp_lines(info, self.info_text, INFO_LINES))  # whole in the help (?)
        self._show_item()

    def _show_item(self) -> None:
        key = self.query_one(StoreTable).selected_key()
        if self.view is None or key is None:
            empty = "(no item matches the search or filter)" if self.search or self.group or self.changes_only \
                else "(no items)"
            if not self._showing(empty):
                self._detail_shown = (self.view, empty)
                self.query_one(DetailLog).show([empty] if self.view else [])
            return
        deleted = key.startswith("-")
        item_id = key[1:] if deleted else key
        history = self.history.get(item_id)
        if self._showing(key, history is not None):
            return
        self._detail_shown = (self.view, key, history is not None)
        row = next((r for r in self.view.rows if r.item_id == item_id and (r.mark == "-") == deleted), None)
        self.query_one(DetailLog).show(item_detail(item_id, row.item if row else None, row.mark if row else " ", history,
                                                   row.before if row else None, self.label))
        if history is None:
            self._load_history(item_id, self.view.after_seq)

    def _showing(self, *what: object) -> bool:
        """Whether the detail pane already shows ``what`` of the current view (the view by identity:
        comparing two views by value would walk every item)."""
        shown = self._detail_shown
        return shown is not None and shown[0] is self.view and shown[1:] == what

    @on(DataTable.RowHighlighted)
    def _row(self, event: DataTable.RowHighlighted) -> None:
        self._show_item()

    # -- time travel ---------------------------------------------------------------------------
    def _current(self) -> MemoryStep | None:
        if self._target is not None:
            return self._target
        if self.step is not None:
            return self.step
        return step_of(self.seqs, self._step_ranges(), self.op_seqs or []) if self.seqs is not None else None

    def action_step_turn(self, delta: int) -> None:
        current = self._current()
        if current is None:
            return
        target = next_turn(current, delta, self._step_ranges(), self.op_seqs or [])
        if target is not None:
            self._target = target
            self._load(target)

    def action_step_op(self, delta: int) -> None:
        current = self._current()
        if not self.op_seqs or current is None:
            return
        target = next_op(current, delta, self._step_ranges(), self.op_seqs)
        if target is not None:
            self._target = target
            self._load(target)

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(StoreTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    # -- filters -------------------------------------------------------------------------------
    def action_cycle_group(self) -> None:
        if self.view is None:
            return
        field, values = self.view.groups()
        if field is None:
            self.notify("These items have no category or collection field to filter on.")
            return
        options: list[tuple[str, str] | None] = [None, *((field, v) for v in values)]
        self.group = options[(options.index(self.group) + 1) % len(options)] if self.group in options else None
        self._redraw()

    def action_changes_only(self) -> None:
        self.changes_only = not self.changes_only
        self._redraw()

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("shown")
        box.focus()

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.search = event.value.strip()
        self._redraw()

    @on(Input.Submitted, "#search")
    def _search_done(self, event: Input.Submitted) -> None:
        self.query_one(StoreTable).focus()

    def action_back(self) -> None:
        box = self.query_one("#search", Input)
        if box.has_class("shown"):  # Esc first closes the search box (clearing it), then leaves
            box.value = ""
            box.remove_class("shown")
            self.query_one(StoreTable).focus()
            return
        stack = self.app.screen_stack
        if self.seqs is not None and len(stack) > 1 and isinstance(stack[-2], ReplayScreen):
            stack[-2].returned_from_memory(self.user_id, self.system, self.seqs[1])  # carry the position back
        super().action_back()
