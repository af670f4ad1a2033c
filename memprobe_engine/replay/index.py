"""The replay index: one pass over a recording that keeps its span tree and its scoring events.

The reader already knows where every line starts; this pass finds the few kinds the replay UI needs
up front (span begin/end, run start/end, episode ends, preference judgments, footprints, slot-fills,
judge scores, attribution, errors) and parses only those lines. It reads ``events.jsonl`` in windows
(``pread``) and searches each with one compiled regex, so lines of other kinds (the bulk: messages, LLM calls,
memory ops) are never decoded; they are read lazily when a screen shows them. The pass reports
progress, can be stopped between windows, and can be resumed from where it stopped, which is how a
followed live recording is kept current. It uses its own file handle, never the reader's event
cache, so it may run in a thread next to code that reads events.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from memprobe_engine.events.reader import RecordingReader
from memprobe_engine.events.upgrade import upgrade_event

#: Kinds parsed during the pass; everything else stays undecoded until shown.
INDEXED_KINDS: tuple[str, ...] = (
    "span_begin", "span_end", "run_start", "run_end", "error", "episode_end", "preference_judgment",
    "memory_footprint", "slot_fill", "judge_score", "attribution_label",
)
#: The fields kept per kind: only what overview numbers need, so a million-event run's index stays
#: small (texts such as reasons are read from the event's line when a screen shows them).
_KEEP: dict[str, tuple[str, ...]] = {
    "run_start": ("seq", "run_id", "resumed"),
    "run_end": ("seq", "status", "reason"),
    "error": ("seq", "user_id", "system", "where", "error_type", "message"),
    "episode_end": ("seq", "span_id", "user_id", "system", "task_index", "end_reason", "turns"),
    "memory_footprint": ("seq", "user_id", "system", "n_items", "mean_chars"),
    "slot_fill": ("seq", "user_id", "system", "dimension", "mode", "overflow"),
    "judge_score": ("seq", "user_id", "system", "dimension", "mode", "score", "rescore_of", "excluded"),
    "attribution_label": ("seq", "user_id", "system", "dimension", "mode", "label"),
}
_PATTERN = re.compile(rb'"kind":"(' + b"|".join(k.encode() for k in INDEXED_KINDS) + rb')"')
_WINDOW = 8 << 20  # bytes decoded per step: bounds the copy and the time between progress reports

Progress = Callable[[int, int], None]
StopFlag = Callable[[], bool]


@dataclass(slots=True)
class SpanRec:
    """One span: where it begins and ends (line numbers), what it is, and its child spans."""

    span_id: str
    parent_id: str | None
    kind: str
    name: str
    attrs: dict[str, Any]
    line: int  # == seq for a recording written by one writer; seqs are read from lines when needed
    user_id: str | None = None
    system: str | None = None
    dimension: str | None = None
    end_line: int | None = None
    status: str | None = None  # None while open; ok / error / cancelled once closed
    error: str | None = None
    #: Child span ids; None for a leaf (most spans are turns or stages: no list for them).
    children: list[str] | None = None


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
        while span_id is not None:
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
            out.add(current)
            stack.extend(self.spans[current].children or ())
        return out

    def find_child(self, span: SpanRec, kind: str, **attrs: Any) -> SpanRec | None:
        for child in self.children(span, kind):
            if all(child.attrs.get(k) == v for k, v in attrs.items()):
                return child
        return None


def extend_run_index(index: RunIndex, reader: RecordingReader, progress: Progress | None = None,
                     should_stop: StopFlag | None = None) -> int:
    """Scan the lines the reader has indexed but this index has not; returns how many were scanned.

    Stops early (between windows) when ``should_stop`` returns True; the next call resumes there.
    """
    ends = reader.index.ends  # the reader may extend its index meanwhile: work on this snapshot
    total = int(ends.shape[0])
    start_line = index.scanned_lines
    if start_line >= total:
        return 0
    legacy = reader.header.schema_version < 1
    # pread into a bounded buffer rather than mmap: mapped file pages would count against the
    # process's resident memory until released, and the point is to stay far below the file size.
    fd = os.open(reader.path, os.O_RDONLY)
    try:
        line = start_line
        while line < total:
            if should_stop is not None and should_stop():
                break
            byte_start = int(ends[line - 1]) if line else 0
            stop_line = max(line + 1, int(np.searchsorted(ends, byte_start + _WINDOW, side="right")))
            stop_line = min(stop_line, total)
            window = os.pread(fd, int(ends[stop_line - 1]) - byte_start, byte_start)
            with index.lock:
                if legacy:
                    _scan_legacy(index, reader, window, ends, line, stop_line, byte_start)
                else:
                    _scan_window(index, window, ends, line, byte_start)
                index.scanned_lines = line = stop_line
            if progress is not None:
                progress(line, total)
    finally:
        os.close(fd)
    return index.scanned_lines - start_line


def _scan_window(index: RunIndex, window: bytes, ends: np.ndarray, first_line: int, byte_start: int) -> None:
    positions = [m.start() for m in _PATTERN.finditer(window)]
    if not positions:
        return
    stop_line = first_line + int(np.searchsorted(ends[first_line:], byte_start + len(window), side="left")) + 1
    local_ends = ends[first_line:stop_line] - byte_start
    # Python ints for the per-line arithmetic below: numpy scalars are several times slower there.
    offsets = [0, *local_ends.tolist()]
    previous = -1
    for local in np.searchsorted(local_ends, np.asarray(positions, dtype=np.int64), side="right").tolist():
        if local == previous:
            continue
        previous = local
        raw = window[offsets[local]:offsets[local + 1]]
        if b'"kind":"slot_fill"' in raw and b'"overflow":true' not in raw:
            continue  # only overflowing fills matter to the overview; the rest are read on demand
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            index.bad_lines[first_line + local] = f"not JSON: {err}"
            continue
        if isinstance(data, dict):
            _absorb(index, data, first_line + local)
        else:
            index.bad_lines[first_line + local] = "not a JSON object"


def _scan_legacy(index: RunIndex, reader: RecordingReader, window: bytes, ends: np.ndarray, first: int,
                 stop: int, byte_start: int) -> None:
    """Old schema versions spell the kind differently: decode and upgrade every line (they are small)."""
    for line in range(first, stop):
        lo = (int(ends[line - 1]) if line else 0) - byte_start
        try:
            data = orjson.loads(window[lo:int(ends[line]) - byte_start])
        except orjson.JSONDecodeError as err:
            index.bad_lines[line] = f"not JSON: {err}"
            continue
        if isinstance(data, dict):
            data = upgrade_event(data, reader.header.schema_version)
            if data.get("kind") in INDEXED_KINDS:
                _absorb(index, data, line)


def _intern(value: Any) -> Any:
    # The same user, system and dimension names repeat on every span: share one string object.
    return sys.intern(value) if isinstance(value, str) else value


def _absorb(index: RunIndex, data: dict[str, Any], line: int) -> None:
    kind = data.get("kind")
    if kind == "span_begin":
        _begin(index, data, line)
        return
    if kind == "span_end":
        rec = index.spans.get(data.get("span_id") or "")
        if rec is not None:
            rec.end_line = line
            rec.status = _intern(str(data.get("status", "ok")))
            rec.error = data.get("error")
        return
    if kind == "preference_judgment":
        unit = index.unit_of(data.get("span_id"))
        if data.get("mean") is not None and unit is not None:
            acc = index.preference.setdefault((unit, int(data.get("task_index", 0))), [0.0, 0.0])
            acc[0] += float(data["mean"])
            acc[1] += 1
        return
    if kind == "run_start":
        index.run_sessions += 1
        index.run_status = None
    elif kind == "run_end":
        index.run_status = str(data.get("status"))
    kept = {name: _intern(data[name]) for name in _KEEP.get(str(kind), ()) if name in data}
    kept["_line"] = line
    index.by_kind.setdefault(str(kind), []).append(kept)


def _begin(index: RunIndex, data: dict[str, Any], line: int) -> None:
    span_id = data.get("span_id")
    if not isinstance(span_id, str):
        index.bad_lines[line] = "span_begin without span_id"
        return
    parent_rec = index.spans.get(data.get("parent_span_id") or "")
    rec = SpanRec(span_id=span_id, parent_id=parent_rec.span_id if parent_rec else data.get("parent_span_id"),
                  kind=_intern(str(data.get("span_kind"))), name=_intern(str(data.get("name", ""))),
                  attrs={_intern(k): _intern(v) for k, v in (data.get("attrs") or {}).items()},
                  line=line, user_id=_intern(data.get("user_id")),
                  system=_intern(data.get("system")), dimension=_intern(data.get("dimension")))
    index.spans[span_id] = rec
    if parent_rec is not None:
        if parent_rec.children is None:
            parent_rec.children = []
        parent_rec.children.append(span_id)
    else:
        index.roots.append(span_id)
    if rec.kind == "unit" and rec.user_id and rec.system:
        index.units.setdefault((rec.user_id, rec.system), []).append(span_id)


def build_run_index(reader: RecordingReader, progress: Progress | None = None,
                    should_stop: StopFlag | None = None) -> RunIndex:
    """A fresh index of everything the reader has indexed so far (see :func:`extend_run_index`)."""
    index = RunIndex()
    extend_run_index(index, reader, progress, should_stop)
    return index

