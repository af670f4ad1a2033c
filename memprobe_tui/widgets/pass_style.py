"""A widget's base style computed once per render pass instead of once or twice per line.

Textual's ``rich_style`` walks every ancestor's styles each time it is read, and DataTable and
RichLog read it for every line they render (twice per line for RichLog): some 40 walks per
stepping key on the memory view and the session stepper. It cannot change during one pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

if TYPE_CHECKING:
    from textual.widget import Widget as _Widget
else:  # a plain mixin at run time: a Widget base here would hide the widget's component classes
    _Widget = object


class StylePerPass(_Widget):
    """Mix in before the Textual widget class: ``rich_style`` is read once per ``render_lines``."""

    _pass_style: Style | None = None

    @property
    def rich_style(self) -> Style:
        return self._pass_style if self._pass_style is not None else super().rich_style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._pass_style = None
        self._pass_style = super().rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._pass_style = None
