"""App-wide behaviour: the user keymap, monochrome mode, F1 help, the command palette, binding ids."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.screen import Screen

from memprobe_tui.app import SCREENS, MemProbeApp, known_binding_ids
from memprobe_tui.keymap import load_keymap
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.recovery.overview import OverviewScreen
from memprobe_tui.recovery.transcript import TranscriptScreen
from memprobe_tui.screens.help import HelpScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_engine.protocols import open_session

from .conftest import RUN
from .helpers import settle


def _app(keymap: Path | None = None, no_color: bool = False) -> MemProbeApp:
    return MemProbeApp(session=open_session(RUN), live={"rescore": None}, keymap_path=keymap, no_color=no_color)


def test_every_binding_has_an_id_and_a_description() -> None:
    owners: list[type[MemProbeApp | Screen[None]]] = [MemProbeApp, *SCREENS]
    for owner in owners:
        for binding in owner.BINDINGS:
            assert not isinstance(binding, tuple), owner
            assert binding.id and binding.description, (owner.__name__, binding.key)
    assert {"transcript.next_event", "memory.next_op", "dimension.rerun", "app.help"} <= known_binding_ids()


async def test_keymap_file_rebinds_by_id_and_flags_unknown_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keymap]\n"transcript.next_event" = "x"\n"no.such.binding" = "z"\n"pane.zoom" = 3\n')
    app = _app(keymap)
    said: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: said.append(message))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        # both problems of the file, in one notification (the first used to hide the second)
        assert any("no.such.binding" in message and "pane.zoom" in message for message in said), said
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        await pilot.press("x")
        assert screen.event_pos == 1


def test_a_broken_keymap_is_reported_not_fatal(tmp_path: Path) -> None:
    bad = tmp_path / "keymap.toml"
    bad.write_text("this is = = not toml")
    keymap, problem = load_keymap(bad)
    assert keymap == {} and problem is not None and str(bad) in problem
    assert load_keymap(tmp_path / "missing.toml") == ({}, None)


async def test_no_color_flag_makes_the_app_monochrome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    app = _app(no_color=True)
    assert app.no_color and "NO_COLOR" not in os.environ  # set only while the app was built
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)


async def test_f1_and_question_mark_open_the_screens_own_help_and_close_it() -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key in ("f1", "question_mark"):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, HelpScreen)
            text = app.screen.query_one(DetailLog).text()
            assert "B full" in text and "keys of this screen" in text
            await pilot.press(key)
            assert isinstance(app.screen, OverviewScreen)


async def test_command_palette_jumps_to_a_dimension() -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"dimension sim_01 × mem0 · schedule")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DimensionScreen)
        assert (app.screen.system, app.screen.dimension) == ("mem0", "schedule_juggling")
