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

Processes that share the file (shards of one run on a cluster's shared home, several runs on one
machine) also share requests *in flight*: before sending, a client claims the request
(:meth:`ResponseCache.acquire`, a row in ``claims`` naming its host, pid and time). Another process
asking the same request meanwhile waits for the answer instead of sending it again, and records it
as a cache hit. A claim is released when the answer is stored or the call fails; its owner refreshes
it every :data:`HEARTBEAT_S` while it waits for the model, so a claim not refreshed for
:data:`STALE_AFTER_S`, or one whose owner process is gone on this host, is taken over: a crashed
shard never blocks the others.

Concurrency: WAL lets readers and a writer work at once, but its index lives in shared memory that
only processes of one host see, so on a network file system (NFS, Lustre, GPFS, CIFS…, where shards
on several nodes meet) the cache uses a rollback journal, whose file locks those systems carry
between hosts. Every claim is decided in one ``BEGIN IMMEDIATE`` transaction (one writer at a time),
and the busy timeout makes a process wait for another's short transaction instead of failing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import ValidationError

from memprobe_engine.processes import running
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
);
CREATE TABLE IF NOT EXISTS claims (
    hash    TEXT PRIMARY KEY,
    owner   TEXT NOT NULL,
    host    TEXT NOT NULL,
    pid     INTEGER NOT NULL,
    claimed REAL NOT NULL
);
"""
#: How often a process refreshes the claims it holds while their requests are on their way.
HEARTBEAT_S = 10.0
#: A claim not refreshed for this long is taken over (its owner crashed on another host, or hangs).
STALE_AFTER_S = 60.0
#: A waiting process looks for the answer this often at first, then less often, up to the cap.
POLL_FIRST_S = 0.05
POLL_MAX_S = 0.5
#: File system types whose files other hosts share: WAL's shared-memory index is not safe there.
NETWORK_FILE_SYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph",
                                  "glusterfs", "fuse.glusterfs", "fuse.sshfs", "fuse.s3fs", "afs", "panfs", "wekafs"})


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
    """A store shared with clients in other processes (a Ray run's units, through the driver's relay;
    shards and runs that share the cache file, through its claims), asked before a request is sent: a request another unit has answered, or is asking right now, is
    not sent again — :meth:`acquire` waits for that answer; None makes this client the one that sends
    it, and then :meth:`put` hands the answer on or :meth:`release` (the call failed) hands it back."""

    async def acquire(self, key: str, endpoint: str = "") -> ChatResult | None: ...

    def release(self, key: str, endpoint: str = "") -> None: ...


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


def file_system_of(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> str:
    """The type of the file system ``path`` lies on (``ext4``, ``nfs4``…), from the mount table; ``""``
    where there is none to read (not Linux)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return ""
    target, best, kind = str(path.resolve()), -1, ""
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        point = parts[4].encode().decode("unicode_escape")  # \040 is a space in the table
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), rest.split()[0]
    return kind


