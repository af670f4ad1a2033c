"""The critical path of a run: how long it would take if the engine cost nothing.

The run is executed on an event loop with a virtual clock: whenever every task is waiting on a
timer (a simulated model call's latency) and no I/O is ready, the clock jumps to the next timer
instead of sleeping. The backend is the in-process scripted oracle with the endpoint's latency, so
the run's virtual duration is exactly its longest chain of dependent model calls × the latency (with
the engine's scheduling: units bounded by --concurrency, dimensions scored concurrently, identical
requests shared). Used by bench/scale.py.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self, loop: "VirtualClockLoop") -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout is None or timeout <= 0:
            return ready if ready or timeout is not None else super().select(timeout)
        self._loop.virtual_now += timeout  # nothing to do until the next timer: jump to it
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.virtual_now = 0.0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.virtual_now


def run_virtual(work: Coroutine[Any, Any, T]) -> tuple[T, float]:
    """Run ``work`` on a virtual clock; returns its result and its virtual duration in seconds."""
    loop = VirtualClockLoop()
    try:
        started = loop.time()
        result = loop.run_until_complete(work)
        return result, loop.time() - started
    finally:
        loop.close()
