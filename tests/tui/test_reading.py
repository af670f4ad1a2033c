"""Pilot tests of keyboard-complete reading: focusable panes with the reading keys, full-screen
text, search in text panes, tables and transcripts, help, settings, copy/export, old → new diffs,
the grid, plots, and the overview's filter and sort."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.pilot import Pilot

from memprobe_engine.events.header import read_header
from memprobe_engine.replay import ReplaySession, llm_call_view
from memprobe_tui.app import MemProbeApp
from memprobe_tui.recovery.grid import GridScreen
from memprobe_tui.recovery.overview import OverviewScreen
from memprobe_tui.recovery.plots import PlotsScreen
from memprobe_tui.recovery.score_table import ScoreTable
from memprobe_tui.recovery.transcript import TranscriptScreen
from memprobe_tui.render_settings import settings_lines
from memprobe_tui.screens.help import HelpScreen
from memprobe_tui.screens.llm_call import LLMCallScreen
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.screens.text_view import TextViewScreen
from memprobe_tui.widgets.detail_log import DetailLog, plain_text
from memprobe_tui.widgets.event_list import EventList
from memprobe_tui.widgets.search_prompt import SearchPrompt
from memprobe_tui.widgets.store_table import StoreTable
from memprobe_tui.widgets.table_search import SearchableTable

from .conftest import REPO, make_app
from .helpers import settle, text_of


def longest_call(session: ReplaySession) -> int:
    """The seq of the recording's longest LLM call (request and response text)."""
    sizes = []
    for line in range(len(session)):
        if b'"kind":"llm_call"' in session.raw(line):
            view = llm_call_view(session, session.event(line).seq)
            assert view is not None
            sizes.append((sum(len(m.content) for m in view.messages) + len(view.event.response_text or ""), view.seq))
    return max(sizes)[1]


async def _judge_call(pilot: Pilot[None]) -> LLMCallScreen:
    """Open the fixture's longest call the way a user would reach any call (the app's router)."""
    await settle(pilot)
    app = pilot.app
    assert isinstance(app, MemProbeApp) and app.session is not None
    app.open_llm_call(app.session, longest_call(app.session))
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, LLMCallScreen)
    return screen


async def test_a_long_call_is_read_to_its_end_by_keyboard_alone() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _judge_call(pilot)
        log = screen.query_one(DetailLog)
        assert screen.focused is log  # the pane has focus: no Tab needed
        assert log.max_scroll_y > 0, "the judge call is longer than one screen at 80×24"
        await pilot.press("pagedown")
        assert log.scroll_y > 0
        await pilot.press("G")
        assert log.scroll_y == log.max_scroll_y  # the end of the response is on screen
        await pilot.press("g")
        assert log.scroll_y == 0
        await pilot.press("end")
        assert log.scroll_y == log.max_scroll_y
        await pilot.press("home", "ctrl+d")
        assert 0 < log.scroll_y <= log.max_scroll_y
        await pilot.press("z")
        await settle(pilot)
        assert isinstance(app.screen, TextViewScreen)
        full = app.screen.query_one(DetailLog)
        assert full.text() == log.text() and app.screen.focused is full
        await pilot.press("G")
        assert full.scroll_y == full.max_scroll_y
        await pilot.press("escape")
        assert app.screen is screen


async def test_search_in_a_text_pane_finds_every_match_and_n_moves_between_them() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _judge_call(pilot)
        log = screen.query_one(DetailLog)
        await pilot.press("slash")
        assert isinstance(app.screen, SearchPrompt)
        await pilot.press(*"memory", "enter")
        assert app.screen is screen and log.matches.query == "memory"
        hits = log.matches.hits
        assert len(hits) >= 2 and all("memory" in log.lines[y].text.lower() for y in hits)
        assert "/memory 1/" in log.border_title
        await pilot.press("n")
        assert log.matches.current == (1 % len(hits))
        await pilot.press("N")
        assert log.matches.current == 0
        await pilot.press("escape")  # clears the search, stays on the screen
        assert not log.matches.active and app.screen is screen
        await pilot.press("escape")
        assert not isinstance(app.screen, LLMCallScreen)


