"""Lazy recording reader: opens a million-event recording without parsing it.

``open_recording`` reads the header and builds (or later extends) the byte-offset index; events
are parsed on demand with ``pread`` and kept in a bounded LRU cache. Lines that fail to parse are
reported in :attr:`RecordingReader.damage` and skipped by the iterators; a torn last line (a crash
mid-write) is reported, never served.
"""

from __future__ import annotations

import mmap
import os
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.base import SCHEMA_VERSION
from memprobe_engine.events.header import EVENTS_FILE, RecordingHeader, read_header
from memprobe_engine.events.index import LineIndex, extend_index
from memprobe_engine.events.payloads import PayloadReader
from memprobe_engine.events.union import parse_event
from memprobe_engine.events.upgrade import upgrade_event

_CACHE_SIZE = 4096
_SCAN_WINDOW = 16 << 20  # bytes searched per step by lines_with


@dataclass
class DamageReport:
    """What could not be read: a torn tail (bytes after the last newline) and unparseable lines."""

    tail_bytes: int = 0
    bad_lines: dict[int, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.tail_bytes == 0 and not self.bad_lines


class DamagedEvent(RecordingError):
    """A line in the middle of ``events.jsonl`` that is not a valid event."""


class RecordingReader:
    """Random and sequential access to one recording's events by line number (== ``seq`` when the
    recording was written by one writer from the start)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.header: RecordingHeader = read_header(directory)
        self.path = directory / EVENTS_FILE
        if not self.path.exists():
            raise RecordingError(f"{directory}: {EVENTS_FILE} is missing; the run never wrote an event. "
                                 f"Re-run it, or pass another recording.")
        self.index = LineIndex()
        self.damage = DamageReport()
        self._fd = os.open(self.path, os.O_RDONLY)
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._payloads = PayloadReader(directory)
        self.refresh()

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
        offset, length = self.index.span(line)
        return os.pread(self._fd, length, offset)

    def get_dict(self, line: int) -> dict[str, Any]:
        """The event at ``line`` as an upgraded dict (no model validation)."""
        try:
            data = orjson.loads(self.raw(line))
        except orjson.JSONDecodeError as err:
            self.damage.bad_lines[line] = f"not JSON: {err}"
            raise DamagedEvent(f"{self.path}: line {line + 1} is not valid JSON ({err}).") from None
        if not isinstance(data, dict):
            self.damage.bad_lines[line] = "not a JSON object"
            raise DamagedEvent(f"{self.path}: line {line + 1} is not a JSON object.")
        if self.header.schema_version < SCHEMA_VERSION:
            data = upgrade_event(data, self.header.schema_version)
        return data

    def get(self, line: int) -> Any:
        """The parsed event at ``line`` (cached)."""
        if line < 0:
            line += len(self)
        cached = self._cache.get(line)
        if cached is not None:
            self._cache.move_to_end(line)
            return cached
        data = self.get_dict(line)
        try:
            event = parse_event(data)
        except ValidationError as err:
            first = err.errors()[0]
            reason = f"{first['msg']} at {'.'.join(map(str, first['loc']))}"
            self.damage.bad_lines[line] = reason
            raise DamagedEvent(f"{self.path}: line {line + 1} is not a valid event: {reason}.") from None
        self._cache[line] = event
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return event

    def iter_events(self, kinds: Iterable[str] | None = None, start: int = 0,
                    stop: int | None = None) -> Iterator[Any]:
        """Parsed events in order, skipping damaged lines; ``kinds`` filters before parsing."""
        stop = len(self) if stop is None else min(stop, len(self))
        lines: Iterable[int] = range(start, stop)
        if kinds is not None:
            lines = self.lines_with([f'"kind":"{kind}"'.encode() for kind in kinds], start, stop)
        for line in lines:
            try:
                yield self.get(line)
            except DamagedEvent:
                continue

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

    def payload(self, ref: str) -> Any:
        """Resolve a content-addressed payload reference."""
        return self._payloads.get(ref)

    def verify(self) -> DamageReport:
        """Parse every line once (no caching) and return the damage found."""
        for line in range(len(self)):
            try:
                parse_event(self.get_dict(line))
            except DamagedEvent:
                continue
            except ValidationError as err:
                first = err.errors()[0]
                self.damage.bad_lines[line] = f"{first['msg']} at {'.'.join(map(str, first['loc']))}"
        return self.damage

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> "RecordingReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_recording(directory: Path | str) -> RecordingReader:
    """Open a recording for reading; RecordingError with a clear message if it is not one."""
    return RecordingReader(Path(directory))
