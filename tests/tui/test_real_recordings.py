"""The replay on what the product really writes: the shipped recordings and a recording the real
protocol-A runner makes in the test (scripted model), not only on the hand-built fixture. A shape the
engine writes that the replay does not expect fails here."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable

from memprobe_engine.errors import MemProbeError
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.paradigms.read.queries import episode_rows
from memprobe_engine.recovery.inputs import load_user
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
from memprobe_engine.protocols import headline
from memprobe_engine.replay.memory_view import item_history, item_writes
from memprobe_engine.replay.queries import episodes, step_events, units
from memprobe_engine.replay.run_history import run_history
from memprobe_engine.replay.search import count_in_steps
from memprobe_tui.app import MemProbeApp
from memprobe_tui.paradigms.commands import sessions_phrase
from memprobe_tui.paradigms.episode_table import EpisodeTable
from memprobe_tui.recovery.step_list import StepList
from memprobe_tui.render import event_detail
from memprobe_tui.render_settings import history_lines
from memprobe_tui.screens.memory import MemoryScreen
from memprobe_tui.widgets.detail_log import DetailLog, plain_text
from memprobe_tui.widgets.store_table import StoreTable
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.tui.conftest import REPO, RUN
from tests.tui.helpers import settle, text_of
from memprobe_engine.protocols import open_session

SHIPPED_A = ["sample-quick-sim_01", "sample-quick-live-sim_01", "sample-quick-fixed-user_001",
             "release-a-user_001-mem0", "release-a-user_001-amem"]


@pytest.fixture(scope="module")
def runner_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording the real runner writes: sim_01, two dimensions, nomem and longctx_full."""
    sessions = REPO / "sessions"
    chosen = [e.dimension for e in load_user(sessions / "users" / "sim_01").bank.entries][:2]
    plan_for(chosen)
    plan = RecoveryPlan(sessions_dir=sessions, users=["sim_01"], dimensions=chosen, systems=["nomem", "longctx_full"],
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=3))
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    oracle = RecoveryOracle()
    target = tmp_path_factory.mktemp("runner") / "rec"
    return asyncio.run(run_recovery(plan, target, llm_config=config, backend_factory=lambda spec: oracle))


def _recordings(runner_made: Path) -> list[Path]:
    return [REPO / "recordings" / name for name in SHIPPED_A] + [runner_made]


def test_every_ended_task_has_its_end_and_every_step_its_events(runner_made: Path) -> None:
    for path in _recordings(runner_made):
        session = open_session(path)
        session.build_index()
        seen = 0
        for unit in units(session):
            for episode in episodes(session, unit.user_id, unit.system):
                seen += 1
                assert episode.end_reason is not None, (path.name, unit.system, episode.task_index)
                labels = [step.label for step in episode.steps]
                assert labels[-1] == "end", (path.name, labels)
                for step in episode.steps:
                    kinds = [e.kind for e in step_events(session, step)]
                    assert kinds, (path.name, unit.system, episode.task_index, step.label)
                    if step.label == "end":
                        assert "episode_end" in kinds
                    else:
                        assert "episode_end" not in kinds  # shown once, in the end step
        assert seen, path.name


