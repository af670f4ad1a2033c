"""The steps a protocol-B store is walked by: an episode's ingested sessions and its probes (``S03
recovery``, ``P2``), and the labeller that names the step of any seq by them."""

from __future__ import annotations

from collections.abc import Callable

from memprobe_engine.paradigms.read.queries import episode_steps
from memprobe_engine.replay.session import ReplaySession
from memprobe_engine.replay.store_steps import Labelled, labeller

#: What a seq after the last step is.
AFTER_STEPS = "after the probes"


def store_steps(session: ReplaySession, unit: str, system: str, *, short: bool = True) -> Labelled:
    """The labelled sessions and probes of (episode, system), in recording order (``short`` is the same
    either way: session labels are already short)."""
    steps = episode_steps(session, unit, system)
    if steps is None:
        return []
    found = [(s.step, s.label) for s in steps.sessions] + [(p.step, f"P{p.probe_index + 1}") for p in steps.probes]
    return sorted(found, key=lambda pair: pair[0].first_line)


def step_labeller(session: ReplaySession, unit: str, system: str) -> Callable[[int], str]:
    """seq → the name of the step of (episode, system) that holds it."""
    return labeller(session, store_steps(session, unit, system), AFTER_STEPS)
