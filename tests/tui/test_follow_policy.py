"""The overviews' follow policies, which :class:`RecordingOverview` runs for them: protocol A keeps
looking at a finished recording every third tick (a re-score may still append to it), protocol B
follows only a run with no run_end and stops once it has one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprobe_tui.paradigms.overview import ParadigmOverviewScreen
from memprobe_tui.recovery.overview import OverviewScreen

from .conftest import make_app
from .helpers import settle
from .test_paradigm import paradigm_app


async def test_protocol_a_looks_at_a_finished_run_every_third_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen) and not screen.session.live
        assert screen._follow_timer is not None  # a finished recording is followed too
        looked: list[int] = []
        monkeypatch.setattr(screen, "_follow", lambda: looked.append(screen._ticks))
        for _ in range(6):
            screen._poll()
        assert len(looked) == 2 and all(tick % 3 == 0 for tick in looked)


async def test_protocol_b_follows_only_until_the_run_end(monkeypatch: pytest.MonkeyPatch) -> None:
    app = paradigm_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ParadigmOverviewScreen) and not screen.session.live
        assert screen._follow_timer is None  # a finished run is not followed at all
        looked: list[int] = []
        stopped: list[bool] = []
        monkeypatch.setattr(screen, "_follow", lambda: looked.append(screen._ticks))
        screen._follow_timer = SimpleNamespace(stop=lambda: stopped.append(True))  # type: ignore[assignment]
        screen._poll()  # the run_end came while it was followed: the timer stops, nothing is read
        assert stopped == [True] and looked == []
        screen._follow_timer = None
