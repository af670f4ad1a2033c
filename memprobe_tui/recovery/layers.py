"""Judgment layers in protocol A's screens: the run's own judgments (``main``) and each named layer
``memprobe rescore --as NAME`` appended, which the overview and the dimension inspector show one at
a time (``L`` cycles them; issue 36: named layers never appeared in the TUI)."""

from __future__ import annotations

from memprobe_engine.recovery.read.outcome_index import judgment_layers
from memprobe_engine.replay import ReplaySession
from memprobe_tui import layers

#: What ``L`` says on a recording with only the run's own judgments.
NO_LAYERS = ("This recording holds only the run's own judgments (main); `memprobe rescore REC --as NAME` adds a "
             "named layer to compare them with.")


def next_layer(session: ReplaySession, layer: str | None) -> str | None:
    """The judgment layer after ``layer`` in [main, *named layers], round (main: None)."""
    return layers.next_layer(judgment_layers(session), layer)


def layer_title(session: ReplaySession, layer: str | None, title: str) -> str:
    """``title`` saying whose judgments are shown (see :func:`memprobe_tui.layers.layer_title`)."""
    return layers.layer_title(judgment_layers(session), layer, title)
