"""The recordings in a folder, newest first, described from their headers and last lines.

Listing is cheap (a header read and a look at the file's tail per recording), so a browser can show
the list at once; a recording's headline numbers need an index pass and are its protocol's to compute
(``memprobe_engine.protocols.headline_and_damage``), recording by recording, in a worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.header import EVENTS_FILE, HEADER_FILE, read_header
from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.replay.session import writer_alive

_TAIL = 1 << 16


@dataclass(frozen=True)
class RecordingEntry:
    """One recording as the browser lists it; ``problem`` is set when its header does not read."""

    path: Path
    run_id: str
    suite: str
    created: float
    systems: tuple[str, ...]
    users: int | None
    status: str  # completed / failed / interrupted (run_end), running, incomplete, unreadable
    size_bytes: int
    problem: str | None = None


def last_event_kind(events: Path) -> tuple[str | None, str | None]:
    """(kind, run_end status) of the last complete line, reading only the file's tail."""
    try:
        size = events.stat().st_size
        with open(events, "rb") as handle:
            handle.seek(max(0, size - _TAIL))
            tail = handle.read()
    except OSError:
        return None, None
    end = tail.rfind(b"\n")
    if end < 0:
        return None, None
    start = tail.rfind(b"\n", 0, end) + 1
    try:
        data = orjson.loads(tail[start:end])
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    return data.get("kind"), data.get("status") if data.get("kind") == "run_end" else None


def describe_recording(path: Path) -> RecordingEntry:
    """Header and status of one recording folder (never raises for a damaged one)."""
    events = path / EVENTS_FILE
    size = events.stat().st_size if events.exists() else 0
    try:
        header = read_header(path)
        config = HeaderConfig.of(header)
    except RecordingError as err:
        return RecordingEntry(path, path.name, "?", os.path.getmtime(path), (), None, "unreadable", size, str(err))
    _, status = last_event_kind(events)
    if status is None:
        status = "running" if writer_alive(path) else "incomplete"
    return RecordingEntry(path=path, run_id=header.run_id, suite=header.suite, created=header.created,
                          systems=tuple(config.systems), users=len(config.users) if config.users is not None else None,
                          status=status, size_bytes=size)


def list_recordings(folder: Path | str) -> list[RecordingEntry]:
    """Every recording directly under ``folder`` (or ``folder`` itself), newest first."""
    root = Path(folder)
    if not root.exists():
        raise RecordingError(f"{root}: no such folder. Pass the folder that holds your recordings "
                             f"(runs write to recordings/ by default).")
    if not root.is_dir():
        raise RecordingError(f"{root} is a file; pass a folder of recordings (or use `memprobe replay` "
                             f"for one recording).")
    if (root / HEADER_FILE).exists():
        return [describe_recording(root)]
    found = [describe_recording(p) for p in sorted(root.iterdir()) if p.is_dir() and (p / HEADER_FILE).exists()]
    return sorted(found, key=lambda e: e.created, reverse=True)
