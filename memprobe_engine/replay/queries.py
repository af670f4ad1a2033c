"""Queries a replay UI asks of a recording: units, a user's episodes and turns, a turn's events.

Everything here works from the run index (the span tree) plus lazy reads of the few lines a screen
shows, so answering costs the size of the answer, not of the recording. A turn's events are found
by its span: the lines between the turn's begin and end that belong to the turn span or a span
below it (other units' events may be interleaved there when units ran concurrently).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import orjson

from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.events.reader import DamagedEvent
from memprobe_engine.replay.index import SpanRec
from memprobe_engine.replay.session import ReplaySession

StepKind = str  # "opening" (task request before the first turn), "turn", "closing" (episode end)


@dataclass(frozen=True)
class UnitInfo:
    """One user × system cell of a run and how far it got."""

    user_id: str
    system: str
    status: str  # pending, running, ok, error, cancelled
    span_id: str | None
    attempts: int
    episodes_done: int


@dataclass(frozen=True)
class StepRef:
    """A stretch of one episode to show as a unit of stepping, with the lines it may occupy."""

    episode_span: str
    kind: StepKind
    task_index: int
    turn: int  # 0 for the opening, the turn number for turns, -1 for the closing
    first_line: int
    last_line: int  # inclusive
    owner: frozenset[str]  # span ids whose events belong to this step

    @property
    def label(self) -> str:
        return {"opening": "task", "closing": "end"}.get(self.kind, f"turn {self.turn}")


@dataclass(frozen=True)
class EpisodeInfo:
    """One task of a user's trajectory: its span attributes, how it ended, and its steps."""

    span_id: str
    task_index: int
    dimension: str
    category: str
    task_id: str
    status: str | None
    end_reason: str | None
    turns: int
    steps: list[StepRef] = field(default_factory=list)


def units(session: ReplaySession) -> list[UnitInfo]:
    """Every unit: planned ones from the header (users × systems) and any the recording holds."""
    with session.index.lock:
        return _units(session)


def _units(session: ReplaySession) -> list[UnitInfo]:
    index = session.index
    config = HeaderConfig.of(session.header)
    planned = [(u, s) for s in config.systems for u in config.users or []]
    seen = dict.fromkeys(planned)
    for key in index.units:
        seen.setdefault(key)
    out: list[UnitInfo] = []
    for user_id, system in sorted(seen, key=lambda k: (k[1], k[0])):
        span = index.unit_span(user_id, system)
        if span is None:
            out.append(UnitInfo(user_id, system, "pending", None, 0, 0))
            continue
        status = span.status or "running"
        rollout = index.find_child(span, "rollout")
        done = sum(1 for e in index.children(rollout, "episode") if e.status) if rollout else 0
        out.append(UnitInfo(user_id, system, status, span.span_id, len(index.units[(user_id, system)]), done))
    return out


def users(session: ReplaySession) -> list[str]:
    return sorted({u.user_id for u in units(session)})


def systems(session: ReplaySession) -> list[str]:
    return sorted({u.system for u in units(session)})


@dataclass
class _Derived:
    """What :func:`episodes` derived from one index generation (its ``scanned_lines``): the
    ``episode_end`` events by span id and each unit's episodes. Building them walks every
    episode_end of the run (about 11 ms at 1M events), and the memory view asks for a unit's steps
    two or three times per stepping key; a pass that absorbs new lines makes a new generation."""

    scanned_lines: int
    ends: dict[Any, dict[str, Any]]
    units: dict[tuple[str, str], list[EpisodeInfo]] = field(default_factory=dict)


_DERIVED: weakref.WeakKeyDictionary[ReplaySession, _Derived] = weakref.WeakKeyDictionary()


def episodes(session: ReplaySession, user_id: str, system: str) -> list[EpisodeInfo]:
    """The unit's episodes in task order, each with its opening, turns and closing steps."""
    with session.index.lock:
        derived = _DERIVED.get(session)
        if derived is None or derived.scanned_lines != session.index.scanned_lines:
            derived = _DERIVED[session] = _Derived(
                session.index.scanned_lines, {e.get("span_id"): e for e in session.index.events("episode_end")})
        found = derived.units.get((user_id, system))
        if found is None:
            found = derived.units[(user_id, system)] = _episodes(session, user_id, system, derived.ends)
        return list(found)


def _episodes(session: ReplaySession, user_id: str, system: str,
              ends: dict[Any, dict[str, Any]]) -> list[EpisodeInfo]:
    index = session.index
    unit = index.unit_span(user_id, system)
    rollout = index.find_child(unit, "rollout") if unit else None
    if rollout is None:
        return []
    out: list[EpisodeInfo] = []
    for span in index.children(rollout, "episode"):
        turns = index.children(span, "turn")
        # The live runner writes episode_end inside the last turn's span; an import writes it in the
        # episode's own span. Either way it is the episode's end.
        end = ends.get(span.span_id) or next((ends[t.span_id] for t in reversed(turns) if t.span_id in ends), None)
        out.append(EpisodeInfo(
            span_id=span.span_id, task_index=span.int_attr("task_index", len(out)),
            dimension=str(span.attrs.get("dimension") or span.dimension or "?"),
            category=str(span.attrs.get("category", "?")), task_id=str(span.attrs.get("task_id", "?")),
            status=span.status, end_reason=end.get("end_reason") if end else None,
            turns=int(end.get("turns", len(turns))) if end else len(turns),
            steps=_steps(session, span, turns, end)))
    return out


