"""The dimension inspector's re-run panel, driven by fake async re-score functions: output streams
in, new scores appear beside the originals, and Escape cancels a running re-run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import Input

from memprobe_engine.recovery.read import RescoreRequest, RescoreSink
from memprobe_tui.app import MemProbeApp
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.recovery.score_table import ScoreTable
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.rerun_panel import RerunPanel
from memprobe_engine.protocols import open_session

from .conftest import make_app
from .helpers import settle, text_of

STARTED: list[RescoreRequest] = []
CANCELLED: list[bool] = []


async def endless_rescore(request: RescoreRequest, sink: RescoreSink) -> None:
    """Streams judge tokens forever, like a slow model; only cancellation ends it."""
    STARTED.append(request)
    sink.note("slot-fill dump_all")
    try:
        while True:
            sink.text("token ")
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        CANCELLED.append(True)
        raise


async def quick_rescore(request: RescoreRequest, sink: RescoreSink) -> None:
    sink.note("judge dump_all")
    for piece in ('{"reason": "', "matches the target", '", "score": 1.0}'):
        sink.text(piece, "judge dump_all")
        await asyncio.sleep(0)
    sink.score("dump_all", 1.0, "matches the target")
    sink.stage("retrieve", 0, "can_invite", "the task invites it")


def _inspector_text(screen: DimensionScreen) -> str:
    return "\n".join(str(line.text) for line in screen.query_one(DetailLog).lines)


async def test_escape_cancels_a_running_rerun_and_stays_on_the_inspector() -> None:
    STARTED.clear()
    CANCELLED.clear()
    app = make_app(rescore=endless_rescore)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen)
        await pilot.press("r", "enter")  # r asks for the model; Enter runs
        await pilot.pause(0.2)
        assert screen.rerun_running()
        assert STARTED and STARTED[0].dimension == "composure_under_strain" and STARTED[0].system == "amem"
        assert "token" in screen.query_one(RerunPanel).text
        assert "running" in text_of(pilot, "#rerun-status")
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not screen.rerun_running()
        assert CANCELLED == [True]
        assert app.screen is screen  # the first Esc cancels; it does not leave the screen
        assert "cancelled" in text_of(pilot, "#rerun-status")
        await pilot.press("escape")
        assert app.screen is not screen


async def test_rerun_streams_text_and_shows_the_new_score_beside_the_original() -> None:
    app = make_app(rescore=quick_rescore)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen)
        before = _inspector_text(screen)
        assert "judge: 0.75" in before and "re-score (1): 1" in before  # the recorded re-score
        await pilot.press("r", "enter")  # r asks for the model; Enter runs
        await settle(pilot)
        log = screen.query_one(RerunPanel).text
        assert '── judge dump_all\n{"reason": "matches the target", "score": 1.0}\n' in log
        after = _inspector_text(screen)
        assert "judge: 0.75   re-score (1): 1   re-run: 1" in after
        assert "re-run stage 0: can_invite" in after
        assert "re-score composure_under_strain: done" in text_of(pilot, "#rerun-status")  # the configured model


async def test_rerun_without_an_engine_function_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(rescore=None)
    said: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: said.append(message))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "d")
        await settle(pilot)
        await pilot.press("r")
        await pilot.pause()
        assert any("not available" in message for message in said)
        assert not app.screen.query_one("#rerun").has_class("shown")


async def appending_rescore(request: RescoreRequest, sink: RescoreSink) -> None:
    """Like the engine's re-score: appends a judge_score with ``rescore_of`` to the recording."""
    from memprobe_engine.events.recorder import Recorder
    from memprobe_engine.events.scoring import JudgeScore
    from memprobe_engine.events.writer import open_writer
    from memprobe_engine.recovery.read import score_pairs

    probe = open_session(request.recording)
    probe.build_index()
    pair = score_pairs(probe)[(request.user_id, request.system, request.dimension, "retrieve")]
    probe.close()
    assert pair.original is not None
    writer = open_writer(request.recording)
    recorder = Recorder(writer)
    with recorder.scope(user_id=request.user_id, system=request.system, dimension=request.dimension):
        recorder.emit(JudgeScore(mode="retrieve", score=1.0, reason="re-run", rescore_of=pair.original.seq))
    writer.close()
    sink.score("retrieve", 1.0, "re-run")


