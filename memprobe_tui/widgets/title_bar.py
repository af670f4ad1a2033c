"""The one-line context bar at the top of every screen: where in the recording you are.

A title longer than the screen is cut at its width and ends in ``…`` (it used to wrap onto a second
line the one-line bar hides, leaving a dangling `` ·``); the help screen (``?``) opens with it whole.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class TitleBar(Static):
    """Shows the screen's position (run, user × system, task, turn…); cheap to update per step."""

    DEFAULT_CSS = """
    TitleBar {
        height: 1;
        width: 100%;
        background: $panel;
        color: $text;
        text-style: bold;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def set(self, text: str | Text) -> None:
        # One line at the full width whatever it says: no layout of the screen (a stepping key
        # changes the title every time, and a layout re-renders every widget of the screen).
        self.update(text, layout=False)
