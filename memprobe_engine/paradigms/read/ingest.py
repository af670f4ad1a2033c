"""One ingested session of a paradigm episode, and what it did to the memory store.

The session stepper shows, per session, the dialogue the system ingested (the ``session_ingest``
event: phase, session type, turns with their roles, the simulated clock) and the store change the
session caused: the store after the session's last event diffed against the store before its first,
rebuilt by the engine's store timeline (the same time travel the protocol-A memory view uses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memprobe_engine.errors import MemProbeError
from memprobe_engine.paradigms.read.queries import (
    EpisodeSteps,
    SessionStep,
    span_events,
)
from memprobe_engine.replay.memory_view import StoreView, store_view
from memprobe_engine.replay.queries import memory_ops, step_seq_range
from memprobe_engine.replay.session import ReplaySession


@dataclass(frozen=True)
class Turn:
    """A dialogue turn as ingested (long contents resolved from the payload file)."""

    role: str
    content: str


@dataclass(frozen=True)
class SessionDetail:
    """Everything the stepper shows about one session."""

    step: SessionStep
    clock: str | None
    turns: list[Turn]
    ingested: bool  # False while the session's ingest event is not recorded (a live or cut run)
    memory_ops: list[Any]
    llm_calls: list[int]  # seqs of the LLM calls the system made while ingesting (A-Mem notes, Mem0 facts)
    seqs: tuple[int, int]  # (seq before the session, last seq of the session): the memory view's range
    store: StoreView | None
    store_error: str | None = None


@dataclass(frozen=True)
class StoreGrowth:
    """The store size after one session and what that session added, updated and deleted."""

    size: int
    added: int
    updated: int
    deleted: int


def resolve_turns(session: ReplaySession, turns: list[Any]) -> list[Turn]:
    """Ingested turns with ``content_ref`` payloads looked up (a missing one is said, not hidden)."""
    out = []
    for turn in turns:
        content = turn.content
        if content is None and turn.content_ref:
            try:
                data = session.payload(turn.content_ref)
                content = data if isinstance(data, str) else str(data)
            except KeyError:
                content = f"[payload {turn.content_ref} is missing from payloads.jsonl]"
        out.append(Turn(str(turn.role), content or ""))
    return out


def store_unit(steps: EpisodeSteps) -> str:
    """The unit the episode's memory events carry (the episode id)."""
    return steps.store_unit or steps.episode_id


def session_detail(session: ReplaySession, steps: EpisodeSteps, position: int) -> SessionDetail:
    """Gather one session's detail (rebuilds two stores: run it in a worker)."""
    step = steps.sessions[position]
    events = span_events(session, step.step)
    ingest = next((e for e in events if e.kind == "session_ingest"), None)
    first, last = step_seq_range(session, step.step)
    store: StoreView | None = None
    problem: str | None = None
    try:
        store = store_view(session, store_unit(steps), steps.system, last, first - 1)
    except MemProbeError as err:  # a damaged memory event: say so in the pane, keep the dialogue
        problem = str(err)
    return SessionDetail(
        step=step, clock=ingest.clock if ingest is not None else None,
        turns=resolve_turns(session, ingest.turns) if ingest is not None else [],
        ingested=ingest is not None, memory_ops=memory_ops(events),
        llm_calls=[e.seq for e in events if e.kind == "llm_call"], seqs=(first - 1, last), store=store,
        store_error=problem)


def store_growth(session: ReplaySession, steps: EpisodeSteps) -> list[StoreGrowth]:
    """Per session, the store size after it and its diff against the store before it: the memory
    growing session by session (one rebuild per session boundary; run it in a worker)."""
    user = store_unit(steps)
    out = []
    previous: dict[str, Any] | None = None
    for step in steps.sessions:
        first, last = step_seq_range(session, step.step)
        before = previous if previous is not None else (
            session.store_at(user, steps.system, first - 1) if first > 0 else {})
        after = session.store_at(user, steps.system, last)
        diff = session.diff(before, after)
        out.append(StoreGrowth(len(after), len(diff.added), len(diff.updated), len(diff.deleted)))
        previous = after
    return out
