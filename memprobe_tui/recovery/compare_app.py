"""The replay app opened on two runs (``memprobe replay BASE --compare OTHER``): it starts on the
compare screen instead of the run overview; every other screen and key is the replay's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memprobe_engine.replay import ReplaySession
from memprobe_tui.app import MemProbeApp
from memprobe_tui.keymap import DEFAULT_KEYMAP
from memprobe_tui.recovery.compare import CompareScreen


class CompareApp(MemProbeApp):
    """``session`` is the base run, ``other`` the run compared with it (each optionally one system)."""

    def __init__(self, *, session: ReplaySession, other: ReplaySession, base_system: str | None = None,
                 other_system: str | None = None, live: Mapping[str, object] | None = None,
                 keymap_path: Path | None = DEFAULT_KEYMAP, no_color: bool = False) -> None:
        super().__init__(session=session, live=live, keymap_path=keymap_path, no_color=no_color)
        self.other = other
        self.base_system, self.other_system = base_system, other_system

    def open_overview(self, session: ReplaySession) -> None:
        if session is self.session and not any(isinstance(s, CompareScreen) for s in self.screen_stack):
            self.push_screen(CompareScreen(session, self.other, base_system=self.base_system,
                                           other_system=self.other_system))
        else:
            super().open_overview(session)
