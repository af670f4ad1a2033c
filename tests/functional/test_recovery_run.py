"""Protocol A end to end with a scripted backend: every stage recorded, every attribution label
reached, both modes, overflow diagnostic, and resume without repeated requests."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.recovery.inputs import load_user
from memprobe_engine.recovery.policy import ExclusionPolicy
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
from tests.functional.recovery_oracle import RecoveryOracle, plan_for

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "sessions"
USER = "sim_01"


def dims(n: int) -> list[str]:
    return [e.dimension for e in load_user(SESSIONS / "users" / USER).bank.entries][:n]


def config(context_tokens: int | None = None) -> LLMConfig:
    models = {"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")}
    if context_tokens:
        models["slot_filler"] = models["default"].model_copy(update={"context_tokens": context_tokens})
    return LLMConfig(models=models)


def plan(dimensions: list[str], systems: list[str], policy: ExclusionPolicy = "paper") -> RecoveryPlan:
    return RecoveryPlan(sessions_dir=SESSIONS, users=[USER], dimensions=dimensions, systems=systems,
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=3, policy=policy))


def run(tmp_path: Path, oracle: RecoveryOracle, dimensions: list[str], systems: list[str],
        context_tokens: int | None = None, record: str = "rec", policy: ExclusionPolicy = "paper") -> Path:
    return asyncio.run(run_recovery(plan(dimensions, systems, policy), tmp_path / record,
                                    llm_config=config(context_tokens), backend_factory=lambda spec: oracle))


def test_every_stage_is_recorded_and_every_label_reached(tmp_path: Path) -> None:
    chosen = dims(5)
    plan_for(chosen)
    oracle = RecoveryOracle()
    record = run(tmp_path, oracle, chosen, ["nomem", "longctx_full"])
    reader = open_recording(record)
    kinds = Counter(e.kind for e in reader.iter_events())
    for kind in ("run_start", "run_end", "message", "llm_call", "memory_op", "retrieval", "episode_end",
                 "preference_judgment", "memory_footprint", "slot_fill", "judge_score", "attribution_stage",
                 "attribution_label", "embedding"):
        assert kinds[kind] > 0, kind
    labels = {(e.system, e.dimension, e.mode): e.label for e in reader.iter_events(kinds=["attribution_label"])}
    long_labels = {labels[("longctx_full", d, "dump_all")] for d in chosen}
    assert long_labels == {"ok", "task_design_failure", "memory_failure", "agent_elicitation_failure",
                           "simulator_too_strict"}
    # nomem remembers nothing: "unknown" scores 0 without a judge call, then attribution runs.
    nomem_scores = [e.score for e in reader.iter_events(kinds=["judge_score"]) if e.system == "nomem"]
    assert nomem_scores == [0.0] * 10
    # stage 0 is asked once per (user, dimension) and shared by both systems and modes
    assert oracle.by_role["stage0"] == len(chosen)
    cached = [e for e in reader.iter_events(kinds=["attribution_stage"]) if e.stage == 0 and e.cached]
    assert cached
    ends = [e for e in reader.iter_events(kinds=["episode_end"])]
    assert {e.end_reason for e in ends} == {"satisfied"} and all(e.turns == 2 for e in ends)
    status = [e.status for e in reader.iter_events(kinds=["run_end"])]
    assert status == ["completed"]


def test_overflow_is_a_diagnostic_not_a_truncation(tmp_path: Path) -> None:
    """audit: an overflowed store is excluded with its size; paper: scored unknown = 0, as the release did."""
    chosen = dims(3)
    plan_for(chosen)
    last = chosen[-1]
    record = run(tmp_path, RecoveryOracle(), chosen, ["longctx_full"], context_tokens=1400, policy="audit")
    reader = open_recording(record)
    assert reader.header.config["policy"] == "audit"
    fills = {(e.dimension, e.mode): e for e in reader.iter_events(kinds=["slot_fill"])}
    assert fills[(last, "dump_all")].overflow and fills[(last, "dump_all")].label is None
    assert "context holds 1,400" in (fills[(last, "dump_all")].excluded or "")
    assert not fills[(last, "retrieve")].overflow
    scores = {(e.dimension, e.mode): e for e in reader.iter_events(kinds=["judge_score"])}
    assert scores[(last, "dump_all")].score is None and scores[(last, "dump_all")].excluded
    labels = {(e.dimension, e.mode): e.label for e in reader.iter_events(kinds=["attribution_label"])}
    assert labels[(last, "dump_all")] == "excluded"

    record = run(tmp_path, RecoveryOracle(), chosen, ["longctx_full"], context_tokens=1400, record="paper")
    reader = open_recording(record)
    assert reader.header.config["policy"] == "paper"
    fills = {(e.dimension, e.mode): e for e in reader.iter_events(kinds=["slot_fill"])}
    assert fills[(last, "dump_all")].overflow and fills[(last, "dump_all")].label == "unknown"
    assert fills[(last, "dump_all")].excluded is None and fills[(last, "dump_all")].call_seq is None
    scores = {(e.dimension, e.mode): e for e in reader.iter_events(kinds=["judge_score"])}
    assert scores[(last, "dump_all")].score == 0.0 and scores[(last, "dump_all")].excluded is None
    labels = {(e.dimension, e.mode): e.label for e in reader.iter_events(kinds=["attribution_label"])}
    assert labels[(last, "dump_all")] not in ("ok", "excluded")  # counted in attribution


def test_resume_after_sigkill_repeats_no_request(tmp_path: Path) -> None:
    """Kill a real `memprobe run`-like process mid-run, rerun it, compare with an uninterrupted run."""
    chosen = dims(4)
    script = tmp_path / "run.py"
    script.write_text(RUN_SCRIPT)
    record = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(script), str(record), ",".join(chosen), "0.05"], env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        events = record / "events.jsonl"
        if events.exists() and events.read_bytes().count(b'"kind":"llm_call"') >= 25:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    subprocess.run([sys.executable, str(script), str(record), ",".join(chosen), "0"], env=env, check=True)

    reader = open_recording(record)
    live = Counter(e.request_hash for e in reader.iter_events(kinds=["llm_call"]) if not e.cache_hit)
    assert live and max(live.values()) == 1, "a request was sent twice"
    assert [e.status for e in reader.iter_events(kinds=["run_end"])][-1] == "completed"

    clean = tmp_path / "clean"
    subprocess.run([sys.executable, str(script), str(clean), ",".join(chosen), "0"], env=env, check=True)
    assert final_scores(record) == final_scores(clean)
    clean_live = sum(1 for e in open_recording(clean).iter_events(kinds=["llm_call"]) if not e.cache_hit)
    assert sum(live.values()) == clean_live, "the resumed run sent a different number of requests"


def final_scores(record: Path) -> dict[tuple[str, str, str], float | None]:
    return {(e.system, e.dimension, e.mode): e.score for e in open_recording(record).iter_events(kinds=["judge_score"])}


RUN_SCRIPT = '''
import asyncio, sys
from pathlib import Path
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.functional.test_recovery_run import plan, config
from memprobe_engine.recovery.runner import run_recovery
record, dims, delay = Path(sys.argv[1]), sys.argv[2].split(","), float(sys.argv[3])
plan_for(dims)
oracle = RecoveryOracle(delay_s=delay)
asyncio.run(run_recovery(plan(dims, ["nomem", "longctx_full"]), record, llm_config=config(),
                         backend_factory=lambda spec: oracle))
'''


def test_documented_example_plugin_runs_a_recovery_session(tmp_path: Path) -> None:
    """docs/memory-systems.md's example system plugs in by import path, unchanged."""
    chosen = dims(2)
    plan_for(chosen)
    record = run(tmp_path, RecoveryOracle(), chosen, ["examples.keyword_memory:KeywordMemory"])
    reader = open_recording(record)
    assert {e.system for e in reader.iter_events(kinds=["judge_score"])} == {"examples.keyword_memory:KeywordMemory"}
    assert any(True for _ in reader.iter_events(kinds=["memory_op"]))
    assert [e.status for e in reader.iter_events(kinds=["run_end"])] == ["completed"]


