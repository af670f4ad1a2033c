"""Named score layers on protocol B's screens (issue 36's leftovers): the paradigm overview and the
probe inspector show the run's own scores (``main``) by default, ``L`` shows the next layer (the title
then starts ``scores NAME``) and the scores, accuracy, answer and reader call shown are that layer's.

The layer is made the way ``memprobe reader-ablation REC --reader SPEC`` makes it (its engine function,
``ablate_reader``, with the reader served by the functional tests' scripted oracle, as protocol A's
layer test serves ``rescore``) on a copy of the shipped ``sample-paradigms-quick``: amem's PILOT-03B
goes from acc 0.75 (the run's own) to 0.25 (the second reader's), its probe 2 from 1 to 0. The plots
(``P``) and the session stepper (Enter) open in the episode list's layer and ``L`` cycles there too."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from memprobe_engine.paradigms.read.queries import episode_rows, paradigm_figures
from memprobe_engine.paradigms.reader_ablation import ablate_reader
from memprobe_engine.protocols import open_session
from memprobe_tui.app import MemProbeApp
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.paradigms.episode_table import EpisodeTable
from memprobe_tui.paradigms.overview import ParadigmOverviewScreen
from memprobe_tui.paradigms.plots import ParadigmPlotsScreen
from memprobe_tui.paradigms.probe_inspector import ProbeScreen
from memprobe_tui.widgets.table_search import table_cells

from .conftest import REPO
from .helpers import settle
from .test_paradigm import pane_text

SAMPLE_B = REPO / "recordings" / "sample-paradigms-quick"
READER = "openai:scripted@http://127.0.0.1:9/v1"
LAYER = f"reader:{READER}"


def layered_copy(tmp_path: Path) -> Path:
    """The shipped protocol-B run with every probe answered again by a second reader, as ``LAYER``."""
    from tests.functional.test_paradigm_run import ParadigmOracle, _config

    record = tmp_path / "paradigms"
    shutil.copytree(SAMPLE_B, record, ignore=shutil.ignore_patterns("writer.lock"))
    summary = asyncio.run(ablate_reader(record, READER, _config(), backend_factory=lambda spec: ParadigmOracle()))
    assert summary.layer == LAYER and summary.answered == 24 and summary.errors == 0
    return record


def row_of(screen: ParadigmOverviewScreen, episode: str) -> list[str]:
    _, rows = table_cells(screen.query_one(EpisodeTable))
    return next(r for r in rows if episode in r)


async def test_named_score_layers_are_selectable_in_the_paradigm_overview_and_the_probe_inspector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the recording names its suite folder relative to the repository
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    record = await asyncio.to_thread(layered_copy, tmp_path)
    app = MemProbeApp(session=open_session(record), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ParadigmOverviewScreen) and screen.system == "amem"
        assert screen.title_text.endswith("· scores main (L: 2 layers)")  # the run's own by default
        assert "0.75" in row_of(screen, "PILOT-03B")
        await pilot.press("L")
        await settle(pilot)
        assert screen.title_text.startswith(f"scores {LAYER} · amem")
        assert "0.25" in row_of(screen, "PILOT-03B") and "0.75" not in row_of(screen, "PILOT-03B")

        await pilot.press("d")  # PILOT-03B, the first row: its probe 1, in the overview's layer
        await settle(pilot)
        inspector = app.screen
        assert isinstance(inspector, ProbeScreen) and inspector.judgment_layer == LAYER
        assert inspector.title_text.startswith(f"scores {LAYER} · PILOT-03B × amem · probe 1/4")
        answer = pane_text(inspector, "#answer")
        assert "CrossFit Central" in answer and "vegetarian" not in answer  # the second reader's answer
        await pilot.press("right_square_bracket")  # probe 2: previous_value
        await settle(pilot)
        assert "probe 2/4 · previous_value · score 0" in inspector.title_text
        assert "original: 0" in pane_text(inspector, "#scores")
        await pilot.press("L")  # back to the run's own scores
        await settle(pilot)
        assert inspector.judgment_layer is None
        assert inspector.title_text.startswith("PILOT-03B × amem · probe 2/4 · previous_value · score 1")
        assert inspector.title_text.endswith("· scores main (L: 2 layers)")
        assert "original: 1" in pane_text(inspector, "#scores")


async def test_the_plots_open_in_the_episode_lists_layer_and_l_shows_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    record = await asyncio.to_thread(layered_copy, tmp_path)
    session = open_session(record)
    app = MemProbeApp(session=session, live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)  # the recording is read in
        main_figures = paradigm_figures(episode_rows(session))
        layer_figures = paradigm_figures(episode_rows(session, layer=LAYER))
        assert main_figures and main_figures != layer_figures  # amem's PILOT-03B: 0.75, then 0.25 in the layer
        await pilot.press("L")  # the episode list shows the layer
        await settle(pilot)
        await pilot.press("P")
        await settle(pilot)
        plots = app.screen
        assert isinstance(plots, ParadigmPlotsScreen) and plots.judgment_layer == LAYER
        assert plots.figures == layer_figures
        assert plots.title_text.startswith(f"scores {LAYER} · plots · ")
        exported = plots.export_document()
        assert exported is not None and f"Scores: {LAYER}" in exported.markdown
        await pilot.press("L")  # the next layer after the last named one: the run's own
        await settle(pilot)
        assert plots.judgment_layer is None and plots.figures == main_figures
        assert plots.title_text.endswith("· scores main (L: 2 layers)")


async def test_the_session_stepper_shows_the_layers_scores_and_hands_the_layer_to_the_probe_inspector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    record = await asyncio.to_thread(layered_copy, tmp_path)
    app = MemProbeApp(session=open_session(record), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("L")  # the episode list shows the layer; PILOT-03B is its first row
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        stepper = app.screen
        assert isinstance(stepper, EpisodeScreen) and stepper.judgment_layer == LAYER
        assert stepper.steps is not None
        sessions = len(stepper.steps.sessions)
        assert stepper.cells[1].original is not None and stepper.cells[1].original["score"] == 0  # probe 2: the layer's
        stepper.goto(sessions + 1)  # probe 2 (previous_value)
        await settle(pilot)
        assert stepper.title_text.startswith(f"scores {LAYER} · PILOT-03B × amem · probe 2/4")
        await pilot.press("L")  # back to the run's own scores
        await settle(pilot)
        assert stepper.judgment_layer is None and stepper.cells[1].original is not None
        assert stepper.cells[1].original["score"] == 1
        assert stepper.title_text.endswith("· scores main (L: 2 layers)")
        await pilot.press("L")
        await settle(pilot)
        stepper.goto(sessions)  # probe 1
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        inspector = app.screen
        assert isinstance(inspector, ProbeScreen) and inspector.judgment_layer == LAYER
        assert "CrossFit Central" in pane_text(inspector, "#answer")  # the second reader's answer
