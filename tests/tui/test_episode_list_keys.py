"""Protocol B's episode list gives f, o and P the meaning they have on protocol A's overview:
f filters the episodes by a text, o cycles their order, P plots accuracy, plasticity and stability
per paradigm and system (with every figure also as text). On the shipped sample-paradigms-quick."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from memprobe_engine.paradigms.metrics import system_metrics
from memprobe_engine.paradigms.read.frames import load_paradigm_frames
from memprobe_engine.paradigms.read.queries import episode_rows
from memprobe_tui.app import MemProbeApp
from memprobe_tui.paradigms.episode_table import EpisodeTable
from memprobe_tui.paradigms.overview import ParadigmOverviewScreen
from memprobe_engine.protocols import open_session

from .conftest import REPO
from .helpers import settle

PARADIGMS = REPO / "recordings" / "sample-paradigms-quick"


def listed(app: MemProbeApp) -> list[str]:
    table = app.screen.query_one(EpisodeTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def press(pilot: Pilot[None], *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


async def test_f_keeps_the_episodes_that_contain_a_text_and_says_so() -> None:
    app = MemProbeApp(session=open_session(PARADIGMS), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert listed(app) == ["PILOT-03B", "PILOT-01A"]
        await press(pilot, "f", *"interference", "enter")
        assert isinstance(app.screen, ParadigmOverviewScreen)
        assert listed(app) == ["PILOT-01A"]
        assert "only “interference”: 1 of 2" in app.screen.title_text
        await press(pilot, "s")  # the filter holds for the next system too
        assert app.screen.system == "full_context" and listed(app) == ["PILOT-01A"]
        await press(pilot, "f", "ctrl+u", "enter")  # an empty filter: every episode again
        assert listed(app) == ["PILOT-03B", "PILOT-01A"] and "only" not in app.screen.title_text


async def test_o_cycles_the_order_of_the_episodes() -> None:
    app = MemProbeApp(session=open_session(PARADIGMS), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        seen = []
        for _ in range(5):
            await press(pilot, "o")
            assert isinstance(app.screen, ParadigmOverviewScreen)
            seen.append((app.screen.sort, listed(app)))
        assert seen == [("accuracy", ["PILOT-03B", "PILOT-01A"]),  # 0.75 before 0.5
                        ("paradigm", ["PILOT-03B", "PILOT-01A"]),  # consolidation before interference
                        ("condition", ["PILOT-01A", "PILOT-03B"]),  # authoritative_update before low
                        ("expected", ["PILOT-03B", "PILOT-01A"]),  # both should_update: run order kept
                        (None, ["PILOT-03B", "PILOT-01A"])]
        await press(pilot, "o", "o", "o")
        assert "by condition" in app.screen.title_text


async def test_P_plots_accuracy_plasticity_and_stability_per_paradigm_with_the_numbers_as_text() -> None:
    app = MemProbeApp(session=open_session(PARADIGMS), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "P")
        screen = app.screen
        assert type(screen).__name__ == "ParadigmPlotsScreen", "P opened no plots"
        values = str(screen.query_one("#values", Static).render())
        lines = values.splitlines()
        # each system named with the character its bars are drawn with (no colour needed)
        assert lines[0].split() == ["paradigm", "█", "amem", "▒", "full_context", "░", "naive_rag"]
        assert lines[1].split() == ["acc", "plast", "stab", "(n)"] * 3
        assert lines[2].split() == ["interference", *["0.50", "0.50", "—", "(4)"] * 3]
        assert lines[3].split() == ["consolidation", "0.75", "0.75", "—", "(4)", "1.00", "1.00", "—", "(4)",
                                    "0.75", "0.75", "—", "(4)"]
        assert "no stability probe scored" in str(screen.query_one("#balance").plt.build())  # type: ignore[attr-defined]
        assert "3 systems · 2 paradigms" in screen.title_text
        assert max(len(line) for line in lines) <= 78


def test_the_plotted_figures_are_the_reports() -> None:
    from memprobe_engine.paradigms.read.queries import ALL_PARADIGMS, paradigm_figures

    session = open_session(PARADIGMS)
    session.build_index()
    pooled = {f.system: f for f in paradigm_figures(episode_rows(session)) if f.paradigm == ALL_PARADIGMS}
    metrics = system_metrics(load_paradigm_frames([PARADIGMS]).probes).set_index("system")
    assert sorted(pooled) == sorted(metrics.index)
    for system, figures in pooled.items():
        assert figures.accuracy.accuracy == pytest.approx(metrics.loc[system, "accuracy"])
        assert figures.plasticity.accuracy == pytest.approx(metrics.loc[system, "plasticity"])
        assert figures.stability.accuracy is None and metrics.loc[system, "stability"] is None
