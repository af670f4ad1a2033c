"""A user's trajectory as a list: each task (episode) with its opening, turns and end."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets.option_list import Option

from memprobe_engine.replay import EpisodeInfo
from memprobe_tui.widgets.cursor_mark import MarkedOptionList

_END_MARK = {"satisfied": "✓", "turn_cap": "⌛", "error": "✗", "excluded": "⊘"}


def episode_prompt(episode: EpisodeInfo) -> Text:
    mark = _END_MARK.get(episode.end_reason or "", "…")
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"T{episode.task_index + 1} ", style="bold")
    text.append(f"{mark} {episode.dimension}")
    return text


class StepList(MarkedOptionList, inherit_bindings=False):
    """Task headers (disabled, for orientation) and their steps; the screen drives the highlight.
    Focused, ↑/↓ (j/k) move a step, PageUp/PageDown a task, Home/End (g/G) the first/last step."""

    DEFAULT_CSS = """
    StepList {
        width: 26;
        height: 1fr;
        border: none;
        border-right: solid $primary 40%;
        padding: 0;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    StepList > .option-list--option-disabled {
        color: $text;
        text-style: bold;
    }
    StepList:focus {
        border: none;
        border-right: heavy $accent;
        background-tint: $foreground 4%;
    }
    StepList:focus > .option-list--option-highlighted {
        text-style: bold reverse;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "screen.step_turn(1)", "Next step", show=False, id="steps.next"),
        Binding("k,up", "screen.step_turn(-1)", "Prev step", show=False, id="steps.prev"),
        Binding("pagedown", "screen.step_task(1)", "Next task", show=False, id="steps.next_task"),
        Binding("pageup", "screen.step_task(-1)", "Prev task", show=False, id="steps.prev_task"),
        Binding("home,g", "screen.goto_step('first')", "First step", show=False, id="steps.first"),
        Binding("end,G", "screen.goto_step('last')", "Last step", show=False, id="steps.last"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._option_of_step: list[int] = []

    def show(self, episodes: list[EpisodeInfo]) -> None:
        options: list[Option] = []
        self._option_of_step = []
        for episode in episodes:
            options.append(Option(episode_prompt(episode), disabled=True))
            for step in episode.steps:
                self._option_of_step.append(len(options))
                options.append(Option(Text("  " + step.label, no_wrap=True)))
        self.set_options(options)

    def select_step(self, step_pos: int) -> None:
        if 0 <= step_pos < len(self._option_of_step):
            self.highlighted = self._option_of_step[step_pos]
            self.scroll_to_highlight()
