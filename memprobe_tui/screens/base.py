"""What every screen shares: the title line, the damage banner, the footer, redraw when the followed
recording grows, the one handler that surfaces worker failures, and the keys every screen has:
``?``/F1 help (the screen's ``HELP`` text and its live keys), ``i`` the run's settings, ``y`` copy
to the clipboard (OSC 52), ``w``/``W`` export Markdown/JSON, Esc back (hidden where there is nothing
to go back to)."""

from __future__ import annotations

import re
import traceback
from typing import ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from memprobe_engine.errors import MemProbeError
from memprobe_engine.replay import ReplaySession
from memprobe_tui.export import ExportDoc, export_dir, text_doc, write_export
from memprobe_tui.messages import RecordingGrew, ShowText
from memprobe_tui.navigation import Navigator
from memprobe_tui.widgets.damage_banner import DamageBanner
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.title_bar import TitleBar


class ReplayScreen(Screen[None]):
    """Base screen. ``session`` is None only for the recordings browser."""

    #: Markdown shown by the help screen above the key list: what this screen's numbers, columns and
    #: marks mean. Every screen sets its own.
    HELP: ClassVar[str] = ""
    #: While True the app keeps the keys typed and applies them once the screen clears it
    #: (``memprobe_tui.typeahead``): a screen whose content is still loading.
    holds_keys: bool = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="screen.back"),
        Binding("question_mark,f1", "help", "Help", key_display="?", id="screen.help"),
        Binding("i", "settings", "Settings", show=False, id="screen.settings"),
        Binding("y", "copy", "Copy", show=False, id="screen.copy"),
        Binding("w", "export('md')", "Export .md", show=False, id="screen.export_md"),
        Binding("W", "export('json')", "Export .json", show=False, id="screen.export_json"),
    ]

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

    def set_title(self, text: str | Text) -> None:
        self._title_text = str(text)
        self.query_one(TitleBar).set(text)

    @property
    def title_text(self) -> str:
        """What the title bar says now (the full-screen view and exports reuse it)."""
        return getattr(self, "_title_text", "")

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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return self.can_go_back()  # the first screen has nowhere to go: no `esc Back` in its footer
        if action == "settings":
            return self.session is not None
        return True

    def can_go_back(self) -> bool:
        return len(self.app.screen_stack) > 2

    def action_back(self) -> None:
        if self.can_go_back():
            self.app.pop_screen()

    def returned_from_memory(self, user_id: str, system: str, seq: int) -> None:
        """The memory screen above was left at ``seq`` (the transcript moves there; others ignore it)."""

    # -- help, settings, copy, export ------------------------------------------------------------
    def action_help(self) -> None:
        from memprobe_tui.screens.help import HelpScreen, key_lines  # help imports the widgets, not screens

        self.app.push_screen(HelpScreen(self.title_text or type(self).__name__, self.HELP, key_lines(self),
                                        [note for note in self.help_notes() if note]))

    def help_notes(self) -> list[str]:
        """What this screen says in lines it may cut (``…``), whole: the help opens with them after
        the title. The damage banner's message here; screens add their own."""
        message = self.session.damage_message() if self.session is not None else None
        return [f"⚠ {message}"] if message else []

    def action_settings(self) -> None:
        if self.session is None:
            return
        from memprobe_engine.replay.run_history import run_history
        from memprobe_tui.render_settings import settings_lines

        header = self.session.header
        history = run_history(self.session) if self.session.indexed else None
        self.post_message(ShowText(f"settings of {header.run_id}", settings_lines(header, history),
                                   export_as="settings", data=header.model_dump(mode="json")))

    def focused_pane(self) -> DetailLog | None:
        """The text pane copy/export act on: the focused one, else the screen's first."""
        focused: Widget | None = self.focused
        if isinstance(focused, DetailLog):
            return focused
        panes = list(self.query(DetailLog))
        return panes[0] if panes else None

    def export_document(self) -> ExportDoc | None:
        """What ``y``/``w``/``W`` copy or export here; screens with a table or a transcript override it."""
        pane = self.focused_pane()
        if pane is None:
            return None
        return text_doc(self.export_name(self.title_text or "text"), self.title_text or "MemProbe", pane.text())

    def export_name(self, what: str) -> str:
        """``<run id>-<what>``; ``what`` loses the run id and the decorations a title carries."""
        run = self.session.header.run_id if self.session is not None else "memprobe"
        what = what.replace(run, " ").replace("· full screen", " ")
        return f"{run}-{'-'.join(re.findall(r'[A-Za-z0-9_.]+', what)) or 'text'}"

    def action_copy(self) -> None:
        doc = self.export_document()
        if doc is None:
            self.notify("Nothing to copy on this screen.")
            return
        self.app.copy_to_clipboard(doc.markdown)
        self.notify(f"Copied {len(doc.markdown):,} characters to the clipboard (OSC 52: your terminal must allow it;"
                    " tmux: set-clipboard on). w writes a file instead.", timeout=6)

    def action_export(self, fmt: str) -> None:
        doc = self.export_document()
        if doc is None:
            self.notify("Nothing to export on this screen.")
            return
        try:
            path = write_export(doc, fmt)
        except OSError as err:
            self.notify(f"Cannot write to {export_dir()}: {err}. Set MEMPROBE_EXPORT_DIR to a writable folder.",
                        severity="error", timeout=15)
            return
        self.notify(f"Exported to {path}", timeout=8)

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
