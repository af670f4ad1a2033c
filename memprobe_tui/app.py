"""The MemProbe replay app: screen routing, global keys, command palette, help and keymap.

Thin on purpose: every screen lives in ``screens/``, every query in ``memprobe_engine.replay``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from textual.app import App
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import HelpPanel

from memprobe_engine.replay import ReplaySession, RescoreFunction, resolve_rescore
from memprobe_engine.replay.paradigm_queries import is_paradigm_recording
from memprobe_tui.commands import ReplayCommands
from memprobe_tui.keymap import DEFAULT_KEYMAP, load_keymap, unknown_ids
from memprobe_tui.messages import ShowText
from memprobe_tui.paradigm_commands import ParadigmCommands
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.screens.browser import BrowserScreen
from memprobe_tui.screens.dimension import DimensionScreen
from memprobe_tui.screens.episode_stepper import EpisodeScreen
from memprobe_tui.screens.help import HelpScreen
from memprobe_tui.screens.llm_call import LLMCallScreen
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.screens.overview import OverviewScreen
from memprobe_tui.screens.paradigm_overview import ParadigmOverviewScreen
from memprobe_tui.screens.probe_inspector import ProbeScreen
from memprobe_tui.screens.text_view import TextViewScreen
from memprobe_tui.screens.transcript import TranscriptScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.search_prompt import SearchPrompt

if TYPE_CHECKING:
    from memprobe_engine.replay.paradigm_rerun import ProbeRerunHook  # loads the reader: only for the type

SCREENS: tuple[type[Screen[None]], ...] = (ReplayScreen, BrowserScreen, OverviewScreen, TranscriptScreen,
                                           MemoryScreen, DimensionScreen, LLMCallScreen, TextViewScreen,
                                           HelpScreen)
SCREENS += (ParadigmOverviewScreen, EpisodeScreen, ProbeScreen)  # protocol B: paradigm recordings

#: Widgets with bindings of their own (their ids can be remapped in the keymap file too).
BINDING_WIDGETS: tuple[type[DOMNode], ...] = (DetailLog, SearchPrompt)


class MemProbeApp(App[None]):
    """Replays one recording (``session``) or browses a folder of them (``folder``)."""

    TITLE = "MemProbe"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "toggle_help", "Help", id="app.help"),
        Binding("q", "quit", "Quit", show=False, id="app.quit"),  # in F1 help and the palette; saves footer room at 80 columns
    ]
    COMMANDS = App.COMMANDS | {ReplayCommands, ParadigmCommands}

    def __init__(self, *, session: ReplaySession | None = None, folder: Path | None = None,
                 rescore: RescoreFunction | None | Literal["auto"] = "auto",
                 keymap_path: Path | None = DEFAULT_KEYMAP, no_color: bool = False,
                 probe_rerun: ProbeRerunHook | None = None) -> None:
        # Textual turns monochrome when NO_COLOR is set while the app is built; set it just for that,
        # so --no-color does not leak into the rest of the process.
        previous = os.environ.get("NO_COLOR")
        if no_color:
            os.environ["NO_COLOR"] = "1"
        try:
            super().__init__()
        finally:
            if no_color and previous is None:
                del os.environ["NO_COLOR"]
        # Over SSH every animation frame is a round trip: a smooth `G` took ~0.9 s to settle (34 ms
        # without). Off unless the user asked for them with Textual's own TEXTUAL_ANIMATIONS.
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            self.animation_level = "none"
        self.session = session
        self.folder = folder or Path("recordings")
        self.rescore: RescoreFunction | None = resolve_rescore() if rescore == "auto" else rescore
        self.keymap_path = keymap_path
        self.rerun_logs: dict[tuple[str, str, str, str], str] = {}
        #: The protocol-B probe re-run; None: the probe inspector builds the default on first use.
        self.probe_rerun = probe_rerun

    def on_show_text(self, message: ShowText) -> None:
        """A pane or screen asked for a text full screen (``z``/Enter, ``i``)."""
        below = self.screen.session if isinstance(self.screen, ReplayScreen) else None
        self.push_screen(TextViewScreen(message.title, message.lines, message.query, session=below,
                                        export_as=message.export_as, data=message.data))

    def on_mount(self) -> None:
        keymap, problem = load_keymap(self.keymap_path)
        problems = [problem] if problem else []  # every problem of the file at once, not the first
        if keymap:
            self.set_keymap(keymap)
            unknown = unknown_ids(keymap, known_binding_ids())
            if unknown:
                problems.append(f"{self.keymap_path}: no binding has the id(s) {', '.join(unknown)}; "
                                "press F1 for the keys.")
        if problems:
            self.notify("\n".join(problems), title="keymap", severity="warning", timeout=15)
        if self.session is not None:
            self.open_overview(self.session)
        else:
            self.push_screen(BrowserScreen(self.folder))

    # -- routing (the Navigator protocol) ------------------------------------------------------
    def open_overview(self, session: ReplaySession) -> None:
        if is_paradigm_recording(session):  # protocol B: the episode list, not the users × systems board
            self.push_screen(ParadigmOverviewScreen(session))
        else:
            self.push_screen(OverviewScreen(session))

    def open_transcript(self, session: ReplaySession, user_id: str, system: str,
                        at: tuple[int, int] | None = None) -> None:
        self.push_screen(TranscriptScreen(session, user_id, system, at))

    def switch_transcript(self, screen: Screen[None], system: str, at: tuple[int, int]) -> None:
        if isinstance(screen, TranscriptScreen):
            self.switch_screen(TranscriptScreen(screen.session, screen.user_id, system, at))

    def open_memory(self, session: ReplaySession, user_id: str, system: str, seqs: tuple[int, int] | None) -> None:
        self.push_screen(MemoryScreen(session, user_id, system, seqs))

    def open_dimension(self, session: ReplaySession, user_id: str, system: str, dimension: str | None) -> None:
        self.push_screen(DimensionScreen(session, user_id, system, dimension))

    def open_llm_call(self, session: ReplaySession, seq: int) -> None:
        self.push_screen(LLMCallScreen(session, seq))

    # -- global actions ------------------------------------------------------------------------
    def action_toggle_help(self) -> None:
        # Screens of a recording have their own help (what the numbers mean, then the live keys);
        # others (the palette, a prompt) get Textual's key panel.
        if isinstance(self.screen, ReplayScreen):
            self.screen.action_help()
        elif self.screen.query(HelpPanel):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()


def known_binding_ids() -> set[str]:
    """Every binding id of the app and its screens (to flag keymap entries that match none)."""
    ids = {b.id for b in MemProbeApp.BINDINGS if isinstance(b, Binding) and b.id}
    for owner in (*SCREENS, *BINDING_WIDGETS):
        ids |= {b.id for b in owner.BINDINGS if isinstance(b, Binding) and b.id}
    return ids