class ResponseCache:
    """Thread-safe handle on the cache file; cheap to share across a whole run."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else cache_dir()
        self.path = self.directory / CACHE_FILE
        self.host, self.pid = socket.gethostname(), os.getpid()
        #: Names this handle's claims (a process may hold several handles on one file).
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            network = file_system_of(self.directory) in NETWORK_FILE_SYSTEMS
            # One connection guarded by a lock: the client calls from one event loop, and sqlite
            # calls here are short; other processes coordinate through the journal and the busy timeout.
            self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False,
                                       isolation_level=None)
        except sqlite3.DatabaseError as err:
            raise self._unusable(err) from None
        except OSError as err:
            raise ConfigError(f"Cannot create the LLM cache folder {self.directory} ({err.strerror}). "
                              f"Set {CACHE_ENV} to a writable folder.") from None
        try:
            mode = self._journal("delete" if network else "wal")
            self._db.execute("PRAGMA synchronous=NORMAL" if mode == "wal" else "PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise self._unusable(err) from None
        if network and mode == "wal":
            self._db.close()
            raise ConfigError(f"The LLM response cache {self.path} is on a network file system, where WAL mode is "
                              f"unsafe between hosts, and another process holds it open in WAL mode. Stop that "
                              f"process (an older MemProbe) and run again, or set {CACHE_ENV} to a folder on a "
                              f"local disk.")
        self._lock = threading.Lock()
        #: Row keys this handle has claimed and not yet answered or released.
        self._held: set[str] = set()
        self._beating: threading.Event | None = None

    def _journal(self, wanted: str) -> str:
        """Switch to journal mode ``wanted``; the mode the file is in afterwards. Leaving WAL needs the
        file to itself: while another process holds it, the file stays in WAL (asked briefly, not for
        the whole busy timeout)."""
        self._db.execute("PRAGMA busy_timeout = 2000")
        try:
            return str(self._db.execute(f"PRAGMA journal_mode={wanted}").fetchone()[0]).lower()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or wanted == "wal":
                raise
            return "wal"
        finally:
            self._db.execute("PRAGMA busy_timeout = 30000")

    def _unusable(self, err: sqlite3.DatabaseError) -> ConfigError:
        return ConfigError(f"The LLM response cache {self.path} is unusable ({err}). Delete the file (it is only "
                           f"a cache) or point {CACHE_ENV} at another folder.")

    def get(self, key: str, endpoint: str = "") -> ChatResult | None:
        """The stored result for ``key`` at ``endpoint``, or None. A damaged row counts as a miss."""
        with self._lock:
            row = self._db.execute("SELECT result FROM responses WHERE hash = ?",
                                   (_row_key(key, endpoint),)).fetchone()
        return _parsed(row)

    def put(self, key: str, result: ChatResult, endpoint: str = "") -> ChatResult:
        """Store a successful result unless another writer stored one first (another process asked
        the same request at the same time); return the stored one. A damaged row is replaced. A
        claim this handle held on the request is released: processes waiting for it read the answer."""
        row_key, blob = _row_key(key, endpoint), result.model_dump_json()
        with self._lock, self._transaction():
            self._db.execute("INSERT OR IGNORE INTO responses (hash, result, created) VALUES (?, ?, ?)",
                             (row_key, blob, time.time()))
            self._db.execute("DELETE FROM claims WHERE hash = ? AND owner = ?", (row_key, self.owner))
            self._held.discard(row_key)
            stored = _parsed(self._db.execute("SELECT result FROM responses WHERE hash = ?", (row_key,)).fetchone())
            if stored is None:
                self._db.execute("UPDATE responses SET result = ?, created = ? WHERE hash = ?",
                                 (blob, time.time(), row_key))
                return result
            return stored

    async def acquire(self, key: str, endpoint: str = "") -> ChatResult | None:
        """Before sending ``key`` to ``endpoint``: the answer another process stored, waiting while one
        holds a live claim on it; None when this handle now holds the claim and must send it (then
        :meth:`put` the answer or :meth:`release` the claim)."""
        row_key, wait = _row_key(key, endpoint), POLL_FIRST_S
        while True:
            with self._lock:
                answer, claimed = self._answer_or_claim(row_key)
            if answer is not None:
                return answer
            if claimed:
                self._keep_alive()
                return None
            await asyncio.sleep(wait)
            wait = min(wait * 1.5, POLL_MAX_S)

    def release(self, key: str, endpoint: str = "") -> None:
        """Give a claim back unanswered (the call failed): the next process waiting for it sends it."""
        row_key = _row_key(key, endpoint)
        with self._lock:
            self._db.execute("DELETE FROM claims WHERE hash = ? AND owner = ?", (row_key, self.owner))
            self._held.discard(row_key)

    def _answer_or_claim(self, row_key: str) -> tuple[ChatResult | None, bool]:
        """The stored answer, or the claim taken (none held, or its holder is stale or gone), or neither
        (someone else is asking). Looked at first without the write lock, so processes waiting on a
        claim do not queue for it on every look; a claim is then taken in one write transaction, so
        two processes never both take it."""
        answer, live = self._look(row_key)
        if answer is not None or live:
            return answer, False
        with self._transaction():
            answer, live = self._look(row_key)
            if answer is not None or live:
                return answer, False
            self._db.execute("INSERT OR REPLACE INTO claims (hash, owner, host, pid, claimed) VALUES (?, ?, ?, ?, ?)",
                             (row_key, self.owner, self.host, self.pid, time.time()))
            self._held.add(row_key)
            return None, True

    def _look(self, row_key: str) -> tuple[ChatResult | None, bool]:
        """(the stored answer, whether another handle holds a live claim on the request)."""
        answer = _parsed(self._db.execute("SELECT result FROM responses WHERE hash = ?", (row_key,)).fetchone())
        if answer is not None:
            return answer, False
        holder = self._db.execute("SELECT owner, host, pid, claimed FROM claims WHERE hash = ?", (row_key,)).fetchone()
        if holder is None or holder[0] == self.owner or time.time() - float(holder[3]) >= STALE_AFTER_S:
            return None, False
        return None, not (holder[1] == self.host and not running(int(holder[2])))  # gone on this host: not live

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # IMMEDIATE takes the write lock at once: the read and the write that follows are one step.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _keep_alive(self) -> None:
        """Refresh this handle's claims every HEARTBEAT_S while it holds any (a thread: a busy event
        loop must not let a live claim go stale)."""
        with self._lock:
            if self._beating is not None:
                return
            stop = self._beating = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                with self._lock:
                    if not self._held or stop.is_set():
                        self._beating = None
                        return
                    try:
                        self._db.execute("UPDATE claims SET claimed = ? WHERE owner = ?", (time.time(), self.owner))
                    except sqlite3.Error:
                        pass  # busy past the timeout: the next beat tries again, well before the claim is stale

        threading.Thread(target=beat, name="memprobe-cache-claims", daemon=True).start()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._beating is not None:
                self._beating.set()
                self._beating = None
            if self._held:  # a request still on its way when the run ends: the others need not wait
                self._db.executemany("DELETE FROM claims WHERE hash = ? AND owner = ?",
                                     [(row_key, self.owner) for row_key in self._held])
                self._held.clear()
            self._db.close()


def _parsed(row: tuple[str] | None) -> ChatResult | None:
    """A stored result, or None for no row or a damaged one."""
    if row is None:
        return None
    try:
        return ChatResult.model_validate_json(row[0])
    except ValidationError:
        return None
