"""Judgment layers on any protocol's screens: the run's own (``main``) and each named layer the
recording holds, shown one at a time (``L`` cycles them). Each protocol lists its layers (protocol A:
``memprobe rescore --as NAME``; protocol B: ``memprobe reader-ablation``'s ``reader:SPEC``, a scoring
mode's ``scoring:corrected``); the order of the cycle and how a title names the layer are shared here,
so ``L`` reads the same on every screen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Notifies(Protocol):
    """A screen, as far as a layer change speaks to the user."""

    def notify(self, message: str, *, timeout: float | None = None) -> None: ...


def next_layer(named: Sequence[str], layer: str | None) -> str | None:
    """The layer after ``layer`` in [main, *named], round (main: None)."""
    order: list[str | None] = [None, *named]
    return order[(order.index(layer) + 1) % len(order)] if layer in order else None


def layer_title(named: Sequence[str], layer: str | None, title: str, noun: str = "judgments") -> str:
    """``title`` saying whose ``noun`` are shown: a named layer first (80 columns keep it), the run's
    own (main) last and only when the recording holds named layers (``L`` cycles them)."""
    if layer is not None:
        return f"{noun} {layer} · {title}"
    return f"{title} · {noun} main (L: {1 + len(named)} layers)" if named else title


def cycle_layer(screen: Notifies, named: Sequence[str], layer: str | None, none_held: str,
                noun: str = "scores") -> tuple[bool, str | None]:
    """``L`` on a screen: (True, the layer after ``layer``), said in a short notice; or (False, ``layer``)
    with ``none_held`` said (how to add a layer) when the recording holds no named one."""
    if not named:
        screen.notify(none_held, timeout=5)
        return False, layer
    layer = next_layer(named, layer)
    screen.notify(f"{noun} {layer or 'main'}", timeout=3)
    return True, layer
