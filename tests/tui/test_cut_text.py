"""Text cut at 80 columns ends in "…" (issue 36, item 4): the memory table shows an item id's first
8 characters (the detail pane names it in full) and gives the text column the rest of the width,
each cut ending in "…" rather than at the screen's edge; and no screen of the snapshot suite at
80×24 shows text cut without "…" (its SVGs' text read by tests/tui/screen_cuts.py)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
from rich.text import Text

from memprobe_engine.protocols import open_session
from memprobe_engine.replay.memory_view import item_text, step_numbered
from memprobe_tui.app import MemProbeApp
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.store_table import StoreTable
from memprobe_tui.widgets.table_fill import fill_table
from memprobe_tui.widgets.table_search import SearchableTable
from tests.tui.conftest import REPO
from tests.tui.helpers import settle
from tests.tui.screen_cuts import find_cuts, svg_rows, vocabulary
from tests.tui.test_compare_screens import compare_app


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
            text, full = cells[-1], step_numbered(" ".join(item_text(items[item_id]).split()))
            assert text == full or (text.endswith("…") and full.startswith(text[:-1])), (text, full)
        detail = screen.query_one(DetailLog).text()
        first = keys[table.cursor_row].lstrip("-")
        assert first in detail  # the full id, one key away: it is the detail pane's first line


# -- every screen of the snapshot suite at 80×24 (issue 36, item 4) ----------------------------------
SNAPSHOTS = REPO / "tests" / "tui" / "__snapshots__"
#: The recordings the snapshot suite shows: their words are the words a screen may end a cell with.
SHOWN = [REPO / "tests" / "fixtures" / "tui" / "run", REPO / "tests" / "fixtures" / "tui" / "truncated",
         REPO / "tests" / "fixtures" / "paradigm" / "run", REPO / "recordings" / "release-a-user_001-amem",
         REPO / "recordings" / "release-a-user_001-mem0"]
#: What the suite types into a prompt (test_snapshots.py: ``/memo``), a word of no recording.
TYPED = {"memo"}


@lru_cache(maxsize=1)
def suite_vocabulary() -> frozenset[str]:
    return frozenset(vocabulary(REPO, SHOWN) | TYPED)


@pytest.mark.parametrize("svg", sorted(SNAPSHOTS.glob("*/*80x24*.svg")), ids=lambda p: p.stem)
def test_no_screen_of_the_snapshot_suite_cuts_text_without_an_ellipsis_at_80x24(svg: Path) -> None:
    rows = svg_rows(svg.read_text(encoding="utf-8"), 80)
    assert len(rows) == 24
    cuts = find_cuts(rows, set(suite_vocabulary()))
    assert not cuts, "text cut without …:\n" + "\n".join(map(str, cuts))


def test_the_detector_finds_each_kind_of_cut() -> None:
    vocab = {"attribution", "authoritative_update", "nomem", "longctx_full", "completed", "episodes", "memory",
             "ok", "agent", "back", "full", "the", "run"}
    rows = ["compare · 2 episodes ·".ljust(80),                                 # a title cut after a separator
            " change  attribu".ljust(80),                                         # a word cut short in a cell
            (" " * 73 + "nomem,l"),                                               # a word run into the edge
            " ok→memo  │ agent→ok".ljust(80),                                     # cut short before a border
            " whole words end well: memory, back, ok→agent, authoritative_upd…".ljust(80),  # a marked cut
            "reader local:fast on probe 2 (previous_value) of PILOT-".ljust(78) + "  ",  # cut after a hyphen
            " a-b - -- [-old-]{+new+} x-y │ run".ljust(80)]                           # hyphens that end no cut
    found = find_cuts(rows, vocab)
    assert [(c.row, c.why) for c in found] == [
        (0, "ends in a dangling “·”"), (1, "“attribu” is the start of a longer word"),
        (2, "“nomem,l” runs into the screen's edge"), (3, "“ok→memo” is the start of a longer word"),
        (5, "“PILOT-” ends in a hyphen: the rest was cut")]


async def test_the_detector_fails_a_table_left_wider_than_the_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compare screen as it was before its columns were fitted: the attribution column ran past
    the screen's edge (``attribu``, ``ok→memo``). Filled again at its content's width, the detector
    must fail it; fitted, it passes."""
    monkeypatch.chdir(REPO)
    app = compare_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SearchableTable)
        assert table.filled is not None
        fitted = svg_rows(app.export_screenshot(), 80)
        columns, rows, _ = table.filled
        fill_table(table, columns, rows)  # no room given: every column as wide as its content
        await settle(pilot)
        cut = svg_rows(app.export_screenshot(), 80)
    vocab = set(suite_vocabulary())
    assert find_cuts(fitted, vocab) == []
    assert any("attribu" in c.why for c in find_cuts(cut, vocab)), "\n".join(cut)
