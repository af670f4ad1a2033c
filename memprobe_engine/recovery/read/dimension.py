"""Everything about one (user, system, dimension): the hidden target, its task, the turns that
carried evidence, and per access mode the retrieval, slot-fill, judge score (original and re-scores)
and attribution stages. What the slot-filler read and the evidence turns come from the case-material
query re-scoring uses too (``recovery/case_material.py``), so the inspector shows what a re-run reads.

The hidden target is not in the recording (it is ground truth the agent never sees); it is loaded
from the sessions tree the header names when that folder can be found from here, else the detail
says where the target can still be read (the recovery judge's prompt).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.memory import Retrieval
from memprobe_engine.events.scoring import AttributionLabel, JudgeScore, SlotFill
from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.case_material import DialogueTurn, EvidenceTurn, ReadItem, SlotFillRead, slot_fill_read
from memprobe_engine.recovery.case_material import evidence_turns as shared_evidence_turns
from memprobe_engine.recovery.read.scores import ScorePair, score_pairs
from memprobe_engine.replay.index import SpanRec
from memprobe_engine.replay.memory_view import item_writes
from memprobe_engine.replay.queries import EpisodeInfo, StepRef, episodes, step_events, task_text
from memprobe_engine.replay.session import ReplaySession
from memprobe_engine.recovery.read.steps import step_labeller
from memprobe_engine.recovery.read.trait import names_in, proper_names, trait_names

if TYPE_CHECKING:
    from memprobe_engine.recovery.inputs import SimUser



@dataclass(frozen=True)
class Target:
    """The hidden ground truth of one dimension, as the sessions bank holds it."""

    short: str
    explanation: str
    category: str
    task: str | None
    source: Path


@dataclass
class ModeDetail:
    """What one access mode did for this dimension, in pipeline order."""

    mode: str
    span_id: str | None = None
    retrieval: Retrieval | None = None
    retrieved: list[tuple[str, float | None, dict[str, Any] | None]] = field(default_factory=list)
    slot_fill: SlotFill | None = None
    judge: JudgeScore | None = None
    pair: ScorePair | None = None
    #: The latest re-score's reason, read from its event (the outcomes fold keeps no texts).
    rescore_reason: str | None = None
    stages: list[Any] = field(default_factory=list)
    #: Attribution stages of the latest re-score of this mode (kept in its own ``rescore`` span), so
    #: a re-run's verdicts are still shown after the inspector is reopened.
    rescore_stages: list[Any] = field(default_factory=list)
    label: AttributionLabel | None = None
    call_seqs: list[int] = field(default_factory=list)
    #: (seq, role) of each LLM call of the mode: slot_filler, recovery_judge, attribution_judge…
    calls: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class DimensionDetail:
    user_id: str
    system: str
    dimension: str
    category: str
    target: Target | None
    target_note: str | None
    task: str | None
    episode: EpisodeInfo | None
    modes: dict[str, ModeDetail]
    evidence: str | None
    evidence_source: str | None
    evidence_turns: list[EvidenceTurn]
    #: The seq of the first slot-fill: the store the inspector's ``m`` opens is the one at this point.
    fill_seq: int | None = None
    #: Per item the slot-filler read, the steps whose ops wrote it (``T1.2``, or ``T1.2 → T3.1`` when
    #: later ops changed it), since the store's last reset.
    written: dict[str, str] = field(default_factory=dict)


def resolve_sessions(session: ReplaySession) -> Path | None:
    """The sessions folder of the header, tried as given, from the working directory, then from the
    recording's parent folders (recordings are often moved next to their inputs)."""
    named = RecoveryConfig.of(session.header).sessions
    if not named:
        return None
    path = Path(str(named))
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, *(p / path for p in session.directory.parents)]
    return next((c for c in candidates if (c / "users").is_dir()), None)


