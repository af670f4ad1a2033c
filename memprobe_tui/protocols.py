"""Where the TUI finds a protocol's screens: each protocol's spec names the module of its TUI entry
(``memprobe_tui.recovery.entry``); a protocol without one opens in the generic overview.

The app, the browser and the shared screens ask here, never a protocol's package, so a new
protocol's screens are its own folder plus the one ``tui`` line of its spec.
"""

from __future__ import annotations

import importlib
from functools import cache

from memprobe_engine.errors import MemProbeError
from memprobe_engine.protocol_spec import ProtocolSpec
from memprobe_engine.protocols import protocols, spec_of
from memprobe_engine.replay import ReplaySession
from memprobe_tui.screens.generic_overview import GENERIC_ENTRY
from memprobe_tui.tui_entry import TuiEntry


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
    return entries().get(read_spec(session).name, GENERIC_ENTRY)
