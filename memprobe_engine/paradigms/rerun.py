"""A live re-run of the reader and the rule scorer on one (episode, probe, system) of a paradigm
recording — the protocol-B counterpart of the dimension re-score (``recovery/rescore.py``).

What the reader saw is taken from the recording, not rebuilt: the original reader call's messages
(system text, the evidence — the system's retrieved memories, the whole episode or the selected
sessions, whatever the input protocol gave it — and the question with its answer format) are sent
again, with the same sampling parameters and the probe type's answer schema, to the reader model
of the request (any spec; by default the configured ``reader`` role). So the memory system is never
re-run and the comparison isolates the reader model. The answer is scored by the same rule scorer
(``paradigms/scoring.score_probe``) against the gold of the episode the run recorded, and both are
*appended* inside a ``rescore`` span: a ``probe_answer`` and a ``probe_score`` whose ``rescore_of``
is the original score's seq. Earlier events are never touched; readers use the latest score.

The UI passes a :class:`ProbeRerunSink` whose methods post messages (called from the event loop
the re-run awaits on); the reply streams into it piece by piece, and what the call does before its
first piece (the model's start, the prompt's evaluation) goes to its ``progress``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.llm import LLMCall
from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.events.reader import DamagedEvent, RecordingReader, open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.llm.call_progress import CallProgress, reporting_to
from memprobe_engine.llm.config import LLMConfig, load_llm_config
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.orchestration.lifecycle import recorded_run
from memprobe_engine.paradigms.reader import READER_ROLE, answer_model
from memprobe_engine.paradigms.scoring import DEFAULT_SCORING, ScoringMode, mode_of_version, score_probe
from memprobe_engine.paradigms.suite import Episode, Probe, parse_episode

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient

#: Attribute names under which a paradigm run stores the episode payload on the episode span.
EPISODE_REF_ATTRS: tuple[str, ...] = ("inputs_ref", "episode_ref")


@dataclass(frozen=True)
class ProbeRerunRequest:
    """Which probe to re-run, in which recording, with which reader model (None: the configured one)."""

    recording: Path
    episode_id: str
    system: str
    probe_index: int
    reader: str | None = None


class ProbeRerunSink(Protocol):
    """Receives a running re-run's output; every method must be cheap and safe to call from the loop."""

    def text(self, piece: str) -> None:
        """A piece of the reader's reply as it is generated."""

    def note(self, message: str) -> None:
        """A progress line (which model, what happens now)."""

    def answer(self, answer: dict[str, Any] | None, error: str | None) -> None:
        """The reader's parsed answer, or the execution error that excludes it."""

    def score(self, score: float, subscores: dict[str, float], reason: str, excluded: bool) -> None:
        """The rule scorer's verdict on the new answer (already appended to the recording)."""

    def progress(self, progress: CallProgress) -> None:
        """What the reader's call does before its reply streams (starting the model, evaluating the
        prompt: so many of so many tokens). Optional: a sink without it is not told."""


ProbeRerunFunction = Callable[[ProbeRerunRequest, ProbeRerunSink], Awaitable[object]]


@dataclass
class RerunMaterial:
    """Everything recorded about the probe that the re-run needs."""

    episode: Episode
    probe: Probe
    original_answer: ProbeAnswer
    original_score_seq: int | None
    messages: list[ChatMessage]
    params: SamplingParams
    #: The scoring mode of the run's own score of this probe (a re-run is scored alike).
    mode: ScoringMode = DEFAULT_SCORING


def _episode(reader: RecordingReader, request: ProbeRerunRequest) -> Episode:
    where = f"{reader.directory}: episode {request.episode_id} × {request.system}"
    found: dict[str, Any] | None = None
    for event in reader.iter_events(kinds=["span_begin"]):
        if not isinstance(event, SpanBegin):
            continue
        attrs = event.attrs
        if event.span_kind == "episode" and attrs.get("episode_id") == request.episode_id and \
                (attrs.get("system") or event.system) == request.system:
            found = attrs  # a resumed run may have re-run the episode: the latest span wins
    if found is None:
        raise RecordingError(f"{where} is not in this recording.")
    ref = next((found[name] for name in EPISODE_REF_ATTRS if isinstance(found.get(name), str)), None)
    if ref is None:
        raise RecordingError(f"{where}: the episode span records no episode payload (inputs_ref), so its gold "
                             f"is unknown and the probe cannot be re-scored.")
    try:
        data = reader.payload(ref)
    except KeyError:
        raise RecordingError(f"{where}: the episode payload {ref} is missing from payloads.jsonl.") from None
    return parse_episode(data, f"{reader.directory}/payloads.jsonl")


