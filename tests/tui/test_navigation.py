"""Pilot tests: moving between screens, stepping turns, time travel in the memory store."""

from __future__ import annotations

from pathlib import Path

from memprobe_tui.app import MemProbeApp
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.recovery.overview import OverviewScreen
from memprobe_tui.recovery.score_table import ScoreTable
from memprobe_tui.recovery.transcript import TranscriptScreen
from memprobe_tui.screens.browser import BrowserScreen
from memprobe_tui.screens.llm_call import LLMCallScreen
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.store_table import StoreTable

from .conftest import FIXTURES, make_app
from .helpers import settle, text_of

SHIPPED = Path(__file__).resolve().parents[2] / "recordings"


async def test_overview_lists_every_unit_with_scores() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        table = app.screen.query_one(ScoreTable)
        keys = [row.value for row in table.rows]
        assert keys == ["amem\t*", "amem\tsim_01", "mem0\t*", "mem0\tsim_01"]
        assert "completed: 2/2 units" in text_of(pilot, "#title")


async def test_overview_title_says_a_shipped_fixed_dialogue_run_had_no_live_rollout() -> None:
    """make demo's shipped run: the title names the fixed dialogues within 80 columns."""
    app = make_app(SHIPPED / "sample-quick-fixed-user_001")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        title = text_of(pilot, "#title")
        assert title.startswith("completed: 2/2 units · fixed dialogues (nomem) ·"), title
    live = make_app(SHIPPED / "sample-quick-sim_01")
    async with live.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "fixed dialogues" not in text_of(pilot, "#title")


async def test_navigation_between_all_screens_and_back() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")
        assert isinstance(app.screen, TranscriptScreen)
        assert (app.screen.user_id, app.screen.system) == ("sim_01", "amem")
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, MemoryScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, TranscriptScreen)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DimensionScreen)
        assert "composure_under_strain" in text_of(pilot, "#title")
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, LLMCallScreen)
        assert "recovery_judge" in text_of(pilot, "#title")
        for expected in (DimensionScreen, TranscriptScreen, OverviewScreen, OverviewScreen):
            await pilot.press("escape")
            assert isinstance(app.screen, expected)  # Esc never leaves the first screen


async def test_stepping_event_by_event_crosses_into_the_next_turn() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        assert "· task ·" in text_of(pilot, "#title")  # starts at task 1's opening request
        opening = len(screen.events)
        for _ in range(opening):
            await pilot.press("j")
        assert screen.steps[screen.step_pos][1].turn == 1 and screen.event_pos == 0
        assert "turn 1/3" in text_of(pilot, "#title")
        await pilot.press("k")
        assert screen.steps[screen.step_pos][1].kind == "opening"
        assert screen.event_pos == opening - 1  # stepping back lands on the previous turn's last event


async def test_turn_by_turn_and_each_turn_lists_its_memory_ops_and_retrievals() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "n")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        kinds = [e.kind for e in screen.events]
        assert kinds.count("retrieval") == 1 and kinds.count("memory_op") >= 2
        assert "message" in kinds and "llm_call" in kinds
        assert "mem " in text_of(pilot, "#title") and "ret " in text_of(pilot, "#title")
        await pilot.press("n", "n", "n")
        assert screen.steps[screen.step_pos][1].kind == "closing"
        await pilot.press("right_square_bracket")
        assert screen.episodes[screen.steps[screen.step_pos][0]].dimension == "schedule_juggling"


async def test_enter_on_an_llm_call_opens_the_inspector_with_resolved_payloads() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "n")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        agent = next(i for i, e in enumerate(screen.events) if e.kind == "llm_call" and e.role == "agent")
        for _ in range(agent):
            await pilot.press("j")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, LLMCallScreen)
        lines = [str(line.text) for line in app.screen.query_one("#call", DetailLog).lines]
        text = "\n".join(lines)
        assert "You are a helpful assistant with a long-term memory" in text  # from payloads.jsonl
        assert "payload sha256:" in text and "cache hit" in text and "latency" in text


async def test_time_travel_diffs_the_store_between_two_turns() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "n", "m")  # task 1, turn 1 of amem
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen) and screen.view is not None
        first = screen.view
        assert first.added == 2 and first.size == 3
        marks = {r.item_id: r.mark for r in first.rows}
        assert list(marks.values()).count("+") == 2
        await pilot.press("n")  # turn 2: its own diff against the end of turn 1
        await settle(pilot)
        second = screen.view
        assert second is not None and second.after_seq > first.after_seq
        assert second.before_seq >= first.after_seq
        assert second.size == first.size + second.added - second.deleted
        assert "· T1 turn 2 ·" in text_of(pilot, "#title")
        assert f"+{second.added} ~{second.updated} -{second.deleted}" in text_of(pilot, "#info")
        table = screen.query_one(StoreTable)
        assert table.row_count == len(second.rows)


async def test_memory_store_shows_deleted_items_filters_and_searches() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("j", "j", "j", "m")  # mem0's final store vs before its last op
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen) and screen.op_seqs and screen.view is not None
        total = screen.query_one(StoreTable).row_count
        await pilot.press("F")
        assert "category=" in text_of(pilot, "#info")
        assert 0 < screen.query_one(StoreTable).row_count < total
        await pilot.press("slash", *"zzz-no-such", "enter")
        assert screen.query_one(StoreTable).row_count == 0
        await pilot.press("escape")  # first Esc clears the search, the second leaves
        assert isinstance(app.screen, MemoryScreen) and screen.search == ""
        deleted_seen = False
        for _ in range(len(screen.op_seqs)):  # walk back through every op of the store
            await pilot.press("left_square_bracket")
            await settle(pilot)
            assert screen.view is not None
            deleted_seen |= any(r.mark == "-" for r in screen.view.rows)
        assert deleted_seen, "the mem0 fixture deletes an item somewhere"
        assert screen.view.size <= 1  # back at the start: the reset, then the first add


async def test_browser_opens_a_recording_and_returns_to_the_list() -> None:
    app = MemProbeApp(folder=FIXTURES, live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        assert [e.path.name for e in app.screen.entries] == ["run", "truncated"]  # same created: name order
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        session = app.screen.session
        assert session.directory == FIXTURES / "run"
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        await pilot.pause(0.2)
        assert session.closed  # a recording opened from the browser is closed when left
