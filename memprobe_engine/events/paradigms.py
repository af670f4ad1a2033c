"""Protocol-B events: a session ingested by a memory system, a probe's answer and its score.

Span layout of a paradigm run: run → episode (``span_kind="episode"``, attrs ``episode_id`` and
``system``) → one ``session`` span per ingested session and one ``probe`` span per probe. The memory
ops and store patches a system makes while ingesting lie inside that session's span, so the store can
be time-travelled session by session.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from memprobe_engine.events.base import EventBase, SeqRef


class IngestedTurn(BaseModel):
    """One dialogue turn as the system received it. ``content_ref`` replaces ``content`` when a long
    turn was stored once in the payload file."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "tool_output"]
    content: str | None = None
    content_ref: str | None = None


class RetrievedItem(BaseModel):
    """A memory the reader saw for a probe, best first."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    score: float | None = None


class SessionIngest(EventBase):
    """A session of an episode after the system ingested it (``clock`` is the simulated time)."""

    kind: Literal["session_ingest"] = "session_ingest"
    episode_id: str
    session_idx: int
    phase: str
    session_type: str
    turns: list[IngestedTurn] = []
    clock: str | None = None


class ProbeAnswer(EventBase):
    """The reader's answer to one probe: structured JSON (``answer``) or free text (``answer_text``).

    ``error`` holds an execution error (unreachable endpoint, unparseable reply after repairs); such a
    probe is excluded from denominators and reported, never scored as wrong.
    """

    kind: Literal["probe_answer"] = "probe_answer"
    episode_id: str
    input_protocol: str
    probe_index: int
    probe_type: str
    question: str
    retrieved: list[RetrievedItem] = []
    answer: dict[str, Any] | None = None
    answer_text: str | None = None
    error: str | None = None
    llm_call_seq: SeqRef = None


class ProbeScore(EventBase):
    """The rule scorer's verdict on one probe answer, with sub-scores and the reason.

    ``rescore_of`` is the ``seq`` of the score this one re-does; readers use the latest score of each
    (system, episode, probe) and never rewrite the original.
    """

    kind: Literal["probe_score"] = "probe_score"
    episode_id: str
    probe_index: int
    probe_type: str
    score: float
    subscores: dict[str, float] = {}
    reason: str = ""
    excluded: bool = False
    exclusion_reason: str | None = None
    rescore_of: SeqRef = None
    scorer_version: str = ""
