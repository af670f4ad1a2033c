"""Protocol A as the recovery release runs it (issue #10): what each role sees and does not see, and
the parameters it is called with, rendered from fixed inputs (sample user sim_01) — content, not wording.

Episode-level checks drive ``run_episode`` with a scripted chat backend and record every request.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory.base import MemoryServices, SimClock
from memprobe_engine.memory.longctx_full import LongContextFull
from memprobe_engine.memory.nomem import NoMemory
from memprobe_engine.recovery import prompts
from memprobe_engine.recovery.input_rules import CATEGORY_GUIDE, Category, retrieve_query
from memprobe_engine.recovery.inputs import SimUser, load_user
from memprobe_engine.recovery.policy import check_policy, release_label
from memprobe_engine.recovery.config import policy_of
from memprobe_engine.recovery.rollout import RolloutSettings, run_episode
from memprobe_engine.recovery.schemas import SimulatorReply
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, temp_recording

SESSIONS = Path(__file__).resolve().parents[2] / "sessions"


@pytest.fixture(scope="module")
def user() -> SimUser:
    return load_user(SESSIONS / "users" / "sim_01")


def text_of(messages: list[Any]) -> str:
    return "\n".join(m.content for m in messages)


# ------------------------------------------------------------------------------ point 1: simulator

def test_simulator_sees_the_whole_persona_and_bank_but_no_target_pointer(user: SimUser) -> None:
    task = user.tasks.tasks[0]
    history = [("user", task.task), ("assistant", "Reply one."), ("user", "Answer one."), ("assistant", "Reply two.")]
    messages = prompts.simulator_messages(user, task.task, history)
    body = messages[-1].content
    profile_json = orjson.loads(body.split("YOUR PROFILE AND MEMORY BANK\n", 1)[1].split("\n\nTHE REQUEST", 1)[0])
    # every bank entry with its explanation, every profile field including the free-form extras
    listed = [e for entries in profile_json["memory_bank"].values() for e in entries]
    assert len(listed) == len(user.bank.entries) == 31
    assert {(e["dimension"], e["short"], e["explanation"]) for e in listed} == \
        {(e.dimension, e.short, e.explanation) for e in user.bank.entries}
    assert all(key in profile_json["base_profile"] for key in user.profile.extra)
    assert profile_json["base_profile"]["communication_style"] == user.profile.communication_style
    # the target dimension is named no more often than any other dimension: no pointer to it
    assert body.count(task.dimension) == 1
    assert task.task in body and "Reply two." in body.split("THE ASSISTANT JUST SAID", 1)[1]
    assert "Answer one." in body  # earlier user answers, also listed as "do not repeat"
    system = messages[0].content
    assert all(label in system for label in prompts.FEEDBACK_TYPES) and len(prompts.FEEDBACK_TYPES) == 7
    assert "is_done" not in system and "one to three sentences" not in system


def test_only_satisfied_ends_and_the_reply_has_no_length_rule() -> None:
    assert set(SimulatorReply.model_fields) == {"feedback_type", "text"}
    assert SimulatorReply(feedback_type="satisfied", text="ok").is_done
    assert not any(SimulatorReply(feedback_type=t, text="x").is_done for t in prompts.FEEDBACK_TYPES[:-1])
    long_turn = "word " * 300  # 56 % of the release's user turns exceed our old 400-character cap
    assert SimulatorReply(feedback_type="followup", text=long_turn).text == long_turn
    assert RolloutSettings().simulator_temperature == 0.85 and RolloutSettings().agent_temperature == 0.7


# ------------------------------------------------------------------------------ points 2 and 3: slot-fill, query

def test_slot_fill_sees_category_guide_and_dimension_but_no_hint_or_explanation(user: SimUser) -> None:
    entry = user.bank.entries[0]
    messages = prompts.slot_fill_messages(entry.dimension, entry.category, CATEGORY_GUIDE[entry.category], "[]")
    text = text_of(messages)
    assert CATEGORY_GUIDE[entry.category] in text and f"DIMENSION: {entry.dimension}\n" in text
    assert entry.category.value in text
    assert entry.explanation not in text and entry.short not in text
    assert "might look like" not in text.lower()
    assert re.search(r"\b15 words\b", text) and "12 words" not in text
    # anti-drift: the rules name the categories a label must not drift into
    assert "skill_memory" in text and "assistance_preference" in text


def test_retrieve_query_is_the_axis_with_spaces_and_the_category_guide() -> None:
    query = retrieve_query("low_point_episode", Category.EPISODIC)
    assert query.startswith("What best describes the user's low point episode? ")
    assert query.endswith(CATEGORY_GUIDE[Category.EPISODIC]) and "_" not in query.split("?")[0]


# ------------------------------------------------------------------------------ points 6, 7: judges

def test_attribution_prompts_carry_the_release_content(user: SimUser) -> None:
    entry, task = user.bank.entries[3], user.tasks.tasks[3]
    history = [("user", task.task), ("assistant", "A reply."), ("user", "An answer.")]
    stage0 = text_of(prompts.task_design_messages(task.task, entry))
    assert "perfectly probing assistant" in stage0 and "perfectly cooperative" in stage0
    assert "A reply." not in stage0 and entry.explanation in stage0  # no conversation; the full target
    stage1 = text_of(prompts.disclosure_messages(task.task, history, entry))
    assert "Indirect signals count" in stage1 and entry.explanation in stage1 and task.task in stage1
    stage2 = text_of(prompts.elicitation_messages(task.task, history, entry))
    assert entry.explanation in stage2 and "An answer." in stage2 and task.task in stage2


def test_preference_judge_sees_task_explanations_and_calibration(user: SimUser) -> None:
    prefs = [e for e in user.bank.entries if e.category == Category.PREFERENCE]
    text = text_of(prompts.preference_messages(prefs, "Plan my week.", "Here is the plan."))
    assert "Plan my week." in text and all(p.explanation in text for p in prefs)
    assert "positive evidence" in text and "null" in text


def test_judge_sees_explanation_truth_and_prediction(user: SimUser) -> None:
    entry = user.bank.entries[5]
    text = text_of(prompts.judge_messages(entry, "some prediction"))
    assert entry.explanation in text and entry.short in text and "some prediction" in text


# ------------------------------------------------------------------------------ point 4 / #9.6: policies

def test_policies_by_name_and_the_release_defaults() -> None:
    assert check_policy("paper") == "paper" and check_policy(" AUDIT ") == "audit"
    with pytest.raises(ConfigError, match="paper, audit"):
        check_policy("lenient")
    assert policy_of({"policy": "audit"}) == "audit" and policy_of({"source": "release-a"}) == "paper"
    assert policy_of({}) == "audit"  # recordings from before policies existed
    assert release_label('{"label": "likes lists", "extra": 1') == '{"label": "likes lists", "extra": 1'
    assert release_label('sure: {"label": "likes lists"}') == "likes lists"
    assert release_label("   ") == "unknown"


# ------------------------------------------------------------------------------ point 5, 10: episodes

Answer = Callable[[ChatRequest], str]


def scripted(simulator: Answer) -> Answer:
    def answer(request: ChatRequest) -> str:
        system = request.messages[0].content
        if system.startswith("You are a personalised AI assistant"):
            return f"Reply number {sum(1 for m in request.messages if m.role == 'assistant') + 1}."
        if system.startswith("You play one particular real person"):
            return simulator(request)
        if system.startswith("You judge how well one reply"):
            return '{"reason": "ok", "ratings": []}'
        raise AssertionError(system[:40])
    return answer


def sim_turn(request: ChatRequest) -> int:
    match = re.search(r"^TURN (\d+):", request.messages[-1].content, flags=re.M)
    assert match
    return int(match.group(1))


async def episodes(tmp_path: Path, user: SimUser, simulator: Answer, *, system: str = "longctx_full",
                   tasks: int = 2, settings: RolloutSettings | None = None) -> tuple[Any, ScriptedBackend, list[Any]]:
    backend = ScriptedBackend(scripted(simulator))
    config = load_llm_config(None, {}, ["openai:test-model@http://127.0.0.1:1/v1"])
    done = []
    with temp_recording(tmp_path / "rec") as recorder:
        chat = ChatClient(config, recorder, backend_factory=lambda spec: backend)
        services = MemoryServices(recorder=recorder, clock=SimClock(), chat=chat, embedder=BagOfWordsEmbedder())
        memory = LongContextFull(services) if system == "longctx_full" else NoMemory(services)
        with recorder.scope(user_id=user.user_id, system=system):
            await memory.reset(user.user_id)
            for index, task in enumerate(user.tasks.tasks[:tasks]):
                done.append(await run_episode(chat=chat, recorder=recorder, system=memory, user=user, task=task,
                                              task_index=index, clock=services.clock,
                                              settings=settings or RolloutSettings(max_turns=4, preference_judge=False)))
    return memory, backend, done


async def test_the_episode_runs_until_satisfied_and_the_final_reply_is_not_stored(tmp_path: Path,
                                                                                  user: SimUser) -> None:
    def simulator(request: ChatRequest) -> str:
        turn = sim_turn(request)
        label = "satisfied" if turn == 3 else ("add_context" if turn == 1 else "too_shallow")
        return orjson.dumps({"feedback_type": label, "text": f"user answer {turn}"}).decode()

    memory, backend, done = await episodes(tmp_path, user, simulator)
    assert [(e.end_reason, e.turns) for e in done] == [("satisfied", 3), ("satisfied", 3)]
    contents = [item["content"] for item in memory.dump()]
    # per task: opening, replies 1 and 2, all three user answers; reply 3 (the final one) is dropped
    first = [c for c, item in zip(contents, memory.dump()) if item["task_index"] == 0]
    assert first == [f"[Task 0] {user.tasks.tasks[0].task}", "Agent: Reply number 1.", "User: user answer 1",
                     "Agent: Reply number 2.", "User: user answer 2", "User: user answer 3"]
    # agent requests: no reply cap by default, temperature 0.7; the scaffold asks no closing question
    agent = [r for r in backend.requests if r.messages[0].content.startswith("You are a personalised")]
    assert all(r.params.max_tokens is None and r.params.temperature == 0.7 for r in agent)
    assert "question" not in agent[0].messages[0].content
    sims = [r for r in backend.requests if r.messages[0].content.startswith("You play one")]
    assert all(r.params.temperature == 0.85 for r in sims)
    # longctx_full: the second task's assistant sees the whole first transcript (not a top 5), as chat turns
    second = [r for r in agent if user.tasks.tasks[1].task in r.messages[-1].content or
              any(user.tasks.tasks[1].task == m.content for m in r.messages)][0]
    replayed = [m.content for m in second.messages[1:]]
    assert replayed[:6] == [user.tasks.tasks[0].task, "Reply number 1.", "user answer 1", "Reply number 2.",
                            "user answer 2", "user answer 3"]


async def test_memory_is_searched_before_the_latest_message_is_written(tmp_path: Path, user: SimUser) -> None:
    def simulator(request: ChatRequest) -> str:
        return orjson.dumps({"feedback_type": "satisfied" if sim_turn(request) == 2 else "followup",
                             "text": "a distinctive zebra remark"}).decode()

    await episodes(tmp_path, user, simulator, tasks=1)
    with open_recording(tmp_path / "rec") as reader:
        events = list(reader.iter_events(kinds=["retrieval", "memory_op"]))
    first_retrieval = next(i for i, e in enumerate(events) if e.kind == "retrieval")
    assert not any(e.kind == "memory_op" and e.op == "add" for e in events[:first_retrieval])


async def test_unusable_simulator_replies_never_count_against_a(tmp_path: Path, user: SimUser) -> None:
    def garbled(request: ChatRequest) -> str:
        return "I refuse to answer in JSON."

    for policy in ("paper", "audit"):
        _, backend, done = await episodes(tmp_path / policy, user, garbled, system="nomem", tasks=1,
                                          settings=RolloutSettings(max_turns=3, preference_judge=False,
                                                                   policy=check_policy(policy)))
        sims = [r for r in backend.requests if r.messages[0].content.startswith("You play one")]
        assert done[0].end_reason == "excluded"
        # paper: the release's fallback goes on with a follow-up until the cap; audit stops at once
        assert done[0].turns == (3 if policy == "paper" else 1)
        assert len(sims) == done[0].turns * 3  # each reply asked once plus two repair rounds
        with open_recording(tmp_path / policy / "rec") as reader:
            (end,) = list(reader.iter_events(kinds=["episode_end"]))
        assert end.end_reason == "excluded" and end.excluded


def test_metric_a_leaves_excluded_episodes_out() -> None:
    """Excluding an episode (unusable simulator) changes neither A nor anything else about the others."""
    import pandas as pd

    from memprobe_engine.recovery.read.frames import (
        ATTRIBUTION_SCHEMA,
        FOOTPRINT_SCHEMA,
        PREFERENCE_SCHEMA,
        SCORE_SCHEMA,
        ReportFrames,
    )
    from memprobe_engine.recovery.read.tables import table2

    def frames(reasons: list[str]) -> ReportFrames:
        empty = {name: pd.DataFrame(columns=list(schema)).astype(schema) for name, schema in (
            ("scores", SCORE_SCHEMA), ("preferences", PREFERENCE_SCHEMA), ("footprints", FOOTPRINT_SCHEMA),
            ("attribution", ATTRIBUTION_SCHEMA))}
        episodes = pd.DataFrame({"system": ["nomem"] * len(reasons), "user_id": ["u1"] * len(reasons),
                                 "task_index": list(range(len(reasons))), "end_reason": reasons,
                                 "turns": [2] * len(reasons)})
        return ReportFrames(empty["scores"], episodes, empty["preferences"], empty["footprints"],
                            empty["attribution"])

    base = table2(frames(["satisfied", "turn_cap", "satisfied", "satisfied"]))
    with_excluded = table2(frames(["satisfied", "turn_cap", "satisfied", "satisfied", "excluded", "excluded"]))
    assert base["A_pct"].tolist() == with_excluded["A_pct"].tolist() == [75.0]


def test_report_prints_the_policy_under_every_table(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memprobe_engine.cli import app

    sample = Path(__file__).resolve().parents[2] / "recordings" / "sample-quick-sim_01"
    with open_recording(sample) as reader:
        policy = policy_of(reader.header.config)
    result = CliRunner().invoke(app, ["report", str(sample)])
    assert result.exit_code == 0, result.output
    tables = result.output.count("Table ")
    assert tables >= 5 and result.output.count(f"exclusion policy: {policy}") == tables


def test_dry_run_prints_the_paper_protocol_and_calls_nothing(tmp_path: Path) -> None:
    """`memprobe run --config sessions/paper.toml --dry-run`: the release's configuration, resolved, no call."""
    from typer.testing import CliRunner

    from memprobe_engine.cli import app

    record = tmp_path / "never"
    result = CliRunner().invoke(app, ["run", "--record", str(record), "--config", str(SESSIONS / "paper.toml"),
                                      "--users", "sim_01", "--systems", "nomem,longctx_full,amem", "--dry-run"],
                                env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert not record.exists() and "no model was called" in out
    roles_table = out.split("cost estimate per role")[0]  # the models table (the cost table lists roles too)
    rows = {line.split()[0]: line.split()[1:] for line in roles_table.splitlines() if line.strip() and
            line.split()[0] in ("agent", "simulator", "slot_filler", "memory_writer")}
    assert "cost estimate per role" in out and "agent" in out.split("cost estimate per role")[1]
    assert rows["agent"][:3] == ["openai:gpt-5.4-mini", "0.7", "none"]
    assert rows["simulator"][:3] == ["openai:gpt-5.4-mini", "0.85", "8192"]
    assert rows["slot_filler"][:2] == ["openai:gpt-5.4-mini", "0.0"] and "memory_writer" in rows
    assert re.search(r"turn cap\s+25", out) and re.search(r"k \(retrieve mode\)\s+5", out)
    assert re.search(r"exclusion policy\s+paper", out)


async def test_the_preference_judge_gets_its_own_reply_cap(tmp_path: Path, user: SimUser) -> None:
    """It rates every preference with a reason, so the slot-fill/judge cap would cut its JSON: its own
    cap goes out when set, the judge cap otherwise (and 0 sends none)."""
    def simulator(request: ChatRequest) -> str:
        return orjson.dumps({"feedback_type": "satisfied", "text": "thanks"}).decode()

    def judge_caps(backend: ScriptedBackend) -> set[int | None]:
        return {r.params.max_tokens for r in backend.requests
                if r.messages[0].content.startswith("You judge how well one reply")}

    cases = [(None, {150}), (400, {400}), (0, {None})]
    for index, (own, expected) in enumerate(cases):
        settings = RolloutSettings(max_turns=1, judge_max_tokens=150, preference_judge_max_tokens=own)
        _, backend, _ = await episodes(tmp_path / str(index), user, simulator, system="nomem", tasks=1,
                                       settings=settings)
        assert judge_caps(backend) == expected
