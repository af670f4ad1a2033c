"""`memprobe import release-a` on the public two-user sample of protocol-A's release.

Everything the release holds arrives (users, tasks, episodes, memory items, scores, attribution),
our report reproduces the release's per-user numbers, a damaged copy imports what is left and names
the damage, the sessions validate under the relaxed import rules, and an imported recording can be
re-scored like one of our own.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli.groups import import_app
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.reader import open_recording
from memprobe_engine.recovery.release import ImportResult, import_release_a
from memprobe_engine.recovery.release.files import system_of
from memprobe_engine.recovery.release.sessions import is_relaxed
from memprobe_engine.recovery.input_rules import Category
from memprobe_engine.recovery.inputs import DimensionPool, load_user, load_users, validate_sessions
from memprobe_engine.recovery.read.frames import ReportFrames, load_frames
from memprobe_engine.recovery.read.tables import category_means, user_b
from memprobe_engine.recovery.unit import tasks_for, unit_inputs

# A copy of the recovery paper's public release sample ships in tests/fixtures (with its LICENSE),
# so these tests run on a fresh clone.
SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "release-sample-A"
RUNS = ("nomem_pooled_50", "amem_pooled_50", "longctx_full_pooled_50", "mem0_pooled_50", "memt_memonly_pooled_50")
USERS = ("user_001", "user_002")
CANONICAL = tuple(c.value for c in Category)



def load(rel: str, root: Path = SAMPLE) -> Any:
    return json.loads((root / rel).read_text(encoding="utf-8"))


def outputs(run: str) -> list[tuple[str, str]]:
    """(output folder, mode) of a run: itself for dump_all, its _retrieve twin when present."""
    twin = f"{run}_retrieve"
    return [(run, "dump_all")] + ([(twin, "retrieve")] if (SAMPLE / "output" / twin).is_dir() else [])


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> ImportResult:
    return import_release_a(SAMPLE, tmp_path_factory.mktemp("import") / "out", workers=2)


@pytest.fixture(scope="module")
def frames(imported: ImportResult) -> ReportFrames:
    return load_frames(sorted(imported.recordings.values()))


def events_of(record: Path) -> list[Any]:
    with open_recording(record) as reader:
        assert check_recording(reader).clean, "every imported event must parse with the real event models"
        return list(reader.iter_events())


def test_every_user_task_episode_item_and_score_is_imported(imported: ImportResult) -> None:
    assert sorted(imported.recordings) == sorted(RUNS)
    assert not [p for p in imported.problems if p.level in ("error", "warning")], imported.problems
    for user in USERS:
        tasks = load(f"benchmark_data/CustomTasksPooledFinal/{user}.json")["tasks"]
        written = load(f"users/{user}/tasks.json", imported.sessions)["tasks"]
        assert [t["task"] for t in written] == [t["task"] for t in tasks]
        assert [t["dimension"] for t in written] == [t["target_dimension"] for t in tasks]
        bank = load(f"users/{user}/bank.json", imported.sessions)["categories"]
        assert sum(len(v) for v in bank.values()) == 31
    for run in RUNS:
        events = events_of(imported.recordings[run])
        system = system_of(run)
        assert {e.system for e in events if e.system} == {system}
        kinds = Counter(e.kind for e in events)
        assert kinds["run_start"] == kinds["run_end"] == 1
        for user in USERS:
            mine = [e for e in events if e.user_id == user]
            episodes = sorted((SAMPLE / "history" / run / user).glob("episode_*.json"),
                              key=lambda p: int(p.stem.removeprefix("episode_")))
            turns = [load(str(p.relative_to(SAMPLE)))["turns"] for p in episodes]
            ends = [e for e in mine if e.kind == "episode_end"]
            assert len(ends) == len(episodes) == 31
            assert [e.turns for e in ends] == [len(t) for t in turns]
            messages = [e for e in mine if e.kind == "message"]
            assert len(messages) == sum(1 + 2 * len(t) for t in turns)
            assert len([e for e in mine if e.kind == "preference_judgment"]) == sum(len(t) for t in turns)
            memories = load(f"memory/{run}/{user}/memories.json")["memories"]
            (snapshot,) = [e for e in mine if e.kind == "memory_snapshot"]
            with open_recording(imported.recordings[run]) as reader:
                items = reader.payload(snapshot.snapshot_ref)["items"]
            assert list(items.values()) == memories
            (footprint,) = [e for e in mine if e.kind == "memory_footprint"]
            assert footprint.n_items == len(memories)
            for folder, mode in outputs(run):
                details = load(f"output/{folder}/recon_judge/{user}.json")["details"]
                scores = {e.dimension: e for e in mine if e.kind == "judge_score" and e.mode == mode}
                fills = {e.dimension: e for e in mine if e.kind == "slot_fill" and e.mode == mode}
                assert {d["dimension"]: d["score"] for d in details} == {k: v.score for k, v in scores.items()}
                assert {d["dimension"]: d["predicted"] for d in details} == {k: v.label for k, v in fills.items()}


def test_layout_follows_our_own_runs(imported: ImportResult) -> None:
    record = imported.recordings["amem_pooled_50"]
    header = json.loads((record / "header.json").read_text())
    assert header["suite"] == "recovery" and header["config"]["source"] == "release-a"
    assert header["config"]["release_run"] == "amem_pooled_50"
    assert header["config"]["sessions"] == str(imported.sessions.resolve())
    events = events_of(record)
    spans = {e.span_id: e for e in events if e.kind == "span_begin"}
    parent_kind = {sid: spans[s.parent_span_id].span_kind if s.parent_span_id in spans else None
                   for sid, s in spans.items()}
    assert Counter((s.span_kind, parent_kind[sid]) for sid, s in spans.items()) >= Counter(
        {("run", None): 1, ("unit", "run"): 2, ("rollout", "unit"): 2, ("episode", "rollout"): 62,
         ("recovery", "unit"): 2, ("dimension", "recovery"): 62, ("mode", "dimension"): 124})
    rollout = next(s for s in spans.values() if s.span_kind == "rollout")
    assert "final store" in rollout.attrs["note"] and rollout.attrs["source"].startswith("memory/amem_pooled_50/")
    episode = next(s for s in spans.values() if s.span_kind == "episode")
    assert episode.attrs["source"] == "history/amem_pooled_50/user_001/episode_1.json"
    assert episode.attrs["task_index"] == 0 and episode.dimension == "reading_comprehension_skill"
    retrieve = next(s for s in spans.values() if s.span_kind == "mode" and s.attrs["mode"] == "retrieve")
    assert retrieve.attrs["source"].startswith("output/amem_pooled_50_retrieve/recon_judge/")
    # The unit inputs are exactly what unit_inputs() stores for a run of our own.
    pool = DimensionPool.model_validate(load("pool.json", imported.sessions), context={"skip_cross": True})
    user = load_user(imported.sessions / "users" / "user_002", pool=pool)
    unit = next(s for s in spans.values() if s.span_kind == "unit" and s.user_id == "user_002")
    with open_recording(record) as reader:
        assert reader.payload(unit.attrs["inputs_ref"]) == unit_inputs(user, pool, tasks_for(user, None))
    # Retrieved memories point at items of the final store.
    retrievals = [e for e in events if e.kind == "retrieval"]
    assert len(retrievals) == 62 and all(e.purpose == "retrieve_mode" for e in retrievals)
    assert not any(i.startswith("unmatched:") for e in retrievals for i in e.item_ids)


def release_overall(per_category: dict[str, float]) -> float:
    """The release's overall: the category means summed left to right in canonical order, divided."""
    values = [per_category[c] for c in CANONICAL if c in per_category]
    return sum(values) / len(values)


