"""What a protocol's TUI folder gives the app: its first screen, its screens, its palette, its live re-run
hooks, its routes between its own screens and its compare app (``memprobe_tui/<protocol>/entry.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from textual.command import Provider
from textual.screen import Screen

from memprobe_engine.replay import ReplaySession


@dataclass(frozen=True)
class TuiEntry:
    """A protocol's screens as the app routes to them."""

    #: The screen a recording of the protocol opens on.
    overview: Callable[[ReplaySession], Screen[None]]
    #: Every screen class of the protocol (their bindings' ids may be remapped in the keymap file).
    screens: tuple[type[Screen[None]], ...] = ()
    #: Command-palette providers (each offers nothing on another protocol's recording).
    commands: tuple[type[Provider], ...] = ()
    #: Builds the protocol's live re-run hooks (name → hook) from the models the user chose.
    live_hooks: Callable[[object], dict[str, object]] = field(default=lambda llm_config: {})
    #: Runs the app on two runs side by side (``memprobe replay BASE --compare OTHER``): (base session,
    #: other session, base system, other system, no colour); None: the protocol has no compare screen.
    compare: Callable[[ReplaySession, ReplaySession, str | None, str | None, bool], None] | None = None
    #: The protocol's own routes between its screens, by name (``Navigator.route``): each pushes or
    #: switches to one of its screens, so its screens never import one another.
    routes: Mapping[str, Callable[..., None]] = field(default_factory=dict)


