"""Replay queries for protocol-B (paradigm) recordings: episodes per system, their sessions and probes.

A paradigm run's span tree is run → episode (attrs ``episode_id``, ``system``, the episode's paradigm,
condition, expected behaviour, split flag, ``episode_ref``) → one ``session`` span per ingested session
and one ``probe`` span per probe. The episode span's ``unit`` is the episode id, so every memory op
of that episode carries ``unit = episode_id`` and the store timeline time-travels an episode's
store exactly as it does a protocol-A user's (older recordings are upgraded on read).

Span structure comes from the run index; the protocol-B events (``session_ingest``, ``probe_answer``,
``probe_score``) are not kept by the index pass, so they are found through the reader's kind filter
(one regex pass) and parsed through the session, never by a scanner of our own. Everything here is
plain data: no Textual.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, get_args

from memprobe_engine.events.reader import DamagedEvent
from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.replay.index import SpanRec
from memprobe_engine.replay.queries import StepRef, step_events
from memprobe_engine.replay.session import ReplaySession

#: The suite name a paradigm run writes into its header (and run_start).
PARADIGM_SUITE = "paradigms"
#: Short names of the probe types, for table cells at 80 columns.
PROBE_ABBREV: dict[str, str] = {
    "current_value": "cur", "previous_value": "prev", "change_detection": "chg", "source": "src",
    "conflict_value": "cfl", "temporal": "tmp",
}


def is_paradigm_recording(session: ReplaySession) -> bool:
    """Whether the recording is a protocol-B run (its header names the paradigm suite)."""
    header = session.header
    return header.suite == PARADIGM_SUITE or HeaderConfig.of(header).suite == PARADIGM_SUITE


@dataclass(frozen=True)
class ScoreCell:
    """The scores of one (system, episode, probe): the original and, after re-runs, the latest."""

    probe_index: int
    probe_type: str
    original: dict[str, Any] | None
    latest: dict[str, Any] | None = None
    rescores: int = 0

    @property
    def current(self) -> dict[str, Any] | None:
        """The score readers count: the latest re-score where one exists."""
        return self.latest or self.original

    @property
    def value(self) -> float | None:
        """The current score, None while unscored or when excluded (an execution error)."""
        current = self.current
        if current is None or current.get("excluded"):
            return None
        return float(current["score"])

    @property
    def correct(self) -> bool | None:
        """The paper's indicator (Eq. 2): a probe is correct when its score is 1; partial credit is
        not (as upstream and ``paradigms/metrics.py``). None while unscored or excluded."""
        value = self.value
        return None if value is None else value >= 1.0


@dataclass(frozen=True)
class EpisodeRow:
    """One episode under one system, as the episode list shows it."""

    episode_id: str
    system: str
    span_id: str
    paradigm: str
    condition: str
    expected_behavior: str
    split: bool | None
    status: str | None  # None while the episode span is open; ok / error / cancelled
    sessions: int
    probes: list[ScoreCell]
    store_unit: str | None  # the unit the episode's memory ops carry (the episode id)
    #: Sessions the episode has (its span's ``sessions``); ``sessions`` counts those ingested so far,
    #: 0 for a full_context system, which ingests none and is given the whole dialogue at each probe.
    planned_sessions: int | None = None

    def sessions_text(self) -> str:
        """``9`` when all were ingested, else ``0/9`` (ingested/planned)."""
        if self.planned_sessions is None or self.planned_sessions == self.sessions:
            return str(self.sessions)
        return f"{self.sessions}/{self.planned_sessions}"

    @property
    def accuracy(self) -> float | None:
        """Share of the scored (non-excluded) probes that are correct — the report's accuracy."""
        marks = [c.correct for c in self.probes if c.correct is not None]
        return sum(marks) / len(marks) if marks else None

    @property
    def mean_score(self) -> float | None:
        """Mean of the current, non-excluded probe scores: partial credit counted."""
        values = [v for v in (c.value for c in self.probes) if v is not None]
        return sum(values) / len(values) if values else None


def episode_spans(session: ReplaySession) -> list[SpanRec]:
    """Every paradigm episode span (``episode_id`` in its attrs) in recording order; a resumed run
    that re-ran an episode keeps only its latest attempt."""
    with session.index.lock:
        spans = [s for s in session.index.spans.values() if s.kind == "episode" and "episode_id" in s.attrs]
    latest: dict[tuple[str, str], SpanRec] = {}
    for span in spans:  # dicts keep insertion (= recording) order: a later attempt replaces an earlier one
        key = (str(span.attrs["episode_id"]), _system_of(span))
        latest.pop(key, None)
        latest[key] = span
    return list(latest.values())


def _system_of(span: SpanRec) -> str:
    return str(span.attrs.get("system") or span.system or "?")


def paradigm_systems(session: ReplaySession) -> list[str]:
    """The systems of the run: those the header plans, then any the recording holds."""
    planned = list(ParadigmConfig.of(session.header).systems)
    return list(dict.fromkeys(planned + [_system_of(s) for s in episode_spans(session)]))


