"""Persistent, content-addressed response cache: (request hash, endpoint) → successful ChatResult.

One sqlite3 file, ``<cache_dir>/llm-cache.sqlite`` (``$MEMPROBE_CACHE_DIR`` or ``~/.cache/memprobe``),
shared by every run on the machine: a re-run or a resumed run pays for no request it already made.
WAL mode and a busy timeout let threads and several processes read and write at once. Only
successful results are stored — a failure is never replayed from the cache.

The request hash (``hashing.py``) leaves the server out on purpose: a recording's hashes must
survive a moved server, so that a resume or ``replay:DIR`` finds its answers. This cache is shared
by every run on the machine, though, and local servers name their models ``m``, ``default`` or a
path: two checkpoints behind one name must never share answers, nor a wrong URL "succeed" from the
cache. So an entry is keyed with the *endpoint* as well (``endpoint_of``: an OpenAI-compatible
server's base URL; empty for the OpenAI API itself, whose model names are global, and for the
servers MemProbe starts, whose model the hash names). Entries made before the endpoint was part of
the key still answer requests to the OpenAI API and the embedded model; those to other servers
are asked again once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import ValidationError

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.model_assets import CACHE_ENV, cache_dir
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.types import ChatResult

CACHE_FILE = "llm-cache.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    hash    TEXT PRIMARY KEY,
    result  TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class ResponseStore(Protocol):
    """What the chat client needs from a cache (a run may layer its own store over this one):
    ``key`` is the request hash, ``endpoint`` the server it is asked of (see the module docstring)."""

    def get(self, key: str, endpoint: str = "") -> ChatResult | None: ...

    def put(self, key: str, result: ChatResult, endpoint: str = "") -> ChatResult:
        """Keep ``result`` unless the store already holds an answer to ``key``; return the one it
        holds. The first answer wins, so every unit of a run that asks one request — in other
        processes too — goes on from the same answer, and a resume serves each what it used."""
        ...


@runtime_checkable
class SharedStore(ResponseStore, Protocol):
    """A store shared with clients in other processes (a Ray run's units, through the driver's relay),
    asked before a request is sent: a request another unit has answered, or is asking right now, is
    not sent again — :meth:`acquire` waits for that answer; None makes this client the one that sends
    it, and then :meth:`put` hands the answer on or :meth:`release` (the call failed) hands it back."""

    async def acquire(self, key: str) -> ChatResult | None: ...

    def release(self, key: str) -> None: ...


def endpoint_of(spec: ModelSpec, env: Mapping[str, str]) -> str:
    """The endpoint part of a cache key: the base URL an ``openai`` spec is sent to, or ``""`` for
    the OpenAI API and for every other backend."""
    if spec.backend != "openai":
        return ""
    from memprobe_engine.llm.backends.openai_compat import OPENAI_DEFAULT_URL, resolve_base_url

    url = resolve_base_url(spec.base_url, env)
    return "" if url == OPENAI_DEFAULT_URL else url


def _row_key(key: str, endpoint: str) -> str:
    return f"{key}@{endpoint}" if endpoint else key


class ResponseCache:
    """Thread-safe handle on the cache file; cheap to share across a whole run."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else cache_dir()
        self.path = self.directory / CACHE_FILE
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # One connection guarded by a lock: the client calls from one event loop, and sqlite
            # calls here are short; other processes coordinate through WAL and the busy timeout.
            self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.DatabaseError as err:
            raise ConfigError(f"The LLM response cache {self.path} is unusable ({err}). Delete the file "
                              f"(it is only a cache) or point {CACHE_ENV} at another folder.") from None
        except OSError as err:
            raise ConfigError(f"Cannot create the LLM cache folder {self.directory} ({err.strerror}). "
                              f"Set {CACHE_ENV} to a writable folder.") from None
        self._lock = threading.Lock()

    def get(self, key: str, endpoint: str = "") -> ChatResult | None:
        """The stored result for ``key`` at ``endpoint``, or None. A damaged row counts as a miss."""
        with self._lock:
            row = self._db.execute("SELECT result FROM responses WHERE hash = ?",
                                   (_row_key(key, endpoint),)).fetchone()
        if row is None:
            return None
        try:
            return ChatResult.model_validate_json(row[0])
        except ValidationError:
            return None

    def put(self, key: str, result: ChatResult, endpoint: str = "") -> ChatResult:
        """Store a successful result unless another writer stored one first (another process asked
        the same request at the same time); return the stored one. A damaged row is replaced."""
        row_key, blob = _row_key(key, endpoint), result.model_dump_json()
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO responses (hash, result, created) VALUES (?, ?, ?)",
                             (row_key, blob, time.time()))
            row = self._db.execute("SELECT result FROM responses WHERE hash = ?", (row_key,)).fetchone()
            try:
                return ChatResult.model_validate_json(row[0])
            except ValidationError:
                self._db.execute("UPDATE responses SET result = ?, created = ? WHERE hash = ?",
                                 (blob, time.time(), row_key))
                return result

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
