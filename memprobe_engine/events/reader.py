"""The read model of a recording: the one owner of ``events.jsonl`` and of every scan over it.

``open_recording`` reads the header and builds (or later extends) the byte-offset index; events are
read on demand with ``pread``. Every line goes through the same checks before anything is served:
its CRC-32 seal (schema 2 on), JSON, a JSON object, upgrade from older schema versions, a string
``kind`` and an integer ``seq``; typed reads then validate it into its model from the
discriminated union. A line that fails is recorded in :attr:`RecordingReader.damage` (line ->
reason, with seq and field for a wrong-typed one) and skipped by the iterators; it is never served as
if intact. A torn last line (a crash mid-write) is reported, never served.

Two modes: typed events (:meth:`get`, :meth:`iter_events`, :meth:`iter_of`) for most callers, and
a fast dict mode (:meth:`get_dict`, :meth:`iter_dicts`) for whole-file passes that read a few fields.
Kind filters find candidate lines with one regex pass over the file and then check the *parsed*
kind, so a memory item that happens to hold ``"kind":"judge_score"`` is not served as a judge score.
"""

from __future__ import annotations

import mmap
import os
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson
from pydantic import ValidationError

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.base import SCHEMA_VERSION, EventBase
from memprobe_engine.events.checksum import unseal
from memprobe_engine.events.fs_errors import recording_os_error
from memprobe_engine.events.header import EVENTS_FILE, RecordingHeader, read_header
from memprobe_engine.events.index import LineIndex, extend_index
from memprobe_engine.events.payloads import JSONValue, PayloadReader
from memprobe_engine.events.run import INTERRUPTED_BY_CRASH
from memprobe_engine.events.union import AnyEvent, parse_event
from memprobe_engine.events.upgrade import upgrade_event

_CACHE_SIZE = 4096
_SCAN_WINDOW = 16 << 20  # bytes searched per step by lines_with
#: raw_lines reads neighbouring lines with one pread when the gap between them is at most this,
#: and never more than _READ_MAX bytes at once (bounds the buffer held while a batch is decoded).
_READ_GAP = 64 << 10
_READ_MAX = 1 << 20
_OFFSET_CHUNK = 65_536

EventDict = dict[str, Any]
E = TypeVar("E", bound=EventBase)


@dataclass
class DamageReport:
    """Everything wrong with a recording, found by whichever reader got there.

    ``bad_lines`` maps a 0-based line of ``events.jsonl`` to why it is not served (checksum, JSON,
    type, span tree); ``unclosed_spans`` are spans opened and never closed; ``payload_problems`` maps
    a payload reference (or ``payloads.jsonl line N``) to what is wrong with it.
    """

    tail_bytes: int = 0
    bad_lines: dict[int, str] = field(default_factory=dict)
    unclosed_spans: list[str] = field(default_factory=list)
    #: Spans a resumed run closed because an earlier session was killed first: named, not damage.
    interrupted_spans: list[str] = field(default_factory=list)
    payload_problems: dict[str, str] = field(default_factory=dict)
    payload_tail_bytes: int = 0

    @property
    def clean(self) -> bool:
        return self.count == 0

    @property
    def count(self) -> int:
        """Problems found: torn tails count one each, then every bad line, open span and payload."""
        return (bool(self.tail_bytes) + len(self.bad_lines) + len(self.unclosed_spans) +
                len(self.payload_problems) + bool(self.payload_tail_bytes))

    def interrupted_note(self) -> str | None:
        """One line naming the spans closed on resume (None when there are none)."""
        if not self.interrupted_spans:
            return None
        return (f"{len(self.interrupted_spans)} span(s) {INTERRUPTED_BY_CRASH}, closed when the run resumed "
                f"(not damage)")

    def first_lines(self, n: int = 3) -> list[int]:
        return sorted(self.bad_lines)[:n]

    def summary(self) -> str:
        """One line naming the counts and the first bad lines (1-based), the same for every reader."""
        parts: list[str] = []
        if self.bad_lines:
            first = ", ".join(str(line + 1) for line in self.first_lines())
            parts.append(f"{len(self.bad_lines)} damaged line(s) (first: line {first}: "
                         f"{self.bad_lines[min(self.bad_lines)]})")
        if self.tail_bytes:
            parts.append(f"a torn last line ({self.tail_bytes:,} bytes)")
        if self.unclosed_spans:
            parts.append(f"{len(self.unclosed_spans)} span(s) never closed")
        if self.payload_problems:
            first_ref = next(iter(self.payload_problems))
            parts.append(f"{len(self.payload_problems)} payload problem(s) (first: {first_ref[:40]} "
                         f"{self.payload_problems[first_ref]})")
        if self.payload_tail_bytes:
            parts.append(f"a torn last payload line ({self.payload_tail_bytes:,} bytes)")
        return "; ".join(parts) if parts else "intact"