@lru_cache(maxsize=64)
def _load_user(user_dir: str) -> SimUser:
    from memprobe_engine.recovery.inputs import load_user  # pydantic-heavy: import on first use

    return load_user(Path(user_dir))


def load_target(session: ReplaySession, user_id: str, dimension: str,
                system: str | None = None) -> tuple[Target | None, str | None]:
    """(target, None) or (None, why it is not available). The unit's inputs recorded in the
    recording come first; the sessions folder named in the header is the fallback for recordings
    made before units stored their inputs."""
    recorded = _recorded_target(session, user_id, dimension, system)
    if recorded is not None:
        return recorded, None
    root = resolve_sessions(session)
    named = RecoveryConfig.of(session.header).sessions
    if root is None:
        why = (f"the sessions folder {named!r} named in the header is not reachable from here" if named
               else "the header names no sessions folder")
        return None, f"hidden target not shown: {why}"
    try:
        user = _load_user(str(root / "users" / user_id))
    except MemProbeError as err:
        return None, f"hidden target not shown: {root / 'users' / user_id} does not load ({str(err)[:200]})"
    entry = user.bank.entry(dimension)
    if entry is None:
        return None, f"hidden target not shown: {dimension} is not in {root / 'users' / user_id / 'bank.json'}"
    task = user.tasks.for_dimension(dimension)
    return Target(entry.short, entry.explanation, str(entry.category), task.task if task else None,
                  root / "users" / user_id), None


def _recorded_target(session: ReplaySession, user_id: str, dimension: str, system: str | None) -> Target | None:
    with session.index.lock:
        candidates = [session.index.unit_span(user_id, system)] if system else \
            [session.index.unit_span(u, s) for (u, s) in session.index.units if u == user_id]
    for span in candidates:
        ref = span.attrs.get("inputs_ref") if span is not None else None
        if not ref:
            continue
        try:
            inputs = session.reader.payload(ref)
        except KeyError:
            continue
        entry = next((e for e in inputs.get("bank", []) if e.get("dimension") == dimension), None)
        if entry is None:
            continue
        task = next((t["task"] for t in inputs.get("tasks", []) if t.get("dimension") == dimension), None)
        return Target(entry["short"], entry["explanation"], str(entry["category"]), task,
                      session.reader.directory / "payloads.jsonl")
    return None


def episode_dialogue(session: ReplaySession, episode: EpisodeInfo) -> list[DialogueTurn]:
    """The episode's messages, each with the turn (step) it was said in."""
    return [DialogueTurn(episode.task_index, step.turn, event.role, event.content)
            for step in episode.steps for event in step_events(session, step) if event.kind == "message"]


def evidence_turns(session: ReplaySession, episode: EpisodeInfo, probe: str,
                   threshold: float = 0.5) -> list[EvidenceTurn]:
    """Messages of the episode that contain ``probe`` or share most of its content words (the
    shared rule of ``recovery/case_material.py``)."""
    return shared_evidence_turns(episode_dialogue(session, episode), probe, threshold)


def named_user_turns(dialogue: list[DialogueTurn], names: list[str]) -> list[EvidenceTurn]:
    """The user's turns that name one of the target's ``names`` or a name said beside one of them (a
    turn naming ``Ponte Vedra Beach`` also names ``Mickler’s Landing``: the user who then picks
    Mickler’s Landing shows the same local knowledge)."""
    near = [n for turn in dialogue if names_in(turn.text, names) for n in proper_names(turn.text)]
    wanted = list(dict.fromkeys([*names, *near]))
    return [EvidenceTurn(t.task_index, t.turn, t.role, t.text, 1.0) for t in dialogue
            if t.role == "user" and names_in(t.text, wanted)]


