"""Pilot and CLI tests for what can go wrong or keep changing: a followed live run, a torn
recording, a path that is not a recording."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.writer import open_writer
from memprobe_tui import cli
from memprobe_tui.recovery.score_table import ScoreTable
from memprobe_tui.recovery.transcript import TranscriptScreen
from memprobe_tui.recovery import overview
from memprobe_tui.widgets.damage_banner import DamageBanner
from tests.synthetic import generic_users, write_synthetic_run

from .conftest import TRUNCATED, make_app
from .helpers import settle, text_of


async def test_follow_mode_picks_up_appended_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overview, "FOLLOW_EVERY_S", 0.05)
    live = tmp_path / "live"
    write_synthetic_run(live, generic_users(1, 2), ["amem"], finish=False, rescore=False)
    writer = open_writer(live)  # this process now holds the writer lock: the run is live
    try:
        app = make_app(live)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert "live: 1/1 units done" in text_of(pilot, "#title")
            before = len(app.screen.query_one(ScoreTable).rows)
            await pilot.press("j", "enter")
            await settle(pilot)
            transcript = app.screen
            assert isinstance(transcript, TranscriptScreen)
            recorder = Recorder(writer)
            with (recorder.span("user_002 × amem", "unit", user_id="user_002", system="amem"),
                  recorder.span("rollout", "rollout"),
                  recorder.span("task 1: dim_00", "episode", dimension="dim_00", task_index=0)):
                recorder.emit(Message(role="user", content="A brand new request.", task_index=0, turn=0))
            await pilot.pause(0.3)
            await settle(pilot)
            assert app.session is not None
            assert transcript.seen_version == app.session.version  # the covered screen redrew too
            await pilot.press("escape")
            await settle(pilot)
            rows = app.screen.query_one(ScoreTable).rows
            assert len(rows) == before + 1 and "amem\tuser_002" in [r.value for r in rows]
            assert "live: 2/2 units done" in text_of(pilot, "#title")
    finally:
        writer.close()


async def test_truncated_recording_opens_with_a_banner_naming_the_missing_bytes() -> None:
    torn = len((TRUNCATED / "events.jsonl").read_bytes().rsplit(b"\n", 1)[1])
    app = make_app(TRUNCATED)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        banner = app.screen.query_one(DamageBanner)
        assert banner.has_class("shown")
        message = text_of(pilot, "#banner")
        assert f"{torn:,} bytes" in message and "torn last line" in message
        assert "no run_end" in text_of(pilot, "#title")
        await pilot.press("j", "j", "j", "enter")  # the interrupted unit still opens
        await settle(pilot)
        assert isinstance(app.screen, TranscriptScreen) and app.screen.steps
        assert app.screen.query_one(DamageBanner).has_class("shown")


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("replay")(cli.replay)
    app.command("tui")(cli.tui)
    return app


@pytest.mark.parametrize("make", ["empty dir", "file", "missing"])
def test_a_path_that_is_not_a_recording_exits_with_the_message_naming_it(tmp_path: Path, make: str) -> None:
    target = tmp_path / "not-a-recording"
    if make == "empty dir":
        target.mkdir()
    elif make == "file":
        target.write_text("hello")
    result = CliRunner().invoke(_cli(), ["replay", str(target)])
    assert result.exit_code == 2
    output = " ".join(result.output.split())
    assert str(target) in output and "error:" in output
    assert "Traceback" not in output


def test_tui_on_a_missing_folder_names_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(_cli(), ["tui", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "nowhere: no such folder" in " ".join(result.output.split())


async def test_a_failing_worker_is_reported_as_one_message_and_the_app_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.errors import RecordingError
    from memprobe_tui.screens import memory

    def broken(*_: object, **__: object) -> None:
        raise RecordingError("events.jsonl: the memory patch at seq 42 does not apply; run `memprobe recording verify`.")

    monkeypatch.setattr(memory, "store_view", broken)
    app = make_app()
    said: list[tuple[str, str]] = []
    monkeypatch.setattr(app, "notify", lambda message, **kw: said.append((message, kw.get("severity", ""))))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await settle(pilot)
        assert said == [("events.jsonl: the memory patch at seq 42 does not apply; run `memprobe recording verify`.",
                         "error")]
        await pilot.press("escape", "enter")
        await settle(pilot)
        assert isinstance(app.screen, TranscriptScreen)  # still usable