class DamagedEvent(RecordingError):
    """A line in the middle of ``events.jsonl`` that is not a valid, intact event."""


def validation_reason(err: ValidationError, data: EventDict) -> str:
    """``seq N: field a.b: message`` for the first error pydantic found."""
    first = err.errors()[0]
    where = ".".join(map(str, first["loc"])) or "(event)"
    seq = data.get("seq")
    prefix = f"seq {seq}: " if isinstance(seq, int) else ""
    return f"{prefix}field {where}: {first['msg']}"[:300]


class RecordingReader:
    """Random and sequential access to one recording's events by line number (== ``seq`` when the
    recording was written by one writer from the start)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.header: RecordingHeader = read_header(directory)
        self.path = directory / EVENTS_FILE
        if not self.path.is_file():
            raise RecordingError(f"{directory}: {EVENTS_FILE} is missing; the run never wrote an event. "
                                 f"Re-run it, or pass another recording.")
        self.index = LineIndex()
        self.damage = DamageReport()
        self._version = self.header.schema_version
        #: Schema 2 on: every line must carry its seal; older recordings are checked where sealed
        #: (a resumed old run appends sealed lines).
        self._seal_required = self._version >= 2
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except OSError as err:
            raise recording_os_error(self.path, err, "read the events") from None
        self._cache: OrderedDict[int, AnyEvent] = OrderedDict()
        self._payloads = PayloadReader(directory)
        try:
            self.refresh()
        except OSError as err:
            os.close(self._fd)
            raise recording_os_error(self.path, err, "read the events") from None

    # -- index -------------------------------------------------------------------------------
    def refresh(self) -> int:
        """Index lines appended since the last call (follow mode); returns how many are new."""
        added = extend_index(self.index, self.path)
        self.damage.tail_bytes = self.index.tail_bytes
        return added

    def __len__(self) -> int:
        return len(self.index)

    # -- access ------------------------------------------------------------------------------
    def raw(self, line: int) -> bytes:
        """The bytes of ``line`` as stored (seal and newline included)."""
        offset, length = self.index.span(line)
        return os.pread(self._fd, length, offset)

    def raw_lines(self, lines: Iterable[int]) -> Iterator[tuple[int, bytes]]:
        """(line, stored bytes) for ascending ``lines``: what :meth:`raw` returns, but lines close to
        each other are read with one ``pread`` (a whole-file pass costs a few hundred reads, not one
        system call per line)."""
        ordered = lines if isinstance(lines, (range, list)) else list(lines)
        # One buffer for the whole pass, filled in place: a fresh multi-megabyte bytes object per
        # read would come from the heap and leave it grown (peak RSS), the lines are copied out.
        buffer = bytearray(_READ_MAX)
        view = memoryview(buffer)
        ends = self.index.ends
        # Offsets are turned into Python ints a chunk at a time (a million lines at once held two
        # lists of a million ints).
        for chunk in range(0, len(ordered), _OFFSET_CHUNK):
            part = ordered[chunk:chunk + _OFFSET_CHUNK]
            at = np.asarray(part, dtype=np.int64)
            stops: list[int] = ends[at].tolist()
            starts: list[int] = np.where(at > 0, ends[np.maximum(at - 1, 0)], 0).tolist()
            yield from self._read_runs(part, starts, stops, view)

    def _read_runs(self, part: Sequence[int], starts: list[int], stops: list[int],
                   view: memoryview) -> Iterator[tuple[int, bytes]]:
        """The lines of one chunk, neighbours read together into ``view``."""
        first, count = 0, len(stops)
        while first < count:
            last, begin, end = first + 1, starts[first], stops[first]
            if end - begin > _READ_MAX:  # a line longer than the buffer: read on its own
                yield part[first], os.pread(self._fd, end - begin, begin)
                first = last
                continue
            while last < count and starts[last] - end <= _READ_GAP and stops[last] - begin <= _READ_MAX:
                end = stops[last]
                last += 1
            got = os.preadv(self._fd, [view[:end - begin]], begin)
            for k in range(first, last):
                yield part[k], bytes(view[starts[k] - begin:min(stops[k] - begin, got)])
            first = last

    def _damaged(self, line: int, reason: str) -> DamagedEvent:
        self.damage.bad_lines[line] = reason
        return DamagedEvent(f"{self.path}: line {line + 1} is not a valid event: {reason}.")

    def decode(self, line: int, raw: bytes) -> EventDict:
        """Check and decode one stored line (see the module docstring); DamagedEvent on failure."""
        body, sealed = unseal(raw)
        if sealed is False:
            raise self._damaged(line, "checksum mismatch (the line was changed after it was written)")
        if sealed is None and self._seal_required:
            raise self._damaged(line, "no checksum (the line was not written by the recording writer)")
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise self._damaged(line, f"not JSON ({str(err)[:80]})") from None
        if not isinstance(data, dict):
            raise self._damaged(line, "not a JSON object")
        if self._version < SCHEMA_VERSION:
            try:
                data = upgrade_event(data, self._version, self.header.suite)
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                raise self._damaged(line, f"cannot be upgraded from schema {self._version} ({err!r:.60})") from None
        if not isinstance(data.get("kind"), str):
            raise self._damaged(line, "no string field kind")
        seq = data.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise self._damaged(line, f"field seq: not an integer ({seq!r:.30})")
        checked: EventDict = data
        return checked

    def get_dict(self, line: int) -> EventDict:
        """The event at ``line`` as a checked, upgraded dict (no model validation)."""
        if line < 0:
            line += len(self)
        return self.decode(line, self.raw(line))

    def parse(self, line: int, data: EventDict | None = None) -> AnyEvent:
        """The typed event at ``line``, validated but not cached (for whole-file passes)."""
        data = self.get_dict(line) if data is None else data
        try:
            return parse_event(data)
        except ValidationError as err:
            raise self._damaged(line, validation_reason(err, data)) from None
        except (ValueError, TypeError, RecursionError) as err:
            raise self._damaged(line, f"not a valid event ({type(err).__name__})") from None

    def get(self, line: int) -> AnyEvent:
        """The parsed event at ``line`` (cached)."""
        if line < 0:
            line += len(self)
        cached = self._cache.get(line)
        if cached is not None:
            self._cache.move_to_end(line)
            return cached
        event = self.parse(line)
        self._cache[line] = event
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return event

    # -- scans ---------------------------------------------------------------------------------
    def candidate_lines(self, kinds: Iterable[str] | None, start: int = 0, stop: int | None = None) -> Iterable[int]:
        """Lines in [start, stop) that may hold an event of ``kinds`` (all lines when None). Lines whose
        bytes do not name the kind are skipped unread; the caller checks the parsed kind."""
        stop = len(self) if stop is None else min(stop, len(self))
        start = max(0, start)
        if kinds is None or self._version < 1:  # schema 0 spelled the kind differently
            return range(start, stop)
        return self.lines_with([f'"kind":"{kind}"'.encode() for kind in kinds], start, stop)

    def iter_dicts(self, kinds: Iterable[str] | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[tuple[int, EventDict]]:
        """(line, checked dict) for every intact line of ``kinds`` in order — the fast mode."""
        wanted = None if kinds is None else frozenset(kinds)
        for line, raw in self.raw_lines(self.candidate_lines(wanted, start, stop)):
            try:
                data = self.decode(line, raw)
            except DamagedEvent:
                continue
            if wanted is None or data["kind"] in wanted:
                yield line, data

    def iter_events(self, kinds: Iterable[str] | None = None, start: int = 0,
                    stop: int | None = None, *, cache: bool = True) -> Iterator[AnyEvent]:
        """Typed events in order, skipping damaged lines; ``kinds`` is checked on the parsed event."""
        wanted = None if kinds is None else frozenset(kinds)
        for line in self.candidate_lines(wanted, start, stop):
            try:
                if cache:
                    event = self.get(line)
                else:
                    event = self.parse(line)
            except DamagedEvent:
                continue
            if wanted is None or event.kind in wanted:
                yield event

    def iter_lines(self, kinds: Iterable[str] | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[tuple[int, AnyEvent]]:
        """(line, typed event) pairs, uncached, for passes that need to know where each event is."""
        wanted = None if kinds is None else frozenset(kinds)
        for line, raw in self.raw_lines(self.candidate_lines(wanted, start, stop)):
            try:
                event = self.parse(line, self.decode(line, raw))
            except DamagedEvent:
                continue
            if wanted is None or event.kind in wanted:
                yield line, event

    def iter_of(self, *types: type[E], start: int = 0, stop: int | None = None) -> Iterator[E]:
        """Events of the given model classes, typed as such (``reader.iter_of(JudgeScore)``)."""
        kinds = [t.model_fields["kind"].default for t in types]
        for event in self.iter_events(kinds, start, stop):
            if isinstance(event, types):
                yield event

    def lines_with(self, tokens: Sequence[bytes], start: int = 0, stop: int | None = None) -> list[int]:
        """Line numbers in [start, stop) whose bytes contain any of ``tokens``, found by one regex
        pass over the file through ``mmap`` (pages released as it goes), not line by line."""
        stop = len(self) if stop is None else min(stop, len(self))
        if start >= stop or not tokens:
            return []
        begin, end = self.index.span(start)[0], int(self.index.ends[stop - 1])
        pattern = re.compile(b"|".join(re.escape(token) for token in tokens))
        offsets: list[int] = []
        with open(self.path, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                position = begin
                while position < end:
                    window_end = min(end, position + _SCAN_WINDOW)
                    if window_end < end:  # finish the line, so no token is cut in two
                        newline = mapped.find(b"\n", window_end, end)
                        window_end = end if newline < 0 else newline + 1
                    offsets.extend(match.start() for match in pattern.finditer(mapped, position, window_end))
                    if hasattr(mapped, "madvise"):
                        aligned = position - position % mmap.PAGESIZE
                        mapped.madvise(mmap.MADV_DONTNEED, aligned, window_end - aligned)
                    position = window_end
            finally:
                mapped.close()
        if not offsets:
            return []
        found = np.searchsorted(self.index.ends, np.asarray(offsets, dtype=np.int64), side="right")
        return [int(line) for line in np.unique(found)]

    # -- payloads and integrity ----------------------------------------------------------------
    @property
    def payloads(self) -> PayloadReader:
        return self._payloads

    def payload(self, ref: str) -> JSONValue:
        """Resolve a content-addressed payload reference (checked against its hash)."""
        return self._payloads.get(ref)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_recording(directory: Path | str) -> RecordingReader:
    """Open a recording for reading; RecordingError with a clear message if it is not one."""
    return RecordingReader(Path(directory))
