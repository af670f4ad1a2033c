"""Where the TUI finds a protocol's screens: each protocol's spec names the module of its TUI entry
(``memprobe_tui.recovery.entry``); a protocol without one opens in the generic overview.

The app, the browser and the shared screens ask here, never a protocol's package, so a new
protocol's screens are its own folder plus the one ``tui`` line of its spec.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from textual.command import Provider
from textual.screen import Screen

from memprobe_engine.errors import MemProbeError
from memprobe_engine.protocol_spec import ProtocolSpec
from memprobe_engine.protocols import protocols, spec_of
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


class _NoProtocol(ProtocolSpec):
    """The read side of a recording no installed protocol owns: no steps, no headline."""

    name = "(none)"
    title = "no protocol"


_NONE = _NoProtocol()


def read_spec(session: ReplaySession) -> ProtocolSpec:
    """The protocol of an open recording (one that no installed protocol owns reads with no steps)."""
    try:
        return spec_of(session.header)
    except MemProbeError:
        return _NONE


@cache
def entries() -> dict[str, TuiEntry]:
    """Every protocol's TUI entry, by protocol name (the generic one where a protocol names none)."""
    from memprobe_tui.screens.generic_overview import GENERIC_ENTRY

    found: dict[str, TuiEntry] = {}
    for name, spec in protocols().items():
        entry = GENERIC_ENTRY
        if spec.tui is not None:
            loaded = getattr(importlib.import_module(spec.tui), "ENTRY", None)
            if not isinstance(loaded, TuiEntry):
                raise MemProbeError(f"{spec.tui}.ENTRY is not a TuiEntry: protocol {name!r} names a TUI entry "
                                    f"that does not exist; fix its spec's tui line.")
            entry = loaded
        found[name] = entry
    return found


def entry_for(session: ReplaySession) -> TuiEntry:
    """The TUI entry of an open recording's protocol."""
    from memprobe_tui.screens.generic_overview import GENERIC_ENTRY

    return entries().get(read_spec(session).name, GENERIC_ENTRY)
