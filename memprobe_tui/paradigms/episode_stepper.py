"""Session stepper: one episode under one system, session by session — phase, session type, the
dialogue the system ingested, and the store change that session caused (the store after the session
diffed against the store before it: memory time travel per session) — then its probes.

The list on the left is the episode: sessions with the store size after each and its growth, then
the probes with their scores. Stepping loads a session in a worker (two store rebuilds through the
engine's store timeline) and the screen draws when its message arrives.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList, Static

from memprobe_engine.memory.timeline import Items
from memprobe_engine.paradigms.read.ingest import (
    SessionDetail,
    StoreGrowth,
    session_detail,
    store_growth,
    store_unit,
)
from memprobe_engine.paradigms.read.probe import ProbeDetail, probe_detail
from memprobe_engine.paradigms.read.queries import (
    EpisodeSteps,
    ScoreCell,
    episode_spans,
    episode_steps,
    paradigm_systems,
    score_cells,
    score_layers,
)
from memprobe_engine.replay import ReplaySession
from memprobe_engine.replay.memory_view import StoreRow
from memprobe_engine.replay.queries import step_seq_range
from memprobe_tui.messages import Loaded
from memprobe_tui.layers import cycle_layer, layer_title
from memprobe_tui.paradigms.probe_inspector import NO_LAYERS, ProbeScreen
from memprobe_tui.paradigms.render import (
    answer_lines,
    gold_lines,
    score_lines,
    session_lines,
    store_summary,
)
from memprobe_tui.paradigms.session_list import SessionList
from memprobe_tui.paradigms.store_diff_table import StoreDiffTable
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.detail_log import DetailLog


class EpisodeScreen(ReplayScreen):
    """``position`` counts the episode's sessions first, then its probes."""

    HELP = """\
One episode of a **paradigm run** under one memory system, in the order the system saw it.

The list holds the **sessions** (phase: encoding, filler, perturbation, post; the session type;
the store size after the session, and what the session added `+`, updated `~`, deleted `-`), then
the **probes** with their scores (`*`: re-scored). For a session the right side shows the dialogue
the system ingested and, below, the store after the session diffed against the store before it:
green rows were added, yellow updated, struck-out ones deleted. For a probe it shows the gold, the
reader's answer and the score; Enter opens the probe inspector.

`m` opens the store in the memory view (item fields, links, history), `c` the first LLM call the
system made in that session, `s` the same episode under the next system, `[`/`]` the episode
before/after. `L` shows the probes' scores and answers from the next score layer (the run's own,
`main`, then each named one: `memprobe reader-ablation`'s `reader:SPEC`, a scoring mode's
`scoring:corrected`); the stepper opens in the episode list's layer, and Enter passes it on.
"""

    DEFAULT_CSS = """
    EpisodeScreen #right { width: 1fr; }
    EpisodeScreen #dialogue { height: 1fr; border-top: none; }
    EpisodeScreen #store-summary { height: 1; padding: 0 1; background: $panel; text-wrap: nowrap;
                                  text-overflow: ellipsis; }
    EpisodeScreen StoreDiffTable { height: 40%; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "step(1)", "Next", key_display="n/p", id="episode.next"),
        Binding("p", "step(-1)", "Prev", show=False, id="episode.prev"),
        Binding("enter", "open", "Open", id="episode.open"),
        Binding("m", "memory", "Memory", id="episode.memory"),
        Binding("c", "call", "Call", id="episode.call"),
        Binding("s", "switch_system", "System", id="episode.system"),
        Binding("right_square_bracket", "episode(1)", "Episode", key_display="[/]", id="episode.next_episode"),
        Binding("left_square_bracket", "episode(-1)", "Prev episode", show=False, id="episode.prev_episode"),
        Binding("L", "layer", "Scores", show=False, id="episode.layer"),  # named layers: reader-ablation
    ]

    def __init__(self, session: ReplaySession, episode_id: str, system: str, position: int = 0,
                 judgment_layer: str | None = None) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        #: The score layer shown (None: the run's own, ``main``; ``L`` cycles the named ones).
        self.judgment_layer = judgment_layer
        self.named_layers: list[str] = []
        self.episode_id, self.system, self.position = episode_id, system, position
        self.steps: EpisodeSteps | None = None
        self.growth: list[StoreGrowth] | None = None
        self.cells: dict[int, ScoreCell] = {}
        self.detail: SessionDetail | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        with Horizontal():
            yield SessionList(id="sessions")
            with Vertical(id="right"):
                yield DetailLog(id="dialogue")
                yield Static("", id="store-summary")
                yield StoreDiffTable(id="store")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.set_title(f"{self.episode_id} × {self.system} · loading…")
        self.query_one(SessionList).focus()
        self.reload()

    def reload(self) -> None:
        super().reload()
        self._load_steps(self.episode_id, self.system)

    # -- loading -------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="steps", exit_on_error=False, name="episode sessions")
    def _load_steps(self, episode_id: str, system: str) -> None:
        steps = episode_steps(self.session, episode_id, system)
        self.named_layers = score_layers(self.session)
        cells = {k[2]: c for k, c in score_cells(self.session, self.judgment_layer).items()
                 if k[:2] == (system, episode_id)}
        self.post_message(Loaded("steps", (steps, cells)))
        if steps is not None:  # the per-session sizes need one rebuild per session: a second message
            self.post_message(Loaded("growth", (episode_id, system, store_growth(self.session, steps))))

    @work(thread=True, exclusive=True, group="item", exit_on_error=False, name="session detail")
    def _load_item(self, steps: EpisodeSteps, position: int) -> None:
        if position < len(steps.sessions):
            self.post_message(Loaded("session", (position, session_detail(self.session, steps, position))))
        else:
            probe = steps.probes[position - len(steps.sessions)]
            detail = probe_detail(self.session, steps.episode_id, steps.system, probe.probe_index, self.judgment_layer)
            first, _ = step_seq_range(self.session, probe.step)
            view = self.session.store_at(store_unit(steps), steps.system, first)
            self.post_message(Loaded("probe", (position, detail, view)))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.what == "steps":
            self.steps, self.cells = message.data
            if self.steps is None:
                self.set_title(f"{self.episode_id} × {self.system} · not in this recording")
                return
            self.growth = None
            self.query_one(SessionList).show(self.steps, None, self.cells)
            self.goto(min(self.position, max(0, self._count() - 1)))
        elif message.what == "growth":
            episode_id, system, growth = message.data
            if self.steps is not None and (episode_id, system) == (self.episode_id, self.system):
                self.growth = growth
                self.query_one(SessionList).show(self.steps, growth, self.cells)
                self._show_title()
        elif message.what == "session" and message.data[0] == self.position:
            self.detail = message.data[1]
            self._draw_session(self.detail)
        elif message.what == "probe" and message.data[0] == self.position:
            self.detail = None
            self._draw_probe(message.data[1], message.data[2])

    # -- drawing -------------------------------------------------------------------------------
    def _count(self) -> int:
        return len(self.steps.sessions) + len(self.steps.probes) if self.steps else 0

    def _show_title(self) -> None:
        steps = self.steps
        if steps is None or not self._count():
            self.set_title(f"{self.episode_id} × {self.system} · no sessions recorded yet")
            return
        if self.position < len(steps.sessions):
            s = steps.sessions[self.position]
            size = f" · store {self.growth[self.position].size} items" if self.growth and \
                self.position < len(self.growth) else ""
            where = f"S{s.session_idx:02d} ({self.position + 1}/{len(steps.sessions)}) · {s.phase} · {s.session_type}{size}"
        else:
            p = steps.probes[self.position - len(steps.sessions)]
            where = f"probe {p.probe_index + 1}/{len(steps.probes)} · {p.probe_type}"
        self.set_title(layer_title(self.named_layers, self.judgment_layer, f"{self.episode_id} × {self.system} · {where}",
                                   noun="scores"))

    def _draw_session(self, detail: SessionDetail) -> None:
        self.query_one("#dialogue", DetailLog).show(session_lines(detail))
        self.query_one("#store-summary", Static).update(store_summary(detail), layout=False)  # one row
        view = detail.store
        self.query_one(StoreDiffTable).show(view.rows if view else [], view.groups()[0] if view else None)

    def _draw_probe(self, detail: ProbeDetail, store: Items) -> None:
        note = [] if self.steps is None or self.steps.sessions else [Text(
            "No session was recorded for this episode (predictions only, e.g. an imported release): there is "
            "nothing to step, only its probes.", style="yellow")]
        self.query_one("#dialogue", DetailLog).show(
            [*note, *gold_lines(detail), *answer_lines(detail.answer), *score_lines(detail, None)])
        seen = {item.id for item in (detail.answer.retrieved if detail.answer is not None else [])}
        protocol = detail.answer.input_protocol if detail.answer is not None else "memory"
        summary = (f"searched store: {len(store)} items, {len(seen)} retrieved (+)" if protocol == "memory" else
                   f"{protocol}: no memory store") + " · Enter: probe inspector"
        self.query_one("#store-summary", Static).update(summary, layout=False)
        # The retrieved items are marked "+" and listed first: what the reader was shown of the store.
        rows = [StoreRow(i, "+" if i in seen else " ", item) for i, item in store.items()]
        rows.sort(key=lambda r: r.mark != "+")
        self.query_one(StoreDiffTable).show(rows, None)

    def goto(self, position: int) -> None:
        """Show item ``position`` (a session, or a probe after the sessions)."""
        if self.steps is None or not 0 <= position < self._count():
            return
        self.position = position
        self.query_one(SessionList).select(position)
        self._show_title()
        self._load_item(self.steps, position)

    @on(OptionList.OptionHighlighted, "#sessions")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        listed = self.query_one(SessionList)
        if event.option_index != listed.highlighted:
            return  # stale: a later key press moved the highlight again before this event arrived
        position = listed.position_of(event.option_index)
        if position is not None and position != self.position:
            self.goto(position)

    @on(OptionList.OptionSelected, "#sessions")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.action_open()  # Enter on the focused list

    def returned_from_memory(self, user_id: str, system: str, seq: int) -> None:
        """The memory view above was left at ``seq``: show the session that seq belongs to."""
        if self.steps is None or system != self.system or user_id != store_unit(self.steps):
            return
        for position, step in enumerate(self.steps.sessions):
            first, last = step_seq_range(self.session, step.step)
            if first <= seq <= last:
                self.goto(position)
                return

    # -- actions -------------------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        self.goto(self.position + delta)

    def _probe_index(self) -> int | None:
        if self.steps is None or self.position < len(self.steps.sessions):
            return None
        return self.steps.probes[self.position - len(self.steps.sessions)].probe_index

    def action_open(self) -> None:
        probe_index = self._probe_index()
        if probe_index is not None:
            self.app.push_screen(ProbeScreen(self.session, self.episode_id, self.system, probe_index,
                                             judgment_layer=self.judgment_layer))
        else:
            self.action_memory()

    def action_layer(self) -> None:
        """The next score layer (main, then each named one): the probes' scores and answers from it."""
        changed, self.judgment_layer = cycle_layer(self, self.named_layers, self.judgment_layer, NO_LAYERS)
        if changed:
            self.reload()

    def action_memory(self) -> None:
        if self.steps is None or not self._count():
            return
        if self.position < len(self.steps.sessions):
            first, last = step_seq_range(self.session, self.steps.sessions[self.position].step)
        else:
            first, last = step_seq_range(self.session, self.steps.probes[self.position - len(self.steps.sessions)].step)
            last = first  # the store the reader searched: as it was when the probe began
        self.nav.open_memory(self.session, store_unit(self.steps), self.system, (first - 1, last))

    def action_call(self) -> None:
        calls = self.detail.llm_calls if self.detail is not None else []
        if calls:
            self.nav.open_llm_call(self.session, calls[0])
        elif self._probe_index() is not None:
            self.action_open()  # the probe inspector holds the reader's call
        else:
            self.notify("This system made no LLM call while ingesting this session.")

    def action_switch_system(self) -> None:
        names = [s for s in paradigm_systems(self.session)
                 if any(e.attrs.get("episode_id") == self.episode_id for e in episode_spans(self.session)
                        if (e.attrs.get("system") or e.system) == s)]
        if len(names) > 1:
            self.system = names[(names.index(self.system) + 1) % len(names)] if self.system in names else names[0]
            self.reload()

    def action_episode(self, delta: int) -> None:
        ids = list(dict.fromkeys(str(e.attrs["episode_id"]) for e in episode_spans(self.session)
                                 if (e.attrs.get("system") or e.system) == self.system))
        if len(ids) > 1 and self.episode_id in ids:
            self.episode_id = ids[(ids.index(self.episode_id) + delta) % len(ids)]
            self.position = 0
            self.reload()
