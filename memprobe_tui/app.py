"""The MemProbe replay app: screen routing, global keys, command palette, help and keymap.

Thin on purpose: shared screens live in ``screens/``, each protocol's in its own folder, found through
its TUI entry (:mod:`memprobe_tui.protocols`); every query is the engine's.
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Mapping
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import HelpPanel

from memprobe_engine.replay import ReplaySession
from memprobe_tui.keymap import DEFAULT_KEYMAP, load_keymap, unknown_ids
from memprobe_tui.messages import ShowText
from memprobe_tui.protocols import entries, entry_for
from memprobe_tui.screens.base import ReplayScreen
from memprobe_tui.screens.browser import BrowserCommands, BrowserScreen
from memprobe_tui.screens.help import HelpScreen
from memprobe_tui.screens.llm_call import LLMCallScreen
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.screens.text_view import TextViewScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.typeahead import TypeAheadApp
from memprobe_tui.widgets.search_prompt import SearchPrompt

#: The shared screens, then every protocol's own (their bindings' ids may be remapped in the keymap).
SCREENS: tuple[type[Screen[None]], ...] = (ReplayScreen, BrowserScreen, MemoryScreen, LLMCallScreen,
                                           TextViewScreen, HelpScreen)
SCREENS += tuple(dict.fromkeys(screen for entry in entries().values() for screen in entry.screens))

#: Widgets with bindings of their own (their ids can be remapped in the keymap file too).
BINDING_WIDGETS: tuple[type[DOMNode], ...] = (DetailLog, SearchPrompt)


class MemProbeApp(TypeAheadApp):
    """Replays one recording (``session``) or browses a folder of them (``folder``). Keys typed while
    a recording loads wait for its screen (:mod:`memprobe_tui.typeahead`)."""

    TITLE = "MemProbe"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "toggle_help", "Help", id="app.help"),
        Binding("q", "quit", "Quit", show=False, id="app.quit"),  # in F1 help and the palette; saves footer room at 80 columns
    ]
    COMMANDS = App.COMMANDS | {BrowserCommands} | {provider for entry in entries().values() for provider in entry.commands}

    def __init__(self, *, session: ReplaySession | None = None, folder: Path | None = None,
                 live: Mapping[str, object] | None = None,
                 keymap_path: Path | None = DEFAULT_KEYMAP, no_color: bool = False) -> None:
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
        #: Live re-run hooks by name (a protocol's TUI entry builds them; a missing one is its default).
        self.live: dict[str, object] = dict(live or {})
        self.keymap_path = keymap_path
        self.rerun_logs: dict[tuple[str, str, str, str], str] = {}

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
        self.push_screen(entry_for(session).overview(session))

    def open_memory(self, session: ReplaySession, user_id: str, system: str, seqs: tuple[int, int] | None) -> None:
        self.push_screen(MemoryScreen(session, user_id, system, seqs))

    def route(self, name: str, *args: object) -> None:
        for entry in entries().values():
            found = entry.routes.get(name)
            if found is not None:
                found(self, *args)
                return
        raise LookupError(f"no protocol's TUI entry has the route {name!r}")

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
