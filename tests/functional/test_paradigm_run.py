"""Protocol B end to end on one upstream episode: every built-in memory system (nomem, longctx_full, amem,
mem0, memt, memoryos), every reference input
protocol and every heuristic in one recording (scripted chat double, bag-of-words embeddings).

Checks the recording's shape (episode → session / probe spans, store changes inside session spans),
that each store can be rebuilt session by session, that heuristics make no model call, that a resumed
run repeats no call, and that a different command against the folder is refused.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory import memoryos_prompts
from memprobe_engine.paradigms import reader
from memprobe_engine.paradigms.runner import ParadigmPlan, describe_plan, run_paradigms
from tests.doubles import BagOfWordsEmbedder
from tests.functional.test_five_systems import FiveSystemOracle
from tests.unit.test_memoryos import reply as memoryos_reply

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sessions" / "paradigms" / "upstream-sample"
EPISODE = "PILOT-01A"
MEMORY = ["nomem", "longctx_full", "amem", "mem0", "memt", "memoryos"]
REFERENCES = ["full_context", "naive_rag", "time_aware_rag", "oracle_rag"]
HEURISTICS = ["latest_value", "always_update", "always_preserve", "source_preference"]

MEMORYOS_PROMPTS = {memoryos_prompts.CONTINUITY_SYSTEM, memoryos_prompts.META_SYSTEM, memoryos_prompts.THEMES_SYSTEM,
                    memoryos_prompts.PROFILE_SYSTEM, memoryos_prompts.KNOWLEDGE_SYSTEM}

ANSWERS: dict[str, dict[str, Any]] = {
    "current_value": {"answer": "CrossFit Central", "reason": "the user switched"},
    "previous_value": {"answer": "FitLife", "reason": "before the switch"},
    "change_detection": {"changed": True, "current_value": "CrossFit Central", "previous_value": "FitLife",
                         "reason": "stated"},
    "temporal": {"changed": True, "old_value": "FitLife", "new_value": "CrossFit Central",
                 "trigger": "FitLife became too crowded", "reason": "stated", "timing": "after the fillers"},
    "source": {"source_description": "the user", "source_class": "user", "accepted": True, "reason": "x"},
    "conflict_value": {"conflict_value_mentioned": False, "conflict_value": None, "source_class": "unknown",
                       "status_class": "unknown", "applies_to_target": False, "current_value": "FitLife",
                       "reason": "x"},
}


class ParadigmOracle(FiveSystemOracle):
    """FiveSystemOracle plus the unified reader: answers in the probe type's format."""

    def answer(self, request: ChatRequest) -> tuple[str, str]:
        if request.messages[0].content == reader.READER_SYSTEM:
            body = request.messages[-1].content
            probe_type = next(t for t, text in reader.ANSWER_FORMATS.items() if body.endswith(text))
            return "reader", json.dumps(ANSWERS[probe_type])
        if request.messages[0].content in MEMORYOS_PROMPTS:
            return "memoryos", memoryos_reply(request)
        return super().answer(request)


def _config() -> LLMConfig:
    return LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})


def _run(record: Path, oracle: ParadigmOracle, systems: list[str], k: int = 5, sessions: Path = SAMPLE) -> Path:
    plan = ParadigmPlan(sessions_dir=sessions, systems=systems, episodes=[EPISODE], k=k)
    return asyncio.run(run_paradigms(plan, record, llm_config=_config(), backend_factory=lambda spec: oracle,
                                     embedder=BagOfWordsEmbedder(hashed=True)))


