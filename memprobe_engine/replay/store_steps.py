"""The steps a memory store is walked by, whatever the protocol: a protocol-A unit's task openings,
turns and ends (``T1 task``, ``T1.2``, ``T1 end``), a protocol-B episode's ingested sessions and
probes (``S03 recovery``, ``P2``). The memory view steps with ``n``/``p`` through them, names the
point it shows by them, and says which of them wrote each item."""

from __future__ import annotations

import bisect
from collections.abc import Callable

from memprobe_engine.replay.paradigm_queries import episode_steps, is_paradigm_recording
from memprobe_engine.replay.queries import StepRef, episodes, step_short
from memprobe_engine.replay.session import ReplaySession

Labelled = list[tuple[StepRef, str]]


def store_steps(session: ReplaySession, unit: str, system: str, *, short: bool = True) -> Labelled:
    """The labelled steps of the store of (unit, system), in recording order; ``short`` names a
    protocol-A turn ``T1.2`` (a table column), else ``T1 turn 2`` (a title)."""
    if is_paradigm_recording(session):
        steps = episode_steps(session, unit, system)
        if steps is None:
            return []
        found = [(s.step, s.label) for s in steps.sessions] + [(p.step, f"P{p.probe_index + 1}") for p in steps.probes]
        return sorted(found, key=lambda pair: pair[0].first_line)
    return [(step, step_short(ep.task_index, step) if short else f"T{ep.task_index + 1} {step.label}")
            for ep in episodes(session, unit, system) for step in ep.steps]


def labeller(session: ReplaySession, steps: Labelled, after: str = "after rollout") -> Callable[[int], str]:
    """seq → the label of the step that holds it; ``before …`` / ``after`` outside every step."""
    ranges = sorted((step.first_line, step.last_line, label) for step, label in steps)
    firsts = [r[0] for r in ranges]

    known: dict[int, str] = {}  # the memory view labels every item's writes on each step

    def label(seq: int) -> str:
        found = known.get(seq)
        if found is None:
            found = known[seq] = _label(seq)
        return found

    def _label(seq: int) -> str:
        line = session.line_of_seq(seq)
        if line is None or not ranges:
            return f"seq {seq}"
        at = bisect.bisect_right(firsts, line) - 1
        if at >= 0 and line <= ranges[at][1]:
            return ranges[at][2]
        return f"before {ranges[0][2]}" if at < 0 else after
    return label


def step_labeller(session: ReplaySession, unit: str, system: str) -> Callable[[int], str]:
    """:func:`labeller` over :func:`store_steps`."""
    after = "after the probes" if is_paradigm_recording(session) else "after rollout"
    return labeller(session, store_steps(session, unit, system), after)
