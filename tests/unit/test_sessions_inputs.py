"""Protocol-A inputs: the shipped sessions are clean, and broken inputs yield precise problems.

The broken-input tests copy ``sessions/`` to a temp dir, damage several files at once and check
that a single ``validate_sessions`` call names every damaged file and field.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from memprobe_engine.errors import MemProbeError
from memprobe_engine.recovery.inputs import (
    CATEGORY_DISPLAY,
    CATEGORY_GUIDE,
    CATEGORY_SLOTS,
    Category,
    DimensionPool,
    Problem,
    SessionDataError,
    UserBank,
    UserTasks,
    count_sentences,
    leak_reason,
    load_pool,
    load_user,
    load_users,
    retrieve_query,
    validate_sessions,
)

SESSIONS = Path(__file__).resolve().parents[2] / "sessions"


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A private, writable copy of the shipped sessions."""
    return Path(shutil.copytree(SESSIONS, tmp_path / "sessions"))


def _find(problems: list[Problem], file_end: str, field_start: str, text: str) -> Problem:
    hits = [p for p in problems if p.file.endswith(file_end) and p.field.startswith(field_start)
            and text in p.message]
    assert hits, f"no problem {file_end} {field_start!r} {text!r} in:\n" + \
        "\n".join(map(str, problems))
    return hits[0]


# --------------------------------------------------------------------------- shipped data

def test_shipped_sessions_have_no_problems() -> None:
    assert validate_sessions(SESSIONS) == []


def test_shipped_users_load_with_full_banks_and_tasks() -> None:
    users = load_users(SESSIONS)
    assert [u.user_id for u in users] == ["sim_01", "sim_02", "sim_03"]
    assert len({u.profile.age for u in users}) == 3
    assert len({u.profile.location for u in users}) == 3
    pool = load_pool(SESSIONS / "pool.json")
    for user in users:
        assert {c: len(user.bank.categories[c]) for c in Category} == CATEGORY_SLOTS
        assert len(user.bank.entries) == 31
        assert [t.dimension for t in user.tasks.tasks] == [e.dimension for e in user.bank.entries]
        for entry in user.bank.entries:
            assert pool.category_of(entry.dimension) == entry.category
            task = user.tasks.for_dimension(entry.dimension)
            assert task is not None and task.category == entry.category
            assert leak_reason(task.task, entry.short) is None


def test_shipped_pool_is_rich_and_sourced() -> None:
    pool = load_pool(SESSIONS / "pool.json")
    for cat in Category:
        dims = pool.categories[cat]
        assert len(dims) >= max(10, CATEGORY_SLOTS[cat])
        assert all(d.source and len(d.answer_space) >= 2 for d in dims)
    assert len(pool.names()) == len(set(pool.names()))


def test_load_users_subset_and_unknown_id() -> None:
    assert [u.user_id for u in load_users(SESSIONS, ids=["sim_03", "sim_01"])] == \
        ["sim_01", "sim_03"]
    with pytest.raises(SessionDataError, match="unknown user id 'nobody'"):
        load_users(SESSIONS, ids=["nobody"])


# --------------------------------------------------------------------------- broken inputs

