"""The engine side of the replay (memprobe_engine.replay): index pass, queries, scores, catalog.

No Textual here: these are the answers the screens draw, checked against the fixture recordings.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from statistics import fmean

import orjson
import pytest

from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.writer import open_writer
from memprobe_engine.recovery.read import dimension_detail, score_board
from memprobe_engine.replay import (
    ReplaySession,
    build_run_index,
    describe,
    episodes,
    list_recordings,
    llm_call_view,
    step_events,
    units,
)
from memprobe_engine.replay.memory_view import item_history, store_view
from memprobe_engine.protocols import open_session

from .conftest import RUN, TRUNCATED


def _session(path: Path = RUN) -> ReplaySession:
    session = open_session(path)
    session.build_index()
    return session


def _raw_events(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in (path / "events.jsonl").read_bytes().splitlines() if line.endswith(b"}")]


def test_index_pass_reports_progress_can_stop_and_resume() -> None:
    session = open_session(RUN)
    seen: list[tuple[int, int]] = []
    build_run_index(session.reader, lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (len(session), len(session))
    assert session.build_index(should_stop=lambda: True) == 0 and not session.indexed
    assert session.build_index() == len(session) and session.indexed
    full = build_run_index(session.reader)
    assert set(full.spans) == set(session.index.spans)


def test_units_episodes_and_steps_follow_the_span_tree() -> None:
    session = _session()
    assert [(u.user_id, u.system, u.status) for u in units(session)] == [("sim_01", "amem", "ok"),
                                                                          ("sim_01", "mem0", "ok")]
    eps = episodes(session, "sim_01", "amem")
    assert [e.dimension for e in eps] == ["composure_under_strain", "schedule_juggling"]
    first = eps[0]
    assert first.steps[0].label == "task" and first.steps[-1].label == "end"
    assert first.end_reason == "satisfied" and len([s for s in first.steps if s.kind == "turn"]) == first.turns
    opening = step_events(session, first.steps[0])
    assert opening[0].kind == "message" and opening[0].turn == 0
    turn = step_events(session, first.steps[1])
    assert {e.kind for e in turn} >= {"retrieval", "llm_call", "message", "memory_op"}
    assert all(e.system == "amem" for e in turn)


def test_turn_events_exclude_a_concurrent_units_interleaved_lines(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", RecordingHeader(run_id="r", suite="recovery", created=1.0,
                                                           config={"users": ["u1", "u2"], "systems": ["s"]}))
    recorder = Recorder(writer)

    async def unit(user: str) -> None:
        with recorder.span(f"{user} × s", "unit", user_id=user, system="s"), recorder.span("rollout", "rollout"), \
                recorder.span("task 1", "episode", dimension="d", task_index=0):
            for turn in (1, 2):
                with recorder.span(f"turn {turn}", "turn", turn=turn, task_index=0):
                    for n in range(3):
                        recorder.emit(Message(role="user", content=f"{user} {turn}.{n}", task_index=0, turn=turn))
                        await asyncio.sleep(0)  # the other unit writes in between

    async def both() -> None:
        await asyncio.gather(unit("u1"), unit("u2"))

    asyncio.run(both())
    writer.close()
    session = _session(tmp_path / "rec")
    for user in ("u1", "u2"):
        turns = [s for s in episodes(session, user, "s")[0].steps if s.kind == "turn"]
        texts = [e.content for e in step_events(session, turns[0])]
        assert texts == [f"{user} 1.0", f"{user} 1.1", f"{user} 1.2"]


def test_score_board_matches_a_direct_computation() -> None:
    session = _session()
    board = score_board(session)
    raw = _raw_events(RUN)
    cats = {(e["user_id"], e["dimension"]): e["attrs"]["category"] for e in raw  # type: ignore[index]
            if e["kind"] == "span_begin" and e["span_kind"] == "episode"}
    rescored = {e["rescore_of"]: e["score"] for e in raw if e["kind"] == "judge_score" and "rescore_of" in e}
    for system in ("amem", "mem0"):
        for mode in ("dump_all", "retrieve"):
            scores: dict[str, list[float]] = {}
            for e in raw:
                if e["kind"] == "judge_score" and e["system"] == system and e["mode"] == mode and "rescore_of" not in e:
                    current = rescored.get(e["seq"], e["score"])  # a re-score replaces the original
                    scores.setdefault(cats[(e["user_id"], e["dimension"])], []).append(float(current))  # type: ignore[arg-type]
            assert board.units[("sim_01", system)].b[mode] == fmean(fmean(v) for v in scores.values())
        ends = [e for e in raw if e["kind"] == "episode_end" and e["system"] == system]
        assert board.units[("sim_01", system)].c == fmean(float(e["turns"]) for e in ends)  # type: ignore[arg-type]
    pairs = [p for p in board.pairs.values() if p.latest is not None]
    assert len(pairs) == 1 and pairs[0].latest is not None and pairs[0].latest.score == 1.0
    assert pairs[0].original is not None and pairs[0].original.score != 1.0


def test_overview_numbers_agree_with_the_report_table() -> None:
    tables = pytest.importorskip("memprobe_engine.recovery.read.tables")
    frames = pytest.importorskip("memprobe_engine.recovery.read.frames")
    table = tables.table2(frames.load_frames([RUN])).set_index("system")
    board = score_board(_session())
    for system in ("amem", "mem0"):
        mine = board.system_means(system)
        row = table.loc[system]
        assert mine.b["dump_all"] == pytest.approx(row["B_full_mean"])
        assert mine.b["retrieve"] == pytest.approx(row["B_topk_mean"])
        assert (mine.a, mine.c, mine.d) == pytest.approx((row["A_pct"], row["C_mean"], row["D_mean"]))
        assert (mine.items, mine.chars) == pytest.approx((row["N_items"], row["chars_per_item"]))


def test_dimension_detail_has_target_task_evidence_and_both_modes() -> None:
    session = _session()
    detail = dimension_detail(session, "sim_01", "amem", "composure_under_strain")
    assert detail.target is not None and detail.target.short.startswith("Gets calmer")
    assert detail.task is not None and "careers week" in detail.task
    assert set(detail.modes) == {"dump_all", "retrieve"}
    retrieve = detail.modes["retrieve"]
    assert retrieve.retrieval is not None and retrieve.retrieved and all(item for _, _, item in retrieve.retrieved)
    assert detail.evidence_turns and detail.evidence_turns[0].turn == 1
    assert detail.modes["dump_all"].pair is not None and detail.modes["dump_all"].pair.latest is not None


def test_dimension_detail_without_the_sessions_folder_says_where_the_target_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(RUN, tmp_path / "run")
    monkeypatch.chdir(tmp_path)  # the header's relative sessions path now leads nowhere
    detail = dimension_detail(_session(tmp_path / "run"), "sim_01", "amem", "composure_under_strain")
    assert detail.target is None and detail.target_note is not None and "not reachable" in detail.target_note
    assert detail.task is not None and "careers week" in detail.task  # from the recording's turn-0 message


def test_store_view_diffs_and_item_history() -> None:
    session = _session()
    seqs = session.memory_seqs("sim_01", "mem0")
    view = store_view(session, "sim_01", "mem0", seqs[-1], -1)
    assert view.added == view.size and view.deleted == 0
    deletes = [s for s in seqs if getattr(session.event_by_seq(s), "op", None) == "delete"]
    assert deletes, "the mem0 fixture deletes an item"
    gone = store_view(session, "sim_01", "mem0", deletes[0], deletes[0] - 1)
    assert gone.deleted == 1 and [r.mark for r in gone.rows].count("-") == 1
    victim = next(r.item_id for r in gone.rows if r.mark == "-")
    history = item_history(session, "sim_01", "mem0", victim)
    assert next(e.op for e in history if e.op != "reset") == "add" and history[-1].op == "delete"


def test_llm_call_view_resolves_payloads_and_reports_missing_ones(tmp_path: Path) -> None:
    session = _session()
    agent = next(e for e in _raw_events(RUN) if e["kind"] == "llm_call" and e["role"] == "agent")
    view = llm_call_view(session, int(agent["seq"]))  # type: ignore[call-overload]
    assert view is not None and view.messages[0].ref is not None and "long-term memory" in view.messages[0].content
    assert llm_call_view(session, 0) is None  # seq 0 is run_start
    shutil.copytree(RUN, tmp_path / "run")
    (tmp_path / "run" / "payloads.jsonl").write_text("")
    broken = llm_call_view(_session(tmp_path / "run"), int(agent["seq"]))  # type: ignore[call-overload]
    assert broken is not None and broken.missing and "missing" in broken.messages[0].content


def test_truncated_recording_reports_damage_and_serves_complete_events() -> None:
    session = _session(TRUNCATED)
    damage = session.damage()
    assert damage.tail_bytes > 0 and not damage.bad_lines
    message = session.damage_message()
    assert message is not None and f"{damage.tail_bytes:,} bytes" in message
    assert session.live and [u.status for u in units(session)] == ["ok", "running"]


def test_catalog_lists_newest_first_with_status(tmp_path: Path) -> None:
    for name, created in (("old", 0), ("new", 5)):
        shutil.copytree(RUN, tmp_path / name)
        header = orjson.loads((tmp_path / name / "header.json").read_bytes())
        header["created"] += created
        (tmp_path / name / "header.json").write_bytes(orjson.dumps(header))
    shutil.copytree(TRUNCATED, tmp_path / "torn")
    (tmp_path / "not-a-recording").mkdir()
    entries = list_recordings(tmp_path)
    assert [e.path.name for e in entries] == ["new", "old", "torn"]
    assert [e.status for e in entries] == ["completed", "completed", "incomplete"]
    assert entries[0].systems == ("amem", "mem0") and entries[0].users == 1


def test_every_recorded_kind_has_a_one_line_description() -> None:
    session = _session()
    kinds: dict[str, tuple[str, str]] = {}
    for line in range(len(session)):
        event = session.event(line)
        kinds.setdefault(event.kind, describe(event))
    assert len(kinds) >= 14
    assert all(summary and "\n" not in summary for _, summary in kinds.values())


def test_store_view_says_an_imported_release_has_only_final_stores(tmp_path: Path) -> None:
    """The memory view of an imported run states plainly that there are no per-turn writes."""
    from memprobe_engine.events.header import new_header
    from memprobe_engine.events.writer import open_writer
    from memprobe_engine.replay.memory_view import store_note

    for source, expected in (("release-a", "final store"), (None, None)):
        folder = tmp_path / f"rec-{source}"
        open_writer(folder, new_header("r", "recovery", {"source": source} if source else {})).close()
        (folder / "events.jsonl").touch()
        session = open_session(folder)
        note = store_note(session)
        assert (note is None) if expected is None else (expected in (note or ""))
        session.close()
