"""What the inspectors with a live re-run share (protocol A's dimension inspector, protocol B's probe
inspector): the model box asked before a re-run appends to the recording, the re-run's end told as a
:class:`RescoreFinished` however it ends, its streamed text and its model call's progress in the
:class:`RerunPanel`, and Esc that first closes the box, then cancels the running re-run (saying so at
once: the re-run's cleanup may take a moment, and the screen must not read "running" meanwhile), and
only then goes back.

Each inspector keeps its own re-run worker (its group and name, which a failure is reported by) and
what the re-run's answers and scores mean to its page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual import on
from textual.widgets import Input

from memprobe_tui.messages import RescoreFinished, RescoreProgress, RescoreText
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.widgets.rerun_panel import RerunPanel


class RerunScreen(ReplayScreen):
    """A screen that composes an ``Input`` with id :attr:`MODEL_BOX` and a :class:`RerunPanel`."""

    #: The worker group the re-run runs in (Esc cancels it).
    RERUN_GROUP: ClassVar[str] = "rerun"
    #: The id of the model box.
    MODEL_BOX: ClassVar[str] = "rerun-model"

    def rerun_running(self) -> bool:
        return any(w.group == self.RERUN_GROUP and w.is_running for w in self.workers)

    def model_box(self) -> Input:
        return self.query_one(f"#{self.MODEL_BOX}", Input)

    def ask_model(self, default: Callable[[], str], title: str | None = None) -> None:
        """Show the model box, prefilled with ``default()`` the first time; it is enabled only while
        shown, so it never takes focus hidden."""
        box = self.model_box()
        if not box.value:
            box.value = default()
        box.disabled = False
        box.add_class("shown")
        if title is not None:
            box.border_title = title
        box.focus()

    def close_model_box(self) -> None:
        box = self.model_box()
        box.remove_class("shown")
        box.disabled = True

    def refocus(self) -> None:
        """Where focus goes when Esc closed the model box."""
        self.focus_next()

    async def reported(self, run: Callable[[], Awaitable[object]]) -> None:
        """Await the re-run; its end (done, cancelled, failed) comes back as a :class:`RescoreFinished`."""
        try:
            await run()
        except asyncio.CancelledError:
            self.post_message(RescoreFinished("cancelled"))
            raise
        except Exception as err:
            self.post_message(RescoreFinished(f"failed: {err}"))
            raise  # the screen's Worker.StateChanged handler reports it
        self.post_message(RescoreFinished("done"))

    @on(RescoreText)
    def _rerun_text(self, message: RescoreText) -> None:
        panel = self.query_one(RerunPanel)
        if message.note:
            panel.note(message.text)
        else:
            panel.write(message.text, message.stage)

    @on(RescoreProgress)
    def _rerun_progress(self, message: RescoreProgress) -> None:
        self.query_one(RerunPanel).progress(message.progress)

    @on(RescoreFinished)
    def _rerun_finished(self, message: RescoreFinished) -> None:
        self.rerun_ended(message.outcome)

    def rerun_ended(self, outcome: str) -> None:
        """Show how the re-run ended (done, cancelled, failed: …), each inspector in its own way. Esc
        calls it with "cancelled" at once and the worker's end again: it must bear being called twice."""
        raise NotImplementedError

    def action_back(self) -> None:
        if self.model_box().has_class("shown"):  # Esc first closes the model box: nothing is run or written
            self.close_model_box()
            self.refocus()
            return
        if self.rerun_running():
            self.workers.cancel_group(self, self.RERUN_GROUP)  # then cancels a running re-run
            self.rerun_ended("cancelled")
            return
        super().action_back()
