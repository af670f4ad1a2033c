"""Build small protocol-B recordings with the engine's own writer, laid out as the paradigm runner
lays them out (run → episode span with its labels → probe spans holding probe_answer/probe_score)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from memprobe_engine.events.header import new_header
from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.run import RunEnd, RunStart
from memprobe_engine.events.writer import open_writer


@dataclass
class P:
    """One probe's outcome: type, score (None = excluded), sub-scores."""

    probe_type: str
    score: float | None
    subscores: dict[str, float] = field(default_factory=dict)


@dataclass
class Ep:
    episode_id: str
    paradigm: str
    condition: str
    expected_behavior: str
    split: bool
    probes: list[P]


def write_paradigm_recording(path: Path, outcomes: dict[str, list[Ep]], *, rescore: dict[tuple[str, str, int], float]
                             | None = None) -> Path:
    """One recording holding every system's episodes; ``rescore`` appends a re-score of some probes."""
    systems = list(outcomes)
    writer = open_writer(path, new_header("t-b", "paradigms", {"suite": "paradigms", "systems": systems}))
    recorder = Recorder(writer)
    seqs: dict[tuple[str, str, int], int] = {}
    with recorder.span("run", "run"):
        recorder.emit(RunStart(run_id="t-b", suite="paradigms"))
        for system, episodes in outcomes.items():
            for ep in episodes:
                with recorder.span(f"{ep.episode_id} × {system}", "episode", system=system, unit=ep.episode_id,
                                   episode_id=ep.episode_id, paradigm=ep.paradigm, condition=ep.condition,
                                   expected_behavior=ep.expected_behavior, split=ep.split):
                    for index, p in enumerate(ep.probes):
                        with recorder.span(f"probe {index}", "probe", probe_index=index, probe_type=p.probe_type):
                            recorder.emit(ProbeAnswer(episode_id=ep.episode_id, input_protocol="memory",
                                                      probe_index=index, probe_type=p.probe_type, question="?",
                                                      answer_text="x", error=None if p.score is not None else "boom"))
                            event = recorder.emit(ProbeScore(
                                episode_id=ep.episode_id, probe_index=index, probe_type=p.probe_type,
                                score=p.score or 0.0, subscores=p.subscores, reason="test",
                                excluded=p.score is None, exclusion_reason=None if p.score is not None else
                                "execution error: boom", scorer_version="t"))
                            seqs[(system, ep.episode_id, index)] = event.seq
        for (system, episode_id, index), score in (rescore or {}).items():
            recorder.emit(ProbeScore(episode_id=episode_id, probe_index=index, system=system,
                                     probe_type=next(p.probe_type for e in outcomes[system] if e.episode_id == episode_id
                                                     for i, p in enumerate(e.probes) if i == index),
                                     score=score, reason="re-scored", rescore_of=seqs[(system, episode_id, index)],
                                     scorer_version="t2"))
        recorder.emit(RunEnd(status="completed"))
    writer.close()
    return path
