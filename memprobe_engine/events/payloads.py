"""Content-addressed payload store: large repeated values (system prompts, store snapshots,
schemas) are written once to ``payloads.jsonl`` and referenced from events by hash.

Every read checks the content against its hash, so a damaged payload is reported, never served. A
torn last line (a crash mid-write) is moved aside to ``payloads.damaged-<n>`` when a writer opens the
file again, exactly as the event writer does with ``events.jsonl``, so the next payload is never
glued onto the fragment.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.fs_errors import recording_os_error

PAYLOADS_FILE = "payloads.jsonl"

#: Anything orjson reads back: a payload is an arbitrary JSON value.
JSONValue = Any
#: Removes secrets from serialized bytes (the writer's scrubber; see ``llm/secrets.py``).
ScrubBytes = Callable[[bytes], bytes]


class PayloadError(RecordingError, KeyError):
    """A referenced payload is missing from ``payloads.jsonl`` or fails its hash check.

    Also a KeyError, so callers that look payloads up like a mapping keep working."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def payload_hash(data: JSONValue) -> str:
    """``sha256:<hex>`` of the canonical JSON (sorted keys) of ``data``."""
    blob = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(blob).hexdigest()


@dataclass
class PayloadIndex:
    """Where each payload line is, and what is wrong with the file: lines that are not payload
    records (line number -> reason) and bytes after the last newline."""

    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    bad_lines: dict[int, str] = field(default_factory=dict)
    tail_bytes: int = 0
    exists: bool = False


def scan_payloads(path: Path) -> PayloadIndex:
    """Index ``payloads.jsonl``: every complete line is parsed (payloads are few and deduplicated)."""
    index = PayloadIndex()
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return index
    except OSError as err:
        raise RecordingError(f"{path} cannot be read ({err.strerror}).") from None
    index.exists = True
    position = 0
    # Line by line, not the whole file at once: a large run's payload file read and split in one
    # piece held it in memory twice over (peak RSS of every reader that checks payloads).
    with handle:
        try:
            for number, line in enumerate(handle):
                if not line.endswith(b"\n"):
                    index.tail_bytes = len(line)
                    break
                ref = _record_hash(line)
                if isinstance(ref, str) and ref.startswith("sha256:"):
                    index.offsets.setdefault(ref, (position, len(line)))
                else:
                    index.bad_lines[number] = ref if isinstance(ref, str) else "not a payload record"
                position += len(line)
        except OSError as err:
            raise RecordingError(f"{path} cannot be read ({err.strerror}).") from None
    return index


