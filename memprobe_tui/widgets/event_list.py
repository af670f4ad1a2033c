"""The events of one step (a turn, a task opening), one line each, coloured by kind."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets.option_list import Option

from memprobe_engine.events.union import AnyEvent
from memprobe_engine.replay import describe
from memprobe_tui.widgets.cursor_mark import MarkedOptionList

#: Colour per event tag; theme-independent names so ANSI terminals and NO_COLOR degrade cleanly.
TAG_STYLES: dict[str, str] = {
    "msg": "bold", "llm": "cyan", "emb": "dim", "mem": "green", "snap": "green", "ret": "magenta",
    "pref": "yellow", "fill": "yellow", "judge": "yellow", "stage": "yellow", "label": "yellow",
    "end": "blue", "ERR": "bold red", "size": "dim",
}


def event_prompt(event: AnyEvent) -> Text:
    """`` tag  summary`` with the tag coloured; the summary is cut by the widget's width. The leading
    space holds the cursor mark."""
    tag, summary = describe(event)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f" {tag:<5} ", style=TAG_STYLES.get(tag, ""))
    text.append(summary)
    return text


class EventList(MarkedOptionList, inherit_bindings=False):
    """Focusable, but the screen's keys drive the highlight (j/k, ↑/↓ step events across turns), so
    stepping never fights the list's own cursor; Home/End and g/G go to the step's first/last event."""

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
    EventList:focus {
        border: none;
        background-tint: $foreground 4%;
    }
    EventList:focus > .option-list--option-highlighted {
        text-style: bold reverse;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        # The transcript screen implements ``edge_event``; other screens simply lack the action.
        Binding("home,g", "screen.edge_event(0)", "First event", show=False, id="events.first"),
        Binding("end,G", "screen.edge_event(-1)", "Last event", show=False, id="events.last"),
    ]

    def show(self, events: list[Any], highlight: int = 0) -> None:
        self.set_options(Option(event_prompt(e)) for e in events)
        if events:
            self.highlighted = max(0, min(highlight, len(events) - 1))
