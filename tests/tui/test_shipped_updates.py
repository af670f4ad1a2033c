"""A shipped store that changes and removes items (issue 36, item 6): ``recordings/sample-paradigms-mem0``
is a real protocol-B run of the Mem0 built-in on the embedded 1.5B model (PILOT-12A and PILOT-10A),
whose consolidation rewrote facts and, when the user said their membership was "no longer YMCA
Downtown", deleted one. A new user replaying it sees an update as old → new, word by word, and the
delete struck out, at 80×24."""

from __future__ import annotations

from collections.abc import Callable

import orjson
from textual.pilot import Pilot

from memprobe_engine.protocols import open_session
from memprobe_tui.app import MemProbeApp
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.screens.memory import MemoryScreen, StoreTable
from memprobe_tui.widgets.detail_log import DetailLog
from tests.tui.conftest import REPO
from tests.tui.helpers import settle, text_of

MEM0 = REPO / "recordings" / "sample-paradigms-mem0"


def memory_ops() -> list[dict[str, object]]:
    return [event for event in map(orjson.loads, (MEM0 / "events.jsonl").read_bytes().splitlines())
            if event["kind"] == "memory_op"]


def test_the_shipped_mem0_run_holds_updates_and_a_delete() -> None:
    ops = [str(event["op"]) for event in memory_ops()]
    assert ops.count("update") >= 2 and ops.count("delete") >= 1 and ops.count("add") >= 2


def _content_changed(text: str) -> bool:
    return any(line.startswith("content: ") and ("[-" in line or "{+" in line) for line in text.splitlines())


async def _memory_at_first(pilot: Pilot[None], mark: str, episodes: int = 2,
                           wanted: Callable[[str], bool] = lambda detail: True) -> MemoryScreen:
    """The memory view stepped op by op to the first op that marks an item ``mark`` whose detail is
    ``wanted``, trying each episode of the stepper in turn; the detail pane shows that item."""
    app = pilot.app
    await pilot.press("enter")  # the first episode's sessions
    await settle(pilot)
    for _ in range(episodes):
        assert isinstance(app.screen, EpisodeScreen)
        await pilot.press("m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        for _ in range(80):
            if screen.view is not None and any(row.mark == mark for row in screen.view.rows):
                rows = [row.item_id for row in screen.view.rows]
                marked = next(row for row in screen.view.rows if row.mark == mark)
                screen.query_one(StoreTable).move_cursor(row=rows.index(marked.item_id))
                await settle(pilot)
                if wanted(screen.query_one(DetailLog).text()):
                    return screen
            await pilot.press("right_square_bracket")
            await settle(pilot)
        await pilot.press("escape", "right_square_bracket")  # back to the stepper, next episode
        await settle(pilot)
    raise AssertionError(f"no op marks an item {mark!r}")


async def test_replaying_it_shows_an_update_as_old_and_new() -> None:
    app = MemProbeApp(session=open_session(MEM0), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await _memory_at_first(pilot, "~", wanted=_content_changed)
        text = screen.query_one(DetailLog).text()
    assert "updated at this step" in text and "old → new" in text


async def test_replaying_it_shows_the_delete_struck_out() -> None:
    deleted = next(event for event in memory_ops() if event["op"] == "delete")
    app = MemProbeApp(session=open_session(MEM0), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await _memory_at_first(pilot, "-")
        info, text = text_of(pilot, "#info"), screen.query_one(DetailLog).text()
    assert f"(delete, seq {deleted['seq']})" in info and "-1" in info
    assert text.startswith(f"{deleted['item_ids'][0]} — deleted at this step")  # type: ignore[index]