def test_rescore_appends_beside_the_original(tmp_path: Path) -> None:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.recovery.read.frames import load_frames
    from memprobe_engine.recovery.rescore import Case, rescore
    from tests.functional import recovery_oracle

    chosen = dims(2)
    plan_for(chosen)
    record = run(tmp_path, RecoveryOracle(), chosen, ["longctx_full"])
    before = (tmp_path / "rec" / "events.jsonl").read_bytes()
    # The new judge is harsher on the first dimension: 1.0 → 0.5.
    recovery_oracle.PLAN[chosen[0]] = (0.5, True, True, "agent_elicitation_failure")
    streamed: list[tuple[str, str]] = []
    seen: list[str] = []
    results = asyncio.run(rescore(
        record, [Case(USER, "longctx_full", chosen[0], "dump_all")],
        chat_factory=lambda recorder: ChatClient(config(), recorder, backend_factory=lambda spec: RecoveryOracle()),
        context_tokens=100_000, on_text=lambda stage, piece: streamed.append((stage, piece)),
        on_event=lambda event: seen.append(event.kind)))
    (result,) = results
    assert result.original_score == 1.0 and result.score == 0.5 and result.attribution == "memory_failure"
    assert {stage for stage, _ in streamed} >= {"slot_fill", "judge"}
    assert "judge_score" in seen and "attribution_label" in seen
    assert (tmp_path / "rec" / "events.jsonl").read_bytes().startswith(before), "earlier events must not change"
    reader = open_recording(record)
    scores = [e for e in reader.iter_events(kinds=["judge_score"])
              if e.dimension == chosen[0] and e.mode == "dump_all"]
    assert [s.score for s in scores] == [1.0, 0.5] and scores[1].rescore_of == scores[0].seq
    frames = load_frames([record])
    row = frames.scores[(frames.scores.dimension == chosen[0]) & (frames.scores["mode"] == "dump_all")]
    assert row.score.tolist() == [0.5]


