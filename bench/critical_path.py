"""The critical path of a run: how long it would take if the engine cost nothing.

The run is executed on an event loop with a virtual clock: whenever every task is waiting on a
timer (a simulated model call's latency) and no I/O is ready, the clock jumps to the next timer
instead of sleeping. The backend is the in-process scripted oracle with the endpoint's latency, so
the run's virtual duration is exactly its longest chain of dependent model calls × the latency (with
the engine's scheduling: units bounded by --concurrency, dimensions scored concurrently, identical
requests shared). Used by bench/scale.py and bench/cluster.py.

Work handed to a worker thread (``asyncio.to_thread``: the embedding model, the embedding cache's
SQLite) costs no virtual time either: while any such job is outstanding the loop waits for it in
real time and the clock stands still. Jumping to the next timer instead (as it did before
2026-12-05) let every other unit's calls complete "during" a unit's embedding, so a unit that
embeds started its chain late by however long the embedding model took to load and encode in real
time: the path of issue 35's job (with ``amem``) came out 16.2–26.8 s depending on the embedding
cache's state and the machine's load.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self, loop: "VirtualClockLoop") -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout is not None and timeout <= 0:
            return ready
        if timeout is None or self._loop.in_threads:
            # Nothing due, or a worker thread still busy: wait in real time for I/O or the thread's
            # wake-up (call_soon_threadsafe writes to the loop's self-pipe); the clock does not move.
            return super().select(None)
        self._loop.virtual_now += timeout  # nothing to do until the next timer: jump to it
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.virtual_now = 0.0
        self.in_threads = 0  # executor jobs not finished yet
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.virtual_now

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self.in_threads += 1

        def finished(_: asyncio.Future[T]) -> None:
            self.in_threads -= 1

        future.add_done_callback(finished)
        return future


def run_virtual(work: Coroutine[Any, Any, T]) -> tuple[T, float]:
    """Run ``work`` on a virtual clock; returns its result and its virtual duration in seconds."""
    loop = VirtualClockLoop()
    try:
        started = loop.time()
        result = loop.run_until_complete(work)
        return result, loop.time() - started
    finally:
        loop.close()
