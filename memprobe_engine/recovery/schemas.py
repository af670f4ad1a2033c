"""Structured outputs the recovery pipeline asks models for. Each puts its reasoning field before
its verdict: small models judge better when they must justify first (DESIGN.md, embedded model).

Every free-text field has a ``max_length``: it becomes ``maxLength`` in the JSON schema the server
enforces, which stops a small model from looping inside a string until its token budget runs out
and the JSON is cut off."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RubricScore = Literal[0, 0.25, 0.5, 0.75, 1]
RUBRIC_VALUES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
OK_THRESHOLD = 0.75


class SimulatorReply(BaseModel):
    """The simulated user's next message and whether the task is done."""

    feedback_type: Literal["followup", "clarify", "correction", "satisfied"]
    text: str = Field(min_length=1, max_length=400)
    is_done: bool


class PreferenceRating(BaseModel):
    dimension: str = Field(max_length=80)
    score: int | None = Field(default=None, ge=1, le=5, description="1-5, or null when not applicable")


class PreferenceVerdict(BaseModel):
    reason: str = Field(max_length=300)
    ratings: list[PreferenceRating]


class SlotFillAnswer(BaseModel):
    reason: str = Field(max_length=400)
    label: str = Field(min_length=1, max_length=120)


class JudgeVerdict(BaseModel):
    reason: str = Field(max_length=400)
    score: RubricScore


class TaskDesignVerdict(BaseModel):
    """Stage 0: could this task, on its own, plausibly invite evidence about the target?"""

    reason: str = Field(max_length=400)
    can_invite: bool


class DisclosureVerdict(BaseModel):
    """Stage 1: did the dialogue carry enough evidence to reconstruct the target?"""

    evidence: str = Field(max_length=300)
    reason: str = Field(max_length=400)
    disclosed: bool


class ElicitationVerdict(BaseModel):
    """Stage 2: did the assistant never approach the topic, or did the user not elaborate?"""

    reason: str = Field(max_length=400)
    label: Literal["agent_elicitation_failure", "simulator_too_strict"]
