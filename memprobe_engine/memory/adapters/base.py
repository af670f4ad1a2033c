"""What every adapter over a third-party memory library shares.

A library is driven through the MemorySystem protocol like a built-in, with four differences the
base class handles once:

- **Its own calls.** The library talks to the recording proxy (:mod:`memprobe_engine.llm.proxy`)
  with a per-system token, so its LLM and embedding requests are recorded inside the span that is
  current when the adapter calls into it, cached by request hash and never repeated on resume.
- **Its own thread.** Libraries block (sync HTTP, embedded databases) or keep loop-bound state, so
  each adapter runs its library on one dedicated thread with its own event loop
  (:class:`LibraryThread`). The engine's loop stays free to serve the proxy the library is
  calling — the two never wait on each other.
- **Its own store.** ``reset`` gives the library a fresh, isolated store folder inside the run's
  recording folder (``stores/<system>/<user>``); after every ingest the store is dumped, diffed
  against the previous dump and each difference recorded as a ``memory_op`` with its JSON Patch
  (:class:`StoreMirror`), so a third-party store evolves in the TUI exactly like a built-in one.
- **Batched ingest.** Evidence is buffered and handed to the library as one conversation when the
  store is next read (``search``) or at ``finish`` (end of a protocol-B session / a protocol-A
  user): one library ``add`` per exchange or session, which is how these libraries are meant to be
  fed, instead of one per message.

Reproducibility: :func:`pinned_clock` replaces the clock and the random-id source *inside the
library's modules* (never globally) while a library call runs, so prompts that mention "today" and
ids that reach prompts are the same on every run; docs/memory-systems.md lists what stays unpinned.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import random
import re
import shutil
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, TypeVar

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.proxy import RecordingProxy, shared_proxy
from memprobe_engine.memory.base import (
    Footprint,
    MemoryServices,
    Observation,
    RecordedStore,
    ScoredItem,
    SimClock,
)

T = TypeVar("T")
#: A library search's hits, ``(item_id, native fields, score)`` best first, and its whole store by id
#: (what the ``_lib_*`` hooks return, directly or awaited: some libraries are async).
LibraryHits = list[tuple[str, dict[str, Any], float | None]]
LibraryStore = dict[str, dict[str, Any]]
#: Pinning swaps names in shared library modules, so library calls of all adapters take turns.
_PIN_LOCK = threading.Lock()
#: The role whose model answers a library's chat calls.
LIBRARY_ROLE = "memory_writer"
#: HTTP timeout of the libraries' own OpenAI clients. The engine's client behind the proxy applies the
#: role's own timeout and retries; a library giving up first (the SDK's default is 600 s, and one long
#: prompt on two CPU cores can take longer) would only abandon an answer the proxy is still computing.
LIBRARY_HTTP_TIMEOUT_S = 7200.0


class LibraryThread:
    """One thread with its own event loop; library calls (sync or async) run there, in order."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"memprobe-{name}", daemon=True)
        self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        """Run the blocking ``fn()`` on the library thread; await its result here."""
        async def wrapped() -> T:
            return fn()
        return await self.call_async(wrapped)

    async def call_async(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine ``make()`` on the library's loop; await its result here."""
        async def runner() -> T:
            return await make()
        future: Future[T] = asyncio.run_coroutine_threadsafe(runner(), self._loop)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


_THREADS: dict[str, LibraryThread] = {}


def library_thread(name: str) -> LibraryThread:
    """One library thread per system for the whole process: units (users, episodes) of one system
    reuse it, so threads do not pile up over a long run and loop-bound library state stays valid."""
    thread = _THREADS.get(name)
    if thread is None:
        thread = _THREADS[name] = LibraryThread(name)
    return thread


class _AnyDatetime(type):
    """So that ``isinstance(real_datetime, datetime)`` still holds inside a pinned module."""

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, dt.datetime)


