"""`memprobe replay BASE --compare OTHER` on the shipped release runs of user_001 (amem → mem0):
a regressed case's side-by-side view is at most 4 keystrokes from opening at 80×24 (here 2: `v`
keeps regressed cases, Enter opens the first), and SVG snapshots of both new screens.

Update the snapshots after an intended change with
``pytest tests/tui/test_compare_screens.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from memprobe_tui.recovery.compare import CaseCompareScreen, CompareScreen
from memprobe_tui.recovery.compare_app import CompareApp
from memprobe_tui.widgets.table_search import SearchableTable, row_texts
from memprobe_engine.protocols import open_session

from .conftest import REPO
from .helpers import settle

BASE = REPO / "recordings" / "release-a-user_001-amem"
OTHER = REPO / "recordings" / "release-a-user_001-mem0"
Steps = Callable[[Pilot[None]], Awaitable[None]]


def compare_app() -> CompareApp:
    return CompareApp(session=open_session(BASE.relative_to(REPO)), other=open_session(OTHER.relative_to(REPO)),
                      live={"rescore": None}, keymap_path=None)


async def test_a_regressed_case_side_by_side_in_two_keystrokes_at_80x24(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    app = compare_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        rows = row_texts(screen.query_one(SearchableTable))
        assert len(rows) == 62 and sum("▼ regressed" in r for r in rows) == 18  # marked in text, not only colour
        pressed = ["v", "enter"]
        for key in pressed:
            await pilot.press(key)
            await settle(pilot)
        assert len(pressed) <= 4
        case = app.screen
        assert isinstance(case, CaseCompareScreen) and case.change == "regressed"
        left = str(case.query_one("#base", Static).render())
        right = str(case.query_one("#other", Static).render())
        for side, system in ((left, "amem"), (right, "mem0")):
            assert side.startswith(system) and "fill " in side and "judge " in side and "final store:" in side
            assert "dialogue of the task" in side and "label " in side
        # the first regressed case of the list, with both scores as the compare table says
        assert case.user_id == "user_001" and case.dimension == "capability_under_pressure" and case.mode == "dump_all"
        assert "score 0.75" in left and "score 0.50" in right
        assert "label ok" in left and "stage 1 " in right and "label memory_failure" in right  # ok → memory
        await pilot.press("escape")
        await settle(pilot)
        table = app.screen.query_one(SearchableTable)
        assert all("▼ regressed" in r for r in row_texts(table))


SIZES = [pytest.param((80, 24), id="80x24")]  # the SSH minimum; the screens only gain columns when wider


def keys(*pressed: str) -> Steps:
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in pressed:
            await pilot.press(key)
            await settle(pilot)

    return run


SCREENS: dict[str, Steps] = {"compare": keys(), "compare_regressed": keys("v"),
                             "compare_case": keys("v", "enter")}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("screen", list(SCREENS))
def test_compare_snapshot(snap_compare: Any, screen: str, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert snap_compare(compare_app(), terminal_size=size, run_before=SCREENS[screen])
