"""Everything about one probe of one episode under one system: the question, the structured gold, the
reader's answer and the memory it saw, the reader's LLM call, and the rule scorer's verdict with its
sub-scores — the original beside the latest re-score (a ``probe_score`` whose ``rescore_of`` points at
it, with the re-run's own answer).

The gold is ground truth the reader never sees, so it is not in any answer event: it comes from the
episode the run recorded (payload ``episode_ref`` of the episode span), else from the suite folder
the header names when it can be found from here; otherwise the detail says why it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.paradigms import ProbeAnswer
from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.paradigms.read.queries import (
    ScoreCell,
    episode_steps,
    events_of_kind,
    find_episode_span,
    recorded_episode,
    score_cells,
    span_events,
)
from memprobe_engine.replay.memory_view import item_writes
from memprobe_engine.replay.session import ReplaySession
from memprobe_engine.paradigms.read.steps import step_labeller

if TYPE_CHECKING:
    from memprobe_engine.paradigms.suite import Suite


@dataclass(frozen=True)
class ProbeGold:
    """A probe as the suite defines it: question, expected behaviour, gold text and structured gold."""

    probe_type: str
    question: str
    expected_behavior: str | None
    gold_answer: str | None
    gold: dict[str, Any]


@dataclass
class ProbeDetail:
    """What the probe inspector shows; ``answer`` and ``score`` are the original events (or None)."""

    episode_id: str
    system: str
    probe_index: int
    probe_type: str
    gold: ProbeGold | None
    gold_note: str | None
    answer: ProbeAnswer | None
    score: dict[str, Any] | None  # the original probe_score's fields
    cell: ScoreCell | None
    rescore_answer: ProbeAnswer | None  # the answer the latest re-score scored, when there is one
    call_seq: int | None
    probe_count: int
    other_calls: list[int] = field(default_factory=list)
    #: Per item the reader saw, the session(s) whose ops wrote it (``S03 filler``), as the store held it.
    written: dict[str, str] = field(default_factory=dict)
    #: The score layer shown (None: the run's own scores; else a named layer such as ``reader:SPEC``).
    layer: str | None = None


@lru_cache(maxsize=8)
def _load_suite(path: str) -> Suite:
    from memprobe_engine.paradigms.suite import (
        load_suite,  # pydantic-heavy: import on first use
    )

    return load_suite(Path(path))


def _suite_folder(session: ReplaySession) -> Path | None:
    named = ParadigmConfig.of(session.header).sessions
    if not named:
        return None
    path = Path(str(named))
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, *(p / path for p in session.directory.parents)]
    return next((c for c in candidates if c.is_dir()), None)


def _gold_from(probe: dict[str, Any]) -> ProbeGold:
    gold = probe.get("gold")
    return ProbeGold(probe_type=str(probe.get("probe_type", "?")), question=str(probe.get("question", "")),
                     expected_behavior=probe.get("expected_behavior"), gold_answer=probe.get("gold_answer"),
                     gold=dict(gold) if isinstance(gold, dict) else {})


def probe_gold(session: ReplaySession, episode_id: str, system: str,
               probe_index: int) -> tuple[ProbeGold | None, str | None]:
    """(gold, None) or (None, why it cannot be shown)."""
    span = find_episode_span(session, episode_id, system)
    episode = recorded_episode(session, span) if span is not None else None
    if episode is not None:
        probes = episode.get("probes") or []
        if 0 <= probe_index < len(probes) and isinstance(probes[probe_index], dict):
            return _gold_from(probes[probe_index]), None
        return None, f"the recorded episode {episode_id} has no probe {probe_index}"
    folder = _suite_folder(session)
    if folder is None:
        named = ParadigmConfig.of(session.header).sessions
        why = f"the suite folder {named!r} named in the header is not reachable from here" if named else \
            "the episode span records no episode and the header names no suite folder"
        return None, f"gold not shown: {why}"
    try:
        suite = _load_suite(str(folder))
    except (MemProbeError, ImportError) as err:
        return None, f"gold not shown: {folder} does not load ({str(err)[:200]})"
    found = next((e for e in suite.episodes if e.episode_id == episode_id), None)
    if found is None or not 0 <= probe_index < len(found.probes):
        return None, f"gold not shown: {folder} has no probe {probe_index} of episode {episode_id}"
    return _gold_from(found.probes[probe_index].model_dump(mode="json")), None


def probe_detail(session: ReplaySession, episode_id: str, system: str, probe_index: int,
                 layer: str | None = None) -> ProbeDetail:
    """Gather the detail (reads the probe's span and the recording's probe scores: run it in a worker).
    ``layer`` (None: the run's own) picks whose answer, score and reader call are shown: a named layer
    (``memprobe reader-ablation``'s ``reader:SPEC``, a scoring mode's ``scoring:corrected``) is found by
    its layer and the probe, since it may have answered or scored the probe outside the probe's span."""
    steps = episode_steps(session, episode_id, system)
    probe = next((p for p in (steps.probes if steps else []) if p.probe_index == probe_index), None)
    events = span_events(session, probe.step) if probe is not None else []
    answer = next((e for e in events if e.kind == "probe_answer" and e.layer is None), None)
    original = next((e for e in events if e.kind == "probe_score" and e.rescore_of is None and e.layer is None), None)
    calls = [e.seq for e in events if e.kind == "llm_call"]
    cell = score_cells(session, layer).get((system, episode_id, probe_index))
    own = answer  # the store the reader searched is the run's: a layer re-sent the same retrieval
    if layer is not None:
        original = None  # the layer's cell holds its original score
        answer = _layer_answer(session, layer, (system, episode_id, probe_index), cell, answer)
        calls = [answer.llm_call_seq] if answer is not None and answer.llm_call_seq is not None else []
    rescore_answer = None
    if cell is not None and cell.latest is not None:
        span_id = cell.latest.get("span_id")
        rescore_answer = next((a for a in events_of_kind(session, "probe_answer")
                               if a.span_id == span_id and a.probe_index == probe_index), None)
    gold, note = probe_gold(session, episode_id, system, probe_index)
    probe_type = probe.probe_type if probe is not None else (answer.probe_type if answer is not None else "?")
    call_seq = answer.llm_call_seq if answer is not None and answer.llm_call_seq is not None else (
        calls[-1] if calls else None)
    written: dict[str, str] = {}
    if answer is not None and answer.retrieved and steps is not None:
        unit = steps.store_unit or episode_id
        at = (own or answer).seq
        writes, label = item_writes(session, unit, system, at), step_labeller(session, unit, system)
        for item in answer.retrieved:
            names = list(dict.fromkeys(label(seq) for seq in writes.of(item.id)))
            if names:
                written[item.id] = names[0] + (f" → {names[-1]}" if len(names) > 1 else "")
    return ProbeDetail(
        written=written,
        episode_id=episode_id, system=system, probe_index=probe_index, probe_type=probe_type, gold=gold,
        gold_note=note, answer=answer, score=original.model_dump() if original is not None else
        (cell.original if cell else None), cell=cell, rescore_answer=rescore_answer, call_seq=call_seq,
        probe_count=len(steps.probes) if steps else 0, other_calls=[c for c in calls if c != call_seq], layer=layer)


def _layer_answer(session: ReplaySession, layer: str, key: tuple[str, str, int], cell: ScoreCell | None,
                  own: ProbeAnswer | None) -> ProbeAnswer | None:
    """The answer ``layer`` scored for the probe ``key`` (system, episode, probe): the layer's own
    answer (a second reader's; the one in its original score's span when several); a layer that only
    scored again (another scoring mode) has none and scored the run's own answer ``own``. None when
    the layer never scored the probe: nothing of the run's own is passed off as the layer's."""
    if cell is None:
        return None
    system, episode_id, probe_index = key
    mine = [a for a in events_of_kind(session, "probe_answer") if a.layer == layer
            and (a.system, a.episode_id, a.probe_index) == (system, episode_id, probe_index)]
    span_id = cell.original.get("span_id") if cell.original is not None else None
    return next((a for a in mine if a.span_id == span_id), mine[0] if mine else own)
