"""Plain over SSH, on the shipped recordings at 80×24: no scroll animation, every colour-coded
distinction also in text (the ▶ cursor, ▲/▼ best and worst, ``[-old-]{+new+}`` diffs), footers that
fit 80 columns, text re-wrapped after a resize, one meaning per key and each key once in help."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widgets import DataTable, Footer, OptionList

from memprobe_tui.app import BINDING_WIDGETS, SCREENS, MemProbeApp
from memprobe_tui.palette_match import match_words
from memprobe_tui.recovery.compare import CaseCompareScreen, CompareScreen
from memprobe_tui.recovery.grid import GridScreen
from memprobe_tui.render import diff_lines
from memprobe_tui.screens.help import key_lines
from memprobe_tui.screens.text_view import TextViewScreen
from memprobe_tui.widgets.detail_log import DetailLog, plain_text
from memprobe_tui.widgets.table_search import SearchableTable
from memprobe_engine.protocols import open_session

from .conftest import REPO
from .helpers import settle

LIVE = REPO / "recordings" / "sample-quick-sim_01"  # live rollout; every grid cell 0.00 (a full tie)
FIXED = REPO / "recordings" / "sample-quick-fixed-user_001"  # make demo: longctx_full beats nomem
PARADIGMS = REPO / "recordings" / "sample-paradigms-quick"


def app_on(path: Path) -> MemProbeApp:
    return MemProbeApp(session=open_session(path), live={"rescore": None}, keymap_path=None)


def rows_of(widget: DataTable[object] | OptionList) -> list[str]:
    """The lines a table or list draws now (what a monochrome terminal shows)."""
    return [widget.render_line(y).text for y in range(widget.size.height)]


async def keys(pilot: Pilot[None], *pressed: str) -> None:
    for key in pressed:
        await pilot.press(key)
        await settle(pilot)


async def test_scrolling_jumps_without_animation_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEXTUAL_ANIMATIONS", raising=False)
    app = app_on(LIVE)
    async with app.run_test(size=(80, 24)) as pilot:
        await keys(pilot, "i")  # the run's settings, full screen: longer than 24 lines
        assert isinstance(app.screen, TextViewScreen)
        log = app.screen.query_one(DetailLog)
        assert log.max_scroll_y > 0
        log.action_scroll_end()
        await pilot.pause()  # one frame: an animated scroll (Textual's default) would still be on its way
        assert log.scroll_y == log.max_scroll_y


async def test_the_cursor_is_a_character_in_tables_and_lists() -> None:
    app = app_on(LIVE)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SearchableTable)
        marked = [line for line in rows_of(table) if line.startswith("▶")]
        assert len(marked) == 1 and "longctx_full" in marked[0] and " all " in marked[0]
        await keys(pilot, "j")
        marked = [line for line in rows_of(table) if line.startswith("▶")]
        assert len(marked) == 1 and "sim_01" in marked[0]
        await keys(pilot, "enter")  # the transcript: step list and event list mark their cursor too
        lists = list(app.screen.query(OptionList))
        assert len(lists) == 2
        for widget in lists:
            assert sum(line.startswith("▶") for line in rows_of(widget)) == 1, type(widget).__name__


async def test_the_grid_marks_best_and_worst_in_text_and_nothing_on_a_full_tie() -> None:
    for path, expect_marks in ((LIVE, False), (FIXED, True)):
        app = app_on(path)
        async with app.run_test(size=(80, 24)) as pilot:
            await keys(pilot, "x")
            assert isinstance(app.screen, GridScreen)
            table = app.screen.query_one(SearchableTable)
            cells = [" ".join(c.plain if hasattr(c, "plain") else str(c) for c in table.get_row_at(i))
                     for i in range(table.row_count)]
            if expect_marks:  # longctx_full 0.75/0.25 beats nomem 0.00 on every dimension
                assert all("▲" in row and "▼" in row for row in cells), cells
            else:  # both systems 0.00 everywhere: nobody is best
                assert not any("▲" in row or "▼" in row for row in cells), cells
            assert table.cursor_column == 2  # starts on the first system, not the category
            await keys(pilot, "l")
            assert table.cursor_column == 3
            await keys(pilot, "h", "h")
            assert table.cursor_column == 1
            assert any("▶" in line for line in rows_of(table))


def test_an_update_keeps_old_and_new_apart_in_plain_text() -> None:
    lines = diff_lines({"id": "m1", "text": "Lives in Berlin now"}, {"id": "m1", "text": "Lives in Paris now"})
    assert plain_text(lines).splitlines()[1] == "text: Lives in [-Berlin-] {+Paris+} now"


async def test_every_footer_fits_80_columns() -> None:
    walks = {LIVE: [[], ["enter"], ["m"], ["d"], ["x"], ["P"], ["d", "c"], ["i"], ["enter", "tab"]],
             PARADIGMS: [[], ["enter"], ["d"], ["enter", "m"], ["enter", "c"], ["P"]]}
    for path, key_lists in walks.items():
        for pressed in key_lists:
            app = app_on(path)
            async with app.run_test(size=(80, 24)) as pilot:
                await settle(pilot)
                await keys(pilot, *pressed)
                footer = app.screen.query_one(Footer)
                used = sum(item.outer_size.width for item in footer.children if item.display)
                assert used <= 80, f"{path.name} {pressed}: {type(app.screen).__name__}'s footer needs {used} columns"


async def test_text_is_wrapped_again_after_a_resize() -> None:
    app = app_on(LIVE)
    async with app.run_test(size=(80, 24)) as pilot:
        await keys(pilot, "i")
        log = app.screen.query_one(DetailLog)
        at_80 = len(log.lines)
        assert max(strip.cell_length for strip in log.lines) <= 76
        await pilot.resize_terminal(140, 40)
        await settle(pilot)
        assert len(log.lines) < at_80  # wrapped lines joined again at the new width
        await pilot.resize_terminal(60, 24)
        await settle(pilot)
        assert max(strip.cell_length for strip in log.lines) <= 56 and len(log.lines) > at_80


#: The one meaning of each letter key on every screen (docs/tui.md, "Keys": the same table in words).
ONE_MEANING = {
    "c": {"call", "judge_call"}, "r": {"rerun"}, "p": {"step(-1)", "step_turn(-1)"}, "f": {"filter"},
    "t": {"task"}, "d": {"dimension", "probe"}, "s": {"switch_system"}, "m": {"memory"}, "e": {"evidence"},
    "a": {"toggle_mode"}, "v": {"changes_only", "toggle_regressed"}, "x": {"grid"}, "o": {"sort"}, "i": {"settings"}, "y": {"copy"},
    "h": {"column(-1)"}, "l": {"column(1)"}, "L": {"layer"},
}


def test_each_letter_key_means_one_thing_on_every_screen() -> None:
    meanings: dict[str, set[str]] = {}
    for owner in (*SCREENS, *BINDING_WIDGETS, MemProbeApp, CompareScreen, CaseCompareScreen):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding)
            for key in binding.key.split(","):
                meanings.setdefault(key.strip(), set()).add(binding.action.removeprefix("screen."))
    for key, allowed in ONE_MEANING.items():
        assert meanings.get(key, set()) <= allowed, f"{key!r} means {sorted(meanings[key])} across screens"


async def test_help_names_each_key_once() -> None:
    for path, pressed in ((LIVE, ["enter"]), (LIVE, ["d"]), (PARADIGMS, ["enter"])):
        app = app_on(path)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await keys(pilot, *pressed)
            listed = [str(line) for line in key_lines(app.screen)]
            shown = [k.strip() for line in listed if line.startswith("  ")
                     for k in re.split(r",\s*", line[2:20])]
            twice = {k for k in shown if k and shown.count(k) > 1}
            assert not twice, f"{pressed}: listed twice: {twice}\n" + "\n".join(listed)



async def test_plots_name_categories_and_print_every_bar_even_a_zero_one() -> None:
    app = app_on(FIXED)
    async with app.run_test(size=(80, 24)) as pilot:
        await keys(pilot, "P")
        values = str(app.screen.query_one("#values").render())
        # nomem's bars are all 0 (drawn as nothing); their numbers still show, under readable names
        assert "nomem: assistance 0.00  knowledge 0.00  skill 0.00" in values, values
        assert "longctx_full: assistance 0.75" in values


async def test_settings_export_is_named_so_and_its_json_is_the_header(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_EXPORT_DIR", str(tmp_path))
    app = app_on(LIVE)
    async with app.run_test(size=(80, 24)) as pilot:
        await keys(pilot, "i", "W", "w")
        run_id = open_session(LIVE).header.run_id
        exported = sorted(p.name for p in tmp_path.iterdir())
        assert all(name.startswith(f"{run_id}-settings-") for name in exported), exported
        data = json.loads(next(tmp_path.glob("*.json")).read_text())
        assert data["run_id"] == run_id and "config" in data  # the header itself, not a text blob


async def test_a_notification_does_not_cover_the_search_prompt() -> None:
    app = app_on(LIVE)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        await keys(pilot, "f")
        app.notify("a long notification " * 6, timeout=30)
        await settle(pilot)
        prompt = app.screen.query_one("#search-box").region
        toasts = [t.region for t in app.screen.query("Toast")]
        assert toasts and not any(t.overlaps(prompt) for t in toasts)


def test_the_palette_matches_words_in_any_order() -> None:
    name = "dimension user_001 × mem0 · directness_preference"
    assert match_words("mem0 user_001", name) is not None and match_words("directness mem0", name) is not None
    assert match_words("graphiti user_001", "transcript user_001 × mem0") is None