def _mode_detail(session: ReplaySession, span: SpanRec, owner: frozenset[str], scanned: int,
                 pairs: dict[Any, ScorePair], key: tuple[str, ...]) -> ModeDetail:
    mode = str(span.attrs.get("mode", "?"))
    detail = ModeDetail(mode=mode, span_id=span.span_id, pair=pairs.get((*key, mode)))
    last = span.end_line if span.end_line is not None else scanned - 1
    step = StepRef(span.span_id, "turn", -1, -1, span.line, last, owner)
    for event in step_events(session, step):
        if event.kind == "retrieval" and detail.retrieval is None:
            detail.retrieval = event
        elif event.kind == "slot_fill" and detail.slot_fill is None:
            detail.slot_fill = event
        elif event.kind == "judge_score" and event.rescore_of is None and detail.judge is None:
            detail.judge = event
        elif event.kind == "attribution_stage":
            detail.stages.append(event)
        elif event.kind == "attribution_label":
            detail.label = event
        elif event.kind == "llm_call":
            detail.call_seqs.append(event.seq)
            detail.calls.append((event.seq, str(event.role)))
    if (detail.retrieval is not None and detail.retrieval.item_ids) or (mode == "dump_all" and detail.slot_fill):
        user, system = key[0], key[1]
        # What the slot-filler read, rebuilt the way a re-score rebuilds it (recovery/case_material.py).
        at = detail.slot_fill.seq if detail.slot_fill is not None else detail.retrieval.seq  # type: ignore[union-attr]
        try:
            read = slot_fill_read(lambda seq: session.store_at(user, system, seq), system, mode, at, detail.retrieval)
        except MemProbeError:
            ids = detail.retrieval.item_ids if detail.retrieval is not None else []
            read = SlotFillRead(mode, [ReadItem(i, None, None) for i in ids])
        detail.retrieved = [(r.item_id, r.score, r.item) for r in read.items]
    return detail


def _add_rescore_stages(session: ReplaySession, modes: dict[str, ModeDetail], user_id: str, system: str,
                        dimension: str, layer: str | None = None) -> None:
    """Give each mode the attribution stages of its latest ``rescore`` span of judgment ``layer`` (by
    recording order). A named layer's span gives the mode its slot-fill, judge score, stages, label and
    calls instead: what the layer judged replaces what the run's own did, in the layer's view."""
    index = session.index
    with index.lock:
        spans = sorted(((span, frozenset(index.descendants(span))) for span in index.spans.values()
                        if span.kind == "rescore" and (span.user_id, span.system) == (user_id, system)
                        and (span.dimension or span.attrs.get("dimension")) == dimension),
                       key=lambda found: -found[0].line)
        scanned = index.scanned_lines
    done: set[str] = set()
    for span, owner in spans:  # the latest first
        mode = str(span.attrs.get("mode", "?"))
        if mode in done or mode not in modes:
            continue
        last = span.end_line if span.end_line is not None else scanned - 1
        events = list(step_events(session, StepRef(span.span_id, "turn", -1, -1, span.line, last, owner)))
        judged = [e for e in events if e.kind in ("judge_score", "slot_fill")]
        if not judged or judged[0].layer != layer:
            continue
        done.add(mode)
        stages = [e for e in events if e.kind == "attribution_stage"]
        target = modes[mode]
        if layer is None:
            target.rescore_stages = stages
            continue
        target.slot_fill = next((e for e in events if isinstance(e, SlotFill)), target.slot_fill)
        target.judge = next((e for e in events if isinstance(e, JudgeScore)), None)
        target.label = next((e for e in events if isinstance(e, AttributionLabel)), None)
        target.stages, target.rescore_stages = stages, []
        target.calls = [(e.seq, str(e.role)) for e in events if e.kind == "llm_call"]
        target.call_seqs = [seq for seq, _ in target.calls]
    if layer is not None:  # a mode the layer never judged shows nothing of the run's own
        for mode, target in modes.items():
            if mode not in done:
                target.slot_fill = target.judge = target.label = None
                target.stages, target.rescore_stages, target.calls, target.call_seqs = [], [], [], []