def events_of_kind(session: ReplaySession, kind: str) -> list[Any]:
    """Every event of a protocol-B kind, parsed, in recording order (damaged lines skipped: the
    damage banner reports them)."""
    out = []
    for line in session.reader.lines_with([f'"kind":"{kind}"'.encode()]):
        try:
            event = session.event(line)
        except DamagedEvent:
            continue
        if event.kind == kind:  # the token may sit inside a text field of another event
            out.append(event)
    return out


CellKey = tuple[str, str, int]  # system, episode, probe index


def score_layers(session: ReplaySession) -> list[str]:
    """The named score layers the recording holds (another reader, another scoring mode, …), in
    recording order; the run's own scores are no layer."""
    return list(dict.fromkeys(str(e.layer) for e in events_of_kind(session, "probe_score") if e.layer))


def score_cells(session: ReplaySession, layer: str | None = None) -> dict[CellKey, ScoreCell]:
    """Every scored (system, episode, probe) of ``layer`` (None: the run's own scores) with its
    original score and latest re-score (dicts of the probe_score fields, with ``seq``). A probe
    scored again without ``rescore_of`` (a resumed run re-ran the episode) replaces the earlier original."""
    originals: dict[CellKey, dict[str, Any]] = {}
    by_seq: dict[int, CellKey] = {}
    rescores: dict[CellKey, list[dict[str, Any]]] = defaultdict(list)
    types: dict[CellKey, str] = {}
    for event in events_of_kind(session, "probe_score"):
        if event.layer != layer:
            continue
        key = (str(event.system), str(event.episode_id), int(event.probe_index))
        data = event.model_dump()
        types[key] = str(event.probe_type)
        if event.rescore_of is None:
            originals[key] = data
            by_seq[int(event.seq)] = key
        else:
            rescores[by_seq.get(int(event.rescore_of), key)].append(data)
    keys = list(originals) + [k for k in rescores if k not in originals]
    return {k: ScoreCell(k[2], types[k], originals.get(k), rescores[k][-1] if rescores.get(k) else None,
                         len(rescores.get(k, []))) for k in keys}


def episode_rows(session: ReplaySession, system: str | None = None, layer: str | None = None) -> list[EpisodeRow]:
    """The episode list (of one system, or of all): attributes from the episode span (the recorded
    episode fills in what the span lacks), sessions ingested so far, and the score of every probe
    (of ``layer``; None: the run's own)."""
    cells = score_cells(session, layer)
    rows: list[EpisodeRow] = []
    for span in episode_spans(session):
        sys_name = _system_of(span)
        if system is not None and sys_name != system:
            continue
        episode_id = str(span.attrs["episode_id"])
        attrs = _episode_attrs(session, span)
        with session.index.lock:
            n_sessions = len(session.index.children(span, "session"))
            probe_spans = session.index.children(span, "probe")
        probes = [c for (s, e, _), c in cells.items() if s == sys_name and e == episode_id]
        known = {c.probe_index for c in probes}
        for probe_span in probe_spans:  # asked but not scored yet: an empty cell keeps the columns aligned
            index = int(probe_span.attrs.get("probe_index", -1))
            if index not in known:
                probes.append(ScoreCell(index, str(probe_span.attrs.get("probe_type", "?")), None))
                known.add(index)
        rows.append(EpisodeRow(
            episode_id=episode_id, system=sys_name, span_id=span.span_id,
            paradigm=str(attrs.get("paradigm", "?")), condition=str(attrs.get("condition", "?")),
            expected_behavior=str(attrs.get("expected_behavior", "?")),
            split=attrs.get("split") if isinstance(attrs.get("split"), bool) else None,
            status=span.status, sessions=n_sessions, probes=sorted(probes, key=lambda c: c.probe_index),
            store_unit=span.unit,
            planned_sessions=planned if isinstance(planned := span.attrs.get("sessions"), int) else None))
    return rows


@dataclass(frozen=True)
class Accuracy:
    """Probe-level accuracy of some episodes, as the report computes it (pooled over probes)."""

    accuracy: float | None  # correct / scored
    mean_score: float | None  # partial credit counted
    scored: int
    excluded: int  # execution errors: in no denominator


def system_accuracy(rows: list[EpisodeRow]) -> Accuracy:
    """Accuracy, mean score and counts over every probe of ``rows``."""
    cells = [c for r in rows for c in r.probes]
    values = [v for v in (c.value for c in cells) if v is not None]
    correct = sum(1 for c in cells if c.correct)
    excluded = sum(1 for c in cells if c.current is not None and c.current.get("excluded"))
    return Accuracy(correct / len(values) if values else None, sum(values) / len(values) if values else None,
                    len(values), excluded)


ALL_PARADIGMS = "all"


@dataclass(frozen=True)
class ParadigmFigures:
    """One system on one paradigm (``paradigm`` :data:`ALL_PARADIGMS`: on every episode): accuracy
    over its probes, plasticity over the probes of its should-update episodes and stability over
    those of its should-preserve ones, as ``paradigms/metrics.system_metrics`` defines them."""

    system: str
    paradigm: str
    accuracy: Accuracy
    plasticity: Accuracy
    stability: Accuracy


