"""Content-addressed payload store: large repeated values (system prompts, store snapshots,
schemas) are written once to ``payloads.jsonl`` and referenced from events by hash."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import orjson

PAYLOADS_FILE = "payloads.jsonl"


def payload_hash(data: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON (sorted keys) of ``data``."""
    blob = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(blob).hexdigest()


class PayloadWriter:
    """Appends payloads not yet stored; remembers which hashes the file already holds."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / PAYLOADS_FILE
        self._known: set[str] = set(_scan(self._path).keys()) if self._path.exists() else set()
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def put(self, data: Any) -> str:
        ref = payload_hash(data)
        with self._lock:
            if ref not in self._known:
                os.write(self._fd, orjson.dumps({"hash": ref, "data": data}) + b"\n")
                self._known.add(ref)
        return ref

    def close(self) -> None:
        os.close(self._fd)


class PayloadReader:
    """Resolves payload hashes; the file is indexed on first use (payloads are few and deduplicated)."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / PAYLOADS_FILE
        self._offsets: dict[str, tuple[int, int]] | None = None

    def get(self, ref: str) -> Any:
        if self._offsets is None:
            self._offsets = _scan(self._path) if self._path.exists() else {}
        where = self._offsets.get(ref)
        if where is None:
            raise KeyError(f"payload {ref} is not in {self._path}")
        with open(self._path, "rb") as handle:
            handle.seek(where[0])
            return orjson.loads(handle.read(where[1]))["data"]


def _scan(path: Path) -> dict[str, tuple[int, int]]:
    """Map hash -> (offset, length) for every complete line; a torn last line is ignored."""
    offsets: dict[str, tuple[int, int]] = {}
    position = 0
    with open(path, "rb") as handle:
        for line in handle:
            if line.endswith(b"\n"):
                # The hash is the first field; reading it by prefix avoids parsing the payload.
                start = line.find(b'"hash":"') + 8
                end = line.find(b'"', start)
                offsets[line[start:end].decode()] = (position, len(line))
            position += len(line)
    return offsets