def test_every_problem_is_reported_in_one_call(tree: Path) -> None:
    users = tree / "users"
    # sim_01: bank with only 6 skill entries, and one knowledge dimension that the pool lacks.
    bank = _read(users / "sim_01" / "bank.json")
    dropped = bank["categories"]["skill_memory"].pop()["dimension"]
    bank["categories"]["knowledge_memory"][2]["dimension"] = "invented_dimension"
    _write(users / "sim_01" / "bank.json", bank)
    # sim_02: a task aimed at a dimension not in the bank, and a task that leaks its target.
    bank2 = _read(users / "sim_02" / "bank.json")
    tasks = _read(users / "sim_02" / "tasks.json")
    tasks["tasks"][4]["dimension"] = "not_in_this_bank"
    target = bank2["categories"]["knowledge_memory"][0]["short"]
    tasks["tasks"][7]["task"] = f"People say I have {target.lower()}. Is that true?"
    _write(users / "sim_02" / "tasks.json", tasks)
    # sim_03: broken JSON in the profile (line 3), and tasks.json missing.
    profile = (users / "sim_03" / "profile.json").read_text(encoding="utf-8").splitlines()
    profile[2] = profile[2] + " oops"
    (users / "sim_03" / "profile.json").write_text("\n".join(profile), encoding="utf-8")
    (users / "sim_03" / "tasks.json").unlink()

    problems = validate_sessions(tree)

    _find(problems, "sim_01/bank.json", "categories.skill_memory", "expected exactly 7 entries, "
                                                                   "found 6")
    _find(problems, "sim_01/bank.json", "categories.knowledge_memory.2.dimension",
          "'invented_dimension' is not a dimension in pool.json")
    _find(problems, "sim_01/tasks.json", "tasks", f"{dropped!r} is not a dimension in this "
                                                  f"user's bank.json")
    _find(problems, "sim_02/tasks.json", "tasks.4.dimension", "'not_in_this_bank' is not a "
                                                              "dimension")
    _find(problems, "sim_02/tasks.json", "tasks", "no task for bank dimension")
    _find(problems, "sim_02/tasks.json", "tasks.7.task", "verbatim")
    broken = _find(problems, "sim_03/profile.json", "", "invalid JSON at line 3")
    assert "column" in broken.message and "line 3" in str(broken)
    _find(problems, "sim_03/tasks.json", "", "file is missing")


def test_field_errors_and_cross_file_rules_are_both_reported(tree: Path) -> None:
    path = tree / "users" / "sim_02" / "bank.json"
    bank = _read(path)
    skill = bank["categories"]["skill_memory"]
    skill[0]["explanation"] = "Only one sentence here."
    skill[1]["short"] = " ".join(["word"] * 20)
    del skill[2]["short"]
    skill[3]["dimension"] = skill[4]["dimension"]
    bank["categories"]["self_model"].append(dict(bank["categories"]["self_model"][0]))
    _write(path, bank)
    problems = validate_sessions(path)
    assert all(p.file == str(path) for p in problems)
    _find(problems, "bank.json", "categories.skill_memory.0.explanation", "2-4 sentences, found 1")
    _find(problems, "bank.json", "categories.skill_memory.1.short", "20 words")
    _find(problems, "bank.json", "categories.skill_memory.2.short", "Field required")
    _find(problems, "bank.json", "categories.skill_memory.4.dimension", "appears twice")
    _find(problems, "bank.json", "categories.self_model", "found 6")


def test_leak_by_content_words_and_task_rules(tree: Path) -> None:
    user = tree / "users" / "sim_01"
    bank = _read(user / "bank.json")
    short = bank["categories"]["skill_memory"][5]["short"]  # "Avoids haggling and usually ..."
    tasks = _read(user / "tasks.json")
    tasks["tasks"][5]["task"] = "I avoid haggling and accept the price they offer. Is that okay?"
    tasks["tasks"][6]["task_id"] = tasks["tasks"][0]["task_id"]
    tasks["tasks"][8]["category"] = "self_model"
    tasks["tasks"][9]["revised"] = True
    tasks["tasks"][10]["task"] = "One. Two. Three. Four sentences is too many."
    _write(user / "tasks.json", tasks)
    problems = validate_sessions(user / "tasks.json")
    leak = _find(problems, "tasks.json", "tasks.5.task", "content words")
    assert short in leak.message
    _find(problems, "tasks.json", "tasks.6.task_id", "already used by tasks.0")
    _find(problems, "tasks.json", "tasks.8.category", "bank.json files")
    _find(problems, "tasks.json", "tasks.9", "critic_verdict='fishing'")
    _find(problems, "tasks.json", "tasks.10.task", "1-3 sentences, found 4")


def test_pool_rules(tree: Path) -> None:
    path = tree / "pool.json"
    pool = _read(path)
    cats = pool["categories"]
    cats["self_model"] = cats["self_model"][:4]
    cats["skill_memory"][1]["name"] = cats["skill_memory"][0]["name"]
    cats["skill_memory"][2]["name"] = "Not Snake"
    cats["skill_memory"][3]["answer_space"] = ["only one"]
    cats["knowledge_memory"][0]["name"] = "terse_reader"
    cats["knowledge_memory"][0]["answer_space"] = ["terse", "wordy"]
    del cats["assistance_preference"]
    _write(path, pool)
    problems = validate_sessions(path)
    _find(problems, "pool.json", "categories.self_model", "at least 5 dimensions, found 4")
    _find(problems, "pool.json", "categories.skill_memory.1.name", "already defined")
    _find(problems, "pool.json", "categories.skill_memory.2.name", "pattern")
    _find(problems, "pool.json", "categories.skill_memory.3.answer_space", "at least 2")
    _find(problems, "pool.json", "categories.knowledge_memory.0.name", "spells out an answer")
    _find(problems, "pool.json", "categories.assistance_preference", "category is missing")