class _SimDatetime(dt.datetime, metaclass=_AnyDatetime):
    """``datetime`` as a library module sees it while pinned: ``now``/``utcnow``/``today`` answer
    the simulated clock (naive simulated times are taken as UTC); everything else is the real class."""

    clock: ClassVar[SimClock | None] = None

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _SimDatetime:
        base = cls.clock.now() if cls.clock is not None else dt.datetime.now()
        if tz is not None:
            base = base.replace(tzinfo=dt.UTC).astimezone(tz)
        return cls.combine(base.date(), base.timetz())

    @classmethod
    def utcnow(cls) -> _SimDatetime:
        return cls.now()

    @classmethod
    def today(cls) -> _SimDatetime:
        return cls.now()


class _SeededUUID(ModuleType):
    """The ``uuid`` module as a library sees it while pinned: ``uuid4`` draws from a seeded source."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__("uuid")
        self._rng = rng

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)


@contextlib.contextmanager
def pinned_clock(modules: list[ModuleType], clock: SimClock, rng: random.Random) -> Iterator[None]:
    """While inside, each module's ``datetime`` (class or module), ``uuid`` and ``uuid4`` names read
    the simulated clock and the seeded id source; restored on exit. Only names a module imported
    are replaced, so nothing outside the library changes."""
    _SimDatetime.clock = clock
    sim_module = ModuleType("datetime")
    sim_module.__dict__.update({k: v for k, v in dt.__dict__.items() if not k.startswith("__")})
    sim_module.datetime = _SimDatetime  # type: ignore[attr-defined]
    seeded = _SeededUUID(rng)
    saved: list[tuple[ModuleType, str, Any]] = []
    for module in modules:
        for name, value in list(vars(module).items()):
            replacement: Any = None
            if value is dt.datetime:
                replacement = _SimDatetime
            elif value is dt:
                replacement = sim_module
            elif value is uuid:
                replacement = seeded
            elif value is uuid.uuid4:
                replacement = seeded.uuid4
            if replacement is not None:
                saved.append((module, name, value))
                setattr(module, name, replacement)
    try:
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


class StoreMirror:
    """The last dump of a library's store, recorded: each new dump becomes add / update / delete
    ``memory_op`` events (with their JSON Patch) against the previous one."""

    def __init__(self, services: MemoryServices, content_field: str) -> None:
        self.store = RecordedStore(services.recorder, content_field=content_field)

    def sync(self, items: dict[str, dict[str, Any]], note: str) -> int:
        """Record the differences to ``items``; returns how many items changed."""
        changed = 0
        for item_id in [i for i in self.store.ids() if i not in items]:
            self.store.delete(item_id, note=note)
            changed += 1
        for item_id, item in items.items():
            if item_id not in self.store:
                self.store.add(item_id, item, note=note)
                changed += 1
            elif self.store.get(item_id) != item:
                self.store.update(item_id, item, note=note)
                changed += 1
        return changed


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


class LibraryAdapter:
    """Base of the adapters: subclasses implement the ``_lib_*`` hooks (run on the library thread)."""

    name: ClassVar[str]
    description: ClassVar[str]
    #: The distribution that must be installed, and the extra that installs it.
    distribution: ClassVar[str]
    extra: ClassVar[str]
    #: The native field counted for the footprint's characters.
    content_field: ClassVar[str] = "memory"

    @classmethod
    def unavailable_reason(cls) -> str:
        """What to do when the library is not installed (``systems list`` and the run's error say it)."""
        return f"install the extra: pip install 'memprobe[{cls.extra}]' (or make install-extras)"

    def __init__(self, services: MemoryServices) -> None:
        services.require(self.name, chat=True, embedder=True)
        self.services = services
        self.mirror = StoreMirror(services, self.content_field)
        self._thread: LibraryThread | None = None
        self._proxy: RecordingProxy | None = None
        self._token = ""
        self._pending: list[Observation] = []
        self.user_id = ""
        self.store_dir = Path()

    # -- the MemorySystem protocol ---------------------------------------------------------------

    async def reset(self, user_id: str) -> None:
        """A fresh, empty store for ``user_id`` in its own folder; recorded as one ``reset`` op."""
        if self._proxy is None:
            self._prepare(self._stores_root())
            self._proxy = await shared_proxy(self.services.chat_client, self.services.text_embedder)
            self._token = self._proxy.register(self.name, role=LIBRARY_ROLE)
            self._thread = library_thread(self.name)
        self.user_id = user_id
        self._pending = []
        self.store_dir = self._stores_root() / _safe(user_id)
        if self.store_dir.exists():
            shutil.rmtree(self.store_dir)  # a resumed unit starts over: its calls come back from the recording
        self.store_dir.mkdir(parents=True)
        await self._library(lambda: self._lib_reset(self.store_dir))
        self.mirror.store.clear(note=f"new user {user_id}")

    async def observe(self, observation: Observation) -> None:
        if observation.text.strip():
            self._pending.append(observation)

    async def finish(self) -> None:
        """Hand the library what it has not seen yet (end of a session, or of a user's tasks)."""
        await self._flush()

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        await self._flush()
        if k <= 0 or not len(self.mirror.store):
            return []
        hits = await self._library(lambda: self._lib_search(query, k))
        return [ScoredItem(id=item_id, item=copy.deepcopy(self.mirror.store.get(item_id))
                           if item_id in self.mirror.store else item, score=score)
                for item_id, item, score in hits[:k]]

    def dump(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(item) for item in self.mirror.store.items()]

    def footprint(self) -> Footprint:
        return self.mirror.store.footprint()

    # -- plumbing --------------------------------------------------------------------------------

    async def _flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        await self._library(lambda: self._lib_ingest(batch))
        items = await self._library(self._lib_dump)
        first, last = batch[0], batch[-1]
        self.mirror.sync(items, note=f"{self.name} ingest of {len(batch)} message(s), task {first.task_index} "
                                     f"turns {first.turn}-{last.turn}")

    async def _library(self, fn: Callable[[], Awaitable[T] | T]) -> T:
        """Run a hook on the library thread, its calls attributed to this system at the current span,
        under the simulated clock."""
        assert self._thread is not None and self._proxy is not None
        modules = self._clock_modules()

        async def run() -> T:
            with _PIN_LOCK, pinned_clock(modules, self.services.clock, self.services.rng):
                result = fn()
                if asyncio.iscoroutine(result):
                    return await result  # type: ignore[no-any-return]
                return result  # type: ignore[return-value]
        with self._proxy.attach(self._token):
            try:
                return await self._thread.call_async(run)
            except ConfigError:
                raise
            except Exception as err:
                self.services.recorder.emit(ErrorEvent(where=self.name, error_type=type(err).__name__,
                                                       message=str(err)[:1000], recoverable=False))
                raise

    def _stores_root(self) -> Path:
        writer = self.services.recorder.writer
        root = Path(writer.directory) if writer is not None else Path.cwd() / ".memprobe-stores"
        return root / "stores" / _safe(self.name)

    @property
    def base_url(self) -> str:
        assert self._proxy is not None
        return self._proxy.base_url

    @property
    def api_key(self) -> str:
        return self._token

    def library_error(self, message: str) -> None:
        """Record a recoverable problem the library reported without raising."""
        self.services.recorder.emit(ErrorEvent(where=self.name, error_type="LibraryWarning", message=message,
                                               recoverable=True))

    # -- hooks for subclasses (called on the library thread) -------------------------------------

    def _prepare(self, stores_root: Path) -> None:
        """Set what the library reads once at import (environment), before it is first imported."""

    def _clock_modules(self) -> list[ModuleType]:
        """The library modules whose clock and id source are pinned during calls."""
        return []

    def _lib_reset(self, store_dir: Path) -> None | Awaitable[None]:
        raise NotImplementedError

    def _lib_ingest(self, batch: list[Observation]) -> None | Awaitable[None]:
        raise NotImplementedError

    def _lib_search(self, query: str, k: int) -> LibraryHits | Awaitable[LibraryHits]:
        """``[(item_id, item, score), ...]`` best first."""
        raise NotImplementedError

    def _lib_dump(self) -> LibraryStore | Awaitable[LibraryStore]:
        """``{item_id: native fields}`` of the whole store."""
        raise NotImplementedError


def conversation(batch: list[Observation]) -> list[dict[str, str]]:
    """The batch as chat messages: the user's words (task openings included) and the assistant's;
    tool outputs are shown as the user's."""
    return [{"role": "assistant" if o.kind == "assistant" else "user",
             "content": o.text if o.kind != "tool_output" else f"Tool output: {o.text}"} for o in batch]
