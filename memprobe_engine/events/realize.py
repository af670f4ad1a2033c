"""Realizer events: the rule check of each generated session, and recorded exclusions.

``realize_check`` follows every attempt at a session (``outcome`` accepted / retry / failed), with
the problems the rules found and the seq of the LLM call that wrote it; ``realize_exclusion``
records what was left out after the attempts ran out: a filler session (dropped; the episode keeps
its other sessions) or a whole episode (an encoding or perturbation session could not be realized).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memprobe_engine.events.base import EventBase, SeqRef


class RealizeCheck(EventBase):
    """The rules' verdict on one attempt at one session of an episode."""

    kind: Literal["realize_check"] = "realize_check"
    episode_id: str
    session_idx: int
    session_type: str
    attempt: int
    role: str
    call_seq: SeqRef = None
    problems: list[str] = Field(default_factory=list)
    outcome: Literal["accepted", "retry", "failed"]


class RealizeExclusion(EventBase):
    """Something the realizer could not produce within its attempts, and why."""

    kind: Literal["realize_exclusion"] = "realize_exclusion"
    episode_id: str
    scope: Literal["session", "episode"]
    session_idx: int | None = None
    session_type: str | None = None
    reason: str