def test_every_system_protocol_and_heuristic_runs_one_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    oracle = ParadigmOracle()
    systems = MEMORY + REFERENCES + HEURISTICS
    record = _run(tmp_path / "rec", oracle, systems)
    with open_recording(record) as rec:
        assert rec.header.config["suite"] == "paradigms"
        assert rec.header.config["episodes"] == [EPISODE]
        events = list(rec.iter_events())
    spans = {e.span_id: e for e in events if e.kind == "span_begin"}
    episodes = {e.system: e for e in spans.values() if e.span_kind == "episode"}
    assert sorted(episodes) == sorted(systems)
    assert [e.status for e in events if e.kind == "span_end" and e.span_id in {s.span_id for s in episodes.values()}] \
        == ["ok"] * len(systems)

    answers = [e for e in events if e.kind == "probe_answer"]
    scores = [e for e in events if e.kind == "probe_score" and e.layer is None]
    assert Counter(a.system for a in answers) == {s: 4 for s in systems}
    assert Counter(s.system for s in scores) == {s: 4 for s in systems}
    assert {a.input_protocol for a in answers if a.system in MEMORY} == {"memory"}
    assert {a.input_protocol for a in answers if a.system in HEURISTICS} == {"heuristic"}
    assert all(a.error is None and a.answer for a in answers)
    # heuristics make no model call; every reader call belongs to a memory system or a reference protocol
    calls = [e for e in events if e.kind == "llm_call"]
    assert not any(c.system in HEURISTICS for c in calls)
    by_seq = {c.seq: c for c in calls}
    reader_calls = [by_seq[a.llm_call_seq] for a in answers if a.llm_call_seq is not None]
    assert {c.role for c in reader_calls} == {"reader"}
    assert Counter(c.system for c in reader_calls) == {s: 4 for s in MEMORY + REFERENCES}
    assert oracle.by_role["reader"] == 4 * len(MEMORY + REFERENCES)

    # 21 session spans per memory system, directly under its episode span, in session order
    for system in MEMORY:
        sessions = [s for s in spans.values() if s.span_kind == "session" and s.system == system]
        assert [s.attrs["session_idx"] for s in sessions] == list(range(21))
        assert {s.parent_span_id for s in sessions} == {episodes[system].span_id}
        ingests = [e for e in events if e.kind == "session_ingest" and e.system == system]
        assert [e.session_idx for e in ingests] == list(range(21))
        assert len({e.clock for e in ingests}) == 21
    # M0 ← Reset() in the episode span, then every store change inside a session span
    for system in ["longctx_full", "amem", "mem0", "memt"]:
        ops = [e for e in events if e.kind == "memory_op" and e.system == system]
        assert ops[0].op == "reset" and ops[0].span_id == episodes[system].span_id
        assert all(spans[op.span_id].span_kind == "session" for op in ops[1:])
        per_session = Counter(spans[op.span_id].attrs["session_idx"] for op in ops[1:])
        assert len(per_session) >= 10, (system, per_session)
    # longctx_full stores every turn (90 in this episode) plus nothing else
    assert sum(1 for e in events if e.kind == "memory_op" and e.system == "longctx_full" and e.op == "add") == 90
    # the references saw what their protocol selects
    by_system = {s: [a for a in answers if a.system == s] for s in systems}
    assert all(len(a.retrieved) == 5 for a in by_system["naive_rag"])
    oracle_ids = {item.id for item in by_system["oracle_rag"][0].retrieved}
    assert oracle_ids == {"session-0", "session-1", "session-2", "session-18"}
    assert by_system["full_context"][0].retrieved == []