def test_per_user_scores_equal_the_release(frames: ReportFrames) -> None:
    means = category_means(frames).set_index(["system", "user_id", "mode", "category"])["value"]
    b = user_b(frames).set_index(["system", "user_id", "mode"])["B"]
    checked = 0
    for run in RUNS:
        system = system_of(run)
        for folder, mode in outputs(run):
            reports = sorted((SAMPLE / "output" / folder).glob("*.json"))
            rows = {row["user_id"]: row["reconstruction"] for report in reports
                    for row in load(str(report.relative_to(SAMPLE))).get("per_user") or []}
            for user in USERS:
                recon = load(f"output/{folder}/recon_judge/{user}.json")
                ours = {c: means[(system, user, mode, c)] for c in CANONICAL}
                assert ours == recon["per_category"] == {c: rows[user][c] for c in CANONICAL}
                assert release_overall(ours) == recon["overall"] == rows[user]["overall"]
                assert b[(system, user, mode)] == recon["overall"]  # the report's own per-user B, to the bit
                checked += 1
    assert checked == 18


def test_attribution_labels_and_counts_reproduce_the_release(imported: ImportResult, frames: ReportFrames) -> None:
    att = frames.attribution
    for run in RUNS:
        events = events_of(imported.recordings[run])
        for folder, mode in outputs(run):
            for user in USERS:
                data = load(f"output/{folder}/attribution/{user}.json")
                mine = att[(att.system == system_of(run)) & (att.user_id == user) & (att["mode"] == mode)]
                assert dict(Counter(mine["label"])) == data["counts"]
                stages = Counter(e.stage for e in events if e.kind == "attribution_stage" and e.user_id == user
                                 and e.mode == mode)
                wanted = Counter({"oracle": 0, "disclosure": 1, "disclosure_subclass": 2}[s["stage"]]
                                 for d in data["details"] for s in d["attribution"]["stages"])
                assert stages == wanted
    labels = {e.dimension: e.label for e in events_of(imported.recordings["amem_pooled_50"])
              if e.kind == "attribution_label" and e.user_id == "user_002" and e.mode == "retrieve"}
    assert Counter(labels.values())["simulator_too_strict"] == 1


