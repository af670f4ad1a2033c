"""What screens of every protocol may ask of the app: open a shared screen, find a live re-run hook. A Protocol, so screens do not import the
app module (which imports them) and calls stay type-checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from memprobe_engine.replay import ReplaySession

if TYPE_CHECKING:
    pass


class Navigator(Protocol):
    """Implemented by :class:`memprobe_tui.app.MemProbeApp`."""

    #: Live re-run hooks by name (each protocol's TUI entry builds and reads its own).
    live: dict[str, object]
    #: The streamed output of the last re-run per (recording, user, system, dimension) while the app
    #: runs, so leaving and reopening an inspector does not lose what the models said.
    rerun_logs: dict[tuple[str, str, str, str], str]

    def open_overview(self, session: ReplaySession) -> None: ...

    def open_memory(self, session: ReplaySession, user_id: str, system: str,
                    seqs: tuple[int, int] | None) -> None: ...

    def open_llm_call(self, session: ReplaySession, seq: int) -> None: ...

    def release_keys(self) -> None:
        """A screen that held the keys typed while it loaded is ready: apply them (``typeahead``)."""
        ...

    def route(self, name: str, *args: object) -> None:
        """Open a protocol's own screen by its route name (the protocol's TUI entry maps it)."""
        ...
