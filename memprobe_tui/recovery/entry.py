"""Protocol A's TUI entry: its overview, its screens, its palette and its compare app (named by the spec's
``tui`` line)."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.screen import Screen

from memprobe_engine.replay import ReplaySession
from memprobe_tui.recovery.commands import ReplayCommands
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.recovery.navigation import DIMENSION, RESCORE, SWITCH_TRANSCRIPT, TRANSCRIPT, live_hooks
from memprobe_tui.recovery.overview import OverviewScreen
from memprobe_tui.recovery.transcript import TranscriptScreen
from memprobe_tui.tui_entry import TuiEntry


def _transcript(app: App[Any], session: ReplaySession, user_id: str, system: str,
                at: tuple[int, int] | None) -> None:
    app.push_screen(TranscriptScreen(session, user_id, system, at))


def _switch_transcript(app: App[Any], screen: Screen[None], system: str, at: tuple[int, int]) -> None:
    if isinstance(screen, TranscriptScreen):
        app.switch_screen(TranscriptScreen(screen.session, screen.user_id, system, at))


def _dimension(app: App[Any], session: ReplaySession, user_id: str, system: str, dimension: str | None,
               layer: str | None = None) -> None:
    app.push_screen(DimensionScreen(session, user_id, system, dimension, judgment_layer=layer))


def run_compare(base: ReplaySession, other: ReplaySession, base_system: str | None, other_system: str | None,
                no_color: bool) -> None:
    """The replay app on the case grid of two runs (it imports the app: loaded on first use)."""
    from memprobe_tui.recovery.compare_app import CompareApp

    CompareApp(session=base, other=other, base_system=base_system, other_system=other_system, no_color=no_color,
               live={RESCORE: None}).run()


ENTRY = TuiEntry(overview=OverviewScreen, screens=(OverviewScreen, TranscriptScreen, DimensionScreen),
                 commands=(ReplayCommands,), live_hooks=live_hooks, compare=run_compare,
                 routes={TRANSCRIPT: _transcript, SWITCH_TRANSCRIPT: _switch_transcript, DIMENSION: _dimension})
