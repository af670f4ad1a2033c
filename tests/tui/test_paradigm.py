"""The TUI on a paradigm (protocol-B) recording, driven with Pilot: the episode list per system, the
session stepper (the amem store growing session by session), the probe inspector (gold beside the
answer, scores) and its live re-run appending a new score; protocol-A recordings still open their
own overview."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Static

from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.paradigms.read.queries import score_cells
from memprobe_engine.paradigms.rerun import (
    ProbeRerunHook,
    ProbeRerunRequest,
    ProbeRerunSink,
    rerun_probe,
)
from memprobe_engine.replay.queries import step_seq_range
from memprobe_tui.app import MemProbeApp
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.paradigms.episode_table import EpisodeTable
from memprobe_tui.paradigms.overview import ParadigmOverviewScreen
from memprobe_tui.paradigms.probe_inspector import ProbeScreen
from memprobe_tui.paradigms.session_list import SessionList
from memprobe_tui.recovery.overview import OverviewScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.rerun_panel import RerunPanel
from tests.doubles import ScriptedBackend
from memprobe_engine.protocols import open_session

from .conftest import REPO, RUN
from .helpers import settle

PARADIGM = REPO / "tests" / "fixtures" / "paradigm" / "run"


def paradigm_app(path: Path = PARADIGM, hook: ProbeRerunHook | None = None) -> MemProbeApp:
    return MemProbeApp(session=open_session(path), live={"rescore": None, "probe_rerun": hook}, keymap_path=None)


def title(screen: Any) -> str:
    """What the screen's title bar shows."""
    return str(screen.query_one("#title", Static).render())


async def wait_for(pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Let the app run until ``condition`` holds (a re-run's messages and follow-up workers take a few
    rounds; a running re-run never completes, so this pauses rather than waiting for workers)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the screen"
        await pilot.pause(0.05)


def pane_text(screen: Any, selector: str) -> str:
    return "\n".join(str(line.text) for line in screen.query_one(selector, DetailLog).lines)


async def test_a_paradigm_recording_opens_the_episode_list_of_each_system() -> None:
    app = paradigm_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ParadigmOverviewScreen)
        table = screen.query_one(EpisodeTable)
        assert table.row_count == 2 and screen.system == "amem"
        cells = [str(c) for c in table.get_row("PILOT-01A")]
        assert cells[:6] == ["PILOT-01A", "0.5", "cur 1*", "prev 1", "chg 0", "tmp .5"]
        assert cells[6:10] == ["interference", "authoritative_update", "update", "no"]
        assert "acc 0.75 (mean 0.81) over 8 probes" in title(screen)
        await pilot.press("s")
        await settle(pilot)
        assert screen.system == "full_context"
        assert [str(c) for c in table.get_row("PILOT-01B")][2:6] == ["cur 0", "cfl 1", "chg 0", "src excl"]
        assert "1 excl" in title(screen)


async def test_a_protocol_a_recording_still_opens_its_own_overview() -> None:
    app = MemProbeApp(session=open_session(RUN), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)


async def test_stepping_sessions_shows_the_amem_store_growing_session_by_session() -> None:
    app = paradigm_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen) and screen.growth is not None
        sizes = []
        for position in range(len(screen.growth)):
            summary = str(screen.query_one("#store-summary", Static).render())
            assert f"store after S{position:02d}: " in summary
            sizes.append(int(summary.split(": ")[1].split(" items")[0]))
            assert screen.detail is not None and screen.detail.step.session_idx == position
            await pilot.press("n")
            await settle(pilot)
        assert sizes == [g.size for g in screen.growth]
        assert sizes[:3] == [1, 2, 3] and sizes == sorted(sizes) and sizes[-1] == 44
        # the perturbation session: its dialogue, and the note it evolved marked as updated
        await pilot.press(*["p"] * (len(sizes) - 18))
        await settle(pilot)
        assert "perturbation" in title(screen)
        assert "CrossFit Central" in pane_text(screen, "#dialogue")
        assert "+2 ~1 -0" in str(screen.query_one("#store-summary", Static).render())
        # the list's own cursor keys step too (the list has focus)
        assert isinstance(app.focused, SessionList)
        await pilot.press("down")
        await settle(pilot)
        assert "S19" in title(screen)


async def test_the_stepper_lists_probes_after_sessions_and_opens_the_inspector() -> None:
    app = paradigm_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen)
        await pilot.press(*["n"] * 21)
        await settle(pilot)
        assert "probe 1/4 · current_value" in title(screen)
        assert "gold answer: CrossFit Central" in pane_text(screen, "#dialogue")
        assert "3 retrieved" in str(screen.query_one("#store-summary", Static).render())
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ProbeScreen) and app.screen.probe_index == 0


async def test_the_probe_inspector_puts_gold_beside_answer_with_scores_and_memory() -> None:
    app = paradigm_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProbeScreen)
        gold, answer, scores = (pane_text(screen, s) for s in ("#gold", "#answer", "#scores"))
        assert "What gym does the user currently go to?" in gold and "current_value: CrossFit Central" in gold
        assert "answer: FitLife" in answer
        assert "original: 0" in scores and "re-score (1): 1" in scores
        assert "re-run answer: answer=CrossFit Central" in scores
        assert "memory the reader saw (memory)" in scores and "note-" in scores
        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
        await settle(pilot)
        assert screen.probe_index == 3 and "temporal" in title(screen)
        assert "original: 0.5  (source_agent 0, direction 1)" in pane_text(screen, "#scores")
        await pilot.press("c")
        await settle(pilot)
        assert "LLM call" in title(app.screen) and "reader" in title(app.screen)


