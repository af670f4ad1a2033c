"""Structured outputs the recovery pipeline asks models for. Each puts its reasoning field before
its verdict: small models judge better when they must justify first (DESIGN.md, embedded model).

Every free-text field has a ``max_length``: it becomes ``maxLength`` in the JSON schema the server
enforces, which stops a small model from looping inside a string until its token budget runs out
and the JSON is cut off."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from memprobe_engine.recovery.simulator_voice import out_of_role_reason

# mypy admits no float in Literal; pydantic validates these exact values at run time.
RubricScore = Literal[0, 0.25, 0.5, 0.75, 1]  # type: ignore[valid-type]
RUBRIC_VALUES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
OK_THRESHOLD = 0.75


FeedbackType = Literal["correction", "add_context", "too_deep", "too_shallow", "followup", "expose_gap",
                       "satisfied"]


class SimulatorReply(BaseModel):
    """The simulated user's next message and its reaction label (the release's seven types). The
    task is done exactly when the label is ``satisfied``; there is no separate done flag. The text
    cap only stops a runaway string: the release puts no limit on a user turn."""

    feedback_type: FeedbackType
    text: str = Field(min_length=1, max_length=6000)

    @property
    def is_done(self) -> bool:
        return self.feedback_type == "satisfied"


class InRoleSimulatorReply(SimulatorReply):
    """A simulator reply under the embedded framing: one that speaks as the assistant is invalid, so
    the client's repair round asks again with the reason, and a reply still out of role is an
    unusable simulator reply with that reason recorded."""

    @field_validator("text")
    @classmethod
    def _in_role(cls, text: str) -> str:
        reason = out_of_role_reason(text)
        if reason is not None:
            raise ValueError(reason)
        return text


class PreferenceRating(BaseModel):
    dimension: str = Field(max_length=80)
    reason: str = Field(default="", max_length=300)
    score: int | None = Field(default=None, ge=1, le=5, description="1-5, or null when not applicable")


class PreferenceVerdict(BaseModel):
    reason: str = Field(max_length=300)
    ratings: list[PreferenceRating]


class SlotFillAnswer(BaseModel):
    reason: str = Field(max_length=400)
    label: str = Field(min_length=1, max_length=160)


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
    evidence: str = Field(default="", max_length=300)
    label: Literal["agent_elicitation_failure", "simulator_too_strict"]
