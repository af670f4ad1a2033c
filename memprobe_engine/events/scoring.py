"""Recovery-scoring events: slot-fills, judge scores and failure-attribution stages."""

from __future__ import annotations

from typing import Literal

from memprobe_engine.events.base import EventBase, SeqRef

AccessMode = Literal["dump_all", "retrieve"]


class SlotFill(EventBase):
    """The slot-filler's reconstruction of one dimension under one access mode.

    ``overflow`` marks a store that did not fit the reader's context: the fill was not attempted on
    a truncated store, and the case is an auditability diagnostic, not a comparable score.
    """

    kind: Literal["slot_fill"] = "slot_fill"
    mode: AccessMode
    label: str | None = None
    reason: str | None = None
    call_seq: SeqRef = None
    excluded: str | None = None
    overflow: bool = False


class JudgeScore(EventBase):
    """A judge's score on the five-level rubric {0, .25, .5, .75, 1}.

    ``rescore_of`` points at the original score's ``seq`` when this is a re-run; readers show the
    latest next to the original and never rewrite the original.
    """

    kind: Literal["judge_score"] = "judge_score"
    mode: AccessMode
    score: float | None = None
    reason: str | None = None
    call_seq: SeqRef = None
    excluded: str | None = None
    rescore_of: SeqRef = None
    #: A judge that is no model call (``calibrated:NAME``); None when ``call_seq`` names the call.
    judge: str | None = None


class AttributionStage(EventBase):
    """One stage (0 task design, 1 disclosure, 2 elicitation vs strictness) and its verdict."""

    kind: Literal["attribution_stage"] = "attribution_stage"
    mode: AccessMode
    stage: Literal[0, 1, 2]
    verdict: str
    evidence: str | None = None
    reason: str | None = None
    cached: bool = False
    call_seq: SeqRef = None


class AttributionLabel(EventBase):
    """The final attribution label of one (user, dimension, mode)."""

    kind: Literal["attribution_label"] = "attribution_label"
    mode: AccessMode
    label: Literal[
        "ok", "task_design_failure", "memory_failure", "agent_elicitation_failure",
        "simulator_too_strict", "excluded",
    ]
    score: float | None = None