def paradigm_figures(rows: list[EpisodeRow]) -> list[ParadigmFigures]:
    """Per system (in row order), per paradigm (the suite's order, any other after) and over all
    paradigms: accuracy, plasticity and stability (the episode list's plots)."""
    from memprobe_engine.paradigms.suite import Paradigm  # pydantic models: loaded on first use

    known = list(get_args(Paradigm))
    seen = {r.paradigm for r in rows}
    paradigms = [p for p in known if p in seen] + sorted(seen - set(known))
    out = []
    for system in dict.fromkeys(r.system for r in rows):
        mine = [r for r in rows if r.system == system]
        for paradigm in [*paradigms, ALL_PARADIGMS]:
            chosen = mine if paradigm == ALL_PARADIGMS else [r for r in mine if r.paradigm == paradigm]
            out.append(ParadigmFigures(
                system, paradigm, system_accuracy(chosen),
                system_accuracy([r for r in chosen if r.expected_behavior == "should_update"]),
                system_accuracy([r for r in chosen if r.expected_behavior == "should_preserve"])))
    return out


# -- the recorded episode (gold, probes) ---------------------------------------------------------
def recorded_episode(session: ReplaySession, span: SpanRec) -> dict[str, Any] | None:
    """The episode as the run recorded it (payload ``inputs_ref`` of the episode span — a live run's
    and an import's — or the older ``episode_ref``), or None."""
    ref = span.attrs.get("inputs_ref", span.attrs.get("episode_ref"))
    if not isinstance(ref, str):
        return None
    try:
        data = session.payload(ref)
    except KeyError:
        return None
    return data if isinstance(data, dict) else None


def _episode_attrs(session: ReplaySession, span: SpanRec) -> dict[str, Any]:
    wanted = ("paradigm", "condition", "expected_behavior", "split")
    attrs = {k: span.attrs[k] for k in wanted if k in span.attrs}
    if len(attrs) < len(wanted):
        episode = recorded_episode(session, span) or {}
        metadata = episode.get("metadata") or {}
        for name in ("paradigm", "condition", "expected_behavior"):
            if name not in attrs and name in episode:
                attrs[name] = episode[name]
        if "split" not in attrs and isinstance(metadata.get("split_perturbation"), bool):
            attrs["split"] = metadata["split_perturbation"]
    return attrs


def find_episode_span(session: ReplaySession, episode_id: str, system: str) -> SpanRec | None:
    return next((s for s in episode_spans(session)
                 if s.attrs.get("episode_id") == episode_id and _system_of(s) == system), None)


# -- sessions ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionStep:
    """One ingested session of an episode, with the lines its span covers (for events and seqs)."""

    session_idx: int
    phase: str
    session_type: str
    span_id: str
    status: str | None
    step: StepRef

    @property
    def label(self) -> str:
        return f"S{self.session_idx:02d} {self.phase}"


@dataclass(frozen=True)
class ProbeStep:
    """One probe span of an episode (its events hold the reader's call, answer and score)."""

    probe_index: int
    probe_type: str
    span_id: str
    step: StepRef


@dataclass
class EpisodeSteps:
    """An episode under one system as the stepper walks it: sessions in order, then the probes."""

    episode_id: str
    system: str
    store_unit: str | None
    sessions: list[SessionStep] = field(default_factory=list)
    probes: list[ProbeStep] = field(default_factory=list)


def _last_line(session: ReplaySession, span: SpanRec) -> int:
    return span.end_line if span.end_line is not None else max(span.line, session.index.scanned_lines - 1)


def episode_steps(session: ReplaySession, episode_id: str, system: str) -> EpisodeSteps | None:
    """The sessions and probes of one episode (None when the recording has no such episode)."""
    span = find_episode_span(session, episode_id, system)
    if span is None:
        return None
    out = EpisodeSteps(episode_id, system, span.unit)
    with session.index.lock:
        children = session.index.children(span)
        owners = {c.span_id: frozenset(session.index.descendants(c)) for c in children}
        for child in children:
            ref = StepRef(child.span_id, child.kind, 0, 0, child.line, _last_line(session, child), owners[child.span_id])
            if child.kind == "session":
                out.sessions.append(SessionStep(int(child.attrs.get("session_idx", len(out.sessions))),
                                                str(child.attrs.get("phase", "?")),
                                                str(child.attrs.get("session_type", "?")), child.span_id,
                                                child.status, ref))
            elif child.kind == "probe":
                out.probes.append(ProbeStep(int(child.attrs.get("probe_index", len(out.probes))),
                                            str(child.attrs.get("probe_type", "?")), child.span_id, ref))
    return out


def span_events(session: ReplaySession, step: StepRef) -> list[Any]:
    """The events of a session or probe span (and spans below it), in recording order."""
    return step_events(session, step)
