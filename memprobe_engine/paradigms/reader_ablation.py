"""The reader ablation (paper Table 4): every probe of a recording answered again by another reader.

The memory systems are not run again: each probe's reader call is taken from the recording — its
messages hold exactly what the reader saw (the system's retrieved memories, the whole episode, or
the selected sessions) and the question with its answer schema — and sent to the other reader with
the same sampling parameters (:func:`~memprobe_engine.paradigms.rerun.gather_probe`, as the
TUI's single-probe re-run does). The answer and its score (in the scoring mode of the run's own
scores, so both readers are scored alike) are appended as the
layer ``reader:<spec>`` (``EventBase.layer``), inside one ``ablation`` span per probe, so the
original answers stay the run's own and ``memprobe report`` prints both readers side by side.
Heuristic systems have no reader call and are left out. Re-running resumes: probes the layer already
holds are skipped, and the response cache serves what was asked before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.client import BackendFactory
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.orchestration.lifecycle import recorded_run
from memprobe_engine.paradigms.reader import READER_ROLE, answer_model
from memprobe_engine.paradigms.rerun import ProbeRerunRequest, RerunMaterial, gather_probe, reader_config
from memprobe_engine.paradigms.scoring import DEFAULT_SCORING, ScoringMode, mode_of_version, score_probe

#: Layers of a reader ablation are named after the reader: ``reader:local:fast``.
READER_LAYER_PREFIX = "reader:"


def reader_layer(spec: str) -> str:
    return READER_LAYER_PREFIX + spec


@dataclass
class AblationSummary:
    layer: str
    answered: int = 0
    errors: int = 0
    already: int = 0
    no_reader: list[str] = field(default_factory=list)  # systems without a reader call (heuristics)
    wall_s: float = 0.0
    #: The scoring mode of the layer: the one the run's own scores were made in, so the readers are
    #: compared under one scorer (a recording from before the modes scored by the corrected rules).
    mode: ScoringMode = DEFAULT_SCORING


def _todo(recording: Path, layer: str, systems: set[str] | None, summary: AblationSummary) -> list[RerunMaterial]:
    """The probes to answer: every original answer with a reader call that the layer lacks."""
    with open_recording(recording) as reader:
        originals: dict[tuple[str, str, int], ProbeAnswer] = {}
        done: set[tuple[str, str, int]] = set()
        versions = {s.scorer_version for s in reader.iter_of(ProbeScore) if s.layer is None}
        if versions and {mode_of_version(v) for v in versions} != {"upstream"}:
            summary.mode = "corrected"
        for event in reader.iter_of(ProbeAnswer):
            key = (event.episode_id, str(event.system), event.probe_index)
            if event.layer == layer:
                done.add(key)
            elif event.layer is None:
                originals.setdefault(key, event)
        todo = []
        for key, answer in originals.items():
            if systems is not None and key[1] not in systems:
                continue
            if answer.llm_call_seq is None:
                if key[1] not in summary.no_reader:
                    summary.no_reader.append(key[1])
                continue
            if key in done:
                summary.already += 1
                continue
            todo.append(gather_probe(reader, ProbeRerunRequest(recording, key[0], key[1], key[2])))
    return todo


async def ablate_reader(recording: Path, reader_spec: str, llm_config: LLMConfig, *,
                        systems: set[str] | None = None, concurrency: int = 4,
                        progress: Callable[[str], None] | None = None,
                        backend_factory: BackendFactory | None = None) -> AblationSummary:
    """Answer every probe of ``recording`` again with ``reader_spec``; append the layer
    (``backend_factory``: tests pass a scripted backend)."""
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient

    started = time.monotonic()
    config = reader_config(llm_config, reader_spec)
    spec = config.spec_for(READER_ROLE).spec_string()
    summary = AblationSummary(layer=reader_layer(spec))
    todo = _todo(recording, summary.layer, systems, summary)
    if not todo:
        summary.wall_s = time.monotonic() - started
        return summary
    async with recorded_run(recording, header=None, suite="reader-ablation", resumed=True,
                            cancel_strays=False) as run:
        recorder = run.recorder
        chat = ChatClient(config, recorder, cache=ResponseCache(), backend_factory=backend_factory)
        run.scrub = chat.scrub
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(material: RerunMaterial) -> None:
            original = material.original_answer
            async with gate:
                with recorder.span(f"reader {spec}: {original.episode_id} probe {original.probe_index}", "ablation",
                                   unit=original.unit, system=original.system, episode_id=original.episode_id,
                                   probe_index=original.probe_index, reader=spec, layer=summary.layer):
                    outcome = await chat.chat(READER_ROLE, material.messages, params=material.params,
                                              schema=answer_model(material.probe.probe_type))
                    if outcome.parsed is None:
                        answer, error = None, f"reader reply unusable: {outcome.excluded or 'no reply'}"
                    else:
                        answer, error = outcome.parsed.model_dump(mode="json"), None
                    recorder.emit(ProbeAnswer(
                        episode_id=original.episode_id, input_protocol=original.input_protocol,
                        probe_index=original.probe_index, probe_type=original.probe_type,
                        question=original.question, retrieved=original.retrieved, answer=answer,
                        answer_text=outcome.text, error=error, llm_call_seq=outcome.call_seq,
                        system=original.system, unit=original.unit, layer=summary.layer))
                    score = score_probe(material.probe, answer, error=error, spec=material.episode.latent_spec,
                                        episode_id=original.episode_id, probe_index=original.probe_index,
                                        system=original.system, mode=summary.mode)
                    score.layer, score.unit = summary.layer, original.unit
                    recorder.emit(score)
            summary.answered += 1
            summary.errors += error is not None
            if progress is not None:
                progress(f"{original.system} × {original.episode_id} probe {original.probe_index}: "
                         f"{'error' if error else score.score}")

        try:
            await asyncio.gather(*(one(m) for m in todo))
        finally:
            await chat.aclose()
    summary.wall_s = time.monotonic() - started
    return summary
