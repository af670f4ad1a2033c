"""Append-only event writer: one writer per recording, one orjson line per event, flushed per event.

Opening an existing recording continues it (a resumed run): the last sequence number is read from
the tail, and a torn last line left by a crash is moved aside to ``events.damaged-<n>`` before new
events are appended, so no complete event is lost and no partial line is ever glued to a new one
(``payloads.jsonl`` gets the same treatment in ``payloads.py``). Every line is sealed with a CRC-32
(``checksum.py``) so a reader can tell a damaged line from an intact one.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import orjson

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.base import EventBase
from memprobe_engine.events.checksum import CHECKSUM_FIELD, seal, unseal
from memprobe_engine.events.fs_errors import recording_os_error
from memprobe_engine.events.header import EVENTS_FILE, HEADER_FILE, RecordingHeader, read_header, write_header
from memprobe_engine.events.payloads import PayloadWriter, ScrubBytes

LOCK_FILE = "writer.lock"
E = TypeVar("E", bound=EventBase)


class EventWriter:
    """Writes events to ``<directory>/events.jsonl``. Use :func:`open_writer` to construct one."""

    def __init__(self, directory: Path, header: RecordingHeader, next_seq: int, lock_fd: int) -> None:
        self.directory = directory
        self.header = header
        self._next_seq = next_seq
        self._lock_fd = lock_fd
        self._fd = os.open(directory / EVENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._mutex = threading.Lock()
        self._scrubs: list[ScrubBytes] = []
        self.payloads = PayloadWriter(directory, scrub=self._scrub)
        self.closed = False
        self.failed: RecordingError | None = None

    def add_scrub(self, scrub: ScrubBytes) -> None:
        """Filter every line and payload written from now on through ``scrub`` (the chat client adds
        one that removes configured API keys). The format itself knows nothing about keys."""
        if scrub not in self._scrubs:
            self._scrubs.append(scrub)
        self.payloads.forget_texts()  # the scrub may change how a remembered text is stored

    def _scrub(self, blob: bytes) -> bytes:
        for scrub in self._scrubs:
            blob = scrub(blob)
        return blob

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def write(self, event: E) -> E:
        """Assign ``seq`` (and ``time`` if unset), append the event, return it."""
        with self._mutex:
            if self.closed:
                raise RecordingError(f"{self.directory}: the recording writer is already closed.")
            event.seq = self._next_seq
            if not event.time:
                event.time = time.time()
            line = seal(self._scrub(orjson.dumps(event.model_dump(exclude_none=True)))) + b"\n"
            self._append(line)
            self._next_seq += 1
        return event

    def write_dict(self, data: dict[str, Any]) -> int:
        """Append an already-serializable event dict (used by importers and merge); returns its seq."""
        with self._mutex:
            seq = self._next_seq
            data["seq"] = seq
            data.setdefault("time", time.time())
            data.pop(CHECKSUM_FIELD, None)  # a copied line's old seal; the line is sealed anew
            self._append(seal(self._scrub(orjson.dumps(data))) + b"\n")
            self._next_seq += 1
            return seq

    def _append(self, line: bytes) -> None:
        """Append one line. After a failed write (a full disk) every later write fails with the same
        one-line error, so the many tasks of a run end with one message, not one traceback each."""
        if self.failed is not None:
            raise self.failed
        try:
            os.write(self._fd, line)
        except OSError as err:
            self.failed = recording_os_error(self.directory / EVENTS_FILE, err, "append an event")
            raise self.failed from None

    def put_payload(self, data: object) -> str:
        return self.payloads.put(data)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        os.close(self._fd)
        self.payloads.close()
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)

    def __enter__(self) -> "EventWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_writer(directory: Path | str, header: RecordingHeader | None = None) -> EventWriter:
    """Create a recording (``header`` required) or continue an existing one (header read from disk).

    Raises RecordingError when another process holds the writer lock.
    """
    directory = Path(directory)
    exists = (directory / HEADER_FILE).exists()
    if not exists and header is None:
        raise RecordingError(f"{directory}: no recording to continue ({HEADER_FILE} missing).")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock_fd = _acquire_lock(directory)
    except OSError as err:
        raise recording_os_error(directory, err, "create or lock the recording") from None
    try:
        if exists:
            header = read_header(directory)
            next_seq = _recover_tail(directory / EVENTS_FILE)
        else:
            assert header is not None
            write_header(directory, header)
            next_seq = 0
        return EventWriter(directory, header, next_seq, lock_fd)
    except OSError as err:
        _unlock(lock_fd)
        raise recording_os_error(directory, err, "open the recording for writing") from None
    except BaseException:
        _unlock(lock_fd)
        raise


def _unlock(lock_fd: int) -> None:
    fcntl.flock(lock_fd, fcntl.LOCK_UN)
    os.close(lock_fd)


def _acquire_lock(directory: Path) -> int:
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise RecordingError(
            f"{directory} is being written by process {holder}. One writer per recording: wait for that "
            f"run to finish (or stop it), or record into another folder.") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def _recover_tail(path: Path) -> int:
    """Return the next sequence number; move a torn last line aside so appends start clean."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    size = path.stat().st_size
    with open(path, "rb+") as handle:
        # Walk back in blocks until a newline is found: the file's last complete line ends there.
        block = 1 << 16
        end = size
        last_newline = -1
        while end > 0 and last_newline < 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start)
            found = chunk.rfind(b"\n")
            if found >= 0:
                last_newline = start + found
            end = start
        complete_end = last_newline + 1
        if complete_end < size:
            handle.seek(complete_end)
            torn = handle.read()
            n = 0
            while (aside := path.with_name(f"events.damaged-{n}")).exists():
                n += 1
            aside.write_bytes(torn)
            handle.truncate(complete_end)
        if complete_end == 0:
            return 0
        # Find the start of the last complete line and read its seq.
        line_start = max(0, complete_end - block)
        handle.seek(line_start)
        chunk = handle.read(complete_end - line_start - 1)
        prev = chunk.rfind(b"\n")
        last_line = chunk[prev + 1:] if prev >= 0 else _read_last_line(handle, complete_end)
        try:
            seq = orjson.loads(unseal(last_line)[0])["seq"]
            if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
                raise TypeError(seq)
            return seq + 1
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise RecordingError(f"{path}: the last complete line is not a valid event, so the run cannot "
                                 f"be continued safely. Run `memprobe recording verify {path.parent}`.") from None


def _read_last_line(handle: BinaryIO, complete_end: int) -> bytes:
    handle.seek(0)
    data: bytes = handle.read(complete_end - 1)
    return data[data.rfind(b"\n") + 1:]
