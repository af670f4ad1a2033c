"""SVG snapshots of every screen at 80×24 (the SSH minimum) and 120×40.

Update after an intended change with ``pytest tests/tui --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from memprobe_tui.app import MemProbeApp

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


SCREENS: dict[str, tuple[Callable[[], MemProbeApp], Steps]] = {
    "browser": (lambda: MemProbeApp(folder=FIXTURES.relative_to(REPO), rescore=None, keymap_path=None), keys()),
    "overview": (make_app, keys()),
    "overview_damaged": (lambda: make_app(TRUNCATED.relative_to(REPO)), keys()),
    "transcript": (make_app, keys("enter", "n", "j", "j")),
    "memory": (make_app, keys("enter", "n", "m")),
    "dimension": (make_app, keys("enter", "d")),
    "dimension_rerun": (lambda: make_app(rescore=quick_rescore), keys("enter", "d", "r")),
    "llm_call": (make_app, keys("enter", "d", "c")),
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen_snapshot(snap_compare: Any, screen: str, size: tuple[int, int],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # paths on screen are shown as given: keep them relative and stable
    build, steps = SCREENS[screen]
    assert snap_compare(build(), terminal_size=size, run_before=steps)
