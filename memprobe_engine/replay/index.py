"""The replay index: one pass over a recording that keeps its span tree and its scoring events.

The reader already knows where every line starts; this pass asks it, window by window, for the few
kinds the replay UI needs up front (span begin/end, run start/end, episode ends, preference
judgments, footprints, errors, and the kinds its protocol's folds ask for) in its fast dict mode, so
lines of other kinds (the bulk: messages, LLM calls, memory ops) are never decoded; they are read
lazily when a screen shows them. A protocol's scoring events are validated and handed to its
:class:`IndexFold` (protocol A's outcomes fold, the report's own) as they arrive, so an overview
needs no second pass and keeps no dict per scoring event. The span tree follows the rules of ``events/spans.py``: a reused span id
or a parent not opened before is filed as a bad line and never linked, so no walk can loop. The pass
reports progress, can be stopped between windows, and can be resumed from where it stopped, which is
how a followed live recording is kept current. It never touches the reader's event cache, so it may
run in a thread next to code that reads events.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, overload

from memprobe_engine.events.reader import DamagedEvent, RecordingReader
from memprobe_engine.events.spans import SpanTree
from memprobe_engine.events.union import AnyEvent

#: Kinds parsed during the pass; everything else stays undecoded until shown.
INDEXED_KINDS: tuple[str, ...] = (
    "span_begin", "span_end", "run_start", "run_end", "error", "episode_end", "preference_judgment",
    "memory_footprint",
)
#: The fields kept per kind: only what overview numbers need, so a million-event run's index stays
#: small (texts such as reasons are read from the event's line when a screen shows them).
_KEEP: dict[str, tuple[str, ...]] = {
    "run_start": ("seq", "run_id", "resumed"),
    "run_end": ("seq", "status", "reason"),
    "error": ("seq", "user_id", "system", "where", "error_type", "message"),
    "episode_end": ("seq", "span_id", "user_id", "system", "task_index", "end_reason", "turns"),
    "memory_footprint": ("seq", "user_id", "system", "n_items", "mean_chars"),
}
_WINDOW_LINES = 5_000  # lines per step: bounds progress and stop latency, and the parsed dicts held at once (RSS)

Progress = Callable[[int, int], None]
StopFlag = Callable[[], bool]


class IndexFold(Protocol):
    """A protocol's running summary of its own events, kept current by the index pass (no second pass,
    no dict kept per event). Attached to a session's index by name (:meth:`RunIndex.attach`)."""

    #: The event kinds the pass validates and hands to :meth:`add`.
    kinds: frozenset[str]

    def add(self, event: AnyEvent) -> None:
        """Take in one validated event of :attr:`kinds`, in recording order."""
        ...

    def add_span(self, span: SpanRec) -> None:
        """Take in one span as it opens (span fields are checked, not validated into models)."""
        ...


FoldT = TypeVar("FoldT", bound=IndexFold)


@dataclass(slots=True)
class SpanRec:
    """One span: where it begins and ends (line numbers), what it is, and its child spans."""

    span_id: str
    parent_id: str | None
    kind: str
    name: str
    attrs: dict[str, Any]
    line: int  # == seq for a recording written by one writer; seqs are read from lines when needed
    unit: str | None = None
    user_id: str | None = None
    system: str | None = None
    dimension: str | None = None
    end_line: int | None = None
    status: str | None = None  # None while open; ok / error / cancelled once closed
    error: str | None = None
    #: Child span ids; None for a leaf (most spans are turns or stages: no list for them).
    children: list[str] | None = None

    def int_attr(self, name: str, default: int) -> int:
        """An integer attribute (task_index, turn, …), or ``default`` when absent or not an integer:
        attrs are free-form, so a damaged or foreign recording may hold anything there."""
        value = self.attrs.get(name, default)
        return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass
