"""The steps a protocol-A store is walked by: each task's opening, turns and end (``T1 task``, ``T1.2``,
``T1 end``), and the labeller that names the step of any seq by them."""

from __future__ import annotations

from collections.abc import Callable

from memprobe_engine.replay.queries import episodes, step_short
from memprobe_engine.replay.session import ReplaySession
from memprobe_engine.replay.store_steps import Labelled, labeller

#: What a seq after the last step is (the store after the last turn, before slot-filling).
AFTER_STEPS = "after rollout"


def store_steps(session: ReplaySession, unit: str, system: str, *, short: bool = True) -> Labelled:
    """The labelled steps of (user, system), in recording order; ``short`` names a turn ``T1.2`` (a table
    column), else ``T1 turn 2`` (a title)."""
    return [(step, step_short(ep.task_index, step) if short else f"T{ep.task_index + 1} {step.label}")
            for ep in episodes(session, unit, system) for step in ep.steps]


def step_labeller(session: ReplaySession, unit: str, system: str) -> Callable[[int], str]:
    """seq → the name of the step of (user, system) that holds it."""
    return labeller(session, store_steps(session, unit, system), AFTER_STEPS)
