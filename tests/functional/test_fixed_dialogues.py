"""Fixed-dialogue (off-policy) runs: ``memprobe run --dialogues SOURCE`` on a scripted backend.

The source is a recording the real runner wrote in the test (a live nomem run) and the imported
protocol-A release sample; the fixed run must feed the same turns in the same order, call no
simulator, assistant or preference judge, score as usual and mark A, C, D as not applicable.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import ConfigError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.recovery.release import import_release_a
from memprobe_engine.recovery.dialogue_source import DialogueSource, parse_source
from memprobe_engine.recovery.fixed_dialogues import load_dialogues
from memprobe_engine.recovery.read.frames import load_frames
from memprobe_engine.recovery.read.render import render_table2
from memprobe_engine.recovery.read.tables import table2
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.functional.test_recovery_run import SESSIONS, USER, config, dims
from memprobe_engine.protocols import open_session

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "tests" / "fixtures" / "release-sample-A"
LIVE_ROLES = {"agent", "simulator", "preference_judge"}


def fixed_plan(chosen: list[str], systems: list[str], source: DialogueSource, sessions: Path = SESSIONS,
               user: str = USER) -> RecoveryPlan:
    return RecoveryPlan(sessions_dir=sessions, users=[user], dimensions=chosen, systems=systems,
                        modes=["dump_all", "retrieve"], dialogues=source,
                        settings=RolloutSettings(max_turns=25, preference_judge=False))


def live_source(tmp_path: Path, chosen: list[str]) -> Path:
    plan_for(chosen)
    plan = RecoveryPlan(sessions_dir=SESSIONS, users=[USER], dimensions=chosen, systems=["nomem"],
                        modes=["dump_all"], settings=RolloutSettings(max_turns=3))
    oracle = RecoveryOracle()
    return asyncio.run(run_recovery(plan, tmp_path / "source", llm_config=config(),
                                    backend_factory=lambda spec: oracle))


def messages(record: Path, system: str) -> list[tuple[str, str, int | None, int | None]]:
    return [(e.role, e.content, e.task_index, e.turn) for e in open_recording(record).iter_events(kinds=["message"])
            if e.system == system]


def test_turns_are_observed_in_order_with_no_live_call(tmp_path: Path) -> None:
    chosen = dims(3)
    source = live_source(tmp_path, chosen)
    oracle = RecoveryOracle()
    record = asyncio.run(run_recovery(fixed_plan(chosen, ["nomem", "longctx_full"], parse_source(str(source))),
                                      tmp_path / "fixed", llm_config=config(), backend_factory=lambda spec: oracle))
    assert not LIVE_ROLES & set(oracle.by_role), oracle.by_role
    assert oracle.by_role["slot_filler"] > 0 and oracle.by_role["stage0"] > 0
    reader = open_recording(record)
    assert reader.header.config["dialogues"] == {"recording": str(source), "system": "nomem"}
    # The same dialogue, message for message, for every system.
    recorded = messages(source, "nomem")
    assert messages(record, "nomem") == messages(record, "longctx_full") == recorded
    # longctx_full stored the observations in the live rollout's order: the task; after each answer
    # that lets the episode go on, the reply it answered, then (next turn) the answer itself; the
    # last answer when the episode ends; never the task's final reply.
    stored = [patch["value"]["content"] for op in reader.iter_events(kinds=["memory_op"])
              if op.system == "longctx_full" and op.op == "add" for patch in op.patch if patch.get("op") == "add"]
    expected: list[str] = []
    for index in range(len(chosen)):
        task = [m for m in recorded if m[2] == index]
        expected.append(f"[Task {index}] {task[0][1]}")
        replies, answers = task[1::2], task[2::2]
        for turn, (reply, answer) in enumerate(zip(replies, answers)):
            if turn + 1 < len(replies):
                expected.append(f"Agent: {reply[1]}")
            expected.append(f"User: {answer[1]}")
    assert stored == expected
    ends = [(e.system, e.end_reason, e.turns) for e in reader.iter_events(kinds=["episode_end"])]
    source_ends = [(e.end_reason, e.turns) for e in open_recording(source).iter_events(kinds=["episode_end"])]
    assert [(r, t) for s, r, t in ends if s == "longctx_full"] == source_ends
    assert not list(reader.iter_events(kinds=["preference_judgment"]))
    # Attribution stages 1 and 2 read the fixed transcript.
    stage1 = [r for r in oracle.requests if r.messages[0].content.startswith("You check whether one episode")]
    assert stage1 and all(recorded[1][1] in r.messages[-1].content or chosen[0] not in r.messages[-1].content
                          for r in stage1)
    # Report: A, C, D not applicable, never 0; B as usual; the footer names the source.
    frames = load_frames([record])
    assert frames.fixed == {"nomem": f"fixed dialogues from {source} (nomem)",
                            "longctx_full": f"fixed dialogues from {source} (nomem)"}
    row = table2(frames).set_index("system").loc["longctx_full"]
    assert row["A_pct"] != row["A_pct"] and row["C_mean"] != row["C_mean"] and row["D_mean"] != row["D_mean"]
    assert row["B_full_mean"] > 0
    cells = render_table2(table2(frames)).columns[1]._cells
    assert cells == ["n/a", "n/a"]
    result = CliRunner().invoke(app, ["report", str(record)])
    assert result.exit_code == 0, result.output
    assert f"fixed dialogues from {source} (nomem); metrics A, C, D not applicable" in " ".join(result.output.split())


def test_fingerprint_of_a_live_run_is_unchanged_and_dry_run_names_the_source(tmp_path: Path) -> None:
    live = RecoveryPlan(sessions_dir=SESSIONS, users=[USER], dimensions=None, systems=["nomem"], modes=["dump_all"],
                        settings=RolloutSettings())
    assert "dialogues" not in live.config({})
    chosen = dims(2)
    source = live_source(tmp_path, chosen)
    result = CliRunner().invoke(app, ["run", "--record", str(tmp_path / "x"), "--users", USER, "--dims",
                                      ",".join(chosen), "--dialogues", str(source), "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"fixed dialogues from {source} (nomem)" in result.output
    assert "simulator" not in result.output.split("protocol parameters")[0]
    assert not (tmp_path / "x").exists()


def test_bad_sources_get_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a readable recording"):
        parse_source(str(tmp_path / "nowhere"))
    chosen = dims(2)
    source = live_source(tmp_path, chosen)
    with pytest.raises(ConfigError, match="holds no amem run"):
        parse_source(f"{source}@amem")
    other = dims(4)[3:]
    with pytest.raises(ConfigError, match=f"no nomem dialogue for {USER} × {other[0]}"):
        asyncio.run(run_recovery(fixed_plan(other, ["nomem"], parse_source(str(source))), tmp_path / "bad",
                                 llm_config=config(), backend_factory=lambda spec: RecoveryOracle()))
    assert not (tmp_path / "bad").exists()


def test_the_imported_release_nomem_transcripts_are_a_source(tmp_path: Path) -> None:
    out = tmp_path / "imp"
    import_release_a(RELEASE, out, workers=1)
    source = parse_source(str(out / "recordings" / "nomem_pooled_50"))
    dialogues = load_dialogues(source)
    assert ("user_001", "writing_skill") in dialogues.by_case
    writing = dialogues.get("user_001", "writing_skill")
    assert writing.opening and writing.opening.startswith("I need to send my teacher a short note")
    assert writing.end_reason == "satisfied" and writing.exchanges[-1].is_done
    chosen = ["writing_skill", "directness_preference"]
    oracle = RecoveryOracle()
    record = asyncio.run(run_recovery(fixed_plan(chosen, ["longctx_full"], source, out / "sessions", "user_001"),
                                      tmp_path / "fixed", llm_config=config(), backend_factory=lambda spec: oracle))
    assert not LIVE_ROLES & set(oracle.by_role)
    reader = open_recording(record)
    said = [e.content for e in reader.iter_events(kinds=["message"])]
    assert "That works. It’s short and clear, and it sounds like something I could send." in said
    assert [e.status for e in reader.iter_events(kinds=["run_end"])] == ["completed"]


RUN_SCRIPT = '''
import asyncio, sys
from pathlib import Path
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.functional.test_recovery_run import config
from tests.functional.test_fixed_dialogues import fixed_plan
from memprobe_engine.recovery.dialogue_source import parse_source
from memprobe_engine.recovery.runner import run_recovery
record, source, dims, delay = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), float(sys.argv[4])
plan_for(dims)
oracle = RecoveryOracle(delay_s=delay)
asyncio.run(run_recovery(fixed_plan(dims, ["nomem", "longctx_full"], parse_source(source)), record,
                         llm_config=config(), backend_factory=lambda spec: oracle))
'''


def test_a_killed_fixed_run_resumes_without_repeating_a_call(tmp_path: Path) -> None:
    chosen = dims(4)
    source = live_source(tmp_path, chosen)
    script = tmp_path / "run.py"
    script.write_text(RUN_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    record = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(script), str(record), str(source), ",".join(chosen), "0.05"], env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        events = record / "events.jsonl"
        if events.exists() and events.read_bytes().count(b'"kind":"llm_call"') >= 8:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    args = [sys.executable, str(script)]
    subprocess.run([*args, str(record), str(source), ",".join(chosen), "0"], env=env, check=True)
    reader = open_recording(record)
    live = Counter(e.request_hash for e in reader.iter_events(kinds=["llm_call"]) if not e.cache_hit)
    assert live and max(live.values()) == 1, "a request was sent twice"
    assert [e.status for e in reader.iter_events(kinds=["run_end"])][-1] == "completed"
    clean = tmp_path / "clean"
    subprocess.run([*args, str(clean), str(source), ",".join(chosen), "0"], env=env, check=True)
    scores = {(e.system, e.dimension, e.mode): e.score for e in reader.iter_events(kinds=["judge_score"])}
    assert scores == {(e.system, e.dimension, e.mode): e.score
                      for e in open_recording(clean).iter_events(kinds=["judge_score"])}


def test_the_replay_overview_leaves_a_and_c_undefined_for_a_fixed_run() -> None:
    """The shipped make-demo run (fixed dialogues): the TUI's overview agrees with the report — B as
    scored, A, C and D undefined (never 0); a live recording still gets its A and C."""
    from memprobe_engine.recovery.read.scores import score_board

    for name, live in (("sample-quick-fixed-user_001", False), ("sample-quick-sim_01", True)):
        session = open_session(ROOT / "recordings" / name)
        session.build_index()
        mine = score_board(session).system_means("longctx_full")
        row = table2(load_frames([ROOT / "recordings" / name])).set_index("system").loc["longctx_full"]
        assert mine.b["dump_all"] == pytest.approx(row["B_full_mean"])
        if live:
            assert mine.a is not None and mine.c is not None
        else:
            assert mine.b["dump_all"] and mine.b["dump_all"] > 0
            assert (mine.a, mine.c, mine.d) == (None, None, None)


def test_a_run_judged_by_the_calibrated_judge_makes_no_judge_call_and_rescore_keeps_it(tmp_path: Path) -> None:
    """--recovery-judge calibrated: every judged fill is scored by the shipped cross-encoder (named on the
    score, recorded in the header), no recovery_judge call is made, and a re-score uses the same judge."""
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.recovery.cross_judge import DEFAULT_JUDGE
    from memprobe_engine.recovery.rescore import Case, rescore

    chosen = dims(3)
    source = parse_source(str(live_source(tmp_path, chosen)))
    plan = fixed_plan(chosen, ["longctx_full"], source)
    plan = RecoveryPlan(**{**plan.__dict__, "settings": RolloutSettings(
        max_turns=25, preference_judge=False, recovery_judge=f"calibrated:{DEFAULT_JUDGE}")})
    oracle = RecoveryOracle()
    record = asyncio.run(run_recovery(plan, tmp_path / "calibrated", llm_config=config(),
                                      backend_factory=lambda spec: oracle))
    with open_recording(record) as reader:
        assert reader.header.config["recovery_judge"] == f"calibrated:{DEFAULT_JUDGE}"
        roles = Counter(e.role for e in reader.iter_events(kinds=["llm_call"]))
        scores = list(reader.iter_events(kinds=["judge_score"]))
    assert roles["recovery_judge"] == 0 and roles["slot_filler"] > 0
    judged = [s for s in scores if s.judge is not None]
    assert judged and all(s.judge == f"calibrated:{DEFAULT_JUDGE}" and s.call_seq is None for s in judged)
    assert all(s.score in (0.0, 0.25, 0.5, 0.75, 1.0) for s in judged)
    first = judged[0]
    results = asyncio.run(rescore(record, [Case(USER, "longctx_full", first.dimension, first.mode)],
                                  chat_factory=lambda recorder: ChatClient(config(), recorder,
                                                                           backend_factory=lambda spec: oracle),
                                  context_tokens=1_000_000, attribution=False, judge_only=True))
    assert results[0].score == first.score and results[0].reason == first.reason