@pytest.mark.parametrize("name", ["sample-quick-sim_01", "release-a-user_001-mem0"])
async def test_step_list_marks_ended_tasks_on_shipped_recordings(name: str) -> None:
    app = MemProbeApp(session=open_session(REPO / "recordings" / name), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        steps = app.screen.query_one(StepList)
        text = "\n".join(str(steps.get_option_at_index(i).prompt) for i in range(steps.option_count))
        assert "…" not in text, text  # "still running, or not ended": every task here ended
        assert "✓" in text or "T1" in text


def _damaged_sim(tmp_path: Path, which: int) -> tuple[Path, int]:
    """sample-quick-sim_01 with one of longctx_full's memory ops changed after it was written (its
    checksum no longer matches): ``which`` counts the ops in recording order (the recording holds a
    failed first attempt, then the resume, each opened by a reset). Returns the copy and the line."""
    target = tmp_path / "sim"
    shutil.copytree(REPO / "recordings" / "sample-quick-sim_01", target)
    lines = (target / "events.jsonl").read_bytes().splitlines(keepends=True)
    ops = [n for n, raw in enumerate(lines) if b'"system":"longctx_full"' in raw and b'"kind":"memory_op"' in raw]
    line = ops[which]
    assert b'"op":"add"' in lines[line] and b"the" in lines[line]
    lines[line] = lines[line].replace(b"the", b"teh", 1)
    (target / "events.jsonl").write_bytes(b"".join(lines))
    return target, line


def test_damage_after_the_point_does_not_block_the_store_before_it(tmp_path: Path) -> None:
    path, damaged = _damaged_sim(tmp_path, -5)  # the resume's second add
    session = open_session(path)
    session.build_index()
    before = session.store_at("sim_01", "longctx_full", damaged - 5)  # after the resume's first add
    assert len(before) == 1
    with pytest.raises(MemProbeError, match=f"line {damaged + 1} is damaged"):
        session.store_at("sim_01", "longctx_full", damaged + 1)


def test_damage_before_a_reset_does_not_block_the_store_after_it(tmp_path: Path) -> None:
    path, _ = _damaged_sim(tmp_path, 2)  # in the failed first attempt, before the resume's reset
    session = open_session(path)
    session.build_index()
    assert len(session.store_at("sim_01", "longctx_full", len(session) - 1)) == 6


async def test_memory_view_past_damage_says_so_and_steps_back(tmp_path: Path) -> None:
    path, damaged = _damaged_sim(tmp_path, -3)
    app = MemProbeApp(session=open_session(path), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.screen.query_one(DataTable).move_cursor(row=0)  # longctx_full × all (the final store)
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, MemoryScreen)
        assert "cannot be rebuilt" in app.screen.title_text and "rebuilding" not in app.screen.title_text
        assert f"line {damaged + 1} is damaged" in text_of(pilot, "#info")
        for _ in range(9):  # back to a turn before the damage: the store shows again
            await pilot.press("p")
            await settle(pilot)
            if "cannot be rebuilt" not in app.screen.title_text:
                break
        assert "cannot be rebuilt" not in app.screen.title_text and "items" in app.screen.title_text


PARADIGMS = REPO / "recordings" / "sample-paradigms-quick"


async def test_paradigm_memory_view_names_sessions_and_steps_them() -> None:
    app = MemProbeApp(session=open_session(PARADIGMS), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for key in ("enter", "m"):
            await pilot.press(key)
            await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        assert "· S00 encoding ·" in screen.title_text and "recovery" not in screen.title_text
        await pilot.press("n")
        await settle(pilot)
        assert "· S01 filler ·" in screen.title_text  # n steps to the next session
        await pilot.press("p")
        await settle(pilot)
        assert "· S00 encoding ·" in screen.title_text
        table = screen.query_one(StoreTable)
        assert str(table.get_row_at(0)[2]) == "S00 encoding"[:14]  # written by that session


async def test_paradigm_full_context_store_says_why_it_is_empty_and_counts_are_true() -> None:
    session = open_session(PARADIGMS)
    session.build_index()
    rows = {(r.episode_id, r.system): r for r in episode_rows(session)}
    full = rows[("PILOT-01A", "full_context")]
    assert full.sessions == 0 and full.planned_sessions == 9
    assert sessions_phrase(full) == "9 sessions, 0 ingested" and full.sessions_text() == "0/9"
    # the browser showed —/— before; then acc pooled over amem and two baselines (2/3): amem alone now
    assert headline(PARADIGMS) == {"amem": pytest.approx(5 / 8)}
    app = MemProbeApp(session=session, live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for key in ("s", "enter", "m"):
            await pilot.press(key)
            await settle(pilot)
        assert isinstance(app.screen, MemoryScreen) and app.screen.system == "full_context"
        assert "keeps no memory store: its input protocol is full_context" in text_of(pilot, "#info")


def test_transcript_search_finds_memory_op_values_and_counts_each_match() -> None:
    session = open_session(REPO / "recordings" / "sample-quick-sim_01")
    session.build_index()
    steps = [s for ep in episodes(session, "sim_01", "longctx_full") for s in ep.steps]
    found = count_in_steps(session, steps, "[task 0]")  # only the memory item's text holds it
    assert [step_events(session, steps[s])[e].kind for s, e, _ in found] == ["memory_op"]
    dayton = count_in_steps(session, steps, "dayton")
    assert sum(n for _, _, n in dayton) > len(dayton)  # some events hold it more than once: counted per match


def test_an_update_shows_the_values_it_wrote() -> None:
    session = open_session(RUN)
    update = next(session.event(n) for n in range(len(session))
                  if b'"op":"update"' in session.raw(n))
    text = plain_text(event_detail(update))
    change = update.patch[0]
    assert f"{change['path']} = {change['value']}" in text


async def test_the_failed_attempt_and_its_resume_are_shown() -> None:
    session = open_session(REPO / "recordings" / "sample-quick-sim_01")
    session.build_index()
    history = run_history(session)
    assert [(a.resumed, a.status) for a in history] == [(False, "failed"), (True, "completed")]
    assert history[0].reason is not None and "IndexError" in history[0].reason
    assert "2. resume" in plain_text(history_lines(history))
    app = MemProbeApp(session=session, live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert "2 runs (i: history)" in app.screen.title_text
        await pilot.press("i")
        await settle(pilot)
        assert "1. first run" in app.screen.export_document().markdown  # type: ignore[union-attr]


def test_an_item_history_starts_at_the_resume_not_in_the_failed_attempt() -> None:
    session = open_session(REPO / "recordings" / "sample-quick-sim_01")
    session.build_index()
    resume = run_history(session)[1].first_seq
    history = item_history(session, "sim_01", "longctx_full", "t0001")
    assert history[0].op == "reset" and all(event.seq > resume for event in history)
    assert item_writes(session, "sim_01", "longctx_full", len(session)).of("t0001") == [history[1].seq]


async def test_paradigm_episode_list_searches_and_compares_systems() -> None:
    app = MemProbeApp(session=open_session(PARADIGMS), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(EpisodeTable)
        assert table.cursor_row == 0
        await pilot.press("slash", "0", "1", "A", "enter")
        await settle(pilot)
        assert table.get_row_at(table.cursor_row)[0].plain == "PILOT-01A"  # / searched the rows
        await pilot.press("x")
        await settle(pilot)
        text = app.screen.export_document().markdown  # type: ignore[union-attr]
        assert "amem" in text and "full_context" in text and "naive_rag" in text
        assert "PILOT-03B" in text and "all episodes" in text and "0.75 (8)" in text


async def test_probe_inspector_names_the_session_that_wrote_each_item_the_reader_saw() -> None:
    app = MemProbeApp(session=open_session(PARADIGMS), live={"rescore": None}, keymap_path=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")  # PILOT-03B × amem, probe 1: the reader answered the old value
        await settle(pilot)
        text = "\n".join(log.text() for log in app.screen.query(DetailLog))
        assert "answer: vegetarian" in text and "expected 'Mediterranean diet' not found" in text  # answer, rule
        assert "[S05 perturbation]" in text and "[S00 encoding]" in text  # the update was read, ranked 4th
