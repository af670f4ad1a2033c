"""``memprobe judge check``: a candidate judge scored against a reference, case by case.

The candidate goes through the run's own judge path (:func:`~memprobe_engine.recovery.scoring.judge`),
rubric rules included ("unknown" scores 0; under the embedded framing a fill that names no trait
scores 0), so the figures describe the judge a run would use, not a bare model. Each case is judged
twice, the second time with no response cache, and the two passes' agreement is the judge's
self-consistency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.scoring import SlotFill
from memprobe_engine.recovery.calibration.agreement import Agreement, ScoredPair, agreement, level_index
from memprobe_engine.recovery.calibration.cases import JudgedCase
from memprobe_engine.recovery.framing import Framing
from memprobe_engine.recovery.inputs import BankEntry
from memprobe_engine.recovery.scoring import judge

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient


@dataclass
class CheckResult:
    """A candidate judge against the reference, and against itself."""

    cases: list[JudgedCase]
    first: list[float | None]
    second: list[float | None]
    vs_reference: Agreement
    #: Share of cases whose two passes gave the same level (None: one pass only).
    self_consistency: float | None


def entry_of(case: JudgedCase) -> BankEntry:
    """The hidden value as the run's judge receives it."""
    return BankEntry.model_validate({"dimension": case.dimension, "category": case.category, "short": case.truth,
                                     "explanation": case.explanation}, context={"relaxed": True})


async def judge_cases(cases: Sequence[JudgedCase], chat: ChatClient | None, *, judge_kind: str, framing: Framing,
                      max_tokens: int | None, progress: Callable[[int], None] | None = None) -> list[float | None]:
    """The candidate's score for each case (None: excluded), in order."""
    recorder = Recorder(None)
    scores: list[float | None] = []
    for index, case in enumerate(cases):
        fill = SlotFill(mode="retrieve" if case.mode == "retrieve" else "dump_all", label=case.predicted)
        verdict = await judge(chat, recorder, entry_of(case), fill, max_tokens=max_tokens,  # type: ignore[arg-type]
                              policy="audit", framing=framing, judge_kind=judge_kind)
        scores.append(verdict.score)
        if progress is not None:
            progress(index + 1)
    return scores


def compare(cases: Sequence[JudgedCase], first: Sequence[float | None],
            second: Sequence[float | None] | None) -> CheckResult:
    """Agreement with the reference (cases the candidate excluded are left out) and self-consistency."""
    pairs = [ScoredPair(c.system, c.reference, s) for c, s in zip(cases, first) if s is not None]
    consistency = None
    if second is not None:
        both = [(a, b) for a, b in zip(first, second) if a is not None and b is not None]
        consistency = sum(level_index(a) == level_index(b) for a, b in both) / len(both) if both else None
    return CheckResult(cases=list(cases), first=list(first), second=list(second or []),
                       vs_reference=agreement(pairs), self_consistency=consistency)


def run_check(cases: Sequence[JudgedCase], make_chat: Callable[[bool], ChatClient | None], *, judge_kind: str,
              framing: Framing, max_tokens: int | None, passes: int = 2,
              progress: Callable[[int, int], None] | None = None) -> CheckResult:
    """Judge ``cases`` ``passes`` times (1 or 2); ``make_chat(cached)`` builds the chat client for a
    pass (the second pass asks afresh, without the response cache)."""

    async def go() -> tuple[list[float | None], list[float | None] | None]:
        runs: list[list[float | None]] = []
        for index in range(passes):
            chat = make_chat(index == 0)
            try:
                runs.append(await judge_cases(
                    cases, chat, judge_kind=judge_kind, framing=framing, max_tokens=max_tokens,
                    progress=None if progress is None else lambda done, i=index: progress(i * len(cases) + done,
                                                                                          passes * len(cases))))
            finally:
                if chat is not None:
                    await chat.aclose()
        return runs[0], runs[1] if len(runs) > 1 else None

    first, second = asyncio.run(go())
    return compare(cases, first, second)
