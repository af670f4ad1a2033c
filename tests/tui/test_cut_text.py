"""Text cut at 80 columns ends in "…" (issue 36, item 4): the memory table shows an item id's first
8 characters (the detail pane names it in full) and gives the text column the rest of the width,
each cut ending in "…" rather than at the screen's edge."""

from __future__ import annotations

import pytest
from rich.text import Text

from memprobe_engine.protocols import open_session
from memprobe_engine.replay.memory_view import item_text
from memprobe_tui.app import MemProbeApp
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.store_table import StoreTable
from tests.tui.conftest import REPO
from tests.tui.helpers import settle


@pytest.mark.parametrize("name", ["release-a-user_001-mem0", "release-a-user_001-amem", "sample-quick-fixed-user_001"])
async def test_memory_table_fits_80_columns_with_short_ids_and_marked_cuts(name: str) -> None:
    app = MemProbeApp(session=open_session(REPO / "recordings" / name), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen) and screen.view is not None
        table = screen.query_one(StoreTable)
        used = sum(column.get_render_width(table) for column in table.columns.values())
        assert used <= table.size.width - 2, "the columns overrun the table: the edge would cut them"
        keys = [str(key.value) for key in table.rows]
        items = {r.item_id: r.item for r in screen.view.rows}
        for key in keys:
            item_id = key.lstrip("-")
            cells = [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(key)]
            shown_id = next(c for c in cells if c.rstrip("…") and item_id.startswith(c.rstrip("…")))
            assert shown_id == item_id or (len(item_id) > 9 and shown_id == item_id[:8] + "…")
            text, full = cells[-1], " ".join(item_text(items[item_id]).split())
            assert text == full or (text.endswith("…") and full.startswith(text[:-1])), (text, full)
        detail = screen.query_one(DetailLog).text()
        first = keys[table.cursor_row].lstrip("-")
        assert first in detail  # the full id, one key away: it is the detail pane's first line
