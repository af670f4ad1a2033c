"""Keys typed while a recording loads are kept and applied when its screen is ready (issue 36, item 5).

Observed: `j` Enter typed during a 5 s load on a busy machine did nothing. Here the shipped recordings'
index pass is held until the test lets it go (a slow load, made certain), the keys are typed during it,
and they must act, in order, once the table is there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from memprobe_engine.protocols import open_session
from memprobe_tui.app import MemProbeApp
from memprobe_tui.paradigms.probe_inspector import ProbeScreen
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.recovery.transcript import TranscriptScreen
from memprobe_tui.screens.recording_overview import RecordingOverview

from .conftest import REPO
from .helpers import settle


def slow_loading_app(name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[MemProbeApp, threading.Event]:
    """The app on a shipped recording whose index pass waits for the returned event."""
    session = open_session(REPO / "recordings" / name)
    loaded = threading.Event()
    build: Callable[..., object] = session.build_index

    def held_build(*args: object, **kwargs: object) -> object:
        assert loaded.wait(30), "the test never let the load finish"
        return build(*args, **kwargs)

    monkeypatch.setattr(session, "build_index", held_build)
    return MemProbeApp(session=session, live={"rescore": None, "probe_rerun": None}, keymap_path=None), loaded


async def test_keys_typed_during_the_load_move_the_cursor_and_open_the_row(monkeypatch: pytest.MonkeyPatch) -> None:
    app, loaded = slow_loading_app("sample-quick-fixed-user_001", monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        overview = app.screen
        assert isinstance(overview, RecordingOverview) and not overview.session.indexed  # still loading
        # The rows: longctx_full all, longctx_full user_001, nomem all, nomem user_001.
        await pilot.press("j", "j", "j", "enter")
        await pilot.pause(0.2)
        assert app.screen is overview  # nothing acted on the empty table
        loaded.set()
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TranscriptScreen), f"Enter did not open the fourth row's transcript: {screen}"
        assert (screen.user_id, screen.system) == ("user_001", "nomem")


async def test_a_key_that_opens_a_screen_lets_it_mount_before_the_next_applies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, loaded = slow_loading_app("sample-quick-fixed-user_001", monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("d", "right_square_bracket")  # the first row's first dimension, then the next one
        loaded.set()
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen)
        assert screen.dimension is not None and screen.dimension != "writing_skill"  # `]` moved on


async def test_keys_typed_while_a_paradigm_recording_loads_apply_too(monkeypatch: pytest.MonkeyPatch) -> None:
    app, loaded = slow_loading_app("sample-paradigms-quick", monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("d")
        loaded.set()
        await settle(pilot)
        assert isinstance(app.screen, ProbeScreen)


async def test_a_failed_load_lets_the_keys_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys are never kept for a screen that will not get ready: a failed index pass releases them."""
    session = open_session(REPO / "recordings" / "sample-quick-fixed-user_001")
    gate = threading.Event()

    def failing_build(*args: object, **kwargs: object) -> None:
        gate.wait(30)
        raise OSError("the disk went away")

    monkeypatch.setattr(session, "build_index", failing_build)
    app = MemProbeApp(session=session, live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("question_mark")
        assert isinstance(app.screen, RecordingOverview)  # held while it loads
        gate.set()
        await pilot.pause(0.5)  # (settle would re-raise the worker's failure, which the screen reports)
        assert not isinstance(app.screen, RecordingOverview)  # `?` opened the help once the load had failed


def test_keys_typed_before_the_app_starts_stay_as_typed_and_unechoed(monkeypatch: pytest.MonkeyPatch) -> None:
    """While Python starts and the recording opens the terminal is the shell's: `j` Enter would be
    echoed over the screen, held until Enter and arrive as `j` + line feed (which the app reads as
    Ctrl+J, not Enter). The console script switches that off first, for the UI commands only, and the
    terminal is restored at exit."""
    import atexit
    import io
    import os
    import pty
    import select
    import termios

    from memprobe_tui.typeahead_tty import keep_typeahead

    master, slave = pty.openpty()
    before = termios.tcgetattr(slave)
    at_exit: list[Callable[[], object]] = []
    monkeypatch.setattr(atexit, "register", lambda fn, *args: at_exit.append(lambda: fn(*args)))
    try:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.FileIO(slave, closefd=False)))
        assert not keep_typeahead(["memprobe", "report", "recordings/x"]) and not at_exit  # not a UI command
        assert keep_typeahead(["memprobe", "replay", "recordings/x"])
        os.write(master, b"j\r")  # typed: no Enter to end a line is needed, and none is added
        ready, _, _ = select.select([slave], [], [], 2)
        assert ready and os.read(slave, 16) == b"j\r"
        echoed, _, _ = select.select([master], [], [], 0.2)
        assert not echoed  # nothing written over the screen
        assert len(at_exit) == 1
        at_exit[0]()
        assert termios.tcgetattr(slave) == before  # the shell gets its terminal back as it was
    finally:
        os.close(master)
        os.close(slave)