async def test_an_execution_error_shows_as_excluded() -> None:
    app = paradigm_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        await pilot.press("j", "d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProbeScreen) and screen.system == "full_context"
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert "error: reader reply was not valid JSON" in pane_text(screen, "#answer")
        assert "original: excluded" in pane_text(screen, "#scores")


def scripted_hook(reply: str, seen: list[ProbeRerunRequest]) -> ProbeRerunHook:
    """The engine's real re-run, with the reader served by a scripted backend (no model runs)."""
    backend = ScriptedBackend(lambda request: reply, piece_size=3)

    async def run(request: ProbeRerunRequest, sink: ProbeRerunSink) -> None:
        seen.append(request)
        await asyncio.sleep(0.05)  # a reply that takes a moment, so the panel shows "running"
        await rerun_probe(request, sink, llm_config=load_llm_config(None, {}, []),
                          chat_factory=lambda config, recorder: ChatClient(config, recorder, cache=None,
                                                                           backend_factory=lambda spec: backend))

    return ProbeRerunHook(run, "local:fast")


async def test_a_probe_rerun_streams_and_appends_a_new_score_beside_the_original(tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(PARADIGM, copy)
    seen: list[ProbeRerunRequest] = []
    app = paradigm_app(copy, scripted_hook('{"answer": "FitLife", "reason": "the note before the switch"}', seen))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d", "right_square_bracket")  # probe 2: previous_value, gold FitLife
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProbeScreen) and screen.probe_index == 1
        await pilot.press("r")
        await pilot.pause()
        box = screen.query_one("#reader-model", Input)
        assert box.has_class("shown") and box.value == "local:fast"
        box.value = "openai:another-reader@http://127.0.0.1:9/v1"
        await pilot.press("enter")
        status = screen.query_one("#rerun-status", Static)
        await wait_for(pilot, lambda: "appended" in str(status.render())
                       and "re-score (1)" in pane_text(screen, "#scores"))
        assert seen and seen[0].reader == "openai:another-reader@http://127.0.0.1:9/v1" and seen[0].probe_index == 1
        log = screen.query_one(RerunPanel).text
        assert '{"answer": "FitLife"' in log and "new score: 1" in log
        assert "appended to the recording" in str(screen.query_one("#rerun-status", Static).render())
        scores = pane_text(screen, "#scores")
        assert "original: 1" in scores and "re-score (1): 1" in scores
    session = open_session(copy)
    try:
        session.build_index()
        cell = score_cells(session)[("amem", "PILOT-01A", 1)]
        assert cell.rescores == 1 and cell.latest is not None and cell.original is not None
        assert cell.latest["rescore_of"] == cell.original["seq"]
    finally:
        session.close()


async def test_escape_closes_the_model_box_then_leaves() -> None:
    app = paradigm_app(hook=scripted_hook("{}", []))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        await pilot.press("r")
        await pilot.pause()
        assert screen.query_one("#reader-model", Input).has_class("shown")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and not screen.query_one("#reader-model", Input).has_class("shown")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ParadigmOverviewScreen)


async def test_escape_cancels_a_running_rerun_before_it_leaves(tmp_path: Path) -> None:
    from tests.unit.test_paradigm_replay import EndlessBackend

    copy = tmp_path / "run"
    shutil.copytree(PARADIGM, copy)
    backend = EndlessBackend()

    async def run(request: ProbeRerunRequest, sink: ProbeRerunSink) -> None:
        await rerun_probe(request, sink, llm_config=load_llm_config(None, {}, []),
                          chat_factory=lambda config, recorder: ChatClient(config, recorder, cache=None,
                                                                           backend_factory=lambda spec: backend))

    app = paradigm_app(copy, ProbeRerunHook(run, "local:fast"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProbeScreen)
        await pilot.press("r", "enter")
        panel = screen.query_one(RerunPanel)
        await wait_for(pilot, lambda: "tok tok" in panel.text)
        assert screen.rerun_running() and "running" in str(screen.query_one("#rerun-status", Static).render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.rerun_running())
        assert app.screen is screen
        assert "cancelled" in str(screen.query_one("#rerun-status", Static).render())
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ParadigmOverviewScreen)


async def test_the_palette_jumps_to_any_episode_or_probe() -> None:
    app = paradigm_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        for key in "probe PILOT-01B × full_context · P2":
            await pilot.press("space" if key == " " else key)
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProbeScreen)
        assert (screen.episode_id, screen.system, screen.probe_index) == ("PILOT-01B", "full_context", 1)


async def test_leaving_the_memory_view_at_a_seq_shows_the_session_it_belongs_to() -> None:
    app = paradigm_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen) and screen.steps is not None
        last_seq = step_seq_range(screen.session, screen.steps.sessions[7].step)[1]
        screen.returned_from_memory("PILOT-01A", "amem", last_seq)
        await settle(pilot)
        assert screen.position == 7 and "S07" in title(screen)
        screen.returned_from_memory("PILOT-01B", "amem", last_seq)  # another store: stays
        await settle(pilot)
        assert screen.position == 7


async def test_the_shipped_quick_recording_opens_complete_and_steps_its_amem_store() -> None:
    """recordings/sample-paradigms-quick (make demo-paradigms' real run) replays as the README says."""
    app = paradigm_app(REPO / "recordings" / "sample-paradigms-quick")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ParadigmOverviewScreen) and screen.system == "amem"
        assert screen.query_one(EpisodeTable).row_count == 2 and "completed" in title(screen)
        await pilot.press("enter")
        await settle(pilot)
        stepper = app.screen
        assert isinstance(stepper, EpisodeScreen) and stepper.growth is not None
        assert [g.size for g in stepper.growth] == list(range(1, len(stepper.growth) + 1))
