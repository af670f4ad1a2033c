"""An episode as a list: its sessions (phase, type, store size and growth), then its probes (score)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets.option_list import Option

from memprobe_engine.paradigms.read.ingest import StoreGrowth
from memprobe_engine.paradigms.read.queries import EpisodeSteps, ScoreCell
from memprobe_tui.paradigms.render import PHASE_STYLES, fmt_score, score_style
from memprobe_tui.widgets.cursor_mark import MarkedOptionList
from memprobe_tui.widgets.store_table import cut

#: Filler session types by what they are (the phase column already says "filler").
_FILLER_SHORT = {"filler_weakly_related": "weak", "filler_near_miss": "near-miss", "filler_confusable": "confusable",
                 "filler_decoy_nonupdate": "decoy"}


def session_label(phase: str, session_type: str) -> str:
    """``encoding``, ``filler near-miss``, ``perturbation``, ``perturbation p2``: 16 cells at most, a
    cut ending in ``…`` (the title names the session's phase and type whole)."""
    if phase == "filler" or session_type.startswith("filler_"):
        return cut(f"filler {_FILLER_SHORT.get(session_type, session_type.removeprefix('filler_'))}", 16)
    if session_type in (phase, "") or session_type.startswith(phase):
        rest = session_type[len(phase):].strip("_ ")
        return cut(f"{phase} {rest}".strip(), 16)
    return cut(f"{phase} {session_type}", 16)


def session_prompt(label_idx: int, phase: str, session_type: str, growth: StoreGrowth | None) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f" S{label_idx:02d} ", style="bold")  # the leading space holds the cursor mark
    text.append(f"{session_label(phase, session_type):<16}", style=PHASE_STYLES.get(phase, ""))
    if growth is not None:
        text.append(f" {growth.size:>3}", style="bold")
        text.append(f" +{growth.added}" if growth.added else " ", style="green")
        text.append(f"~{growth.updated}" if growth.updated else "", style="yellow")
        text.append(f"-{growth.deleted}" if growth.deleted else "", style="red")
    return text


def probe_prompt(index: int, probe_type: str, cell: ScoreCell | None) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f" P{index + 1} ", style="bold")
    text.append(f"{probe_type:<16}")
    value = cell.value if cell is not None else None
    if cell is not None and cell.current is not None and cell.current.get("excluded"):
        text.append(" excl", style="yellow")
    else:
        text.append(f" {fmt_score(value)}", style=f"bold {score_style(value)}")
    if cell is not None and cell.rescores:
        text.append("*", style="cyan")
    return text


class SessionList(MarkedOptionList):
    """Two disabled headers (sessions, probes) and one option per item. Focused, so ↑/↓ move through
    it (the screen follows the highlight); positions count sessions first, then probes."""

    DEFAULT_CSS = """
    SessionList {
        width: 32;
        height: 1fr;
        border: none;
        border-right: solid $primary 40%;
        padding: 0;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    SessionList:focus {
        border: none;
        border-right: solid $accent;
    }
    SessionList > .option-list--option-disabled {
        color: $text;
        text-style: bold;
    }
    """

    #: A step moves the highlight: redraw the two options it left and reached, not all ~25 lines of
    #: the list (a whole-list repaint was a sixth of a session step, bench/tui_paradigms.py).
    highlighted: reactive[int | None] = reactive(None, repaint=False)
    _drawn_highlight: int | None = None  # the option drawn highlighted (redrawn when it moves)

    def watch_highlighted(self, highlighted: int | None) -> None:
        lines = self._index_to_line
        for index in (self._drawn_highlight, highlighted):
            y = lines.get(index) if index is not None else None
            if y is None or index is None:
                self.refresh()  # not laid out yet (new options): the whole list
            else:
                self.refresh_lines(y, self._heights.get(index, 1))
        self._drawn_highlight = highlighted
        super().watch_highlighted(highlighted)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._option_of: list[int] = []

    def show(self, steps: EpisodeSteps, growth: list[StoreGrowth] | None,
             cells: dict[int, ScoreCell]) -> None:
        options: list[Option] = [Option(Text(f"sessions ({len(steps.sessions)})     items", style="bold"), disabled=True)]
        self._option_of = []
        for pos, session in enumerate(steps.sessions):
            self._option_of.append(len(options))
            grown = growth[pos] if growth is not None and pos < len(growth) else None
            options.append(Option(session_prompt(session.session_idx, session.phase, session.session_type, grown)))
        options.append(Option(Text(f"probes ({len(steps.probes)})", style="bold"), disabled=True))
        for probe in steps.probes:
            self._option_of.append(len(options))
            options.append(Option(probe_prompt(probe.probe_index, probe.probe_type, cells.get(probe.probe_index))))
        highlighted = self.highlighted
        self.set_options(options)
        if highlighted is not None and highlighted < len(options):
            self.highlighted = highlighted

    def position_of(self, option_index: int) -> int | None:
        """The item position an option shows (None for a header)."""
        try:
            return self._option_of.index(option_index)
        except ValueError:
            return None

    def select(self, position: int) -> None:
        if 0 <= position < len(self._option_of):
            self.highlighted = self._option_of[position]
            self.scroll_to_highlight()
