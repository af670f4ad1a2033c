"""Issue 36, item 6's smaller items, each on the shipped recordings: one task numbering on screen
(store items said ``[Task 0]`` beside steps saying ``T1.1``), the browser's protocol-B headline per
memory system (``acc 0.667`` pooled amem with two baselines; amem alone is 0.625), the command palette
opening a recording from the browser, a table search that says it is active and how many rows it
found, an LLM call's title cut with ``…`` (it ended in a dangling ``·``), the browser naming its folder
without the server's absolute path, and named judgment layers selectable in the overview and the
dimension inspector (the run's own, ``main``, by default)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from textual.widgets import Static

from memprobe_engine.protocols import open_session
from memprobe_tui.app import MemProbeApp
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.recovery.overview import OverviewScreen
from memprobe_tui.screens.browser import BrowserScreen
from memprobe_tui.screens.llm_call import LLMCallScreen
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.widgets.detail_log import DetailLog
from memprobe_tui.widgets.store_table import StoreTable
from memprobe_tui.widgets.table_search import SearchableTable, table_cells

from .conftest import REPO
from .helpers import settle
from .screen_cuts import svg_rows

RECORDINGS = REPO / "recordings"
FIXED = RECORDINGS / "sample-quick-fixed-user_001"
AMEM = RECORDINGS / "release-a-user_001-amem"


def replay(path: Path) -> MemProbeApp:
    return MemProbeApp(session=open_session(path), live={"rescore": None}, keymap_path=None)


def browser(folder: Path) -> MemProbeApp:
    return MemProbeApp(folder=folder, live={"rescore": None}, keymap_path=None)


def detail_line(app: MemProbeApp) -> str:
    """What the line under the table says (empty while hidden)."""
    from memprobe_tui.widgets.row_detail import RowDetail  # new with the line: the other tests run without it

    found = app.screen.query_one(RowDetail)
    return str(found.render()) if found.display else ""


async def test_store_items_number_tasks_as_the_steps_do() -> None:
    app = replay(FIXED)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, MemoryScreen)
        _, rows = table_cells(app.screen.query_one(StoreTable))
        texts = [row[-1] for row in rows]
        assert not any("[Task " in t for t in texts), texts
        assert texts[0].startswith("[T1 task] I need to send my teacher") and rows[0][2] == "T1.1", rows[0]
        assert any(t.startswith("[T3 task] ") for t in texts)
        assert "task_index 0 is the store's own count from 0: task T1" in app.screen.query_one(DetailLog).text() \
            or "task T3 in the steps" in app.screen.query_one(DetailLog).text()


async def test_the_browser_headline_of_a_paradigm_run_is_per_memory_system(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    app = browser(Path("recordings"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=6)
        _, rows = table_cells(app.screen.query_one(SearchableTable))
        paradigms = next(r for r in rows if r[0] == "sample-paradigms-quick")
        assert paradigms[2] == "acc amem 0.625"  # full_context and naive_rag are baselines: not pooled in


async def test_the_command_palette_opens_a_recording_from_the_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    app = browser(Path("recordings"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        for key in "open recording fixed-user":
            await pilot.press("space" if key == " " else key)
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot, rounds=6)
        assert isinstance(app.screen, OverviewScreen)
        assert app.screen.session.directory.name == FIXED.name


async def test_a_table_search_says_it_is_active_and_how_many_rows_it_found() -> None:
    app = replay(FIXED)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert detail_line(app) == ""
        await pilot.press("slash", *"nomem", "enter")
        await settle(pilot)
        assert detail_line(app) == "/nomem 1/2 · n/N · Esc clears"
        await pilot.press("n")
        await settle(pilot)
        assert detail_line(app) == "/nomem 2/2 · n/N · Esc clears"
        await pilot.press("escape")
        await settle(pilot)
        assert detail_line(app) == ""


async def test_an_llm_call_title_too_long_for_80_columns_ends_in_an_ellipsis() -> None:
    app = replay(FIXED)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.session is not None
        call = LLMCallScreen(app.session, 167)  # its title is 80 characters
        app.push_screen(call)
        await settle(pilot)
        assert call.title_text == ("LLM call #167 · recovery_judge · user_001 × longctx_full · "
                                         "geographic_knowledge")
        top = svg_rows(app.export_screenshot(), 80)[0].rstrip()
        assert top.endswith("…") and not top.endswith("·"), top
        assert top == " LLM call #167 · recovery_judge · user_001 × longctx_full · geographic_knowled…"


@pytest.mark.parametrize("cwd", ["repo", "elsewhere"])
async def test_the_browser_names_its_folder_without_the_server_s_path(cwd: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO if cwd == "repo" else tmp_path)
    app = browser(RECORDINGS.resolve())  # as `memprobe tui serve` passes it
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        found = sum(1 for folder in RECORDINGS.iterdir() if (folder / "events.jsonl").is_file())
        assert app.screen.title_text == f"recordings in recordings · {found} found"


def layered_copy(tmp_path: Path) -> Path:
    """The shipped amem run with one case re-judged as the layer ``oracle-judge`` (a scripted oracle
    gives mathematics_skill's dump_all 1.0; the run's own judge gave it 0.5)."""
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.recovery.rescore import Case, rescore
    from tests.functional import recovery_oracle
    from tests.functional.recovery_oracle import RecoveryOracle

    record = tmp_path / "amem"
    shutil.copytree(AMEM, record, ignore=shutil.ignore_patterns("writer.lock"))
    plan = dict(recovery_oracle.PLAN)
    recovery_oracle.PLAN["mathematics_skill"] = (1.0, True, True, "agent_elicitation_failure")
    try:
        config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
        asyncio.run(rescore(record, [Case("user_001", "amem", "mathematics_skill", "dump_all")],
                            context_tokens=1_000_000, layer="oracle-judge",
                            chat_factory=lambda recorder: ChatClient(config, recorder,
                                                                     backend_factory=lambda spec: RecoveryOracle())))
    finally:
        recovery_oracle.PLAN.clear()
        recovery_oracle.PLAN.update(plan)
    return record


async def test_named_judgment_layers_are_selectable_in_the_overview_and_the_inspector(tmp_path: Path) -> None:
    record = await asyncio.to_thread(layered_copy, tmp_path)
    app = replay(record)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        assert screen.title_text.endswith("· judgments main (L: 2 layers)")  # the run's own by default
        _, rows = table_cells(screen.query_one(SearchableTable))
        assert rows[0][:5] == ["amem", "all", "1/1", "0.490", "0.516"]
        await pilot.press("L")
        await settle(pilot)
        assert screen.title_text.startswith("judgments oracle-judge · ")
        _, rows = table_cells(screen.query_one(SearchableTable))
        assert rows[0][:5] == ["amem", "all", "1/1", "1.000", "—"]  # the layer judged one dump_all case
        await pilot.press("L")
        await settle(pilot)
        assert table_cells(screen.query_one(SearchableTable))[1][0][3] == "0.490"
        app.push_screen(DimensionScreen(screen.session, "user_001", "amem", "mathematics_skill"))
        await settle(pilot)
        inspector = app.screen
        assert isinstance(inspector, DimensionScreen)
        text = inspector.query_one(DetailLog).text()
        assert "judge: 0.5" in text and "attribution: memory_failure" in text
        await pilot.press("L")
        await settle(pilot)
        assert inspector.title_text.startswith("judgments oracle-judge · user_001 × amem · mathematics_skill")
        text = inspector.query_one(DetailLog).text()
        assert "judge: 1" in text and "attribution: ok" in text and "judge: 0.5" not in text


async def test_the_release_notice_is_cut_with_an_ellipsis_and_whole_in_the_help() -> None:
    """The memory view opened from the inspector on an imported release run: context, step and the
    release notice are more than the info lines' 4 rows at 80 columns (the notice's end was hidden)."""
    app = replay(AMEM)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d", "m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        shown = str(screen.query_one("#info", Static).render()).splitlines()
        assert len(shown) == 4 and shown[-1].endswith("…"), shown
        assert "there are no per-turn writes" in screen.info_text
        await pilot.press("question_mark")
        await settle(pilot)
        assert "after the last episode; there are no per-turn writes" in " ".join(
            app.screen.query_one(DetailLog).text().split())
