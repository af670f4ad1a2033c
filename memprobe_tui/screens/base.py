"""What every screen shares: the title line, the damage banner, the footer, redraw when the followed
recording grows, and the one handler that surfaces worker failures."""

from __future__ import annotations

import traceback
from typing import ClassVar, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from memprobe_engine.errors import MemProbeError
from memprobe_engine.replay import ReplaySession
from memprobe_tui.messages import RecordingGrew
from memprobe_tui.navigation import Navigator
from memprobe_tui.widgets.damage_banner import DamageBanner
from memprobe_tui.widgets.title_bar import TitleBar


class ReplayScreen(Screen[None]):
    """Base screen. ``session`` is None only for the recordings browser."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back", id="screen.back")]

    def __init__(self, session: ReplaySession | None) -> None:
        super().__init__()
        self.session = session
        self.seen_version = -1

    def compose_top(self) -> ComposeResult:
        yield TitleBar(id="title")
        yield DamageBanner(id="banner")

    def compose_bottom(self) -> ComposeResult:
        yield Footer(compact=True)

    @property
    def nav(self) -> Navigator:
        """The app, seen as the navigator that opens other screens."""
        return cast(Navigator, self.app)

    def set_title(self, text: str) -> None:
        self.query_one(TitleBar).set(text)

    def show_damage(self) -> None:
        message = self.session.damage_message() if self.session is not None else None
        self.query_one(DamageBanner).show_message(message)

    def reload(self) -> None:
        """Redraw from the session (subclasses extend); called when the recording grew."""
        if self.session is not None:
            self.seen_version = self.session.version
        self.show_damage()

    def on_screen_resume(self) -> None:
        # A screen below the top missed RecordingGrew while covered; catch up when shown again.
        if self.session is not None and self.seen_version not in (-1, self.session.version):
            self.reload()

    def on_recording_grew(self, message: RecordingGrew) -> None:
        self.reload()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()

    @on(Worker.StateChanged)
    def surface_worker_failure(self, event: Worker.StateChanged) -> None:
        """The one place a failed worker is reported: a user-facing message, never a traceback."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if isinstance(error, MemProbeError):
            message = str(error)
        else:
            message = f"{type(error).__name__}: {error}"
            self.log.error("".join(traceback.format_exception(error)) if error else message)
        self.notify(message, title=f"{event.worker.name or 'background task'} failed", severity="error",
                    timeout=15)
