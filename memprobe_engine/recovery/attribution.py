"""Failure attribution (the recovery paper's Table 10) for one (user, dimension, mode).

score >= 0.75 → ok. Otherwise: stage 0, a task-design oracle from the task and the target alone
(cached per (user, dimension), shared by every system and mode); stage 1, a disclosure judge over
the dimension's episode transcript (memory_failure when disclosed); stage 2, agent elicitation
versus simulator strictness. Each stage is its own span with verdict, evidence and reason.

An unparseable stage output follows the exclusion policy (:mod:`.policy`): under ``paper`` the
release's defaults (stage 0 can invite, stage 1 not disclosed, stage 2 unclassified, which we label
``excluded``); under ``audit`` the case is ``excluded`` at that stage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.scoring import AttributionLabel, AttributionStage
from memprobe_engine.llm.types import SamplingParams
from memprobe_engine.recovery import prompts, prompts_embedded
from memprobe_engine.recovery.framing import DEFAULT_FRAMING, Framing
from memprobe_engine.recovery.inputs import BankEntry
from memprobe_engine.recovery.policy import DEFAULT_POLICY, ExclusionPolicy
from memprobe_engine.recovery.prompts import Turn
from memprobe_engine.recovery.schemas import OK_THRESHOLD, DisclosureVerdict, ElicitationVerdict, TaskDesignVerdict
from memprobe_engine.recovery.config import Mode
from memprobe_engine.recovery.scoring import TextSink, ask

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.orchestration.protocol import SharedValues

V = TypeVar("V", DisclosureVerdict, ElicitationVerdict)


@dataclass(frozen=True)
class Stage0Verdict:
    can_invite: bool
    reason: str


class Stage0Cache:
    """Stage-0 verdicts keyed by (user, dimension); the run seeds it from earlier recorded stages.

    ``lock`` serialises the first ask per key, so concurrent systems and modes wait for one oracle
    call instead of each making their own. Where units run in other processes (a Ray run),
    ``shared`` carries the verdicts between them: :meth:`pull` takes the verdict another unit holds or
    waits while it asks, so the oracle is asked once per (user, dimension) in the whole run there too."""

    def __init__(self) -> None:
        self._verdicts: dict[tuple[str, str], Stage0Verdict] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._owned: set[tuple[str, str]] = set()
        self.shared: SharedValues | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Shipped to other processes (Ray tasks) with the run: the verdicts, never the locks or the link.
        return {"_verdicts": dict(self._verdicts)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._verdicts, self._locks, self._owned, self.shared = dict(state["_verdicts"]), {}, set(), None

    def get(self, user_id: str, dimension: str) -> Stage0Verdict | None:
        return self._verdicts.get((user_id, dimension))

    def put(self, user_id: str, dimension: str, verdict: Stage0Verdict) -> None:
        key = (user_id, dimension)
        self._verdicts.setdefault(key, verdict)
        if key in self._owned and self.shared is not None:
            self._owned.discard(key)
            self.shared.put(_shared_key(key), {"can_invite": verdict.can_invite, "reason": verdict.reason})

    def lock(self, user_id: str, dimension: str) -> asyncio.Lock:
        return self._locks.setdefault((user_id, dimension), asyncio.Lock())

    async def pull(self, user_id: str, dimension: str) -> None:
        """With ``shared``: take the verdict another unit holds (waiting while it asks), or become the
        one that asks (then :meth:`put` hands the verdict on, :meth:`settle` gives it up)."""
        key = (user_id, dimension)
        if self.shared is None or key in self._verdicts or key in self._owned:
            return
        held = await self.shared.acquire(_shared_key(key))
        if isinstance(held, dict):
            self._verdicts.setdefault(key, Stage0Verdict(can_invite=bool(held["can_invite"]), reason=str(held["reason"])))
        else:
            self._owned.add(key)

    def settle(self, user_id: str, dimension: str) -> None:
        """After asking: a key this unit took on but found no verdict for goes back to the others."""
        key = (user_id, dimension)
        if key in self._owned and self.shared is not None:
            self._owned.discard(key)
            self.shared.release(_shared_key(key))


def _shared_key(key: tuple[str, str]) -> str:
    return f"value:stage0/{key[0]}/{key[1]}"


async def attribute(chat: ChatClient, recorder: Recorder, *, user_id: str, entry: BankEntry, task_text: str,
                    history: Sequence[Turn], score: float | None, mode: Mode, stage0: Stage0Cache,
                    max_tokens: int | None = 250, on_text: TextSink | None = None,
                    policy: ExclusionPolicy = DEFAULT_POLICY, framing: Framing = DEFAULT_FRAMING) -> str:
    """Run the stages needed for this case and record the final label."""
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    if score is None:
        label = "excluded"
    elif score >= OK_THRESHOLD:
        label = "ok"
    else:
        label = await _stages(chat, recorder, user_id, entry, task_text, history, mode, stage0, params, on_text,
                              policy, framing)
    recorder.emit(AttributionLabel(mode=mode, label=label, score=score))
    return label


async def _stages(chat: ChatClient, recorder: Recorder, user_id: str, entry: BankEntry, task_text: str,
                  history: Sequence[Turn], mode: Mode, stage0: Stage0Cache, params: SamplingParams,
                  on_text: TextSink | None, policy: ExclusionPolicy, framing: Framing) -> str:
    built = prompts_embedded if framing == "embedded" else prompts
    with recorder.span("stage 0: task design", "stage", stage=0, mode=mode):
        async with stage0.lock(user_id, entry.dimension):
            await stage0.pull(user_id, entry.dimension)
            try:
                verdict0 = await _stage0(chat, recorder, user_id, entry, task_text, mode, stage0, params, on_text,
                                         policy, built.task_design_messages(task_text, entry))
            finally:
                stage0.settle(user_id, entry.dimension)
    if verdict0 is None:
        return "excluded"
    if not verdict0.can_invite:
        return "task_design_failure"

    disclosure = await _judged_stage(
        chat, recorder, 1, "stage 1: disclosure", built.disclosure_messages(task_text, history, entry),
        prompts_embedded.quoted_disclosure(history) if framing == "embedded" else DisclosureVerdict, lambda v: ("disclosed" if v.disclosed else "not_disclosed", v.evidence), mode, params,
        on_text, policy, DisclosureVerdict(evidence="", reason="", disclosed=False))
    if disclosure is None:
        return "excluded"
    if disclosure.disclosed:
        return "memory_failure"
    elicitation = await _judged_stage(
        chat, recorder, 2, "stage 2: elicitation vs strictness",
        built.elicitation_messages(task_text, history, entry), ElicitationVerdict,
        lambda v: (v.label, v.evidence or None), mode, params, on_text, policy, None)
    return "excluded" if elicitation is None else elicitation.label


async def _judged_stage(chat: ChatClient, recorder: Recorder, stage: Literal[1, 2], name: str, messages: list[Any],
                        schema: type[V], verdict_of: Callable[[V], tuple[str, str | None]], mode: Mode,
                        params: SamplingParams, on_text: TextSink | None, policy: ExclusionPolicy,
                        paper_default: V | None) -> V | None:
    """One judged stage in its own span: ask, record the verdict (and evidence). When the judge's
    output stayed unusable: under ``paper`` the release's default verdict (``paper_default``; None
    means the release left the case unclassified), under ``audit`` excluded (None)."""
    with recorder.span(name, "stage", stage=stage, mode=mode):
        out = await ask(chat, "attribution_judge", messages, params=params, schema=schema,
                        stage=f"stage {stage}", on_text=on_text)
        if out.parsed is None:
            if policy == "paper" and paper_default is not None:
                verdict, evidence = verdict_of(paper_default)
                recorder.emit(AttributionStage(mode=mode, stage=stage, verdict=verdict, evidence=evidence,
                                               reason=f"unparseable ({out.excluded}); paper policy: the release's "
                                                      f"default", call_seq=out.call_seq))
                return paper_default
            why = "unclassified, as in the release" if policy == "paper" else "excluded"
            recorder.emit(AttributionStage(mode=mode, stage=stage, verdict="excluded",
                                           reason=f"{out.excluded} ({policy} policy: {why})", call_seq=out.call_seq))
            return None
        verdict, evidence = verdict_of(out.parsed)
        recorder.emit(AttributionStage(mode=mode, stage=stage, verdict=verdict, evidence=evidence,
                                       reason=out.parsed.reason, call_seq=out.call_seq))
        return out.parsed  # type: ignore[no-any-return]


async def _stage0(chat: ChatClient, recorder: Recorder, user_id: str, entry: BankEntry, task_text: str, mode: Mode,
                  stage0: Stage0Cache, params: SamplingParams, on_text: TextSink | None,
                  policy: ExclusionPolicy, messages: list[Any]) -> Stage0Verdict | None:
    """The task-design oracle, asked once per (user, dimension); None when its output was unusable."""
    cached = stage0.get(user_id, entry.dimension)
    if cached is not None:
        recorder.emit(AttributionStage(mode=mode, stage=0, verdict="can_invite" if cached.can_invite else
                                       "cannot_invite", reason=cached.reason, cached=True))
        verdict0 = cached
    else:
        out = await ask(chat, "attribution_judge", messages, params=params,
                        schema=TaskDesignVerdict, stage="stage 0", on_text=on_text)
        if out.parsed is None and policy == "audit":
            recorder.emit(AttributionStage(mode=mode, stage=0, verdict="excluded", reason=out.excluded,
                                           call_seq=out.call_seq))
            return None
        if out.parsed is None:  # the release's default, cached like a real verdict
            verdict0 = Stage0Verdict(can_invite=True, reason=f"unparseable ({out.excluded}); paper policy: "
                                                             f"can invite, the release's default")
        else:
            verdict0 = Stage0Verdict(can_invite=out.parsed.can_invite, reason=out.parsed.reason)
        stage0.put(user_id, entry.dimension, verdict0)
        recorder.emit(AttributionStage(mode=mode, stage=0, verdict="can_invite" if verdict0.can_invite else
                                       "cannot_invite", reason=verdict0.reason, call_seq=out.call_seq))
    return verdict0