def test_resume_repeats_no_call_and_other_settings_are_refused(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    systems = ["amem", "full_context", "latest_value"]
    first = ParadigmOracle()
    record = _run(tmp_path / "rec", first, systems)
    assert first.requests
    again = ParadigmOracle()
    _run(tmp_path / "rec", again, systems)
    assert again.requests == []
    with open_recording(record) as rec:
        assert sum(1 for e in rec.iter_events(kinds=["probe_answer"])) == 12  # nothing answered twice
    plan = ParadigmPlan(sessions_dir=SAMPLE, systems=systems, episodes=[EPISODE], k=5)
    assert "3 unit(s) already finished" in describe_plan(plan, record)[1]
    with pytest.raises(RecordingError, match="different settings"):
        _run(tmp_path / "rec", ParadigmOracle(), systems, k=3)


def test_a_resume_over_an_edited_episode_is_refused_and_names_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Same flags, but the episode was re-realized since: resuming would mix two versions of it."""
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    suite = tmp_path / "suite"
    shutil.copytree(SAMPLE, suite)
    _run(tmp_path / "rec", ParadigmOracle(), ["latest_value"], sessions=suite)
    _run(tmp_path / "rec", ParadigmOracle(), ["latest_value"], sessions=suite)  # unchanged: resumes
    lines = (suite / "episodes.jsonl").read_text().splitlines()
    edited = []
    for line in lines:
        episode = json.loads(line)
        if episode["episode_id"] == EPISODE:
            episode["probes"][0]["question"] += " (reworded)"
        edited.append(json.dumps(episode))
    (suite / "episodes.jsonl").write_text("\n".join(edited) + "\n")
    with pytest.raises(RecordingError, match=f"episode\\(s\\) {EPISODE} .* changed since this recording"):
        _run(tmp_path / "rec", ParadigmOracle(), ["latest_value"], sessions=suite)


def test_an_interrupted_unit_resumes_from_recorded_responses(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    complete = ParadigmOracle()
    _run(tmp_path / "full", complete, ["amem"])
    n_calls = len(complete.requests)

    class Failing(ParadigmOracle):
        async def complete(self, request: ChatRequest) -> Any:
            if len(self.requests) >= n_calls // 2:
                raise ConnectionError("the endpoint went away")
            return await super().complete(request)

    failing = Failing()
    with pytest.raises(ConnectionError, match="went away"):
        _run(tmp_path / "rec", failing, ["amem"])
    done_before = len(failing.requests)
    assert 0 < done_before < n_calls
    resumed = ParadigmOracle()
    _run(tmp_path / "rec", resumed, ["amem"])
    assert len(resumed.requests) == n_calls - done_before  # only what the first session did not finish


def test_dry_run_describes_the_plan_without_calls() -> None:
    plan = ParadigmPlan(sessions_dir=SAMPLE, systems=["amem", "full_context", "latest_value"])
    lines = describe_plan(plan)
    assert lines[0].startswith(f"suite {SAMPLE}: 2 episode(s) × 3 system(s) = 6 unit(s)")
    assert "sessions ingested by memory systems: 42" in lines[2]
    assert "reader calls" in lines[3] and lines[3].endswith(": 16")


def test_shards_cover_every_unit_once_and_merge_into_one_recording(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.cli.merge_cmd import merge_recordings

    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    systems = ["full_context", "latest_value", "oracle_rag"]
    shards = []
    for index in range(2):
        plan = ParadigmPlan(sessions_dir=SAMPLE, systems=systems, shard=(index, 2))
        shards.append(asyncio.run(run_paradigms(plan, tmp_path / "rec", llm_config=_config(),
                                                backend_factory=lambda spec: ParadigmOracle(),
                                                embedder=BagOfWordsEmbedder(hashed=True))))
    assert [s.name for s in shards] == ["rec.shard-0-of-2", "rec.shard-1-of-2"]
    merge_recordings(tmp_path / "merged", shards)
    with open_recording(tmp_path / "merged") as rec:
        events = list(rec.iter_events())
    units = [(e.unit, e.system) for e in events if e.kind == "span_begin" and e.span_kind == "episode"]
    assert sorted(units) == sorted((e, s) for e in ("PILOT-01A", "PILOT-01B") for s in systems)
    calls = {e.seq: e for e in events if e.kind == "llm_call"}
    answers = [e for e in events if e.kind == "probe_answer" and e.system != "latest_value"]
    assert len(answers) == 16 and all(calls[a.llm_call_seq].role == "reader" for a in answers)  # type: ignore[index]

