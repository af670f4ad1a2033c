"""A banner that says what part of a recording cannot be shown (torn tail, bad lines)."""

from __future__ import annotations

from textual.widgets import Static


class DamageBanner(Static):
    """Hidden while the recording is clean; otherwise one or two lines in the warning colour."""

    DEFAULT_CSS = """
    DamageBanner {
        height: auto;
        max-height: 3;
        width: 100%;
        background: $warning 30%;
        color: $text;
        padding: 0 1;
        display: none;
    }
    DamageBanner.shown {
        display: block;
    }
    """

    def show_message(self, message: str | None) -> None:
        """Show ``message``, or hide the banner when it is None."""
        self.set_class(message is not None, "shown")
        self.update(f"⚠ {message}" if message else "")
