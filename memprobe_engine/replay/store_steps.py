"""The steps a memory store is walked by, and naming a seq by them, whatever the protocol.

Each protocol says what its steps are (protocol A: a unit's task openings, turns and ends, ``T1 task``,
``T1.2``, ``T1 end``; protocol B: an episode's ingested sessions and probes, ``S03 recovery``, ``P2``)
through its spec's ``store_steps``. The memory view steps with ``n``/``p`` through them, names the
point it shows by them, and says which of them wrote each item."""

from __future__ import annotations

import bisect
from collections.abc import Callable

from memprobe_engine.replay.queries import StepRef
from memprobe_engine.replay.session import ReplaySession

Labelled = list[tuple[StepRef, str]]


def labeller(session: ReplaySession, steps: Labelled, after: str) -> Callable[[int], str]:
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
