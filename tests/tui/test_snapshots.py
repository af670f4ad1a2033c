"""SVG snapshots of every screen and view at 80×24 (the SSH minimum) and 120×40.

Update after an intended change with ``pytest tests/tui --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from memprobe_tui.app import MemProbeApp
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.widgets.store_table import StoreTable

from .conftest import FIXTURES, REPO, TRUNCATED, make_app
from .helpers import settle
from .test_rerun import quick_rescore

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]
Steps = Callable[[Pilot[None]], Awaitable[None]]


def keys(*pressed: str) -> Steps:
    """Settle, press ``pressed`` one by one (settling after each: screens load in workers)."""

    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in pressed:
            await pilot.press(key)
            await settle(pilot)

    return run


async def memory_update(pilot: Pilot[None]) -> None:
    """mem0's store at its one update, the updated item's old → new diff in the detail."""
    await keys("j", "j", "j", "m")(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, MemoryScreen)
    while screen.view is not None and not any(r.mark == "~" for r in screen.view.rows):
        await pilot.press("left_square_bracket")
        await settle(pilot)
    assert screen.view is not None
    row = [r.mark for r in screen.view.rows].index("~")
    screen.query_one(StoreTable).move_cursor(row=row)
    await settle(pilot)


SCREENS: dict[str, tuple[Callable[[], MemProbeApp], Steps]] = {
    "browser": (lambda: MemProbeApp(folder=FIXTURES.relative_to(REPO), live={"rescore": None}, keymap_path=None), keys()),
    "overview": (make_app, keys()),
    "overview_damaged": (lambda: make_app(TRUNCATED.relative_to(REPO)), keys()),
    "transcript": (make_app, keys("enter", "n", "j", "j")),
    "memory": (make_app, keys("enter", "n", "m")),
    "dimension": (make_app, keys("enter", "d")),
    "dimension_rerun": (lambda: make_app(rescore=quick_rescore), keys("enter", "d", "r", "enter")),
    "llm_call": (make_app, keys("enter", "d", "c")),
    "llm_call_end": (make_app, keys("enter", "d", "c", "G")),
    "full_screen": (make_app, keys("enter", "d", "c", "z", "G")),
    "help_overview": (make_app, keys("question_mark")),
    "settings": (make_app, keys("i")),
    "grid": (make_app, keys("x")),
    "plots": (make_app, keys("P")),
    "overview_filtered": (make_app, keys("f", "m", "e", "m", "0", "enter", "o")),
    "transcript_search": (make_app, keys("enter", "slash", *"assistant", "enter", "n")),
    "transcript_detail_focused": (make_app, keys("enter", "n", "tab")),
    "memory_update": (make_app, memory_update),
    "search_prompt": (make_app, keys("enter", "slash", *"memo")),
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen_snapshot(snap_compare: Any, screen: str, size: tuple[int, int],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # paths on screen are shown as given: keep them relative and stable
    build, steps = SCREENS[screen]
    assert snap_compare(build(), terminal_size=size, run_before=steps)