def _last_line(session: ReplaySession, span: SpanRec) -> int:
    return span.end_line if span.end_line is not None else max(span.line, session.index.scanned_lines - 1)


def _steps(session: ReplaySession, episode: SpanRec, turns: list[SpanRec],
           end_event: dict[str, Any] | None = None) -> list[StepRef]:
    """Opening, turns, closing. When episode_end sits inside the last turn (the live runner's shape),
    the closing step starts at that event and the last turn stops just before it."""
    index = session.index
    turn_ids = {t.span_id for t in turns}
    # The opening and closing hold the episode's own events and any non-turn spans below it.
    own = frozenset({episode.span_id}.union(*(index.descendants(c) for c in index.children(episode)
                                                if c.span_id not in turn_ids)))
    task_index = episode.int_attr("task_index", 0)
    end = _last_line(session, episode)
    first_turn = turns[0].line if turns else end + 1
    steps = [StepRef(episode.span_id, "opening", task_index, 0, episode.line, first_turn - 1, own)]
    end_line = session.line_of_seq(int(end_event["seq"])) if end_event and turns and \
        end_event.get("span_id") == turns[-1].span_id else None
    for turn in turns:
        last = _last_line(session, turn)
        if turn is turns[-1] and end_line is not None:
            last = end_line - 1
        steps.append(StepRef(episode.span_id, "turn", task_index, turn.int_attr("turn", len(steps)),
                             turn.line, last, frozenset(index.descendants(turn))))
    if end_line is not None:
        steps.append(StepRef(episode.span_id, "closing", task_index, -1, end_line, end,
                             own | {turns[-1].span_id}))
    elif turns and turns[-1].end_line is not None and turns[-1].end_line < end:
        steps.append(StepRef(episode.span_id, "closing", task_index, -1, turns[-1].end_line + 1, end, own))
    return steps


def step_events(session: ReplaySession, step: StepRef, *, skip_spans: bool = True) -> list[Any]:
    """The parsed events of one step in recording order (span begin/end markers left out)."""
    out: list[Any] = []
    for line in range(step.first_line, min(step.last_line, len(session) - 1) + 1):
        raw = session.raw(line)
        if skip_spans and (b'"kind":"span_begin"' in raw or b'"kind":"span_end"' in raw):
            continue
        try:
            span_id = orjson.loads(raw).get("span_id")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if span_id in step.owner:
            try:
                out.append(session.event(line))
            except DamagedEvent:
                continue
    return out


def step_seq_range(session: ReplaySession, step: StepRef) -> tuple[int, int]:
    """(first seq, last seq) a step covers; time travel puts the store at the last one."""
    first = _seq_at(session, step.first_line)
    last = _seq_at(session, min(step.last_line, len(session) - 1))
    return first, max(first, last)


def _seq_at(session: ReplaySession, line: int) -> int:
    raw = session.raw(line) if 0 <= line < len(session) else b""
    if raw.startswith(b'{"seq":'):
        try:
            return int(raw[7:raw.find(b",", 7)])
        except ValueError:
            pass
    return line


def memory_ops(events: list[Any]) -> list[Any]:
    """The store mutations among a step's events (what this turn did to the memory)."""
    return [e for e in events if e.kind in ("memory_op", "memory_snapshot")]


def retrievals(events: list[Any]) -> list[Any]:
    """The searches among a step's events (what the assistant was shown from memory)."""
    return [e for e in events if e.kind == "retrieval"]


def task_text(session: ReplaySession, episode: EpisodeInfo) -> str | None:
    """The user's opening request of an episode (the turn-0 user message)."""
    if not episode.steps:
        return None
    for event in step_events(session, episode.steps[0]):
        if event.kind == "message" and event.role == "user":
            return str(event.content)
    return None


def step_messages(session: ReplaySession, step: StepRef) -> list[tuple[str, str]]:
    """(role, text) of the step's messages: the dialogue a disclosure judge reads."""
    return [(e.role, e.content) for e in step_events(session, step) if e.kind == "message"]


def step_short(task_index: int, step: StepRef) -> str:
    """``T1 task``, ``T1.2`` (task 1, turn 2), ``T1 end``: the transcript's ``:`` syntax."""
    if step.kind == "turn":
        return f"T{task_index + 1}.{step.turn}"
    return f"T{task_index + 1} {step.label}"


def turn_short(task_index: int, turn: int) -> str:
    """A message's turn as the steps name it: ``T2.1`` (task 2, turn 1), ``T2 task`` for the opening
    (turn 0): the one numbering of the step list, the why chain and the evidence turns."""
    return f"T{task_index + 1}.{turn}" if turn else f"T{task_index + 1} task"


def find_step(eps: list[EpisodeInfo], seq_line: int) -> tuple[int, int] | None:
    """(episode position, step position) of the step whose line range holds ``seq_line``."""
    for e_pos, episode in enumerate(eps):
        for s_pos, step in enumerate(episode.steps):
            if step.first_line <= seq_line <= step.last_line:
                return e_pos, s_pos
    return None


def unit_dimensions(session: ReplaySession, user_id: str, system: str) -> list[str]:
    """The unit's dimensions in task order, then any only its recovery stage mentions."""
    found = [e.dimension for e in episodes(session, user_id, system)]
    with session.index.lock:
        unit = session.index.unit_span(user_id, system)
        recovery = session.index.find_child(unit, "recovery") if unit else None
        extra = [str(s.attrs.get("dimension") or s.dimension) for s in
                 (session.index.children(recovery, "dimension") if recovery else [])]
    return list(dict.fromkeys(found + extra))
