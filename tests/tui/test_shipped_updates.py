"""A shipped store that changes items (issue 36, item 6): ``recordings/sample-paradigms-mem0`` is a real
protocol-B run of the Mem0 built-in on the embedded 1.5B model (2 episodes), whose consolidation
rewrote facts. A new user replaying it sees an update as old → new, word by word, at 80×24."""

from __future__ import annotations

from pathlib import Path

import orjson

from memprobe_engine.protocols import open_session
from memprobe_tui.app import MemProbeApp
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.screens.memory import MemoryScreen, StoreTable
from memprobe_tui.widgets.detail_log import DetailLog
from tests.tui.conftest import REPO
from tests.tui.helpers import settle

MEM0 = REPO / "recordings" / "sample-paradigms-mem0"


def first_content_update(path: Path) -> tuple[str, str]:
    """(old content, new content) of the recording's first update that rewrote an item's text."""
    contents: dict[str, str] = {}
    for line in (path / "events.jsonl").read_bytes().splitlines():
        event = orjson.loads(line)
        if event["kind"] != "memory_op":
            continue
        for patch in event["patch"]:
            if patch["op"] == "add" and patch["path"].count("/") == 2:
                contents[patch["path"]] = patch["value"]["content"]
            elif patch["path"].endswith("/content") and event["op"] == "update":
                item = patch["path"].removesuffix("/content")
                return contents[item], patch["value"]
    raise AssertionError("the recording holds no update of an item's text")


def test_the_shipped_mem0_run_holds_updates_of_item_text() -> None:
    ops = [orjson.loads(line)["op"] for line in (MEM0 / "events.jsonl").read_bytes().splitlines()
           if b'"kind":"memory_op"' in line]
    assert ops.count("update") >= 2 and ops.count("add") >= 2


async def test_replaying_it_shows_an_update_as_old_and_new() -> None:
    old, new = first_content_update(MEM0)
    app = MemProbeApp(session=open_session(MEM0), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")  # the first episode's sessions
        await settle(pilot)
        assert isinstance(app.screen, EpisodeScreen)
        await pilot.press("m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        for _ in range(40):  # op by op until a row is marked updated
            if screen.view is not None and any(row.mark == "~" for row in screen.view.rows):
                break
            await pilot.press("right_square_bracket")
            await settle(pilot)
        assert screen.view is not None
        row = next(row for row in screen.view.rows if row.mark == "~")
        screen.query_one(StoreTable).move_cursor(row=[r.item_id for r in screen.view.rows].index(row.item_id))
        await settle(pilot)
        text = screen.query_one(DetailLog).text()
    assert "updated at this step" in text and "old → new" in text
    assert f"content: [-{old}-]{{+{new}+}}" in text, text
