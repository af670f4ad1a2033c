"""``memprobe judge check``: a candidate judge scored against a reference, case by case.

The candidate goes through the run's own judge path (:func:`~memprobe_engine.recovery.scoring.judge`),
rubric rules included ("unknown" scores 0; under the embedded framing a fill that names no trait
scores 0), so the figures describe the judge a run would use, not a bare model. Each case is judged
twice, the second time with no response cache, and the two passes' agreement is the judge's
self-consistency.

The fill stage measures the slot-filler the same way: it reads what the release's slot-filler read
(the retrieved top-k, or the run's whole store), and its fill is judged beside the release's fill by
the same judge.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.scoring import SlotFill
from memprobe_engine.recovery.calibration.agreement import Agreement, ScoredPair, agreement
from memprobe_engine.report.compare_stats import level_index
from memprobe_engine.recovery.calibration.cases import JudgedCase
from memprobe_engine.recovery.framing import Framing
from memprobe_engine.recovery.inputs import BankEntry
from memprobe_engine.recovery.config import Mode
from memprobe_engine.recovery.scoring import judge, slot_fill

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
            offset = index * len(cases)

            def step(done: int, offset: int = offset) -> None:
                if progress is not None:
                    progress(offset + done, passes * len(cases))
            try:
                runs.append(await judge_cases(cases, chat, judge_kind=judge_kind, framing=framing,
                                              max_tokens=max_tokens, progress=step))
            finally:
                if chat is not None:
                    await chat.aclose()
        return runs[0], runs[1] if len(runs) > 1 else None

    first, second = asyncio.run(go())
    return compare(cases, first, second)


@dataclass(frozen=True)
class FillOutcome:
    """A candidate slot-fill on the release's own reading material, beside the release's fill."""

    case: JudgedCase
    fill: str | None
    #: The candidate's fill and the release's fill, both scored by the same judge.
    fill_score: float | None
    release_fill_score: float | None
    excluded: str | None = None


async def fill_cases(cases: Sequence[JudgedCase], chat: ChatClient, *, judge_kind: str, framing: Framing,
                     max_tokens: int | None, context_tokens: int,
                     progress: Callable[[int], None] | None = None) -> list[FillOutcome]:
    """Fill each case from what the release's slot-filler read (its top-k, or the run's store), then
    judge that fill and the release's fill with ``judge_kind``."""
    recorder = Recorder(None)
    outcomes: list[FillOutcome] = []
    for index, case in enumerate(cases):
        mode: Mode = "retrieve" if case.mode == "retrieve" else "dump_all"
        entry = entry_of(case)
        if case.memory is None:
            outcomes.append(FillOutcome(case, None, None, None, excluded="no reading material in the release"))
            continue
        fill = await slot_fill(chat, recorder, entry, None, list(case.memory), mode, context_tokens=context_tokens,
                               max_tokens=max_tokens, policy="audit", framing=framing)
        scored = await judge(chat, recorder, entry, fill, max_tokens=max_tokens, policy="audit", framing=framing,
                             judge_kind=judge_kind)
        release = await judge(chat, recorder, entry, SlotFill(mode=mode, label=case.predicted), max_tokens=max_tokens,
                              policy="audit", framing=framing, judge_kind=judge_kind)
        outcomes.append(FillOutcome(case, fill.label, scored.score, release.score,
                                    excluded=fill.excluded or scored.excluded))
        if progress is not None:
            progress(index + 1)
    return outcomes


def render_fills(outcomes: Sequence[FillOutcome], *, width: int = 60) -> str:
    """A summary line, then each case: the reference score, the release's fill and the candidate's."""
    usable = [o for o in outcomes if o.excluded is None and o.fill_score is not None]
    lines = [f"  cases {len(outcomes)}, filled {len(usable)}"]
    if usable:
        good = sum(o.fill_score is not None and o.fill_score >= 0.75 for o in usable)
        mean = sum(o.fill_score or 0.0 for o in usable) / len(usable)
        paper = sum(o.release_fill_score or 0.0 for o in usable) / len(usable)
        reference = sum(o.case.reference for o in usable) / len(usable)
        lines.append(f"  candidate fill scored >= 0.75 in {good} of {len(usable)}; mean score: candidate {mean:.3f}, "
                     f"release's fill {paper:.3f} (same judge), release's fill by the reference {reference:.3f}")
    for o in outcomes:
        head = f"  {o.case.user_id} {o.case.system} {o.case.mode} {o.case.dimension} (truth: {o.case.truth})"
        lines.append(head)
        lines.append(f"      release {o.case.reference:g} / {_fmt(o.release_fill_score)}: {o.case.predicted[:width]}")
        lines.append(f"      ours    {_fmt(o.fill_score)}: {(o.fill or o.excluded or '')[:width]}")
    return "\n".join(lines)


def _fmt(score: float | None) -> str:
    return "-" if score is None else f"{score:g}"