async def test_a_finished_rerun_is_read_back_and_the_overview_updates(run_copy: Path) -> None:
    app = make_app(run_copy, rescore=appending_rescore)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        before = text_of_row(app, "amem\tsim_01")
        await pilot.press("enter", "d")
        await settle(pilot)
        await pilot.press("r", "enter")  # r asks for the model; Enter runs
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen) and screen.detail is not None
        pair = screen.detail.modes["retrieve"].pair
        assert pair is not None and pair.latest is not None and pair.latest.score == 1.0
        # read back, the new score is the recorded re-score, not listed a second time as the live re-run
        assert "retrieve" not in screen.live
        await pilot.press("escape", "escape")
        await settle(pilot)
        assert text_of_row(app, "amem\tsim_01") != before  # B top-k now counts the re-score


def text_of_row(app: MemProbeApp, key: str) -> str:
    table = app.screen.query_one(ScoreTable)
    return " ".join(str(cell) for cell in table.get_row(key))


async def test_a_reopened_inspector_shows_the_last_rerun_output_and_progress_counts_steps() -> None:
    app = make_app(rescore=quick_rescore)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "d", "r", "enter")
        await settle(pilot)
        panel = app.screen.query_one(RerunPanel)
        assert panel.steps == 1  # one announced stage: the judge
        assert "steps: 1" in text_of(pilot, "#rerun-status")
        await pilot.press("escape", "d")
        await settle(pilot)
        reopened = app.screen.query_one(RerunPanel)
        assert reopened is not panel and reopened.has_class("shown")
        assert "matches the target" in reopened.text and "last re-score" in text_of(pilot, "#rerun-status")


def test_progress_line_gives_an_upper_bound_eta_from_finished_steps() -> None:
    panel = RerunPanel()
    panel._title, panel._started, panel._step_started, panel._steps, panel._stage = "re-score d", 100.0, 130.0, 3, "judge"
    text = panel.progress_text(now=140.0)
    # two steps took 30 s: 15 s each, 8 may remain → 120 s, 10 s of the current one already spent
    assert "step 3/≤10 (judge)" in text and "40.0 s" in text and "≤ 1 min 50 s left" in text


async def test_rerun_asks_for_a_model_first_and_esc_writes_nothing(run_copy: Path) -> None:
    asked: list[str | None] = []

    async def capture(request: RescoreRequest, sink: RescoreSink) -> None:
        asked.append(request.model)

    app = make_app(run_copy, rescore=capture)
    size = (run_copy / "events.jsonl").stat().st_size
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "d", "r")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen)
        box = screen.query_one("#rerun-model", Input)
        assert box.has_class("shown") and box.value  # prefilled with the configured model
        assert not screen.rerun_running() and asked == []
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen and not box.has_class("shown") and asked == []
        assert (run_copy / "events.jsonl").stat().st_size == size  # nothing appended
        await pilot.press("r")
        await settle(pilot)
        box.value = "openai:gpt-4o-mini"
        await pilot.press("enter")
        await settle(pilot)
        assert asked == ["openai:gpt-4o-mini"]


def test_a_chosen_model_serves_every_rescore_role_and_a_bad_one_is_named() -> None:
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.recovery.rescore import RESCORE_ROLES, rescore_config

    base = LLMConfig(models={"default": parse_spec("local:fast")})
    chosen = rescore_config(base, "openai:gpt-4o-mini")
    assert {chosen.spec_for(role).spec_string() for role in RESCORE_ROLES} == {"openai:gpt-4o-mini"}
    assert chosen.spec_for("agent").spec_string() == "local:fast"  # only the re-score's roles change
    assert rescore_config(base, None) is base
    with pytest.raises(ConfigError, match="re-run's model"):
        rescore_config(base, "nonsense::")
