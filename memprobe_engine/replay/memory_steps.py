"""One diff model for the memory view: what a step of the store is, whichever key reached it.

A step is a **turn** (the store after the turn's last event against the store just before the turn:
all ops of that turn at once) or an **op** (the store after one memory op against the store just
before that op). Opening the view, ``n``/``p`` (turns) and ``[``/``]`` (ops) all build their step
here, so the same step shows the same numbers however it was reached, and the header says which kind
it is. Two more kinds are only ever opened, never stepped to: a **point** (the store at one seq,
compared with nothing: the dimension inspector's store at the slot-fill) and a **span** (two seqs a
caller chose that are neither a turn nor an op).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Literal

StepKind = Literal["turn", "op", "point", "span"]

#: A turn's (first seq, last seq), in recording order.
Ranges = list[tuple[int, int]]


@dataclass(frozen=True)
class MemoryStep:
    """The store after ``after_seq`` diffed against the store after ``before_seq``."""

    kind: StepKind
    before_seq: int
    after_seq: int
    #: The turn that holds ``after_seq`` (its index in the ranges), None outside every turn.
    turn: int | None = None
    #: An op step's position among its turn's ops (1-based) and their count; a turn step's op count.
    op_index: int = 0
    ops_in_turn: int = 0

    @property
    def seqs(self) -> tuple[int, int]:
        return self.before_seq, self.after_seq


def _turn_of(ranges: Ranges, seq: int) -> int | None:
    at = bisect.bisect_right([first for first, _ in ranges], seq) - 1
    return at if at >= 0 and ranges[at][0] <= seq <= ranges[at][1] else None


def _ops_of(ranges: Ranges, op_seqs: list[int], turn: int | None) -> list[int]:
    if turn is None:
        return []
    first, last = ranges[turn]
    return op_seqs[bisect.bisect_left(op_seqs, first):bisect.bisect_right(op_seqs, last)]


def turn_step(ranges: Ranges, op_seqs: list[int], turn: int) -> MemoryStep:
    """Turn ``turn``: every op of it against the store before it."""
    first, last = ranges[turn]
    return MemoryStep("turn", first - 1, last, turn, 0, len(_ops_of(ranges, op_seqs, turn)))


def op_step(ranges: Ranges, op_seqs: list[int], seq: int) -> MemoryStep:
    """The op at ``seq``, against the store just before it."""
    turn = _turn_of(ranges, seq)
    ops = _ops_of(ranges, op_seqs, turn)
    return MemoryStep("op", seq - 1, seq, turn, ops.index(seq) + 1 if seq in ops else 0, len(ops))


def step_of(seqs: tuple[int, int] | None, ranges: Ranges, op_seqs: list[int]) -> MemoryStep:
    """The step a caller asked for by seqs: None is the last step that changed the store (the turn
    of the store's last op, or that op when no turn holds it)."""
    if seqs is None:
        if not op_seqs:
            return MemoryStep("point", -1, -1)
        last = op_seqs[-1]
        turn = _turn_of(ranges, last)
        return turn_step(ranges, op_seqs, turn) if turn is not None else op_step(ranges, op_seqs, last)
    before, after = seqs
    if before == after:
        return MemoryStep("point", before, after, _turn_of(ranges, after))
    turn = _turn_of(ranges, after)
    if turn is not None and ranges[turn] == (before + 1, after):
        return turn_step(ranges, op_seqs, turn)
    if before == after - 1 and after in op_seqs:
        return op_step(ranges, op_seqs, after)
    return MemoryStep("span", before, after, turn)


def next_turn(step: MemoryStep, delta: int, ranges: Ranges, op_seqs: list[int]) -> MemoryStep | None:
    """The turn ``delta`` turns from ``step`` (from an op, or a point inside a turn, ``n`` and ``p``
    move from that turn; after the last turn, ``p`` goes back into the last one)."""
    current = _turn_of(ranges, step.after_seq)
    if current is None:
        before_all = not ranges or step.after_seq < ranges[0][0]
        current = -1 if before_all else len(ranges)
    target = current + delta
    return turn_step(ranges, op_seqs, target) if 0 <= target < len(ranges) else None


def next_op(step: MemoryStep, delta: int, ranges: Ranges, op_seqs: list[int]) -> MemoryStep | None:
    """The op ``delta`` (±1) ops from ``step``. A turn step, or a point, stands after its last op, so
    ``[`` from a turn lands on that turn's last op (the same store, its last change alone)."""
    after = step.after_seq
    if delta > 0:
        at = bisect.bisect_right(op_seqs, after)
        return op_step(ranges, op_seqs, op_seqs[at]) if at < len(op_seqs) else None
    at = bisect.bisect_left(op_seqs, after) if step.kind == "op" else bisect.bisect_right(op_seqs, after)
    return op_step(ranges, op_seqs, op_seqs[at - 1]) if at > 0 else None


def describe(step: MemoryStep, label: str | None, short: str | None, op_name: str | None) -> tuple[str, str]:
    """(where, against): the title's name of the step and the info line's start, before the counts.
    ``label``/``short`` name the turn that holds the step (``T3 turn 1`` / ``T3.1``), ``op_name`` the op."""
    if step.kind == "turn":
        ops = {0: "no op", 1: "1 op"}.get(step.ops_in_turn, f"all {step.ops_in_turn} ops")
        return (f"{label}", f"step {short} ({ops}, seq {step.before_seq + 1}–{step.after_seq}) vs before it:")
    if step.kind == "op":
        what = f"{op_name}, " if op_name else ""
        where = f" of {short}" if short and step.op_index else ""
        place = f" in {label}" if label else ""
        position = f"op {step.op_index}/{step.ops_in_turn}{where}" if step.op_index else "op"
        return (f"op seq {step.after_seq}{place}", f"{position} ({what}seq {step.after_seq}) vs before it:")
    if step.kind == "point":
        place = f" ({label})" if label else ""
        return (f"at seq {step.after_seq}{place}", f"the store at seq {step.after_seq}, not diffed")
    place = f" ({label})" if label else ""
    return (f"after seq {step.after_seq}{place}", f"vs seq {step.before_seq}:")
