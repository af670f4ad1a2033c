"""Protocol-A events: episode outcomes, per-turn preference judgments, task-generation verdicts."""

from __future__ import annotations

from typing import Literal

from memprobe_engine.events.base import EventBase, SeqRef


class EpisodeEnd(EventBase):
    """How one task's episode ended; ``end_reason`` feeds metric A (task completion). An
    ``excluded`` episode (the simulator's replies were unusable; ``excluded`` says why) is left out
    of A rather than counted as a failure."""

    kind: Literal["episode_end"] = "episode_end"
    task_index: int
    end_reason: Literal["satisfied", "turn_cap", "error", "excluded"]
    turns: int
    excluded: str | None = None


class PreferenceJudgment(EventBase):
    """The preference judge's view of one assistant turn: 1–5 per assistance preference, or
    ``None`` where the preference does not apply (n/a). ``mean`` averages the applicable ones."""

    kind: Literal["preference_judgment"] = "preference_judgment"
    task_index: int
    turn: int
    scores: dict[str, float | None]
    mean: float | None = None
    call_seq: SeqRef = None
    excluded: str | None = None


class TaskVerdict(EventBase):
    """The blind anti-fishing critic's verdict on a generated task, and the editor's revision."""

    kind: Literal["task_verdict"] = "task_verdict"
    attempt: int
    task: str
    verdict: Literal["neutral", "fishing"]
    reason: str | None = None
    revised_task: str | None = None
