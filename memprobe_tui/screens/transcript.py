"""Transcript stepper: a user's tasks and turns for one system, stepped turn by turn and event by
event. Each turn lists the memory ops it caused and the retrievals the assistant saw.

Stepping is answered on the UI thread on purpose: a step reads one turn's few lines (a millisecond
or two), far below the cost of a worker round trip, so j/k stay instant on any recording size.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical

from memprobe_engine.replay import (EpisodeInfo, ReplaySession, StepRef, episodes, memory_ops, retrievals, step_events,
                                    step_seq_range, systems)
from memprobe_tui.render import event_detail
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.event_list import EventList
from memprobe_tui.widgets.step_list import StepList


class TranscriptScreen(ReplayScreen):
    """One unit's trajectory. ``at`` = (task index, turn) to start at (turn 0: the task opening)."""

    DEFAULT_CSS = """
    TranscriptScreen #right { width: 1fr; }
    TranscriptScreen EventList { height: 45%; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "step_event(1)", "Event", key_display="j/k", id="transcript.next_event"),
        Binding("k,up", "step_event(-1)", "Prev event", show=False, id="transcript.prev_event"),
        Binding("n,right", "step_turn(1)", "Turn", key_display="n/p", id="transcript.next_turn"),
        Binding("p,left", "step_turn(-1)", "Prev turn", show=False, id="transcript.prev_turn"),
        Binding("right_square_bracket", "step_task(1)", "Next task", show=False, id="transcript.next_task"),
        Binding("left_square_bracket", "step_task(-1)", "Prev task", show=False, id="transcript.prev_task"),
        Binding("enter", "inspect", "Inspect", id="transcript.inspect"),
        Binding("m", "memory", "Memory", id="transcript.memory"),
        Binding("d", "dimension", "Dim", id="transcript.dimension"),
        Binding("s", "switch_system", "System", show=False, id="transcript.system"),
    ]

    def __init__(self, session: ReplaySession, user_id: str, system: str,
                 at: tuple[int, int] | None = None) -> None:
        super().__init__(session)
        self.session: ReplaySession = session
        self.user_id, self.system, self.at = user_id, system, at
        self.episodes: list[EpisodeInfo] = []
        self.steps: list[tuple[int, StepRef]] = []  # (episode position, step), flattened
        self.step_pos = 0
        self.events: list[Any] = []
        self.event_pos = 0

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        with Horizontal():
            yield StepList(id="steps")
            with Vertical(id="right"):
                yield EventList(id="events")
                yield DetailLog(id="detail")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        super().reload()
        current = self.steps[self.step_pos][1] if self.steps else None
        self.episodes = episodes(self.session, self.user_id, self.system)
        self.steps = [(e_pos, step) for e_pos, ep in enumerate(self.episodes) for step in ep.steps]
        self.query_one(StepList).show(self.episodes)
        if current is not None:  # keep the position when the followed recording grew
            self.step_pos = next((i for i, (_, s) in enumerate(self.steps)
                                  if (s.episode_span, s.turn) == (current.episode_span, current.turn)), self.step_pos)
        elif self.at is not None:
            self.step_pos = next((i for i, (e, s) in enumerate(self.steps)
                                  if self.episodes[e].task_index == self.at[0] and s.turn == self.at[1]), 0)
        self.goto_step(min(self.step_pos, max(0, len(self.steps) - 1)), self.event_pos if current else 0)

    # -- stepping ------------------------------------------------------------------------------
    def goto_step(self, step_pos: int, event_pos: int = 0) -> None:
        """Show step ``step_pos`` (its events read now) with event ``event_pos`` highlighted (-1: last)."""
        if not self.steps:
            self.set_title(f"{self.user_id} × {self.system} · no episodes recorded yet")
            self.query_one(EventList).show([])
            self.query_one(DetailLog).show([])
            return
        self.step_pos = step_pos
        self.events = step_events(self.session, self.steps[step_pos][1])
        self.event_pos = len(self.events) - 1 if event_pos < 0 else min(event_pos, max(0, len(self.events) - 1))
        self.query_one(StepList).select_step(step_pos)
        self.query_one(EventList).show(self.events, self.event_pos)
        self._show_title()
        self._show_event()

    def _show_title(self) -> None:
        e_pos, step = self.steps[self.step_pos]
        episode = self.episodes[e_pos]
        ops, hits = memory_ops(self.events), retrievals(self.events)
        seen = sum(len(r.item_ids) for r in hits)
        where = step.label if step.kind != "turn" else f"turn {step.turn}/{episode.turns}"
        self.set_title(f"{self.user_id} × {self.system} · T{episode.task_index + 1}/{len(self.episodes)} · {where} · "
                       f"mem {len(ops)} · ret {seen} · {episode.dimension}")

    def _show_event(self) -> None:
        detail = self.query_one(DetailLog)
        if not self.events:
            detail.show(["(no events in this step)"])
            return
        self.query_one(EventList).highlighted = self.event_pos
        detail.show(event_detail(self.events[self.event_pos]))

    def action_step_event(self, delta: int) -> None:
        target = self.event_pos + delta
        if 0 <= target < len(self.events):
            self.event_pos = target
            self._show_event()
        elif delta > 0 and self.step_pos + 1 < len(self.steps):
            self.goto_step(self.step_pos + 1, 0)
        elif delta < 0 and self.step_pos > 0:
            self.goto_step(self.step_pos - 1, -1)

    def action_step_turn(self, delta: int) -> None:
        target = self.step_pos + delta
        if 0 <= target < len(self.steps):
            self.goto_step(target, 0)

    def action_step_task(self, delta: int) -> None:
        if not self.steps:
            return
        e_pos = self.steps[self.step_pos][0] + delta
        first = next((i for i, (e, _) in enumerate(self.steps) if e == e_pos), None)
        if first is not None:
            self.goto_step(first, 0)

    # -- jumps ---------------------------------------------------------------------------------
    def current_seqs(self) -> tuple[int, int]:
        """(seq before this step, last seq of this step or of the highlighted memory event)."""
        first, last = step_seq_range(self.session, self.steps[self.step_pos][1])
        event = self.events[self.event_pos] if self.events else None
        if event is not None and event.kind in ("memory_op", "memory_snapshot"):
            return event.seq - 1, event.seq
        return first - 1, last

    def action_inspect(self) -> None:
        if not self.events:
            return
        event = self.events[self.event_pos]
        if event.kind == "llm_call":
            self.nav.open_llm_call(self.session, event.seq)
        elif event.kind in ("memory_op", "memory_snapshot", "retrieval"):
            self.action_memory()

    def action_memory(self) -> None:
        if self.steps:
            before, after = self.current_seqs()
            self.nav.open_memory(self.session, self.user_id, self.system, (before, after))

    def action_dimension(self) -> None:
        if self.steps:
            episode = self.episodes[self.steps[self.step_pos][0]]
            self.nav.open_dimension(self.session, self.user_id, self.system, episode.dimension)

    def action_switch_system(self) -> None:
        """The same task and turn under the next system (transcripts diverge across systems)."""
        names = systems(self.session)
        if len(names) < 2 or not self.steps:
            return
        e_pos, step = self.steps[self.step_pos]
        nxt = names[(names.index(self.system) + 1) % len(names)] if self.system in names else names[0]
        self.nav.switch_transcript(self, nxt, (self.episodes[e_pos].task_index, step.turn))
