"""The help screen (``?`` or F1): what the current screen's metrics, columns and marks mean, then
every key that works there right now (the focused pane's, the screen's and the app's).

Each screen states its own explanation in a ``HELP`` class attribute (Markdown), so a new screen
documents itself where it is written; the key list is read from the live bindings, so a user
keymap shows its own keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.screen import Screen

from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.title_bar import TitleBar

KEYMAP_NOTE = ("Any key can be changed in ~/.config/memprobe/keymap.toml: `\"<binding id>\" = \"key1,key2\"` "
               "(the ids are listed in brackets above).")


def key_lines(screen: Screen[None]) -> list[RenderableType]:
    """The keys active on ``screen`` now, grouped by who handles them (pane, screen, app): one line per
    action, naming each of its keys (Textual's own ↑ "Scroll Up" and our k "Up" share a line)."""
    groups: dict[str, dict[str, tuple[list[str], str, str]]] = {}
    for key, active in screen.active_bindings.items():
        binding, namespace = active.binding, active.node
        actions = groups.setdefault(_group_name(namespace, screen), {})
        keys, description, binding_id = actions.setdefault(binding.action, ([], "", ""))
        shown = screen.app.get_key_display(Binding(key, binding.action))  # the key itself, not a footer label
        if shown not in keys:
            keys.append(shown)
        if binding.id or not description:  # our wording (with its id for the keymap) over Textual's
            description, binding_id = binding.description or binding.action, binding.id or binding_id
        actions[binding.action] = (keys, description, binding_id)
    lines: list[RenderableType] = []
    for group, actions in groups.items():
        lines.append(Text(group, style="bold underline"))
        for keys, description, binding_id in actions.values():
            line = Text(f"  {', '.join(keys):<18}", style="bold")
            line.append(description)
            if binding_id:
                line.append(f"  [{binding_id}]", style="dim")
            lines.append(line)
    return lines


def _group_name(namespace: DOMNode, screen: Screen[None]) -> str:
    if namespace is screen:
        return "keys of this screen"
    if namespace is screen.app:
        return "everywhere"
    return f"keys of the focused pane ({type(namespace).__name__}; Tab moves focus)"


class HelpScreen(Screen[None]):
    """Built from the screen it explains; Esc, q, ? or F1 close it."""

    DEFAULT_CSS = """
    HelpScreen DetailLog { height: 1fr; border-top: none; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "close", "Close", key_display="esc", id="help.close"),
    ]

    def __init__(self, title: str, help_markdown: str, keys: Sequence[RenderableType],
                 notes: Sequence[str] = ()) -> None:
        super().__init__()
        self._title, self._help, self._keys, self._notes = title, help_markdown, list(keys), list(notes)

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        yield DetailLog(id="help", zoomable=False)

    def on_mount(self) -> None:
        # The keys of this screen first: the title bar cuts what the width leaves no room for, and
        # the screen's own title (cut on its bar at 80 columns) opens the text whole.
        self.query_one(TitleBar).set(f"help · Esc closes · / searches · {self._title}")
        lines: list[RenderableType] = [Text(self._title, style="bold"), *(Text(n) for n in self._notes), Text("")]
        if self._help.strip():
            lines.append(Markdown(self._help))
        lines.append(Text(""))
        lines += self._keys
        lines += [Text(""), Text(KEYMAP_NOTE, style="dim")]
        log = self.query_one(DetailLog)
        log.show(lines)
        log.focus()

    def action_close(self) -> None:
        self.dismiss(None)