def test_rescore_in_retrieve_mode_reads_the_recorded_top_k(tmp_path: Path) -> None:
    from memprobe_engine.recovery.rescore import Case, gather

    chosen = dims(2)
    plan_for(chosen)
    record = run(tmp_path, RecoveryOracle(), chosen, ["longctx_full"])
    reader = open_recording(record)
    material = gather(reader, Case(USER, "longctx_full", chosen[1], "retrieve"))
    retrieval = [e for e in reader.iter_events(kinds=["retrieval"])
                 if e.purpose == "retrieve_mode" and e.dimension == chosen[1]][0]
    assert [item["id"] for item in material.memory] == retrieval.item_ids and material.memory
    dump = gather(reader, Case(USER, "longctx_full", chosen[1], "dump_all"))
    assert len(dump.memory) > len(material.memory)


class GarblingOracle(RecoveryOracle):
    """Answers the judge of one dimension with prose, so that call ends excluded after its repairs."""

    def __init__(self, garbled: str) -> None:
        super().__init__()
        self.garbled = garbled

    def answer(self, request):  # type: ignore[no-untyped-def]
        role, text = super().answer(request)
        first_ask = f"DIMENSION: {self.garbled}\n" in request.messages[-1].content
        repair_round = any(m.role == "assistant" for m in request.messages)  # only garbled judges get repaired
        if role == "recovery_judge" and (first_ask or repair_round):
            return role, "I would rather not grade this."
        return role, text


def test_resume_replays_an_excluded_call_without_asking_its_repairs_again(tmp_path: Path) -> None:
    chosen = dims(2)
    plan_for(chosen)
    first = GarblingOracle(chosen[1])
    record = run(tmp_path, first, chosen, ["longctx_full"], policy="audit")
    excluded = [e for e in open_recording(record).iter_events(kinds=["llm_call"]) if e.excluded]
    assert excluded and excluded[0].repairs == 2
    # Crash right after the excluded call: keep the events up to it, drop the rest.
    events = record / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(b"".join(lines[:excluded[0].seq + 1]))
    second = GarblingOracle(chosen[1])
    run(tmp_path, second, chosen, ["longctx_full"], policy="audit")
    asked_again = [r for r in second.requests if any(m.role == "assistant" for m in r.messages)
                   and "compare two short descriptions" in r.messages[0].content]
    assert not asked_again, "a repair round of the recorded excluded call was sent again"
    final = [e for e in open_recording(record).iter_events(kinds=["judge_score"]) if e.dimension == chosen[1]]
    assert final and final[-1].score is None and final[-1].excluded


def test_unparseable_judge_output_follows_the_policy_and_the_run_goes_on(tmp_path: Path) -> None:
    """Issue #9 point 6: a scoring role's unusable output is that item's outcome, never a failed run —
    audit excludes it (no score, attribution excluded), paper scores it 0 as the release did."""
    chosen = dims(2)
    plan_for(chosen)
    audit = open_recording(run(tmp_path, GarblingOracle(chosen[1]), chosen, ["longctx_full"], record="audit",
                               policy="audit"))
    paper = open_recording(run(tmp_path, GarblingOracle(chosen[1]), chosen, ["longctx_full"], record="paper"))
    for reader in (audit, paper):
        assert [e.status for e in reader.iter_events(kinds=["run_end"])] == ["completed"]
    audit_scores = {(e.dimension, e.mode): e for e in audit.iter_events(kinds=["judge_score"])}
    paper_scores = {(e.dimension, e.mode): e for e in paper.iter_events(kinds=["judge_score"])}
    assert audit_scores[(chosen[1], "dump_all")].score is None and audit_scores[(chosen[1], "dump_all")].excluded
    assert paper_scores[(chosen[1], "dump_all")].score == 0.0 and paper_scores[(chosen[1], "dump_all")].excluded is None
    assert audit_scores[(chosen[0], "dump_all")].score == paper_scores[(chosen[0], "dump_all")].score == 1.0
    audit_labels = {(e.dimension, e.mode): e.label for e in audit.iter_events(kinds=["attribution_label"])}
    paper_labels = {(e.dimension, e.mode): e.label for e in paper.iter_events(kinds=["attribution_label"])}
    assert audit_labels[(chosen[1], "dump_all")] == "excluded"
    assert paper_labels[(chosen[1], "dump_all")] not in ("ok", "excluded")