def _llm_call(reader: RecordingReader, seq: int) -> LLMCall | None:
    """The llm_call event with ``seq`` (its line for a one-writer recording, else searched)."""
    if 0 <= seq < len(reader):
        try:
            event = reader.get(seq)
            if event.seq == seq and event.kind == "llm_call":
                return event
        except DamagedEvent:
            pass
    return next((e for e in reader.iter_events(kinds=["llm_call"]) if e.kind == "llm_call" and e.seq == seq), None)


def gather_probe(reader: RecordingReader, request: ProbeRerunRequest) -> RerunMaterial:
    """Collect the probe's inputs from the recording; RecordingError naming what is missing."""
    episode = _episode(reader, request)
    where = f"{reader.directory}: probe {request.probe_index} of {request.episode_id} × {request.system}"
    if not 0 <= request.probe_index < len(episode.probes):
        raise RecordingError(f"{where}: the recorded episode has {len(episode.probes)} probes.")
    answer: ProbeAnswer | None = None
    score_seq: int | None = None
    version: str | None = None
    for event in reader.iter_events(kinds=["probe_answer", "probe_score"]):
        if not isinstance(event, (ProbeAnswer, ProbeScore)) or event.layer is not None:
            continue  # another reader's or scoring's layer is not the run's own answer
        if (event.episode_id, event.system, event.probe_index) != (request.episode_id, request.system,
                                                                   request.probe_index):
            continue
        if isinstance(event, ProbeAnswer):
            if answer is None:
                answer = event
        elif event.rescore_of is None:
            score_seq = int(event.seq)  # the latest original (a re-run unit scores again)
            version = event.scorer_version
    if answer is None:
        raise RecordingError(f"{where}: no probe_answer is recorded, so there is nothing to re-run.")
    if answer.llm_call_seq is None:
        raise RecordingError(f"{where}: the answer came from the {answer.input_protocol} input protocol without a "
                             f"reader call (a heuristic); there is no reader to re-run.")
    call = _llm_call(reader, answer.llm_call_seq)
    if call is None:
        raise RecordingError(f"{where}: the reader's LLM call #{answer.llm_call_seq} is not in the recording.")
    messages = []
    for message in call.messages:
        content = message.content
        if content is None and message.content_ref is not None:
            try:
                content = str(reader.payload(message.content_ref))
            except KeyError:
                raise RecordingError(f"{where}: payload {message.content_ref} of the reader's call is missing from "
                                     f"payloads.jsonl.") from None
        messages.append(ChatMessage(role=message.role, content=content or ""))
    known = set(SamplingParams.model_fields)
    params = SamplingParams(**{k: v for k, v in call.params.items() if k in known})
    return RerunMaterial(episode=episode, probe=episode.probes[request.probe_index], original_answer=answer,
                         original_score_seq=score_seq, messages=messages, params=params,
                         mode=mode_of_version(version))


