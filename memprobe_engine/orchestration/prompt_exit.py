"""A command stopped by Ctrl-C or SIGTERM exits at once, whatever threads are still busy.

Blocking work runs in the event loop's default thread pool (``asyncio.to_thread``): loading the
embedding model, encoding a batch, starting the embedded server. A signal cancels the tasks that
wait for it, but not the threads: ``asyncio.run`` then waits for the pool to finish, and the
interpreter joins its threads on the way out — on a busy machine the model load alone took 20–30 s.

- :func:`run_interruptible` runs a coroutine as ``asyncio.run`` does, with a default pool whose
  shutdown waits for nothing, and SIGTERM ending it as Ctrl-C does (the coroutine is cancelled, then
  :class:`~memprobe_engine.orchestration.lifecycle.Interrupted` is raised).
- :func:`exit_now` ends the process without joining threads, after the ``atexit`` handlers (which
  stop an embedded server) and a flush of stdout and stderr. The recording was closed before, by
  the run's own lifecycle.
- :func:`note_completed` / :func:`completed`: whether the command's recorded run finished its work, so
  that a signal arriving after that exits 0.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_completed: list[Path] = []


class NoWaitExecutor(ThreadPoolExecutor):
    """A thread pool whose shutdown never waits for a thread still at work (its result is not wanted
    any more) and drops the work not started."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


def run_interruptible(main: Coroutine[object, object, T]) -> T:
    """``asyncio.run(main)`` that SIGTERM interrupts like Ctrl-C and that never waits for a busy thread."""
    from memprobe_engine.orchestration.interrupted import Interrupted

    async def body() -> T:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(NoWaitExecutor(thread_name_prefix="memprobe"))
        task = asyncio.current_task()
        stopped: list[int] = []
        installed = False
        if task is not None and threading.current_thread() is threading.main_thread():
            def on_term() -> None:
                stopped.append(signal.SIGTERM)
                task.cancel()

            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGTERM, on_term)
                installed = True
        try:
            return await main
        except asyncio.CancelledError:
            if stopped:
                raise Interrupted(stopped[0]) from None
            raise
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGTERM)

    return asyncio.run(body())


def note_completed(recording: Path | None) -> None:
    """Record that the command's recorded run finished (None: a new run starts, nothing finished yet)."""
    _completed.clear()
    if recording is not None:
        _completed.append(recording)


def completed() -> Path | None:
    """The recording whose run this command finished, if it did."""
    return _completed[0] if _completed else None


def exit_now(status: int) -> None:
    """Flush, run the ``atexit`` handlers, and end the process with ``status`` without joining threads."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    os._exit(status)


__all__ = ["NoWaitExecutor", "completed", "exit_now", "note_completed", "run_interruptible"]