def dimension_detail(session: ReplaySession, user_id: str, system: str, dimension: str,
                     layer: str | None = None) -> DimensionDetail:
    """Gather the detail (reads the dimension's few spans; may rebuild a store: run it in a worker);
    the scores, fills and labels of judgment ``layer`` (None: the run's own, ``main``)."""
    index = session.index
    eps = episodes(session, user_id, system)
    episode = next((e for e in eps if e.dimension == dimension), None)
    with index.lock:  # span lookups only; reading lines and rebuilding stores happen unlocked
        unit = index.unit_span(user_id, system)
        recovery = index.find_child(unit, "recovery") if unit else None
        # The recorder puts a span's dimension in its scope (the event's field), not in attrs.
        dim_span = next((s for s in (index.children(recovery, "dimension") if recovery else [])
                         if (s.dimension or s.attrs.get("dimension")) == dimension), None)
        mode_spans = [(span, frozenset(index.descendants(span))) for span in
                      (index.children(dim_span, "mode") if dim_span else [])]
        scanned = index.scanned_lines
    pairs = score_pairs(session, layer)
    modes: dict[str, ModeDetail] = {}
    for span, owner in mode_spans:
        detail = _mode_detail(session, span, owner, scanned, pairs, (user_id, system, dimension))
        modes[detail.mode] = detail
    for (u, s, d, mode), pair in pairs.items():  # a re-score of a mode whose span is not indexed
        if (u, s, d) == (user_id, system, dimension) and mode not in modes:
            modes[mode] = ModeDetail(mode=mode, pair=pair)
    for detail in modes.values():
        if detail.pair is not None and detail.pair.latest is not None:
            latest = session.event_by_seq(detail.pair.latest.seq)
            detail.rescore_reason = latest.reason if isinstance(latest, JudgeScore) else None
    _add_rescore_stages(session, modes, user_id, system, dimension, layer)
    target, note = load_target(session, user_id, dimension, system)
    category = (target.category if target else None) or (dim_span.attrs.get("category") if dim_span else None) \
        or (episode.category if episode else "?")
    task = target.task if target and target.task else None
    if task is None and episode is not None:
        task = task_text(session, episode)
    evidence = next((s.evidence for m in modes.values() for s in m.stages if s.stage == 1 and s.evidence), None)
    probe, source = (evidence, "stage 1") if evidence else ((target.short, "target words") if target else (None, None))
    turns = evidence_turns(session, episode, probe, 0.5 if source == "stage 1" else 0.4) if episode and probe else []
    names = trait_names(target)
    if episode is not None and names:  # the user's turns that name the target's places, people…
        seen = {(u.task_index, u.turn, u.role) for u in turns}
        named = [t for t in named_user_turns(episode_dialogue(session, episode), names)
                 if (t.task_index, t.turn, t.role) not in seen]
        if named:
            turns += named
            source = f"{source} and the target's names" if source else "the target's names"
    # The user's turns first: the disclosure is what the user said, an assistant's echo comes after.
    turns.sort(key=lambda t: (t.role != "user", not names_in(t.text, names), t.task_index, t.turn))
    fills = [m.slot_fill.seq for m in modes.values() if m.slot_fill is not None]
    fill_seq = min(fills) if fills else None
    written: dict[str, str] = {}
    if fill_seq is not None:
        writes, label = item_writes(session, user_id, system, fill_seq), step_labeller(session, user_id, system)
        for item_id in {i for m in modes.values() for i, _, _ in m.retrieved}:
            steps = list(dict.fromkeys(label(seq) for seq in writes.of(item_id)))
            written[item_id] = steps[0] + (f" → {steps[-1]}" if len(steps) > 1 else "") if steps else "?"
    return DimensionDetail(user_id=user_id, system=system, dimension=dimension, category=str(category), target=target,
                           target_note=note, task=task, episode=episode, modes=modes, evidence=evidence,
                           evidence_source=source if turns or evidence else None, evidence_turns=turns,
                           fill_seq=fill_seq, written=written)
