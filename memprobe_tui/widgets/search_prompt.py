"""The one-line search prompt that ``/`` opens on any pane, and the match state panes keep.

A modal screen (not an Input inside each screen) so every pane, list or text, on every screen —
including ones other engineers add — gets the same prompt with no layout work: push it, get the
query back (None when Esc cancelled it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class SearchPrompt(ModalScreen[str | None]):
    """Asks for a search text at the bottom of the screen; dismisses with it (None: cancelled)."""

    DEFAULT_CSS = """
    SearchPrompt { align: left bottom; background: $background 0%; }
    SearchPrompt > #search-box { height: 3; width: 100%; border: tall $accent; background: $surface; }
    SearchPrompt > #search-help { height: 1; width: 100%; background: $panel; padding: 0 1; }
    /* Notifications stack at the bottom right, over this prompt: on it, they go to the top. */
    SearchPrompt ToastRack { dock: top; align: right top; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="search.cancel")]

    def __init__(self, placeholder: str = "search (case-insensitive)", value: str = "",
                 label: str = "Enter: find · then n / N: next / previous match · Esc: cancel") -> None:
        super().__init__()
        self._placeholder, self._value, self._label = placeholder, value, label

    def compose(self) -> ComposeResult:
        yield Static(self._label, id="search-help")
        yield Input(value=self._value, placeholder=self._placeholder, id="search-box")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass
class Matches:
    """A search's hits (positions in a pane: line numbers, row indices) and the current one."""

    query: str = ""
    hits: list[int] = field(default_factory=list)
    current: int = -1

    @property
    def active(self) -> bool:
        return bool(self.query)

    def set(self, query: str, hits: Sequence[int], near: int = 0) -> int | None:
        """Start a search; the current hit is the first at or after ``near``. Returns it (None: no hit)."""
        self.query, self.hits = query, list(hits)
        self.current = next((i for i, h in enumerate(self.hits) if h >= near), 0) if self.hits else -1
        return self.hits[self.current] if self.hits else None

    def step(self, delta: int) -> int | None:
        """The next (delta 1) or previous (-1) hit, wrapping around."""
        if not self.hits:
            return None
        self.current = (self.current + delta) % len(self.hits)
        return self.hits[self.current]

    def clear(self) -> None:
        self.query, self.hits, self.current = "", [], -1

    def label(self) -> str:
        """``/query 2/5`` (or ``/query: no match``) for a border or title."""
        if not self.query:
            return ""
        if not self.hits:
            return f"/{self.query}: no match"
        return f"/{self.query} {self.current + 1}/{len(self.hits)} · n/N · Esc clears"
