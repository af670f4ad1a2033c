"""Re-score recorded cases without re-running the system under test.

For one (user, system, dimension, mode) of a recording: rebuild exactly what the slot-filler read
(the store at that point for dump_all, the recorded top-k for retrieve) from the recorded memory
operations, re-run slot-fill and judge (any model; streamed when asked), optionally the attribution
stages, and *append* the results as new events — ``judge_score.rescore_of`` points at the original,
which is never touched. The hidden target, task and pool entry come from the unit's recorded inputs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.base import EventBase
from memprobe_engine.events.memory import Retrieval
from memprobe_engine.events.reader import RecordingReader, open_recording
from memprobe_engine.events.recorder import E, Recorder
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.scoring import AttributionStage, JudgeScore, SlotFill
from memprobe_engine.events.writer import EventWriter
from memprobe_engine.memory.timeline import store_at
from memprobe_engine.orchestration.lifecycle import recorded_run
from memprobe_engine.recovery.attribution import Stage0Cache, Stage0Verdict, attribute
from memprobe_engine.recovery.case_material import DialogueTurn, retrieval_for_fill, slot_fill_read
from memprobe_engine.recovery.config import Mode, RecoveryConfig
from memprobe_engine.recovery.framing import Framing
from memprobe_engine.recovery.config import framing_of
from memprobe_engine.recovery.inputs import BankEntry, PoolDimension
from memprobe_engine.recovery.judge_kind import judge_of
from memprobe_engine.recovery.outcomes import OutcomeFold
from memprobe_engine.recovery.policy import ExclusionPolicy
from memprobe_engine.recovery.config import policy_of
from memprobe_engine.recovery.prompts import Turn
from memprobe_engine.recovery.rescore_contract import RescoreRequest, RescoreSink
from memprobe_engine.recovery.scoring import TextSink, judge, slot_fill

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig

EventSink = Callable[[EventBase], None]


@dataclass(frozen=True)
class Case:
    user_id: str
    system: str
    dimension: str
    mode: Mode


@dataclass
class CaseMaterial:
    """Everything recorded about one case that a re-score needs."""

    case: Case
    entry: BankEntry
    pool_entry: PoolDimension | None
    task_text: str
    memory: list[dict[str, Any]]
    history: list[Turn]
    original_score_seq: int | None
    original_score: float | None
    stage0: Stage0Verdict | None = None
    #: The slot-fill the original score judged (what a judge-only re-score judges again).
    recorded_fill: SlotFill | None = None


@dataclass
class RescoreResult:
    case: Case
    label: str | None
    score: float | None
    reason: str | None
    excluded: str | None
    original_score: float | None
    attribution: str | None = None
    events: list[Any] = field(default_factory=list)
    overflow: bool = False
    policy: ExclusionPolicy = "paper"


class _ObservedRecorder(Recorder):
    """A recorder that also hands every event it writes to a listener (the TUI's live view)."""

    def __init__(self, writer: EventWriter | None, listener: EventSink | None, layer: str | None = None) -> None:
        super().__init__(writer, layer=layer)
        self._listener = listener
        self.emitted: list[EventBase] = []

    def emit(self, event: E) -> E:
        event = super().emit(event)
        self.emitted.append(event)
        if self._listener is not None:
            self._listener(event)
        return event


def recorded_cases(reader: RecordingReader) -> list[Case]:
    """Every (user, system, dimension, mode) that has a judge score, in recording order."""
    seen: dict[Case, None] = {}
    for event in reader.iter_of(JudgeScore):
        if event.user_id and event.system and event.dimension:
            seen[Case(event.user_id, event.system, event.dimension, event.mode)] = None
    return list(seen)


def gather(reader: RecordingReader, case: Case) -> CaseMaterial:
    """Collect the case's inputs from the recording; RecordingError naming what is missing.

    The case is re-scored from its current attempt: the original judge score the outcomes fold
    holds current, the slot-fill that score judged (the latest before it; a re-score's own fill
    comes after) and the dialogue of the latest attempt. What that fill read comes from the
    case-material query the replay inspector uses too (``recovery/case_material.py``)."""
    inputs = _unit_inputs(reader, case)
    entry_data = next((e for e in inputs["bank"] if e["dimension"] == case.dimension), None)
    if entry_data is None:
        raise RecordingError(f"{reader.directory}: {case.dimension} is not in the recorded bank of {case.user_id}.")
    entry = BankEntry.model_validate(entry_data, context={"relaxed": True})  # accepted when the run was made
    pool_data = inputs.get("pool", {}).get(case.dimension)
    task_index, task = next(((i, t) for i, t in enumerate(inputs["tasks"]) if t["dimension"] == case.dimension),
                            (0, {"task": ""}))
    fold = OutcomeFold()
    fills: list[SlotFill] = []
    retrievals: list[Retrieval] = []
    dialogue: list[DialogueTurn] = []
    stage0: Stage0Verdict | None = None
    for event in reader.iter_events(kinds=["slot_fill", "judge_score", "retrieval", "message", "attribution_stage"]):
        if event.user_id != case.user_id:
            continue
        if event.kind == "attribution_stage" and event.dimension == case.dimension and event.stage == 0 \
                and event.verdict in ("can_invite", "cannot_invite"):
            stage0 = Stage0Verdict(can_invite=event.verdict == "can_invite", reason=event.reason or "")
        if event.system != case.system or event.dimension != case.dimension:
            continue
        if event.kind == "message" and event.role in ("user", "assistant"):
            if event.turn == 0:
                dialogue = []  # a re-run unit replays the episode: keep the latest attempt
            dialogue.append(DialogueTurn(task_index, event.turn or 0, event.role, event.content))
        elif event.kind == "retrieval":
            retrievals.append(event)
        elif isinstance(event, (SlotFill, JudgeScore)) and event.mode == case.mode:
            fold.add(event)
            if isinstance(event, SlotFill):
                fills.append(event)
    outcome = fold.cases.get((case.system, case.user_id, case.dimension, case.mode))
    original = outcome.original if outcome is not None else None
    fill = next((f for f in reversed(fills) if original is None or f.seq < original.seq), None)
    if fill is None:
        raise RecordingError(f"{reader.directory}: no slot-fill recorded for {case.user_id}/{case.system}/"
                             f"{case.dimension} in {case.mode} mode.")
    retrieval = retrieval_for_fill(retrievals, fill.seq) if case.mode == "retrieve" else None
    read = slot_fill_read(lambda seq: store_at(reader, unit=case.user_id, system=case.system, upto_seq=seq),
                          case.system, case.mode, fill.seq, retrieval)
    return CaseMaterial(case=case, entry=entry, pool_entry=PoolDimension.model_validate(pool_data) if pool_data else None,
                        task_text=task["task"], memory=read.memory, history=[(t.role, t.text) for t in dialogue],
                        original_score_seq=original.seq if original is not None else None,
                        original_score=original.score if original is not None else None, stage0=stage0,
                        recorded_fill=fill)


def _unit_inputs(reader: RecordingReader, case: Case) -> dict[str, Any]:
    for event in reader.iter_of(SpanBegin):
        if event.span_kind == "unit" and event.user_id == case.user_id and event.system == case.system:
            ref = event.attrs.get("inputs_ref")
            if ref:
                return reader.payload(ref)  # type: ignore[no-any-return]
    raise RecordingError(f"{reader.directory}: the unit {case.user_id} × {case.system} has no recorded inputs "
                         f"(bank, tasks), so it cannot be re-scored.")


def _read_cases(record: Path, cases: list[Case]) -> tuple[list[CaseMaterial], RecoveryConfig]:
    """Each case's material and the recording's protocol-A settings."""
    with open_recording(record) as reader:
        return [gather(reader, case) for case in cases], RecoveryConfig.of(reader.header)


async def rescore(record: Path, cases: Iterable[Case], *, chat_factory: Callable[[Recorder], Any],
                  context_tokens: int, attribution: bool = True, on_text: TextSink | None = None,
                  on_event: EventSink | None = None, max_tokens: int | None = 200,
                  policy: ExclusionPolicy | None = None, layer: str | None = None,
                  judge_only: bool = False, judge_kind: str | None = None) -> list[RescoreResult]:
    """Re-score ``cases`` and append the results to ``record``. ``chat_factory`` builds the chat
    client bound to the recorder (so the new LLM calls are recorded in the same recording).
    ``policy`` defaults to the one the recording was made under (an imported release run: paper).
    A stage-0 verdict already recorded for a (user, dimension) — for an imported run, the
    release's own — is reused, never asked again: one verdict per (user, dimension). ``layer``
    keeps the new judgments as that named layer (``EventBase.layer``) instead of replacing the
    current outcome. ``judge_only`` judges the recorded slot-fill again instead of filling anew (a
    judge's sensitivity alone: no slot-filler call, no attribution). ``judge_kind`` (model or
    calibrated:NAME, :mod:`.judge_kind`) defaults to the judge the recording was scored with."""
    # Read in a thread: a big recording takes seconds, and a UI's event loop awaits this.
    materials, config = await asyncio.to_thread(_read_cases, record, list(cases))
    chosen = policy or policy_of(config)
    framing = framing_of(config)
    judge_kind = judge_kind or judge_of(config)
    results: list[RescoreResult] = []
    # The shared run lifecycle: run_start/run_end around the appended events, leftover spans closed.
    async with recorded_run(record, header=None, suite="rescore", resumed=True, cancel_strays=False,
                            recorder_factory=lambda writer: _ObservedRecorder(writer, on_event, layer)) as run:
        recorder = run.recorder
        assert isinstance(recorder, _ObservedRecorder)
        chat = chat_factory(recorder)
        run.scrub = getattr(chat, "scrub", None)
        try:
            for material in materials:
                results.append(await _one(chat, recorder, material, context_tokens, attribution and not judge_only,
                                          on_text, max_tokens, chosen, framing, judge_only, judge_kind))
        finally:
            await chat.aclose()
    return results


async def _one(chat: ChatClient, recorder: _ObservedRecorder, material: CaseMaterial, context_tokens: int,
               attribution: bool, on_text: TextSink | None, max_tokens: int | None,
               policy: ExclusionPolicy, framing: Framing, judge_only: bool = False,
               judge_kind: str = "model") -> RescoreResult:
    case = material.case
    first = len(recorder.emitted)
    with recorder.span(f"rescore {case.dimension} {case.mode}", "rescore", user_id=case.user_id, system=case.system,
                       dimension=case.dimension, mode=case.mode, rescore_of=material.original_score_seq,
                       judge_only=judge_only):
        if judge_only and material.recorded_fill is not None:
            fill = material.recorded_fill
        else:
            fill = await slot_fill(chat, recorder, material.entry, material.pool_entry, material.memory, case.mode,
                                   context_tokens=context_tokens, max_tokens=max_tokens, on_text=on_text,
                                   policy=policy, framing=framing)
        score = await judge(chat, recorder, material.entry, fill, max_tokens=max_tokens,
                            rescore_of=material.original_score_seq, on_text=on_text, policy=policy, framing=framing,
                            judge_kind=judge_kind)
        label = None
        if attribution:
            stage0 = Stage0Cache()
            if material.stage0 is not None:  # the paper's rule: one stage-0 verdict per (user, dimension)
                stage0.put(case.user_id, case.dimension, material.stage0)
            label = await attribute(chat, recorder, user_id=case.user_id, entry=material.entry,
                                    task_text=material.task_text, history=material.history, score=score.score,
                                    mode=case.mode, stage0=stage0, on_text=on_text, max_tokens=max_tokens,
                                    policy=policy, framing=framing)
    return RescoreResult(case=case, label=fill.label, score=score.score, reason=score.reason, excluded=score.excluded,
                         original_score=material.original_score, attribution=label, events=recorder.emitted[first:],
                         overflow=fill.overflow, policy=policy)


#: The roles a re-score calls (a model chosen for a re-run serves all three).
RESCORE_ROLES = ("slot_filler", "recovery_judge", "attribution_judge")


def rescore_config(llm_config: LLMConfig | None, model: str | None = None) -> LLMConfig:
    """The models a re-score uses: ``llm_config`` (default: the environment, else the embedded
    model), with ``model`` (a spec string) serving every re-score role when given."""
    import os

    from memprobe_engine.llm.config import LLMConfig, load_llm_config
    from memprobe_engine.llm.spec import parse_spec

    config = llm_config if llm_config is not None else load_llm_config(None, os.environ, [])
    if not model:
        return config
    spec = parse_spec(model, origin="the re-run's model")
    return LLMConfig(models={**config.models, **dict.fromkeys(RESCORE_ROLES, spec)})


async def rescore_dimension(request: RescoreRequest, sink: RescoreSink, *,
                            llm_config: LLMConfig | None = None) -> None:
    """The replay UI's re-run hook (``memprobe_engine.replay.RescoreFunction``): re-score one
    (user, system, dimension) under the requested modes, streaming text, scores and stage verdicts
    into ``sink``, and what each model call does before its reply streams (``sink.progress``, when the
    sink has it). Models come from ``llm_config`` or, by default, the environment
    (``MEMPROBE_MODEL…``), which falls back to the embedded model; ``request.model`` replaces them."""
    from memprobe_engine.llm.call_progress import CallProgress, reporting_to
    from memprobe_engine.llm.client import ChatClient

    config = rescore_config(llm_config, request.model)
    cases = [Case(request.user_id, request.system, request.dimension, cast(Mode, mode)) for mode in request.modes
             if mode in ("dump_all", "retrieve")]

    def on_event(event: EventBase) -> None:
        if isinstance(event, JudgeScore):
            sink.score(event.mode, event.score, event.reason or event.excluded)
        elif isinstance(event, AttributionStage):
            sink.stage(event.mode, event.stage, event.verdict, event.reason)
        elif isinstance(event, SpanBegin):
            sink.note(event.name)

    listener = getattr(sink, "progress", None)  # optional (see RescoreSink.progress)
    sink.note(f"models: slot_filler {config.spec_for('slot_filler').spec_string()}, "
              f"recovery_judge {config.spec_for('recovery_judge').spec_string()}, "
              f"attribution_judge {config.spec_for('attribution_judge').spec_string()} (fresh calls, no cache)")
    # A live re-run asks the models again: answering from the response cache would only replay the
    # original output of the same model.
    if listener is not None:
        listener(CallProgress("reading the case from the recording"))
    with reporting_to(listener) if listener is not None else contextlib.nullcontext():
        await rescore(request.recording, cases,
                      chat_factory=lambda recorder: ChatClient(config, recorder, cache=None),
                      context_tokens=config.spec_for("slot_filler").context_budget(),
                      on_text=lambda stage, piece: sink.text(piece, stage), on_event=on_event)
