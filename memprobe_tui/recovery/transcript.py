"""Transcript stepper: a user's tasks and turns for one system, stepped turn by turn and event by
event. Each turn lists the memory ops it caused and the retrievals the assistant saw.

Stepping is answered on the UI thread on purpose: a step reads one turn's few lines (a millisecond
or two), far below the cost of a worker round trip, so j/k stay instant on any recording size.

Three panes take focus in turn (Tab): the step list (↑/↓ move turns), the event list (↑/↓ move
events) and the detail (the reading keys of :class:`DetailLog`). ``/`` searches the whole
transcript; while a search is active n/N move between its hits (Esc ends it, then n steps turns).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical

from memprobe_engine.replay import (
    EpisodeInfo,
    ReplaySession,
    StepRef,
    episodes,
    find_step,
    memory_ops,
    retrievals,
    step_events,
    step_messages,
    step_seq_range,
    systems,
)
from memprobe_engine.replay.search import count_in_steps
from memprobe_tui.export import ExportDoc, transcript_doc
from memprobe_tui.recovery.step_list import StepList
from memprobe_tui.render import event_detail
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.event_list import EventList
from memprobe_tui.widgets.search_prompt import Matches, SearchPrompt
from memprobe_tui.recovery.navigation import open_dimension, switch_transcript

GOTO_HELP = "go to: 7 (turn 7 of this task) · T3 (task 3) · T3.2 (task 3, turn 2) · first · last"


class TranscriptScreen(ReplayScreen):
    """One unit's trajectory. ``at`` = (task index, turn) to start at (turn 0: the task opening)."""

    DEFAULT_CSS = """
    TranscriptScreen #right { width: 1fr; }
    TranscriptScreen EventList { height: 45%; }
    """

    HELP = """\
**Transcript** of one user × one memory system: the user's tasks (T1, T2, …), each opened by the
user's request (*task*), then the turns, then the closing (scoring of the task).

Left, the steps. The mark after a task number says how its episode ended:

| mark | meaning |
| --- | --- |
| ✓ | the simulated user was satisfied (ended the task) |
| ⌛ | the turn cap was reached first |
| ✗ | the episode ended with an error |
| ⊘ | excluded: the simulated user's replies were unusable (left out of A) |
| … | still running, or not ended in this recording |

Middle, the events of the step, one per line, tagged: `msg` a message, `llm` an LLM call, `emb` an
embedding batch, `mem` a memory operation, `snap` a store snapshot, `ret` a retrieval (the items
the assistant saw, with scores), `pref` the preference judgment, `end` the episode end, `ERR` an
error. Below, the highlighted event in full (Enter on an LLM call opens the call; on a memory
event, the store at that step).

Title: `T2/5` task of tasks, `turn 3/7` turn of turns, `mem N` memory operations this step,
`ret N` items retrieved this step, then the task's hidden dimension.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Search keys first: while a search is active they take n/N; otherwise n falls through.
        Binding("n", "search_step(1)", "Next match", show=False, id="transcript.next_match"),
        Binding("N", "search_step(-1)", "Prev match", show=False, id="transcript.prev_match"),
        Binding("slash", "search", "Search", key_display="/", id="transcript.search"),
        Binding("colon", "goto", "Go to", show=False, key_display=":", id="transcript.goto"),
        Binding("home,g", "goto_step('first')", "First step", show=False, id="transcript.first"),
        Binding("end,G", "goto_step('last')", "Last step", show=False, id="transcript.last"),
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
        self.matches = Matches()
        self._hits: list[tuple[int, int]] = []
        self._occurrences = 0

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
        self.query_one(EventList).focus()

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
        found = f" · {self.matches.label()}" if self.matches.active else ""
        if self.matches.active and self._hits:  # n/N move by event; say how many matches they hold
            found += f" · {self._occurrences} matches in {len(self._hits)} events"
        self.set_title(f"{self.user_id} × {self.system} · T{episode.task_index + 1}/{len(self.episodes)} · {where} · "
                       f"mem {len(ops)} · ret {seen} · {episode.dimension}{found}")

    def _show_event(self) -> None:
        detail = self.query_one(DetailLog)
        if not self.events:
            detail.show(["(no events in this step)"])
            return
        self.query_one(EventList).highlighted = self.event_pos
        detail.show(event_detail(self.events[self.event_pos]))
        if self.matches.active and (self.step_pos, self.event_pos) in self._hits:
            detail.search(self.matches.query)  # the hit highlighted in the detail too

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

    def action_edge_event(self, where: int) -> None:
        if self.events:
            self.event_pos = 0 if where == 0 else len(self.events) - 1
            self._show_event()

    def action_goto_step(self, where: str) -> None:
        if self.steps:
            self.goto_step(0 if where == "first" else len(self.steps) - 1, 0)

    # -- search and go-to ----------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "search_step":
            return self.matches.active
        return super().check_action(action, parameters)

    def action_search(self) -> None:
        self.app.push_screen(SearchPrompt("search this transcript: messages, responses, memory ops",
                                          self.matches.query), self.search)

    def search(self, query: str | None) -> None:
        """Find ``query`` in every step of the unit; go to the first hit at or after this step."""
        if not query:
            return
        counted = count_in_steps(self.session, [s for _, s in self.steps], query)
        self._hits = [(step, event) for step, event, _ in counted]
        self._occurrences = sum(n for _, _, n in counted)
        order = {hit: i for i, hit in enumerate(self._hits)}
        self.matches.set(query, list(range(len(self._hits))))
        here = next((order[h] for h in self._hits if h >= (self.step_pos, self.event_pos)), 0)
        self.matches.current = here if self._hits else -1
        self.refresh_bindings()
        self._goto_hit()

    def action_search_step(self, delta: int) -> None:
        self.matches.step(delta)
        self._goto_hit()

    def _goto_hit(self) -> None:
        if not self._hits:
            self._show_title()
            self.notify(f"“{self.matches.query}” is not in this transcript.", timeout=4)
            return
        step_pos, event_pos = self._hits[self.matches.current]
        if step_pos != self.step_pos:
            self.goto_step(step_pos, event_pos)
        else:
            self.event_pos = event_pos
            self._show_event()
            self._show_title()

    def action_back(self) -> None:
        if self.matches.active:  # Esc first ends a search (one binding per key: Back carries both)
            self.action_clear_search()
            return
        super().action_back()

    def action_clear_search(self) -> None:
        self.matches.clear()
        self._hits = []
        self.refresh_bindings()
        if self.steps:
            self._show_event()
            self._show_title()

    def action_goto(self) -> None:
        self.app.push_screen(SearchPrompt("turn number, T<task>, T<task>.<turn>, first or last", label=GOTO_HELP),
                             self.goto)

    def goto(self, target: str | None) -> None:
        """Go to a turn (of this task), a task, a task's turn, or the first/last step."""
        if not target or not self.steps:
            return
        text = target.strip().lower()
        if text in ("first", "last"):
            self.action_goto_step(text)
            return
        found = re.fullmatch(r"(?:t(\d+))?(?:[. ]?(\d+))?", text)
        if found is None or not any(found.groups()):
            self.notify(f"“{target}”: {GOTO_HELP}", severity="warning", timeout=6)
            return
        task = int(found.group(1)) - 1 if found.group(1) else self.episodes[self.steps[self.step_pos][0]].task_index
        turn = int(found.group(2)) if found.group(2) else 0
        pos = next((i for i, (e, s) in enumerate(self.steps)
                    if self.episodes[e].task_index == task and s.turn == turn), None)
        if pos is None:
            self.notify(f"T{task + 1} has no turn {turn} in this transcript.", severity="warning", timeout=6)
            return
        self.goto_step(pos, 0)

    def returned_from_memory(self, user_id: str, system: str, seq: int) -> None:
        """The memory screen was left at ``seq``: show the step it was at (time travel carries back)."""
        if (user_id, system) != (self.user_id, self.system):
            return
        line = self.session.line_of_seq(seq)
        hit = find_step(self.episodes, line) if line is not None else None
        if hit is None:
            return
        e_pos, s_pos = hit
        step = self.episodes[e_pos].steps[s_pos]
        pos = next((i for i, (_, s) in enumerate(self.steps) if s == step), None)
        if pos is not None and pos != self.step_pos:
            self.goto_step(pos, 0)

    # -- export --------------------------------------------------------------------------------
    def export_document(self) -> ExportDoc | None:
        """The focused detail when the detail pane has focus; otherwise the whole transcript."""
        if isinstance(self.focused, DetailLog):
            return super().export_document()
        turns: list[tuple[str, str, str]] = []
        for e_pos, step in self.steps:
            episode = self.episodes[e_pos]
            where = f"T{episode.task_index + 1} {step.label}"
            turns += [(where, role, text) for role, text in step_messages(self.session, step)]
        return transcript_doc(self.export_name(f"{self.user_id}-{self.system}-transcript"),
                              f"Transcript {self.user_id} × {self.system} ({self.session.header.run_id})", turns)

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
            open_dimension(self.app, self.session, self.user_id, self.system, episode.dimension)

    def action_switch_system(self) -> None:
        """The same task and turn under the next system (transcripts diverge across systems)."""
        names = systems(self.session)
        if len(names) < 2 or not self.steps:
            return
        e_pos, step = self.steps[self.step_pos]
        nxt = names[(names.index(self.system) + 1) % len(names)] if self.system in names else names[0]
        switch_transcript(self.app, self, nxt, (self.episodes[e_pos].task_index, step.turn))