def test_user_dir_mode_and_user_id_mismatch(tree: Path) -> None:
    user = tree / "users" / "sim_03"
    tasks = _read(user / "tasks.json")
    tasks["user_id"] = "sim_99"
    _write(user / "tasks.json", tasks)
    problems = validate_sessions(user)
    assert len(problems) == 1
    assert problems[0].field == "user_id" and "'sim_99'" in problems[0].message


def test_paths_that_are_not_sessions() -> None:
    assert "does not exist" in validate_sessions("/nonexistent/sessions")[0].message
    readme = validate_sessions(SESSIONS / "README.md")
    assert "not a sessions file" in readme[0].message


def test_loaders_raise_one_error_listing_every_problem(tree: Path) -> None:
    user = tree / "users" / "sim_01"
    (user / "tasks.json").unlink()
    (user / "profile.json").write_text("{", encoding="utf-8")
    with pytest.raises(SessionDataError) as info:
        load_user(user)
    assert isinstance(info.value, MemProbeError)
    assert len(info.value.problems) == 2
    assert "tasks.json: file is missing" in str(info.value)
    with pytest.raises(SessionDataError):
        load_users(tree)


# --------------------------------------------------------------------------- models and helpers

def test_models_check_cross_rules_from_validation_context() -> None:
    pool = load_pool(SESSIONS / "pool.json")
    raw_bank = _read(SESSIONS / "users" / "sim_01" / "bank.json")
    bank = UserBank.model_validate(raw_bank, context={"pool": pool})
    assert bank.entries[0].category is Category.SKILL
    raw_bank["categories"]["skill_memory"][0]["dimension"] = "invented_dimension"
    UserBank.model_validate(raw_bank)  # without a pool only structure is checked
    with pytest.raises(ValidationError, match="not a dimension in pool.json"):
        UserBank.model_validate(raw_bank, context={"pool": pool})
    raw_tasks = _read(SESSIONS / "users" / "sim_01" / "tasks.json")
    raw_tasks["tasks"].pop()
    with pytest.raises(ValidationError, match="no task for bank dimension"):
        UserTasks.model_validate(raw_tasks, context={"bank": bank})
    assert DimensionPool.model_validate(_read(SESSIONS / "pool.json")).index() == pool.index()


def test_category_constants_and_retrieve_query() -> None:
    assert sum(CATEGORY_SLOTS.values()) == 31
    assert CATEGORY_DISPLAY[Category.SELF] == "Self Model"
    assert [c.value for c in Category] == ["skill_memory", "knowledge_memory", "episodic_memory",
                                           "self_model", "assistance_preference"]
    # Each guide states its scope and names the neighbouring categories it is not (the release's guide).
    assert all("Not " in CATEGORY_GUIDE[c] for c in Category)
    others = {c: [o.value for o in Category if o is not c and o.value in CATEGORY_GUIDE[c]] for c in Category}
    assert all(others[c] for c in Category if c is not Category.EPISODIC), others
    query = retrieve_query("bargaining_style", Category.SKILL)
    assert query == f"What best describes the user's bargaining style? " \
                    f"{CATEGORY_GUIDE[Category.SKILL]}"


@pytest.mark.parametrize(("text", "count"), [
    ("One.", 1),
    ("She met Dr. Ruiz at 6 a.m. on Monday. It went well!", 2),
    ("Is it right? Yes. No", 3),
    ("", 0),
])
def test_count_sentences(text: str, count: int) -> None:
    assert count_sentences(text) == count


def test_leak_reason_ignores_unrelated_overlap() -> None:
    target = "Negotiates firmly on prices"
    assert leak_reason("Can you help me plan a camping trip?", target) is None
    assert leak_reason("I negotiate hard on every price.", target)
