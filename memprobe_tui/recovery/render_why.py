"""The why block of the dimension inspector: the chain disclosed → written → reachable → filled →
judged, per access mode, in a few lines (``memprobe_engine/recovery/read/why.py`` builds it)."""

from __future__ import annotations

from rich.text import Text

from memprobe_engine.recovery.read.why import WhyChain
from memprobe_engine.replay import one_line
from memprobe_tui.render import Lines, heading

_LABEL_STYLE = {"ok": "green", "memory_failure": "bold red", "task_design_failure": "red", "excluded": "dim"}
#: Columns a line's text leaves for the lead (12), the pane's padding and scroll bar.
_MARGIN = 16


def why_lines(chain: WhyChain, width: int = 80) -> Lines:
    """The chain, one short line per link, for a pane ``width`` columns wide; what is cut ends in
    ``…`` (the sections below hold it whole). The links a cut would lose the point of (which items
    hold the trait and when they were written, the reach, a contradicted label) wrap instead."""
    room = max(40, width - _MARGIN)

    def _line(lead: str, text: str, style: str = "", *, cut: bool = True) -> Text:
        line = Text(f" {lead:<10} ", style="bold")
        line.append(one_line(text, room) if cut else text, style=style)
        return line

    lines: Lines = [heading("why: disclosed → written → reachable → filled → judged")]
    lines.append(_line("disclosed", chain.disclosed, "cyan"))
    lines.append(_line("written", chain.written, cut=False))
    for mode in chain.modes:
        lines.append(_line(mode.mode, f"reach: {mode.reach}", "magenta", cut=False))
        lines.append(_line("", f"filled {mode.fill}"))
        judged = Text(f" {'':<10} ", style="bold")
        label = f" → {mode.label}" if mode.label else ""
        judged.append(one_line(f"judged {mode.judge}", room - len(label)))
        if mode.label:
            judged.append(" → ")
            judged.append(mode.label, style=_LABEL_STYLE.get(mode.label, "yellow"))
        lines.append(judged)
        lines.append(_line("", f"stages {mode.stages}", "dim"))
        if mode.flag:
            lines.append(_line("", mode.flag + " (label as recorded)", "bold yellow", cut=False))
    if chain.pending:
        lines.append(Text(f" relevance and ranks by {chain.embedder}: computing…", style="dim"))
    return lines