class RunIndex:
    """The span tree and scoring events of one recording, extendable as the recording grows."""

    spans: dict[str, SpanRec] = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)
    by_kind: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    units: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # attempts, oldest first
    #: (unit span id, task index) -> [sum of per-turn preference means, count]: metric D without keeping
    #: one event per turn, and per unit *attempt*, so a re-run unit's earlier attempt is not counted.
    preference: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    bad_lines: dict[int, str] = field(default_factory=dict)
    #: Protocol folds by name (e.g. protocol A's outcomes), fed as lines arrive.
    folds: dict[str, IndexFold] = field(default_factory=dict, repr=False)
    #: The span tree's rules (events/spans.py): a reused id or a parent not opened before is damage.
    tree: SpanTree = field(default_factory=SpanTree, repr=False)
    scanned_lines: int = 0
    run_status: str | None = None  # status of the last run_end after the last run_start
    run_sessions: int = 0
    #: Held while a window is absorbed; readers that iterate the dicts above hold it too, so a
    #: follow pass in a worker thread never changes a dict another thread is walking.
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def events(self, kind: str) -> list[dict[str, Any]]:
        """Kept event dicts of one kind, in recording order (each has ``_line`` added)."""
        return self.by_kind.get(kind, [])

    def unit_span(self, user_id: str, system: str) -> SpanRec | None:
        """The latest attempt at a unit: a resumed run re-runs an interrupted unit in a new span."""
        attempts = self.units.get((user_id, system))
        return self.spans[attempts[-1]] if attempts else None

    def children(self, span: SpanRec, kind: str | None = None) -> list[SpanRec]:
        found = [self.spans[c] for c in span.children or ()]
        return [s for s in found if kind is None or s.kind == kind]

    def unit_of(self, span_id: str | None) -> str | None:
        """The id of the ``unit`` span at or above ``span_id`` (None outside any unit)."""
        steps = 0
        while span_id is not None and steps <= len(self.spans):  # bounded even on a damaged tree
            steps += 1
            rec = self.spans.get(span_id)
            if rec is None:
                return None
            if rec.kind == "unit":
                return span_id
            span_id = rec.parent_id
        return None

    def descendants(self, span: SpanRec) -> set[str]:
        """The span's id and the ids of every span below it."""
        out: set[str] = set()
        stack = [span.span_id]
        while stack:
            current = stack.pop()
            if current in out:
                continue
            out.add(current)
            stack.extend(self.spans[current].children or ())
        return out

    def kinds(self) -> tuple[str, ...]:
        """The kinds a pass decodes: the index's own and every attached fold's."""
        extra = sorted({kind for fold in self.folds.values() for kind in fold.kinds} - set(INDEXED_KINDS))
        return (*INDEXED_KINDS, *extra)

    def attach(self, name: str, fold: FoldT, reader: RecordingReader) -> FoldT:
        """The fold attached under ``name``; ``fold`` is attached first when none is, and brought up to
        the lines already indexed (one kind-filtered scan of them), so later passes keep it current."""
        with self.lock:
            found = self.folds.get(name)
            if isinstance(found, type(fold)):
                return found
            if found is not None:
                raise TypeError(f"index fold {name!r} is a {type(found).__name__}, not a {type(fold).__name__}")
            for rec in sorted(self.spans.values(), key=lambda r: r.line):
                fold.add_span(rec)
            for at, data in reader.iter_dicts(tuple(fold.kinds), 0, self.scanned_lines):
                if (event := _validated(reader, at, data)) is not None:
                    fold.add(event)
            self.folds[name] = fold
            return fold

    def find_child(self, span: SpanRec, kind: str, **attrs: object) -> SpanRec | None:
        for child in self.children(span, kind):
            if all(child.attrs.get(k) == v for k, v in attrs.items()):
                return child
        return None


def extend_run_index(index: RunIndex, reader: RecordingReader, progress: Progress | None = None,
                     should_stop: StopFlag | None = None) -> int:
    """Absorb the lines the reader has indexed but this index has not; returns how many were covered.

    Lines come from the reader's kind-filtered dict mode (one byte scan per window, seal and
    envelope checked, parsed kind checked), so damage is judged by the read model, not here. Stops
    early (between windows) when ``should_stop`` returns True; the next call resumes there.
    """
    total = len(reader)  # the reader may extend its index meanwhile: cover what it has now
    start_line = index.scanned_lines
    if start_line >= total:
        return 0
    line = start_line
    kinds = index.kinds()
    fold_of_kind = {kind: [fold for fold in index.folds.values() if kind in fold.kinds] for kind in kinds}
    while line < total:
        if should_stop is not None and should_stop():
            break
        stop_line = min(total, line + _WINDOW_LINES)
        found: list[tuple[int, dict[str, Any], AnyEvent | None]] = []
        for at, data in reader.iter_dicts(kinds, line, stop_line):
            if data["kind"] in _SPAN_KINDS:
                found.append((at, data, None))
            elif (event := _validated(reader, at, data)) is not None:
                found.append((at, data, event))
        with index.lock:
            for at, data, event in found:
                if event is not None and fold_of_kind[event.kind]:
                    for fold in fold_of_kind[event.kind]:
                        fold.add(event)
                    if event.kind not in INDEXED_KINDS:
                        continue
                _absorb(index, data, at)
            index.scanned_lines = line = stop_line
        if progress is not None:
            progress(line, total)
    return index.scanned_lines - start_line