def _record_hash(line: bytes) -> str | None:
    """The record's ``hash`` member, or a reason (not starting with sha256:) when it has none."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "not JSON"
    if not isinstance(record, dict) or "data" not in record or not isinstance(record.get("hash"), str):
        return "not a {hash, data} record"
    ref: str = record["hash"]
    return ref if ref.startswith("sha256:") else "hash is not sha256:<hex>"


def recover_payload_tail(path: Path) -> None:
    """Move a torn last line of ``payloads.jsonl`` aside (``payloads.damaged-<n>``) and truncate it."""
    if not path.exists():
        return
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return
        block = 1 << 16
        end, last_newline = size, -1
        while end > 0 and last_newline < 0:
            start = max(0, end - block)
            handle.seek(start)
            found = handle.read(end - start).rfind(b"\n")
            if found >= 0:
                last_newline = start + found
            end = start
        complete_end = last_newline + 1
        if complete_end == size:
            return
        handle.seek(complete_end)
        torn = handle.read()
        n = 0
        while (aside := path.with_name(f"payloads.damaged-{n}")).exists():
            n += 1
        aside.write_bytes(torn)
        handle.truncate(complete_end)


#: How many distinct texts :class:`PayloadWriter` remembers before it starts over.
TEXT_MEMO_SIZE = 20_000


class PayloadWriter:
    """Appends payloads not yet stored; remembers which hashes the file already holds.

    ``scrub`` (when given) removes secrets from a payload before it is hashed and written.
    """

    def __init__(self, directory: Path, scrub: ScrubBytes | None = None) -> None:
        self._path = directory / PAYLOADS_FILE
        recover_payload_tail(self._path)
        self._known: set[str] = set(scan_payloads(self._path).offsets)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._scrub = scrub
        #: Texts stored already → their reference: a run stores the same long prompt texts on every
        #: call of a conversation, and serializing and hashing them again cost more than the lookup.
        self._texts: dict[str | tuple[str, ...], str] = {}

    def forget_texts(self) -> None:
        """Drop the text memo (the scrub changed: a text may now be stored differently)."""
        self._texts.clear()

    def put(self, data: JSONValue) -> str:
        # A list of texts is remembered as a text is: each memory system of a protocol-B run embeds
        # the same turns, and every embedding batch stores its texts.
        key: str | tuple[str, ...] | None = data if isinstance(data, str) else (
            tuple(data) if type(data) is list and all(type(item) is str for item in data) else None)
        if key is None:
            return self._put(data)
        known = self._texts.get(key)
        if known is not None:
            return known
        if len(self._texts) >= TEXT_MEMO_SIZE:
            self._texts.clear()
        ref = self._texts[key] = self._put(data)
        return ref

    def _put(self, data: JSONValue) -> str:
        if self._scrub is not None:
            blob = orjson.dumps(data)
            clean = self._scrub(blob)
            if clean != blob:
                data = orjson.loads(clean)
        ref = payload_hash(data)
        with self._lock:
            if ref not in self._known:
                try:
                    os.write(self._fd, orjson.dumps({"hash": ref, "data": data}) + b"\n")
                except OSError as err:
                    raise recording_os_error(self._path, err, "store a payload") from None
                self._known.add(ref)
        return ref

    def close(self) -> None:
        os.close(self._fd)


class PayloadReader:
    """Resolves payload hashes; the file is indexed on first use and every payload is checked
    against its hash before it is served (verified ones are remembered, not re-hashed)."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / PAYLOADS_FILE
        self._index: PayloadIndex | None = None
        self._verified: set[str] = set()

    @property
    def index(self) -> PayloadIndex:
        if self._index is None:
            self._index = scan_payloads(self._path)
        return self._index

    def refresh(self) -> None:
        """Forget the index, so payloads a live writer appended since are found."""
        self._index = None

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, str) and ref in self.index.offsets

    def refs(self) -> Iterable[str]:
        return self.index.offsets.keys()

    def get(self, ref: str) -> JSONValue:
        """The payload stored under ``ref``; PayloadError when it is missing or damaged."""
        return self._read(ref, remember=True)

    def _read(self, ref: str, *, remember: bool) -> JSONValue:
        where = self.index.offsets.get(ref) if isinstance(ref, str) else None
        if where is None and isinstance(ref, str) and self._index is not None:
            self.refresh()  # a live run may have appended it since the file was indexed
            where = self.index.offsets.get(ref)
        if where is None:
            missing = "is missing" if self.index.exists else "cannot be read: the file is missing"
            raise PayloadError(f"payload {str(ref)[:80]} referenced by the recording {missing} "
                               f"({self._path}). Run `memprobe recording verify {self._path.parent}`.")
        with open(self._path, "rb") as handle:
            handle.seek(where[0])
            line = handle.read(where[1])
        try:
            record = orjson.loads(line)
            data = record["data"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise PayloadError(f"{self._path}: the record of payload {ref} is damaged.") from None
        if ref not in self._verified:
            if payload_hash(data) != ref:
                raise PayloadError(f"{self._path}: payload {ref} does not match its hash (the file was "
                                   f"changed or damaged); it is not served.")
            if remember:
                self._verified.add(ref)
        return data

    def check(self, ref: str) -> str | None:
        """None when ``ref`` resolves to an intact payload, else the reason it does not. Not
        remembered as verified: the whole-recording check hashes every payload once, and keeping
        all their hashes held ~14 MB for the rest of a replay of a million events (bench/tui.py)."""
        try:
            self._read(ref, remember=False)
        except PayloadError as err:
            return "missing" if "missing" in str(err) else "damaged"
        return None
