"""The audit question — why was (user, dimension, system) not recovered? — answered from opening a
shipped recording in at most six keys: `d` the inspector (the fill, the judge's reason, every
attribution stage, what the slot-filler read with the step that wrote each item), `m` the store at
fill time with the items retrieve's slot-filler read marked."""

from __future__ import annotations

import pytest

from memprobe_tui.app import MemProbeApp
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.screens.llm_call import LLMCallScreen
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.store_table import StoreTable, short_id
from tests.tui.conftest import REPO
from tests.tui.helpers import settle, text_of
from memprobe_engine.protocols import open_session

# recording -> (a memory item the inspector lists with the step that wrote it, that step)
WALKS = {
    "sample-quick-sim_01": ("t0001", "T1.1"),
    "sample-quick-fixed-user_001": ("t0001", "T1.1"),
    "release-a-user_001-mem0": ("00bf9380-607c-4513-8b63-ff638b1cdac3", "after rollout"),
}


def _app(name: str) -> MemProbeApp:
    return MemProbeApp(session=open_session(REPO / "recordings" / name), live={"rescore": None}, keymap_path=None)


@pytest.mark.parametrize("name", sorted(WALKS))
async def test_why_not_recovered_in_two_keys(name: str) -> None:
    item_id, step = WALKS[name]
    app = _app(name)
    keys = 0
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        keys += 1
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen) and screen.detail is not None
        detail = screen.detail
        text = screen.query_one(DetailLog).text()
        assert text.index("why") < text.index("target")  # the answer comes first
        for mode in detail.modes.values():
            assert mode.slot_fill is not None and mode.judge is not None
            assert f"slot-fill: {mode.slot_fill.label}" in text
            assert mode.judge.reason and mode.judge.reason[:60] in text  # the judge's reason
            for stage in mode.stages:  # every attribution stage, with its reason
                assert f"stage {stage.stage}: {stage.verdict}" in text
                assert not stage.reason or stage.reason[:40] in text
            if mode.label is not None:
                assert f"attribution: {mode.label.label}" in text
        assert "read: the whole store" in text  # what dump_all's slot-filler read, as items
        assert f"{item_id} [{step}]" in text  # … each with the step that wrote it
        top_k = detail.modes["retrieve"].retrieved
        assert top_k
        first_id, first_score, _ = top_k[0]
        # retrieve's top-k with the scores the recording holds (the paper's release keeps none)
        assert f"{first_id} {'' if first_score is None else f'{first_score:.3f} '}[" in text
        assert name.startswith("release") or all(score is not None for _, score, _ in top_k)

        await pilot.press("m")
        keys += 1
        await settle(pilot)
        store = app.screen
        assert isinstance(store, MemoryScreen)
        assert store.seqs == (detail.fill_seq, detail.fill_seq)  # the store at fill time
        assert "at the slot-fill of" in text_of(pilot, "#info")
        table = store.query_one(StoreTable)
        assert [str(c.label) for c in table.columns.values()][:4] == ["±", "read", "id", "written"]
        marked = {str(table.get_row(first_id)[2]): str(table.get_row(first_id)[1])}
        assert marked == {short_id(first_id): "k1"}  # the top-k item the slot-filler read first (id cut at 80 columns)
        assert table.cursor_row == table.get_row_index(first_id)  # … and the cursor is on it
        assert str(table.get_row(item_id)[3]) == step[:14]
        history = store.query_one(DetailLog).text()
        assert "history (" in history and "seq " in history
        assert keys <= 6


async def test_c_opens_the_judge_call_or_says_whose_call_it_opens() -> None:
    app = _app("sample-quick-fixed-user_001")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DimensionScreen) and app.screen.detail is not None
        judge = app.screen.detail.modes["dump_all"].judge
        assert judge is not None and judge.call_seq is not None
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, LLMCallScreen) and app.screen.seq == judge.call_seq
    app = _app("sample-quick-sim_01")  # a rubric scored "unknown": no judge call, so c opens the slot-filler's
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        text = app.screen.query_one(DetailLog).text()
        assert "c slot-filler call #" in text


async def test_e_without_an_evidence_turn_says_so_and_next_dimension_starts_at_the_top() -> None:
    app = _app("sample-quick-sim_01")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen)
        await pilot.press("G")
        await settle(pilot)
        assert screen.query_one(DetailLog).scroll_y > 0
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.query_one(DetailLog).scroll_y == 0
        assert screen.detail is not None
        screen.detail.evidence_turns.clear()  # as for a dimension no turn carried
        await pilot.press("e")
        await settle(pilot)
        assert app.screen is screen
        assert any("No turn of this task's dialogue carries" in str(n.message) for n in app._notifications)


async def test_any_cell_is_five_keys_away() -> None:
    """sim_01 × nomem × low_point_episode (not the first row, not the first dimension): j j d ] m."""
    app = _app("sample-quick-sim_01")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key in ("j", "j", "d", "right_square_bracket"):
            await pilot.press(key)
            await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DimensionScreen) and screen.detail is not None
        assert (screen.system, screen.dimension) == ("nomem", "low_point_episode")
        text = screen.query_one(DetailLog).text()
        assert "dump_all" in text and "filled “" in text and "judged" in text and "read: the whole store: 0 items" in text
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, MemoryScreen)
        assert "recorded no memory operation for sim_01" in text_of(pilot, "#info")  # nomem keeps none