_SPAN_KINDS = frozenset({"span_begin", "span_end"})


def _validated(reader: RecordingReader, line: int, data: dict[str, Any]) -> AnyEvent | None:
    """Scoring and lifecycle events are few: validate them into their models, so a wrong-typed
    field is damage (filed in ``reader.damage``; None here) rather than a crash in a fold. Spans are
    many and are checked field by field in :func:`_begin`."""
    try:
        return reader.parse(line, data)
    except DamagedEvent:
        return None


@overload
def _intern(value: str) -> str: ...
@overload
def _intern(value: object) -> object: ...
def _intern(value: object) -> object:
    # The same user, system and dimension names repeat on every span: share one string object.
    return sys.intern(value) if isinstance(value, str) else value


def _text(value: object) -> str | None:
    return sys.intern(value) if isinstance(value, str) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _absorb(index: RunIndex, data: dict[str, Any], line: int) -> None:
    kind = data["kind"]
    if kind == "span_begin":
        _begin(index, data, line)
        return
    if kind == "span_end":
        span_id = data.get("span_id")
        problem = index.tree.end(span_id) if isinstance(span_id, str) else "span_end without a span id"
        if problem is not None:
            index.bad_lines[line] = problem
            return
        rec = index.spans.get(span_id) if isinstance(span_id, str) else None
        if rec is not None:
            rec.end_line = line
            status = data.get("status", "ok")
            rec.status = _intern(status if isinstance(status, str) else "error")
            error = data.get("error")
            rec.error = error if isinstance(error, str) else None
        return
    if kind == "preference_judgment":
        unit = index.unit_of(_text(data.get("span_id")))
        mean, task = _number(data.get("mean")), data.get("task_index", 0)
        if mean is not None and unit is not None and isinstance(task, int):
            acc = index.preference.setdefault((unit, task), [0.0, 0.0])
            acc[0] += mean
            acc[1] += 1
        return
    if kind == "run_start":
        index.run_sessions += 1
        index.run_status = None
    elif kind == "run_end":
        status = data.get("status")
        index.run_status = status if isinstance(status, str) else "failed"
    kept = {name: _intern(data[name]) for name in _KEEP.get(kind, ()) if name in data
            and _scalar(data[name])}
    kept["_line"] = line
    index.by_kind.setdefault(kind, []).append(kept)


def _scalar(value: object) -> bool:
    """Kept fields are names and numbers; a list or object there is a damaged event, left out."""
    return value is None or isinstance(value, (str, int, float, bool))


def _begin(index: RunIndex, data: dict[str, Any], line: int) -> None:
    span_id, parent = data.get("span_id"), data.get("parent_span_id")
    if not isinstance(span_id, str):
        index.bad_lines[line] = "span_begin without span_id"
        return
    parent_id = parent if isinstance(parent, str) else None
    problem = index.tree.begin(span_id, parent_id, line)
    if problem is not None:
        index.bad_lines[line] = problem
        if span_id in index.spans:
            return  # a reused id: the first span keeps it, so no span becomes its own ancestor
        parent_id = None  # unknown parent: shown as a root rather than linked to a later span
    parent_rec = index.spans.get(parent_id) if parent_id is not None else None
    attrs = data.get("attrs")
    rec = SpanRec(span_id=span_id, parent_id=parent_rec.span_id if parent_rec else None,
                  kind=_intern(str(data.get("span_kind"))), name=_intern(str(data.get("name", ""))),
                  attrs={_intern(k): _intern(v) for k, v in attrs.items()} if isinstance(attrs, dict) else {},
                  line=line, unit=_text(data.get("unit")), user_id=_text(data.get("user_id")),
                  system=_text(data.get("system")), dimension=_text(data.get("dimension")))
    index.spans[span_id] = rec
    if parent_rec is not None:
        if parent_rec.children is None:
            parent_rec.children = []
        parent_rec.children.append(span_id)
    else:
        index.roots.append(span_id)
    if rec.kind == "unit" and rec.user_id and rec.system:
        index.units.setdefault((rec.user_id, rec.system), []).append(span_id)
    for fold in index.folds.values():
        fold.add_span(rec)


def build_run_index(reader: RecordingReader, progress: Progress | None = None,
                    should_stop: StopFlag | None = None) -> RunIndex:
    """A fresh index of everything the reader has indexed so far (see :func:`extend_run_index`)."""
    index = RunIndex()
    extend_run_index(index, reader, progress, should_stop)
    return index

