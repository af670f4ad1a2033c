"""Progress of long commands (run, generate, import, rescore) for a person at a terminal or a log.

On a terminal: a live rich display — a bar with done/total, elapsed time and ETA, and the latest
step as its description; a spinner while the total is not known yet (model start-up, the first
call). Not on a terminal (a pipe, a CI log, ``nohup``): one timestamped plain line per update, so
logs stay greppable and nothing redraws. Either way it starts printing at once: a command that
spends its first minutes starting models says so instead of staying silent.

Usage::

    with CommandProgress("run", unit="units") as progress:
        progress.phase("starting models (the embedded 1.5B takes about a minute)")
        await run_protocol(..., progress=progress.hook)

Model start-up is shown too: while the display is open, the model lifecycle messages of
``memprobe_engine.llm`` (assembling the embedded model, starting a llama.cpp or vLLM server, ready
after N s) become its phases.

``hook`` has the shape of :data:`ProgressHook` (message, done, total);
``advance``/``set_total``/``note`` serve commands that count their own work.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: What a run reports after each step: (message, units done, units in all).
ProgressHook = Callable[[str, int, int], None]

#: Loggers whose INFO messages are model start-up and shutdown (shown as phases).
MODEL_LOGGERS = ("memprobe_engine.llm",)


class _PhaseHandler(logging.Handler):
    def __init__(self, progress: CommandProgress) -> None:
        super().__init__(level=logging.INFO)
        self._progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._progress.phase(record.getMessage())
        except Exception:  # a display problem must never break the command
            self.handleError(record)


class CommandProgress:
    """One command's progress display; ``live`` None decides by whether ``stream`` is a terminal."""

    def __init__(self, title: str, *, unit: str = "steps", total: int | None = None, stream: IO[str] | None = None,
                 live: bool | None = None) -> None:
        self.title, self.unit, self.total = title, unit, total
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self.console = Console(file=self._stream, highlight=False, soft_wrap=True)
        self.live = self.console.is_terminal if live is None else live
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._started = time.monotonic()
        self._description = title
        self._handler = _PhaseHandler(self)
        self._levels: list[tuple[logging.Logger, int]] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> CommandProgress:
        self._started = time.monotonic()
        if self.live:
            self._progress = Progress(
                SpinnerColumn(), TextColumn("[bold]{task.fields[title]}[/]"), BarColumn(bar_width=24),
                MofNCompleteColumn(), TextColumn(self.unit), TimeElapsedColumn(), TextColumn("ETA"),
                TimeRemainingColumn(), TextColumn("{task.description}", markup=False),
                console=self.console, transient=False, refresh_per_second=4)
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=self.total, title=self.title)
        for name in MODEL_LOGGERS:
            logger = logging.getLogger(name)
            self._levels.append((logger, logger.level))
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)
            logger.addHandler(self._handler)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for logger, level in self._levels:
            logger.removeHandler(self._handler)
            logger.setLevel(level)
        self._levels.clear()
        if self._progress is not None:
            self._progress.stop()
        if kind is None:
            self._plain(f"finished in {_took(time.monotonic() - self._started)}", force=True)

    # -- updates ---------------------------------------------------------------------------------
    def phase(self, text: str) -> None:
        """What happens now when it is not a counted step (model start-up, indexing, writing)."""
        self._describe(text)
        self._plain(text)

    def set_total(self, total: int) -> None:
        self.total = total
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total)

    def advance(self, steps: int = 1, note: str | None = None) -> None:
        self.done += steps
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done)
        if note:
            self._describe(note)
        self._plain(note or "")

    def note(self, text: str) -> None:
        """A line of its own above the live display (or a plain line)."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False)
        else:
            self._plain(text)

    def hook(self, message: str, done: int, total: int) -> None:
        """The runner's progress hook: ``message`` after ``done`` of ``total`` units."""
        if total != self.total:
            self.set_total(total)
        if done != self.done:
            self.done = done
            if self._progress is not None and self._task is not None:
                self._progress.update(self._task, completed=done)
        self._describe(message)
        self._plain(message)

    # -- output ----------------------------------------------------------------------------------
    def _describe(self, text: str) -> None:
        self._description = text
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=text)

    def _plain(self, text: str, force: bool = False) -> None:
        if self.live and not force:
            return
        stamp = dt.datetime.now().strftime("%H:%M:%S")
        count = f"{self.done}/{self.total} {self.unit}" if self.total else f"{self.done} {self.unit}"
        eta = self.eta()
        line = f"[{stamp}] {self.title}: {count}" + (f" · ETA {_took(eta)}" if eta is not None else "")
        print(line + (f" · {text}" if text else ""), file=self._stream, flush=True)

    def eta(self) -> float | None:
        """Seconds left at the mean pace so far (None before the first step or without a total)."""
        if not self.total or not self.done or self.done >= self.total:
            return None
        elapsed = time.monotonic() - self._started
        return elapsed / self.done * (self.total - self.done)


def _took(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def stderr_progress(message: str, done: int, total: int) -> None:
    """Plain progress lines (works over SSH and in logs), for callers without a display."""
    stamp = dt.datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp}] {done}/{total} units · {message}", file=sys.stderr, flush=True)