async def _reread(chat: ChatClient, recorder: Recorder, request: ProbeRerunRequest, material: RerunMaterial,
                  sink: ProbeRerunSink) -> ProbeScore:
    """Inside the rescore span: the streamed reader call, its answer and its score, appended."""
    original = material.original_answer
    stream = chat.stream(READER_ROLE, material.messages, params=material.params,
                         schema=answer_model(material.probe.probe_type))
    async for piece in stream:
        sink.text(piece)
    outcome = stream.outcome
    if outcome is None or outcome.parsed is None:
        answer, error = None, f"reader reply unusable: {outcome.excluded if outcome else 'no reply'}"
    else:
        answer, error = outcome.parsed.model_dump(mode="json"), None
    sink.answer(answer, error)
    recorder.emit(ProbeAnswer(episode_id=request.episode_id, input_protocol=original.input_protocol,
                              probe_index=request.probe_index, probe_type=original.probe_type,
                              question=original.question, retrieved=original.retrieved, answer=answer,
                              error=error, llm_call_seq=outcome.call_seq if outcome else None))
    score = score_probe(material.probe, answer, error=error, spec=material.episode.latent_spec,
                        episode_id=request.episode_id, probe_index=request.probe_index, system=request.system,
                        mode=material.mode)
    score.rescore_of = material.original_score_seq
    recorder.emit(score)
    sink.score(score.score, dict(score.subscores), score.reason, score.excluded)
    return score


def reader_config(base: LLMConfig, spec: str | None) -> LLMConfig:
    """``base`` with the reader role set to ``spec`` (ConfigError naming the spec when it is bad)."""
    if not spec:
        return base
    return LLMConfig(models={**base.models, READER_ROLE: parse_spec(spec, origin="the re-run's reader model")})


def _read_probe(request: ProbeRerunRequest) -> RerunMaterial:
    with open_recording(request.recording) as reader:
        return gather_probe(reader, request)


async def rerun_probe(request: ProbeRerunRequest, sink: ProbeRerunSink, *, llm_config: LLMConfig | None = None,
                      chat_factory: Callable[[LLMConfig, Recorder], Any] | None = None) -> ProbeScore:
    """Re-run the reader (streamed) and the scorer on one probe, appending both to the recording.
    Returns the appended score. ``chat_factory`` builds the chat client (tests pass a scripted one)."""
    base = llm_config if llm_config is not None else load_llm_config(None, os.environ, [])
    config = reader_config(base, request.reader)
    listener = getattr(sink, "progress", None)  # optional (see ProbeRerunSink.progress)
    if listener is not None:
        listener(CallProgress("reading the probe from the recording"))
    # Read in a thread: a big recording takes seconds, and a UI's event loop awaits this.
    material = await asyncio.to_thread(_read_probe, request)
    spec = config.spec_for(READER_ROLE).spec_string()
    sink.note(f"reader {spec} (fresh call, no cache) on probe {request.probe_index + 1} "
              f"({material.probe.probe_type}) of {request.episode_id} × {request.system}")
    original = material.original_answer
    # The shared run lifecycle: run_start/run_end around the appended events, leftover spans closed
    # (a cancelled re-run ends "interrupted"); other tasks of the UI's event loop are left alone.
    async with recorded_run(request.recording, header=None, suite="rescore", resumed=True,
                            cancel_strays=False) as run:
        recorder = run.recorder
        if chat_factory is not None:
            chat = chat_factory(config, recorder)
        else:
            from memprobe_engine.llm.client import ChatClient

            # A live re-run asks the model again: the response cache would replay the same model's output.
            chat = ChatClient(config, recorder, cache=None)
        run.scrub = getattr(chat, "scrub", None)
        try:
            with recorder.span(f"rescore {request.episode_id} probe {request.probe_index}", "rescore",
                               unit=original.unit, system=request.system, episode_id=request.episode_id,
                               probe_index=request.probe_index, rescore_of=material.original_score_seq, reader=spec):
                with reporting_to(listener) if listener is not None else contextlib.nullcontext():
                    score = await _reread(chat, recorder, request, material, sink)
        finally:
            await chat.aclose()
    return score



@dataclass(frozen=True)
class ProbeRerunHook:
    """What a replay UI holds to offer the re-run: the function and the reader spec it defaults to."""

    run: ProbeRerunFunction
    default_reader: str


def default_hook(llm_config: LLMConfig | None = None) -> ProbeRerunHook:
    """The engine's re-run on ``llm_config`` (default: the environment, else the embedded model)."""
    import functools

    config = llm_config if llm_config is not None else load_llm_config(None, os.environ, [])
    return ProbeRerunHook(functools.partial(rerun_probe, llm_config=config),
                          config.spec_for(READER_ROLE).spec_string())
