"""The re-run panel: a status line with progress per step and an ETA, and the re-score's streamed
output in a read-only, soft-wrapping text area (appends are cheap; long lines wrap to the width).

Progress counts the steps the stream announces (a new ``stage`` label: slot-fill, judge,
attribution stage 0/1/2, per access mode). The attribution may stop early (a disclosed target
ends it after stage 1), so the total is an upper bound, and so is the ETA: the mean time of a
finished step times the steps that may remain.

A second line says what the model call under way does, with its own elapsed time: the engine's
progress before the reply streams (starting the model, evaluating the prompt: 512/1,834 tokens),
then how much of the reply has streamed. On a small CPU a prompt takes minutes before the first
token; without this line the panel looked stuck.
"""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static, TextArea

from memprobe_engine.llm.call_progress import CallProgress
from memprobe_tui.timefmt import duration

#: What the progress line says while the reply streams (with how many pieces came).
STREAMING = "the reply streams"
#: Steps per access mode at most: slot-fill, judge, attribution stages 0, 1 and 2.
STEPS_PER_MODE = 5


class RerunPanel(Vertical):
    """Hidden until a re-run starts; stays visible afterwards with its outcome and output."""

    DEFAULT_CSS = """
    RerunPanel {
        height: 45%;
        min-height: 8;
        border-top: solid $accent;
        display: none;
    }
    RerunPanel.shown {
        display: block;
    }
    RerunPanel > #rerun-status {
        height: auto;
        max-height: 2;
        padding: 0 1;
        background: $accent 20%;
    }
    RerunPanel > #rerun-progress {
        height: 1;
        padding: 0 1;
        background: $accent 10%;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    RerunPanel > #rerun-progress.idle {
        display: none;
    }
    RerunPanel > TextArea {
        height: 1fr;
        border: none;
        padding: 0 1;
        background: $surface;
    }
    RerunPanel > TextArea:focus {
        border: none;
        background-tint: $foreground 3%;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="rerun-status")
        yield Static("", id="rerun-progress", classes="idle")
        # Soft-wrapping: a line longer than the panel (the probe re-run's note naming reader, probe and
        # episode) wraps instead of being cut at the edge (it read "… of PILOT-" at 80 columns).
        yield TextArea("", id="rerun-log", read_only=True, soft_wrap=True, show_line_numbers=False,
                       highlight_cursor_line=False, compact=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._stage: str | None = None
        self._title = ""
        self._started = 0.0
        self._step_started = 0.0
        self._steps = 0
        self._total = STEPS_PER_MODE * 2
        self._outcome: str | None = None
        self._doing = ""           # what the call under way does (the progress line), "" for none
        self._doing_what = ""      # the step it is in (a prompt's counts change, its step does not)
        self._doing_since = 0.0    # when that step began
        self._pieces = 0           # pieces of the reply streamed since it began streaming
        self._role = ""            # the role of the call under way, as its last progress said

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)

    @property
    def text(self) -> str:
        return self.query_one(TextArea).text

    @property
    def steps(self) -> int:
        return self._steps

    def start(self, title: str, modes: int = 2) -> None:
        """A re-run of ``title`` (the dimension) under ``modes`` access modes begins."""
        self.add_class("shown")
        self._stage, self._title, self._outcome = None, title, None
        self._started = self._step_started = time.monotonic()
        self._steps, self._total = 0, STEPS_PER_MODE * max(1, modes)
        self._clear("")
        self._doing_what = self._role = ""
        self._set_doing("starting the re-run")
        self._tick()

    def restore(self, title: str, text: str) -> None:
        """Show the output of an earlier re-run of this dimension (the inspector was reopened)."""
        self.add_class("shown")
        self._title, self._outcome = title, "shown again"
        self._clear(text)
        self._set_doing("")
        self._set_status(f"last {title} in this session (r runs it again)")

    def finish(self, outcome: str) -> None:
        self._outcome = outcome
        self._set_doing("")
        # No elapsed time here: the progress line showed it while running, and a finished panel
        # should read the same every time it is shown (snapshots, a reopened inspector).
        self._set_status(f"{self._title}: {outcome} · steps: {self._steps}"
                         + (" — scores appended to the recording" if outcome == "done" else ""))

    def status(self, text: str) -> None:
        """Say ``text`` on the status line; the automatic progress stops (the caller took over)."""
        self._outcome = self._outcome or "status set by the screen"
        self._set_doing("")
        self._set_status(text)

    def progress(self, progress: CallProgress) -> None:
        """The model call under way reports what it does (shown until the next report or piece)."""
        if self._outcome is None:
            self._role = progress.role or ""
            self._set_doing(progress.describe(), progress.what)

    def progress_line(self, now: float | None = None) -> str:
        """``evaluating the prompt: 512/1,834 tokens (27 %) · 15.4 s``; "" when nothing runs."""
        if not self._doing:
            return ""
        now = time.monotonic() if now is None else now
        return f"{self._doing} · {duration(now - self._doing_since)}"

    def _set_doing(self, text: str, what: str | None = None) -> None:
        """Show ``text``; its time counts from when the step ``what`` (default: the text) began."""
        what = text if what is None else what
        if what != self._doing_what:
            self._doing_what, self._doing_since = what, time.monotonic()
        self._doing = text
        line = self.query_one("#rerun-progress", Static)
        line.set_class(not text, "idle")
        line.update(self.progress_line())

    def _set_status(self, text: str) -> None:
        self.query_one("#rerun-status", Static).update(text)

    def progress_text(self, now: float | None = None) -> str:
        """``⟳ TITLE running · step 3/≤10 (judge) · 41.0 s · ≤ 1 min 36 s left · Esc cancels``."""
        now = time.monotonic() if now is None else now
        elapsed = now - self._started
        parts = [f"⟳ {self._title} running", f"step {max(1, self._steps)}/≤{self._total}"
                 + (f" ({self._stage})" if self._stage else ""), duration(elapsed)]
        finished = max(0, self._steps - 1)
        if finished:
            left = (self._step_started - self._started) / finished * (self._total - finished) - (now - self._step_started)
            parts.append(f"≤ {duration(max(0.0, left))} left")
        parts.append("Esc cancels")
        return " · ".join(parts)

    def _tick(self) -> None:
        if self._started and self._outcome is None and self.has_class("shown"):
            self._set_status(self.progress_text())
            self.query_one("#rerun-progress", Static).update(self.progress_line())

    def write(self, text: str, stage: str | None = None) -> None:
        """Append streamed text; a new ``stage`` starts its own headed section (and a step)."""
        if stage is not None and stage != self._stage:
            self._stage = stage
            self._steps += 1
            self._step_started = time.monotonic()
            self.line(f"── {stage}")
            self._tick()
        if self._outcome is None:  # the reply streams: the progress line counts its pieces
            self._pieces = self._pieces + 1 if self._doing_what == STREAMING else 1
            role = f"{self._role}: " if self._role else ""
            self._set_doing(f"{role}{STREAMING}: {self._pieces} piece{'s' if self._pieces > 1 else ''}", STREAMING)
        self._append(text)

    def note(self, text: str) -> None:
        """A progress note of the re-run (a span begins: the next access mode, an attribution stage).
        The text streamed after it opens a section (and a step) of its own, even under the same stage
        label: retrieve's slot-fill after dump_all's was shown as the same step 1."""
        self._stage = None
        self.line(text)

    def line(self, text: str) -> None:
        """A line of its own (a note, a stage header), even in the middle of streamed text."""
        current = self.text
        self._append(("\n" if current and not current.endswith("\n") else "") + text + "\n")

    def _clear(self, text: str) -> None:
        self.query_one(TextArea).load_text(text)

    def _append(self, text: str) -> None:
        area = self.query_one(TextArea)
        area.insert(text, area.document.end, maintain_selection_offset=False)
        area.scroll_end(animate=False)