async def test_search_a_transcript_jumps_to_the_turn_holding_the_text() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen) and screen.step_pos == 0
        await pilot.press("slash", *"UPDATE", "enter")  # only one memory op is an update: mem0's
        # amem has no update op: the search says so and stays put
        assert screen.matches.active and not screen.matches.hits and screen.step_pos == 0
        await pilot.press("escape")
        assert not screen.matches.active and app.screen is screen
        await pilot.press("slash", *"assistant", "enter")
        assert len(screen.matches.hits) > 1
        first = (screen.step_pos, screen.event_pos)
        event = screen.events[screen.event_pos]
        assert "assistant" in str(getattr(event, "role", "")) + str(getattr(event, "content", ""))
        await pilot.press("n")
        assert (screen.step_pos, screen.event_pos) > first
        assert "/assistant 2/" in text_of(pilot, "#title")
        await pilot.press("N")
        assert (screen.step_pos, screen.event_pos) == first


async def test_go_to_a_task_turn_and_the_last_step() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        await pilot.press("colon", *"T2.1", "enter")
        step = screen.steps[screen.step_pos]
        assert screen.episodes[step[0]].task_index == 1 and step[1].turn == 1
        await pilot.press("G")  # the event list has focus: its last event
        assert screen.event_pos == len(screen.events) - 1
        await pilot.press("tab", "tab")  # step list, then back round: step list is first in order
        await pilot.press("shift+tab")
        assert isinstance(screen.focused, (EventList, DetailLog)) or screen.focused is not None
        await pilot.press("colon", *"last", "enter")
        assert screen.step_pos == len(screen.steps) - 1


async def test_every_pane_of_the_transcript_takes_focus_and_scrolls() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        kinds = set()
        for _ in range(3):
            await pilot.press("tab")
            kinds.add(type(screen.focused).__name__)
        assert kinds == {"StepList", "EventList", "DetailLog"}
        while not isinstance(screen.focused, DetailLog):
            await pilot.press("tab")
        before = screen.step_pos
        await pilot.press("j", "k", "pagedown", "G", "g")  # scroll the detail; never steps turns
        assert screen.step_pos == before
        await pilot.press("z")
        assert isinstance(app.screen, TextViewScreen)


async def test_help_on_the_overview_explains_columns_marks_and_keys() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.query_one(DetailLog).text()
        for column in ("B full", "B top-k", "A %", "| C ", "| D ", "Items", "Chars", "†", "Status"):
            assert column in text, column
        assert "overview.grid" in text and "keymap.toml" in text  # live keys with their ids
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_the_first_screen_offers_no_back_key() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "escape" not in app.screen.active_bindings
        await pilot.press("enter")
        assert "escape" in app.screen.active_bindings


async def test_settings_panel_shows_models_per_role_and_run_settings() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("i")
        assert isinstance(app.screen, TextViewScreen)
        text = app.screen.query_one(DetailLog).text()
        assert "models per role" in text and "turn cap per task" in text and "recovery-synthetic-7" in text


def test_settings_of_the_shipped_sample_name_every_role_with_its_spec() -> None:
    header = read_header(REPO / "recordings" / "sample-quick-sim_01")
    text = plain_text(settings_lines(header))
    assert "attribution_judge  local:1.5b" in text and "recovery_judge" in text
    assert "k (retrieval top-k for slot-fill): 5" in text and "turn cap per task: 3" in text


async def test_export_a_transcript_as_markdown_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_EXPORT_DIR", str(tmp_path))
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "w", "W")
        md = next(tmp_path.glob("*transcript*.md")).read_text()
        data = json.loads(next(tmp_path.glob("*transcript*.json")).read_text())
        assert md.startswith("# Transcript sim_01 × amem") and "## T1 task · user" in md
        assert data["messages"] and {m["role"] for m in data["messages"]} >= {"user", "assistant"}
        await pilot.press("y")
        assert app.clipboard.startswith("# Transcript sim_01 × amem")  # what OSC 52 sent


