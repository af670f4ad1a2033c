"""One recorded-run lifecycle for every command that writes a recording.

``async with recorded_run(directory, header=..., suite=...) as run:`` opens the writer (creating the
recording, or continuing one when ``header`` is None), emits ``run_start``, and hands out
``run.recorder``. On the way out, whatever happened, it:

- cancels tasks the run started that are still going (a failed unit must not leave siblings writing
  into a closed recording; their spans close as ``cancelled``),
- closes every span the recorder still has open as ``cancelled``, innermost first,
- writes ``run_end`` with the status that fits: ``completed`` on success, ``failed`` on an exception
  (and an ``error`` event naming it), ``interrupted`` on Ctrl-C, task cancellation or SIGTERM,
- closes the writer, which releases the lock.

With ``signals=True`` (the CLI), SIGTERM cancels the run's task like Ctrl-C does, and the context
then raises :class:`Interrupted` (a KeyboardInterrupt) so the command exits with 143 and its one line. A
fatal error inside a task group arrives as an ExceptionGroup; :func:`first_error` picks the one
error to show, so the user reads one line, not one per unit.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.run import ErrorEvent, RunEnd, RunStart
from memprobe_engine.events.writer import EventWriter, open_writer
from memprobe_engine.orchestration.interrupted import Interrupted as Interrupted  # where callers look for it

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.embeddings import TextEmbedder

Scrub = Callable[[str], str]


@dataclass
class RecordedRun:
    """What the body of ``recorded_run`` works with."""

    writer: EventWriter
    recorder: Recorder
    #: Set by the body to say why a completed-looking exit is not one (rare; e.g. "nothing to do").
    note: str | None = None
    #: Removes secrets from the failure reason (the body may set it once its chat client exists).
    scrub: Scrub | None = None
    signum: int | None = field(default=None, repr=False)

    @property
    def directory(self) -> Path:
        return self.writer.directory


def first_error(error: BaseException) -> BaseException:
    """The one error to report: inside an ExceptionGroup, the first MemProbeError (the clear message
    a user can act on), else the first leaf that is not a cancellation."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    leaves: list[BaseException] = []
    stack: list[BaseException] = [error]
    while stack:
        current = stack.pop(0)
        if isinstance(current, BaseExceptionGroup):
            stack[0:0] = list(current.exceptions)
        else:
            leaves.append(current)
    for leaf in leaves:
        if isinstance(leaf, MemProbeError):
            return leaf
    for leaf in leaves:
        if not isinstance(leaf, asyncio.CancelledError):
            return leaf
    return leaves[0] if leaves else error


RunStatus = Literal["completed", "failed", "interrupted"]


def _status_of(error: BaseException | None, signum: int | None) -> tuple[RunStatus, str | None]:
    if error is None:
        return "completed", None
    if signum is not None:
        return "interrupted", signal.Signals(signum).name
    if isinstance(error, (KeyboardInterrupt, asyncio.CancelledError)):
        return "interrupted", "Ctrl-C" if isinstance(error, KeyboardInterrupt) else "cancelled"
    return "failed", f"{type(error).__name__}: {error}"


@asynccontextmanager
async def recorded_run(directory: Path | str, *, header: RecordingHeader | None, suite: str,
                       resumed: bool | None = None, signals: bool = False, cancel_strays: bool = True,
                       scrub: Scrub | None = None,
                       recorder_factory: Callable[[EventWriter], Recorder] = Recorder) -> AsyncIterator[RecordedRun]:
    """Open (or continue) a recording and run its lifecycle; see the module docstring.

    ``resumed`` defaults to whether the recording already held events. Continuing a recording first
    closes the spans an earlier, killed session left open (``interrupted``, not damage). ``scrub`` removes secrets
    from the failure reason written to ``run_end`` and the ``error`` event. ``cancel_strays=False``
    leaves other tasks alone: for a run inside someone else's event loop (the TUI's re-score).
    """
    from memprobe_engine.orchestration.prompt_exit import note_completed

    note_completed(None)
    writer = open_writer(directory, header)
    recorder = recorder_factory(writer)
    run = RecordedRun(writer=writer, recorder=recorder, scrub=scrub)
    was_resumed = writer.next_seq > 0 if resumed is None else resumed
    if header is None:
        recorder.close_spans_of_a_crash()  # an earlier session killed mid-span: closed as interrupted
    task = asyncio.current_task()
    before = asyncio.all_tasks()
    loop = asyncio.get_running_loop()
    installed = False
    previous = signal.getsignal(signal.SIGTERM)
    if signals and task is not None and threading.current_thread() is threading.main_thread():
        def _on_term() -> None:
            run.signum = signal.SIGTERM
            task.cancel()

        try:
            loop.add_signal_handler(signal.SIGTERM, _on_term)
            installed = True
        except (NotImplementedError, RuntimeError, ValueError):
            installed = False
    error: BaseException | None = None
    try:
        recorder.emit(RunStart(run_id=writer.header.run_id, suite=suite, resumed=was_resumed, note=None))
        yield run
    except BaseException as err:  # noqa: BLE001 - recorded, then re-raised below
        error = err
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGTERM)
            if previous is not None:  # the command's own handler again, not the default (killed outright)
                signal.signal(signal.SIGTERM, previous)
        if cancel_strays:
            await _cancel_strays(before, task)
        try:
            if writer.failed is None:  # after a failed write (a full disk) nothing more can be written
                recorder.close_open_spans()
                status, reason = _status_of(None if error is None else first_error(error), run.signum)
                if reason is not None and run.scrub is not None:
                    reason = run.scrub(reason)
                if status == "failed" and error is not None:
                    shown = first_error(error)
                    recorder.emit(ErrorEvent(where=suite, error_type=type(shown).__name__,
                                             message=(reason or "")[:2000]))
                recorder.emit(RunEnd(status=status, reason=(reason or run.note)))
                if status == "completed":
                    note_completed(writer.directory)  # a signal from here on exits 0
        finally:
            writer.close()  # the lock is released even when the closing events cannot be written
    if error is not None:
        if run.signum is not None:
            raise Interrupted(run.signum) from None
        if isinstance(error, BaseExceptionGroup):
            raise first_error(error) from None
        raise error


async def _cancel_strays(before: set[asyncio.Task[object]], current: asyncio.Task[object] | None) -> None:
    """Cancel and await tasks created during the run that are still pending (orphans of a failed
    ``gather``), so nothing writes after run_end and no 'exception was never retrieved' noise."""
    strays = [t for t in asyncio.all_tasks() if t not in before and t is not current and not t.done()]
    for stray in strays:
        stray.cancel()
    if strays:
        await asyncio.wait(strays, timeout=10)


async def close_run_clients(chat: ChatClient, embedder: TextEmbedder | None) -> None:
    """Close what a run opened: the library adapters' recording proxy (if any ran), the chat client, the
    embedder."""
    # A shared proxy exists only where something (a library adapter) imported the proxy module; importing
    # it here for nothing (its HTTP server, h11) cost every run tens of milliseconds at its end.
    proxy = sys.modules.get("memprobe_engine.llm.proxy")
    if proxy is not None:
        await proxy.close_shared_proxies()
    await chat.aclose()
    close = getattr(embedder, "aclose", None)
    if close is not None:
        await close()
