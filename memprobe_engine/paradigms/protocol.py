"""Protocol B's incremental memory protocol (the paper's Eq. 1) over the ordinary MemorySystem protocol.

Per episode: ``M0 ← Reset()``, then ``Mt ← Ingest(Mt−1, st)`` for every session in order, then each
probe is asked of ``MT``. Nothing here is specific to one system: every built-in system and any
plug-in is driven through ``reset`` / ``observe`` / ``finish`` exactly as protocol A drives it.

How a session becomes observations (so systems written for protocol A run unchanged):

- every turn is one :class:`Observation`, in dialogue order, with its role as ``kind`` — the session's
  first user turn is its ``task`` opening (systems that start a fresh context per task do so per
  session), later user turns are ``user``, replies ``assistant``, tool results ``tool_output``;
- ``task_index`` is the session's index and ``turn`` the turn's position within it;
- the simulated clock advances :data:`SESSION_GAP_DAYS` per session and :data:`TURN_MINUTES` per
  turn, so timestamps order sessions the way the episode does;
- the session's phase and type (``encoding``, ``perturbation``, ``filler_*``) are never shown to the
  system: they are the benchmark's labels, and a system that saw them would be told where the
  change is;
- with ``granularity="session"`` a session is instead ONE ``task`` observation holding its whole
  transcript (``User: …`` / ``Assistant: …`` / ``Tool output: …`` lines), as the upstream harness feeds
  A-MEM, Graphiti and Cognee; a writer that makes model calls per observation then makes them per
  session, which is what the quick run on a small CPU uses;
- a system's optional ``finish()`` hook runs at the end of every session, so a batch writer has
  written session ``t`` before session ``t+1`` arrives (``Ingest`` completes ``Mt``).

Each session is a ``session`` span; the ``memory_op`` events (with their JSON Patches) a system
emits while ingesting it lie inside that span, followed by one ``session_ingest`` event, so the
store can be rebuilt session by session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from memprobe_engine.events.paradigms import IngestedTurn, SessionIngest
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.memory.base import MemorySystem, Observation, SimClock
from memprobe_engine.paradigms.config import GRANULARITIES, Granularity
from memprobe_engine.paradigms.suite import Episode, Session

#: Simulated days between two sessions of an episode.
SESSION_GAP_DAYS = 1
#: Simulated minutes between two turns of a session.
TURN_MINUTES = 2
#: Turn text longer than this goes to the payload store (like the LLM client's messages).
INLINE_LIMIT = 200

ObservationKind = Literal["task", "user", "assistant", "tool_output"]
#: How a session is offered to a system: turn by turn (default) or as one transcript.
_SPEAKER = {"user": "User", "assistant": "Assistant", "tool_output": "Tool output"}


def observation_kind(role: str, *, first_user_turn: bool) -> ObservationKind:
    """The Observation kind of one dialogue turn (see the module docstring)."""
    if role == "user":
        return "task" if first_user_turn else "user"
    if role == "tool_output":
        return "tool_output"
    return "assistant"


def session_transcript(session: Session) -> str:
    """A session's dialogue as plain lines, one per turn, each with its speaker's role."""
    return "\n".join(f"{_SPEAKER.get(turn.role, turn.role)}: {turn.content}" for turn in session.dialogue)


def session_observations(session: Session, clock: SimClock,
                         granularity: Granularity = "turns") -> list[Observation]:
    """The observations of one session in dialogue order, advancing ``clock`` per turn."""
    if granularity == "session":
        clock.advance(minutes=TURN_MINUTES * len(session.dialogue))
        return [Observation(kind="task", text=session_transcript(session), task_index=session.session_idx, turn=0,
                            timestamp=clock.iso())]
    observations: list[Observation] = []
    seen_user = False
    for position, turn in enumerate(session.dialogue):
        clock.advance(minutes=TURN_MINUTES)
        kind = observation_kind(turn.role, first_user_turn=turn.role == "user" and not seen_user)
        seen_user = seen_user or turn.role == "user"
        observations.append(Observation(kind=kind, text=turn.content, task_index=session.session_idx,
                                        turn=position, timestamp=clock.iso()))
    return observations


def ordered_sessions(episode: Episode) -> list[Session]:
    """The episode's sessions in chronological order (by ``session_idx``; file order breaks ties)."""
    return sorted(episode.sessions, key=lambda session: session.session_idx)


def ingested_turns(recorder: Recorder, session: Session) -> list[IngestedTurn]:
    """The session's turns as recorded in ``session_ingest``; long content goes to the payload store."""
    turns: list[IngestedTurn] = []
    for turn in session.dialogue:
        ref = recorder.put_payload(turn.content) if len(turn.content) > INLINE_LIMIT else None
        turns.append(IngestedTurn(role=turn.role, content_ref=ref) if ref is not None
                     else IngestedTurn(role=turn.role, content=turn.content))
    return turns


async def ingest_session(system: MemorySystem, session: Session, *, episode_id: str, recorder: Recorder,
                         clock: SimClock, granularity: Granularity = "turns") -> None:
    """``Mt ← Ingest(Mt−1, st)``: one session, turn by turn, inside its own ``session`` span."""
    with recorder.span(f"session {session.session_idx}: {session.session_type}", "session",
                       episode_id=episode_id, session_idx=session.session_idx, phase=session.phase,
                       session_type=session.session_type):
        clock.advance(days=SESSION_GAP_DAYS)
        for observation in session_observations(session, clock, granularity):
            await system.observe(observation)
        finish = getattr(system, "finish", None)
        if finish is not None:
            await finish()
        recorder.emit(SessionIngest(episode_id=episode_id, session_idx=session.session_idx, phase=session.phase,
                                    session_type=session.session_type, turns=ingested_turns(recorder, session),
                                    clock=clock.iso()))


async def ingest_episode(system: MemorySystem, episode: Episode, *, recorder: Recorder, clock: SimClock,
                         sessions: Sequence[Session] | None = None, granularity: Granularity = "turns") -> None:
    """Eq. 1's first two lines: reset the store, then ingest every session in order."""
    await system.reset(episode.episode_id)
    for session in sessions if sessions is not None else ordered_sessions(episode):
        await ingest_session(system, session, episode_id=episode.episode_id, recorder=recorder, clock=clock,
                             granularity=granularity)


__all__ = ["GRANULARITIES", "SESSION_GAP_DAYS", "TURN_MINUTES", "Granularity", "ingest_episode", "ingest_session",
           "observation_kind", "ordered_sessions", "session_observations", "session_transcript"]