async def test_export_the_overview_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_EXPORT_DIR", str(tmp_path))
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("W")
        data = json.loads(next(tmp_path.glob("*overview*.json")).read_text())
        assert data["columns"][:3] == ["System", "User", "Status"] and len(data["rows"]) == 4


async def test_an_update_shows_old_and_new_text_word_by_word() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("j", "j", "j", "m")  # mem0's store
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen) and screen.op_seqs
        while screen.view is not None and not any(r.mark == "~" for r in screen.view.rows):
            await pilot.press("left_square_bracket")
            await settle(pilot)
        assert screen.view is not None
        row = next(r for r in screen.view.rows if r.mark == "~")
        assert row.before is not None and row.before != row.item
        table = screen.query_one(StoreTable)
        table.move_cursor(row=[r.item_id for r in screen.view.rows].index(row.item_id))
        await settle(pilot)
        text = screen.query_one(DetailLog).text()
        assert "old → new" in text and "Updated:" in text
        styles = [span.style for line in screen.query_one(DetailLog).source if hasattr(line, "spans")
                  for span in line.spans]
        assert any("strike" in str(s) for s in styles) and any("underline" in str(s) for s in styles)


async def test_a_memory_search_with_no_match_clears_the_detail() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "n", "m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        await pilot.press("slash", *"zzz-no-such", "enter")
        await settle(pilot)
        assert "no item matches" in screen.query_one(DetailLog).text()


async def test_leaving_the_memory_screen_carries_its_turn_back_to_the_transcript() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "n", "m")
        await settle(pilot)
        await pilot.press("n")  # the memory screen moves on a turn
        await settle(pilot)
        await pilot.press("escape")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        assert screen.steps[screen.step_pos][1].turn == 2


async def test_overview_filter_sort_and_table_search() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(ScoreTable)
        await pilot.press("f", *"mem0", "enter")
        await settle(pilot)
        assert [r.value for r in table.rows] == ["mem0\t*", "mem0\tsim_01"]
        await pilot.press("f", "ctrl+u", "enter")  # an empty filter (prompt cleared) shows every row again
        await settle(pilot)
        assert table.row_count == 4
        await pilot.press("o")  # sort by B full, highest first
        await settle(pilot)
        means = [app.screen._data[0].system_means(s).b.get("dump_all") for s in ("amem", "mem0")]  # type: ignore[union-attr]
        best = "amem" if (means[0] or 0) >= (means[1] or 0) else "mem0"
        assert str(next(iter(table.rows)).value).startswith(best)
        await pilot.press("slash", *"mem0", "enter")
        assert str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value).startswith("mem0")


async def test_grid_and_plots_open_from_the_overview() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, GridScreen) and app.screen.grid is not None
        grid = app.screen.grid
        assert {d for _, d in grid.dimensions} == {"composure_under_strain", "schedule_juggling"}
        assert grid.systems == ["amem", "mem0"]
        await pilot.press("escape", "P")
        await settle(pilot)
        assert isinstance(app.screen, PlotsScreen) and app.screen.data is not None
        bars, _ = app.screen.data
        assert set(bars) == {"amem", "mem0"} and all(0 <= v <= 1 for per in bars.values() for v in per.values())
        await pilot.press("a")
        await settle(pilot)
        assert app.screen.mode == "retrieve"


async def test_browser_names_rows_by_folder_and_refreshes_itself_while_a_run_is_live(tmp_path: Path) -> None:
    import os
    import shutil

    from memprobe_tui.screens.browser import BrowserScreen

    from .conftest import TRUNCATED

    live = tmp_path / "live-run"
    shutil.copytree(TRUNCATED, live)  # no run_end: "running" while a writer holds the lock
    (live / "writer.lock").write_text(str(os.getpid()))
    app = MemProbeApp(folder=tmp_path, live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, BrowserScreen)
        assert [e.status for e in screen.entries] == ["running"]
        table = screen.query_one(SearchableTable)
        assert table.get_row_at(0)[0] == "live-run"  # the folder, not the run id
        (live / "writer.lock").unlink()  # the writer went away: no key pressed, the list follows
        await pilot.pause(2.5)
        await settle(pilot)
        assert [e.status for e in screen.entries] == ["incomplete"]