def test_imported_sessions_validate_under_relaxed_rules(imported: ImportResult) -> None:
    assert validate_sessions(imported.sessions) == [], "an imported tree validates (authoring rules relaxed)"
    users = load_users(imported.sessions)  # and loads, so `memprobe run --sessions` can run the paper's users
    assert [u.user_id for u in users] == ["user_001", "user_002"] and users[0].profile.age == 11
    problems = validate_sessions(imported.sessions, relaxed=False)
    assert problems and all(is_relaxed(p) for p in problems), [str(p) for p in problems if not is_relaxed(p)]
    profile = load("users/user_002/profile.json", imported.sessions)
    assert profile["age"] == 48 and profile["location"] == "Fort Bragg, United States"
    assert profile["extra"]["interests"]["interests"][0] == "real estate investing and property rehab"
    tasks = load("users/user_001/tasks.json", imported.sessions)["tasks"]
    verdicts = Counter((t["critic_verdict"], t["revised"]) for t in tasks)
    assert verdicts == {("neutral", False): 17, ("fishing", True): 14}
    report = json.loads((imported.out / "import-report.json").read_text())
    assert report["sessions"]["validation"] == {"relaxed": len(problems), "structural": 0}


def damage(tmp_path: Path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(SAMPLE, copy)
    for path in copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (copy / "history/amem_pooled_50/user_001/episode_3.json").write_text('{"task": "cut off', encoding="utf-8")
    (copy / "pref_judge/amem_pooled_50/user_002/episode_5.json").unlink()
    (copy / "memory/memt_memonly_pooled_50/user_002/memories.json").write_text("[1, 2", encoding="utf-8")
    for top in ("history", "pref_judge", "memory", "output"):
        for folder in (copy / top).glob("mem0_pooled_50*"):
            shutil.rmtree(folder)
    shutil.rmtree(copy / "output/longctx_full_pooled_50_retrieve")
    return copy


def test_a_damaged_copy_imports_the_rest_and_names_the_problems(tmp_path: Path) -> None:
    import_release_a(SAMPLE, tmp_path / "out", workers=1)  # a clean import first: the damaged one replaces it
    result = import_release_a(damage(tmp_path), tmp_path / "out", workers=1)
    problems = {(p.level, p.file) for p in result.problems}
    assert not (tmp_path / "out" / "recordings" / "mem0_pooled_50").exists(), "a stale run must not linger"
    assert ("notice", "history/mem0_pooled_50/") in problems
    assert ("error", "history/amem_pooled_50/user_001/episode_3.json") in problems
    assert ("warning", "pref_judge/amem_pooled_50/user_002/episode_5.json") in problems
    assert ("error", "memory/memt_memonly_pooled_50/user_002/memories.json") in problems
    assert ("error", "history/mem0_pooled_50/") in problems
    assert ("warning", "output/longctx_full_pooled_50_retrieve/") in problems
    saved = json.loads((tmp_path / "out" / "import-report.json").read_text())
    assert {(p["level"], p["file"]) for p in saved["problems"]} == problems
    assert sorted(result.recordings) == sorted(set(RUNS) - {"mem0_pooled_50"})
    frames = load_frames(sorted(result.recordings.values()))
    episodes = frames.episodes.groupby(["system", "user_id"]).size()
    assert episodes[("amem", "user_001")] == 30 and episodes[("amem", "user_002")] == 31
    assert set(frames.scores.loc[frames.scores.system == "longctx_full", "mode"]) == {"dump_all"}
    memt = frames.footprints[frames.footprints.system == "memt"]
    assert list(memt.user_id) == ["user_001"]
    assert len(frames.scores[frames.scores.system == "memt"]) == 2 * 2 * 31  # scores survive a lost store
    pref = frames.preferences
    assert pref[(pref.system == "amem") & (pref.user_id == "user_002") & (pref.task_index == 4)]["mean"].notna().all()


def test_rescore_appends_a_new_score_to_an_imported_recording(imported: ImportResult, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.recovery.rescore import Case, gather, rescore
    from tests.functional import recovery_oracle
    from tests.functional.recovery_oracle import RecoveryOracle

    record = tmp_path / "amem"
    shutil.copytree(imported.recordings["amem_pooled_50"], record, ignore=shutil.ignore_patterns("writer.lock"))
    dimension = "mathematics_skill"
    monkeypatch.setitem(recovery_oracle.PLAN, dimension, (1.0, True, True, "agent_elicitation_failure"))
    cases = [Case("user_001", "amem", dimension, "dump_all"), Case("user_001", "amem", dimension, "retrieve")]
    with open_recording(record) as reader:
        materials = [gather(reader, case) for case in cases]
    assert len(materials[0].memory) == 99 and len(materials[1].memory) == 5
    assert materials[0].original_score == 0.5 and materials[0].stage0 is not None
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    before = (record / "events.jsonl").read_bytes()
    results = asyncio.run(rescore(record, cases, context_tokens=1_000_000, chat_factory=lambda recorder: ChatClient(
        config, recorder, backend_factory=lambda spec: RecoveryOracle())))
    assert [r.score for r in results] == [1.0, 1.0] and [r.attribution for r in results] == ["ok", "ok"]
    assert (record / "events.jsonl").read_bytes().startswith(before), "imported events must not change"
    with open_recording(record) as reader:
        scores = [e for e in reader.iter_events(kinds=["judge_score"])
                  if e.user_id == "user_001" and e.dimension == dimension and e.mode == "dump_all"]
    assert [s.score for s in scores] == [0.5, 1.0] and scores[1].rescore_of == scores[0].seq
    after = load_frames([record]).scores
    row = after[(after.user_id == "user_001") & (after.dimension == dimension) & (after["mode"] == "dump_all")]
    assert row.score.tolist() == [1.0]


def test_rescore_of_an_imported_run_reuses_the_release_stage0_verdict(imported: ImportResult, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #10: re-scoring an imported run under the paper policy asks no stage-0 question: the
    release's own verdict for that (user, dimension) is reused."""
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.recovery.rescore import Case, gather, rescore
    from tests.functional import recovery_oracle
    from tests.functional.recovery_oracle import RecoveryOracle

    record = tmp_path / "amem"
    shutil.copytree(imported.recordings["amem_pooled_50"], record, ignore=shutil.ignore_patterns("writer.lock"))
    dimension = "mathematics_skill"
    # a low score, so attribution must go through stage 0 again
    monkeypatch.setitem(recovery_oracle.PLAN, dimension, (0.25, False, True, "agent_elicitation_failure"))
    cases = [Case("user_001", "amem", dimension, "dump_all"), Case("user_001", "amem", dimension, "retrieve")]
    with open_recording(record) as reader:
        released = gather(reader, cases[0]).stage0
        assert reader.header.config.get("source") == "release-a"
    assert released is not None
    oracle = RecoveryOracle()
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    results = asyncio.run(rescore(record, cases, context_tokens=1_000_000, chat_factory=lambda recorder: ChatClient(
        config, recorder, backend_factory=lambda spec: oracle)))
    assert oracle.by_role["stage0"] == 0, "the release's stage-0 verdict must be reused, not asked again"
    expected = "task_design_failure" if not released.can_invite else "memory_failure"
    assert [r.attribution for r in results] == [expected, expected]
    with open_recording(record) as reader:
        stages = [e for e in reader.iter_events(kinds=["attribution_stage"]) if e.stage == 0][-2:]
    assert all(e.cached and e.call_seq is None for e in stages)


def test_cli_imports_and_prints_the_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(import_app, ["release-a", str(SAMPLE), "--out", str(tmp_path / "out"),
                                             "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "0 errors, 0 warnings" in result.output and "import-report.json" in result.output
    assert (tmp_path / "out" / "recordings" / "memt_memonly_pooled_50" / "events.jsonl").exists()


def test_imported_users_run_against_any_system(imported: ImportResult, tmp_path: Path) -> None:
    """The paper's own users and tasks, run through our pipeline (scripted models)."""
    import asyncio

    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.recovery.rollout import RolloutSettings
    from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
    from tests.functional.recovery_oracle import RecoveryOracle, plan_for

    user = load_users(imported.sessions, ["user_002"])[0]
    chosen = [e.dimension for e in user.bank.entries][:2]
    plan_for(chosen)
    plan = RecoveryPlan(sessions_dir=imported.sessions, users=["user_002"], dimensions=chosen,
                        systems=["longctx_full"], modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=2))
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    oracle = RecoveryOracle()
    record = asyncio.run(run_recovery(plan, tmp_path / "run", llm_config=config, backend_factory=lambda spec: oracle))
    scores = [e for e in open_recording(record).iter_events(kinds=["judge_score"])]
    assert {(e.dimension, e.mode) for e in scores} == {(d, m) for d in chosen for m in ("dump_all", "retrieve")}


#: Characters a llama.cpp slot of 8,192 tokens holds of the release's JSON stores (the mem0 store
#: of user_001, 40,781 characters, counted 15,822 tokens on the embedded model: 2.6 per token).
_SLOT_CHARS = int(8192 * 2.6)


@pytest.mark.parametrize("policy", ["paper", "audit"])
def test_rescore_of_a_store_larger_than_the_context_records_an_overflow_and_scores_the_rest(
        imported: ImportResult, tmp_path: Path, policy: str) -> None:
    """Issue #22 (9): the server refuses the mem0 user's full store as longer than its context. That
    case is an overflow under the chosen policy (paper: unknown = 0; audit: excluded with the
    diagnostic); the retrieve cases that fit are scored; the command does not end."""
    from memprobe_engine.errors import ContextOverflow
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.llm.types import ChatRequest, ChatResult
    from memprobe_engine.recovery.rescore import Case, rescore
    from tests.functional.recovery_oracle import RecoveryOracle

    class ContextLimitedOracle(RecoveryOracle):
        async def complete(self, request: ChatRequest) -> ChatResult:
            if sum(len(m.content) for m in request.messages) > _SLOT_CHARS:
                raise ContextOverflow("http://127.0.0.1:9/v1 refused the request as longer than the model's "
                                      "context (HTTP 400: the request exceeds the available context size)")
            return await super().complete(request)

    record = tmp_path / "mem0"
    shutil.copytree(imported.recordings["mem0_pooled_50"], record, ignore=shutil.ignore_patterns("writer.lock"))
    dims = ("mathematics_skill", "writing_skill")
    cases = [Case("user_001", "mem0", d, m) for d in dims for m in ("dump_all", "retrieve")]
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    results = asyncio.run(rescore(record, cases, context_tokens=1_000_000, attribution=False,
                                  policy=policy,  # type: ignore[arg-type]
                                  chat_factory=lambda recorder: ChatClient(
                                      config, recorder, backend_factory=lambda spec: ContextLimitedOracle())))
    by_mode = {(r.case.dimension, r.case.mode): r for r in results}
    for dimension in dims:
        full, top = by_mode[(dimension, "dump_all")], by_mode[(dimension, "retrieve")]
        assert top.score == 1.0 and top.excluded is None, "a case that fits is scored"
        if policy == "paper":
            assert (full.label, full.score, full.excluded) == ("unknown", 0.0, None)
        else:
            assert full.score is None and "longer than the model's context" in (full.excluded or "")
    with open_recording(record) as reader:
        fills = list(reader.iter_events(kinds=["slot_fill"]))[-4:]
    assert [f.overflow for f in fills] == [True, False, True, False]
