"""SVG snapshots of the paradigm screens at 80×24 (the SSH minimum) and 120×40: the episode list, the
session stepper on the perturbation session, the stepper on a probe, the probe inspector, and the
inspector after a live re-run (scripted reader).

Update after an intended change with ``pytest tests/tui/test_paradigm_snapshots.py --snapshot-update``
and review the SVGs.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from memprobe_tui.app import MemProbeApp

from .conftest import REPO
from .helpers import settle
from .test_paradigm import PARADIGM, pane_text, paradigm_app, scripted_hook, wait_for

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]
Steps = Callable[[Pilot[None]], Awaitable[None]]


def keys(*pressed: str) -> Steps:
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in pressed:
            await pilot.press(key)
            await settle(pilot)

    return run


async def rerun(pilot: Pilot[None]) -> None:
    await keys("d", "right_square_bracket", "r")(pilot)
    screen = pilot.app.screen
    screen.query_one("#reader-model", Input).value = "local:fast"
    await pilot.press("enter")
    await wait_for(pilot, lambda: "re-score (1)" in pane_text(screen, "#scores"))


SCREENS: dict[str, tuple[Callable[[Path], MemProbeApp], Steps]] = {
    "paradigm_overview": (lambda _: paradigm_app(), keys()),
    "paradigm_overview_system": (lambda _: paradigm_app(), keys("s")),
    "episode_session": (lambda _: paradigm_app(), keys("enter", *["n"] * 18)),
    "episode_probe": (lambda _: paradigm_app(), keys("enter", *["n"] * 22)),
    "probe_inspector": (lambda _: paradigm_app(), keys("d", "right_square_bracket", "right_square_bracket",
                                                       "right_square_bracket")),
    "probe_rerun": (lambda copy: paradigm_app(copy, scripted_hook('{"answer": "FitLife", "reason": "before the switch"}',
                                                                  [])), rerun),
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("screen", list(SCREENS))
def test_paradigm_screen_snapshot(snap_compare: Any, screen: str, size: tuple[int, int], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    copy = tmp_path / "run"
    shutil.copytree(PARADIGM, copy)  # the re-run appends: never to the committed fixture
    build, steps = SCREENS[screen]
    assert snap_compare(build(copy), terminal_size=size, run_before=steps)
