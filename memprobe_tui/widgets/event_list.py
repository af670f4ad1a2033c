"""The events of one step (a turn, a task opening), one line each, coloured by kind."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from memprobe_engine.replay import describe

#: Colour per event tag; theme-independent names so ANSI terminals and NO_COLOR degrade cleanly.
TAG_STYLES: dict[str, str] = {
    "msg": "bold", "llm": "cyan", "emb": "dim", "mem": "green", "snap": "green", "ret": "magenta",
    "pref": "yellow", "fill": "yellow", "judge": "yellow", "stage": "yellow", "label": "yellow",
    "end": "blue", "ERR": "bold red", "size": "dim",
}


def event_prompt(event: Any) -> Text:
    """`` tag  summary`` with the tag coloured; the summary is cut by the widget's width."""
    tag, summary = describe(event)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{tag:<5} ", style=TAG_STYLES.get(tag, ""))
    text.append(summary)
    return text


class EventList(OptionList):
    """Not focusable: the screen's keys drive the highlight, so stepping never fights focus."""

    DEFAULT_CSS = """
    EventList {
        height: 1fr;
        border: none;
        padding: 0;
        background: $surface;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    EventList > .option-list--option-highlighted {
        text-style: bold;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.can_focus = False

    def show(self, events: list[Any], highlight: int = 0) -> None:
        self.set_options(Option(event_prompt(e)) for e in events)
        if events:
            self.highlighted = max(0, min(highlight, len(events) - 1))
