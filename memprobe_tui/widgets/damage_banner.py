"""A banner that says what part of a recording cannot be shown (torn tail, bad lines)."""

from __future__ import annotations

from textual.widgets import Static

from memprobe_tui.widgets.fixed_region import clamp_lines

#: Lines the banner may take (a longer message ends in ``…``; the help, ``?``, has it whole).
LINES = 3


class DamageBanner(Static):
    """Hidden while the recording is clean; otherwise one or two lines in the warning colour."""

    DEFAULT_CSS = """
    DamageBanner {
        height: auto;
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
        self._message = f"⚠ {message}" if message else ""
        self.update(clamp_lines(self, self._message, LINES))

    def on_resize(self) -> None:
        if getattr(self, "_message", ""):  # wrapped again at the new width, cut again if need be
            self.update(clamp_lines(self, self._message, LINES))
