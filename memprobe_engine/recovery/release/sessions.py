"""Release personas, banks, tasks and taxonomy pool → a MemProbe sessions tree.

Mapping decisions (each one is also stated in the import report or the written files):

* **Pool.** The release pool maps field for field onto :class:`PoolDimension`. It omits each
  category's core dimensions, so a bank dimension absent from it is *added* under the bank's
  category with ``axis`` "(not in the released pool)", ``source`` naming the omission, and an
  ``answer_space`` made of the distinct target phrases the release banks give it (padded with an
  explicit placeholder when only one exists). Adding them keeps every cross-file rule (bank names
  verbatim from the pool) intact instead of relaxing it.
* **Profile.** DeepPersona profiles have no name and no communication style: ``name`` is the user
  id and ``communication_style`` is the profile's own ``life_attitude`` text; ``extra`` keeps every
  base-profile field not mapped, and ``extra.derived_fields`` says how each derived field was made.
* **Tasks.** ``task_id`` is the position in the release file (``t01``…). The release marks a task
  the anti-fishing critic flagged and the editor rewrote with ``pipeline_note``
  ``edited_after_fishing_flag`` → ``critic_verdict`` "fishing", ``revised`` true; every release
  task went through the critic, so an empty note → "neutral"; any other note → no verdict (None).
* **Text rules.** Release text is imported verbatim. Our authoring rules (sentence counts, target
  phrase length, leak check, minimum age, pool names that spell out an answer) are checked but
  *relaxed* for imports: violations are
  notices in the import report, never a reason to drop a user; structural problems are warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.imports.problems import ProblemLog
from memprobe_engine.recovery.release.files import BANK_FILE, POOL_FILE, Release
from memprobe_engine.recovery.input_rules import BANK_FILE as BANK_JSON
from memprobe_engine.recovery.input_rules import POOL_FILE as POOL_JSON
from memprobe_engine.recovery.input_rules import PROFILE_FILE, TASKS_FILE, USERS_DIR, Category
from memprobe_engine.recovery.inputs import Problem, validate_sessions

CATEGORIES: tuple[str, ...] = tuple(c.value for c in Category)
NOT_IN_POOL_AXIS = "(not in the released pool)"
NOT_IN_POOL_SOURCE = "release bank: a per-category core dimension the released dimension_pool.json omits"
SINGLE_ANSWER_PAD = "(no other position appears in the release)"
FISHING_NOTE = "edited_after_fishing_flag"
#: (last field segment, message fragment) of the authoring rules relaxed for imported text.
RELAXED_RULES: tuple[tuple[str, str], ...] = (
    ("explanation", "explanation must have"), ("task", "task statement must have"),
    ("short", "target phrase has"), ("task", "task statement leaks the target"),
    ("age", "is outside 13-110"),
    ("name", "name spells out an answer"))
#: Location fields in the order they read best ("city, state, country"); others follow.
LOCATION_ORDER = ("city", "state", "region", "country")


@dataclass
class ImportedUser:
    """One user in our on-disk shapes, plus the release task order (the order episodes ran in)."""

    user_id: str
    profile: dict[str, Any]
    bank: dict[str, Any]
    tasks: list[dict[str, Any]] | None

    def entries(self) -> list[dict[str, Any]]:
        """Bank entries with their category, in canonical category order (``UserBank.entries``)."""
        cats = self.bank["categories"]
        return [{"dimension": e.get("dimension"), "category": c, "short": e.get("short"),
                 "explanation": e.get("explanation")} for c in CATEGORIES for e in cats.get(c, [])]

    def unit_inputs(self, pool: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """What ``recovery.unit.unit_inputs`` stores for a unit: persona, bank, tasks (bank order), pool."""
        order = {e["dimension"]: i for i, e in enumerate(self.entries())}
        tasks = sorted(self.tasks or [], key=lambda t: order.get(t["dimension"], len(order)))
        return {"user_id": self.user_id, "profile": self.profile, "bank": self.entries(), "tasks": tasks,
                "pool": {t["dimension"]: pool[t["dimension"]] for t in tasks if t["dimension"] in pool}}


@dataclass
class ImportedInputs:
    """The pool (on-disk shape) and every user of the release bank file."""

    pool: dict[str, Any]
    users: list[ImportedUser] = field(default_factory=list)

    def pool_index(self) -> dict[str, dict[str, Any]]:
        """Dimension name → pool entry, across categories."""
        return {d["name"]: d for dims in self.pool["categories"].values() for d in dims}


def _text(value: object) -> object:
    """Strings stripped as our models strip them on load; anything else unchanged."""
    return value.strip() if isinstance(value, str) else value


def convert_pool(raw: dict[str, Any] | None, log: ProblemLog) -> dict[str, Any]:
    """The release pool as a ``DimensionPool`` dict (empty categories when the file is unusable)."""
    raw = raw or {}
    meta: dict[str, Any] = raw["meta"] if isinstance(raw.get("meta"), dict) else {}
    categories: dict[str, list[dict[str, Any]]] = {}
    for cat in CATEGORIES:
        dims = raw.get(cat, [])
        if not isinstance(dims, list):
            log.add("warning", POOL_FILE, f"{cat} is not a list; no pool dimensions imported for it")
            dims = []
        categories[cat] = [{"name": _text(d.get("name")), "axis": _text(d.get("axis")),
                            "answer_space": [_text(a) for a in d.get("answer_space") or []],
                            "source": _text(d.get("source"))} for d in dims if isinstance(d, dict)]
    for key in sorted(set(raw) - {"meta", *CATEGORIES}):
        log.add("notice", POOL_FILE, f"top-level key {key!r} is not a category; not imported")
    notes = " ".join(str(meta[k]) for k in ("purpose", "core_dims_note") if isinstance(meta.get(k), str))
    return {"version": str(meta.get("version") or "release"),
            "notes": f"Imported from the protocol-A public release ({POOL_FILE}). {notes}".strip(),
            "categories": categories}


def add_missing_dimensions(pool: dict[str, Any], users: list[ImportedUser], log: ProblemLog) -> list[str]:
    """Add bank dimensions the pool lacks (the release pool omits core dims); returns their names."""
    known = {d["name"] for dims in pool["categories"].values() for d in dims}
    missing: dict[str, tuple[str, list[str]]] = {}
    for user in users:
        for entry in user.entries():
            name = entry["dimension"]
            if isinstance(name, str) and name not in known:
                cat, shorts = missing.setdefault(name, (entry["category"], []))
                if isinstance(entry["short"], str) and entry["short"].lower() not in {s.lower() for s in shorts}:
                    shorts.append(entry["short"])
    for name, (cat, shorts) in missing.items():
        answers = shorts if len(shorts) >= 2 else [*shorts, SINGLE_ANSWER_PAD]
        pool["categories"][cat].append({"name": name, "axis": NOT_IN_POOL_AXIS, "answer_space": answers,
                                        "source": NOT_IN_POOL_SOURCE})
    if missing:
        log.add("notice", POOL_FILE, f"{len(missing)} bank dimension(s) are not in the released pool and were "
                                     f"added to pool.json with axis {NOT_IN_POOL_AXIS!r}: {', '.join(missing)}")
    return list(missing)


def _sub(base: dict[str, Any], key: str, sub: str) -> object:
    value = base.get(key)
    return value.get(sub) if isinstance(value, dict) else None


def convert_profile(user_id: str, base: dict[str, Any]) -> dict[str, Any]:
    """A ``PersonaProfile`` dict from a DeepPersona base profile; unmapped fields go to ``extra``."""
    used: dict[str, set[str] | None] = {"gender": None, "location": None, "age_info": {"age"},
                                        "career_info": {"status"}, "personal_values": {"values_orientation"},
                                        "personal_story": {"personal_story"},
                                        "life_attitude": {"attitude", "attitude_details"}}
    location = base.get("location")
    if isinstance(location, dict):
        keys = [k for k in LOCATION_ORDER if k in location] + [k for k in location if k not in LOCATION_ORDER]
        location = ", ".join(v.strip() for k in keys if isinstance(v := location[k], str) and v.strip())
    story = base.get("personal_story")
    values = _sub(base, "personal_values", "values_orientation")
    style = " ".join(str(_sub(base, "life_attitude", k)).strip() for k in ("attitude", "attitude_details")
                     if isinstance(_sub(base, "life_attitude", k), str))
    extra: dict[str, Any] = {"imported_from": "release-a", "derived_fields": {
        "name": "the release persona has no name; the user id stands in",
        "communication_style": "the release persona has none; life_attitude.attitude and attitude_details",
        "values": "personal_values.values_orientation as one item",
        "background": "personal_story.personal_story",
        "location": "the location fields joined"}}
    for key, value in base.items():
        taken = used.get(key, set())
        if key in used and taken is None:
            continue
        rest = {k: v for k, v in value.items() if k not in (taken or set())} if isinstance(value, dict) else value
        if rest not in ({}, None):
            extra[key] = rest
    occupation = _sub(base, "career_info", "status")
    return {"name": str(base.get("name") or user_id), "age": _sub(base, "age_info", "age"),
            "gender": _text(base.get("gender")), "location": _text(location),
            "occupation": " ".join(occupation.split()) if isinstance(occupation, str) else occupation,
            "background": _text(story.get("personal_story") if isinstance(story, dict) else story),
            "values": [values.strip()] if isinstance(values, str) else values,
            "communication_style": style or None, "extra": extra}


def convert_bank(user_id: str, memory_bank: object, log: ProblemLog) -> dict[str, Any]:
    """The release memory bank in ``UserBank`` on-disk form (entries without ``category``)."""
    categories: dict[str, list[dict[str, Any]]] = {c: [] for c in CATEGORIES}
    if not isinstance(memory_bank, dict):
        log.add("warning", BANK_FILE, "memory_bank is missing or not an object; the bank is empty", user_id=user_id)
        memory_bank = {}
    for cat, entries in memory_bank.items():
        if cat not in categories or not isinstance(entries, list):
            log.add("warning", BANK_FILE, f"memory_bank.{cat} is not a known category list; not imported",
                    user_id=user_id)
            continue
        categories[cat] = [{"dimension": _text(e.get("dimension")), "short": _text(e.get("short")),
                            "explanation": _text(e.get("explanation"))} for e in entries if isinstance(e, dict)]
    return {"user_id": user_id, "categories": categories}


def critic_of(note: str) -> tuple[str | None, bool]:
    """(critic_verdict, revised) from a release ``pipeline_note``."""
    if not note:
        return "neutral", False
    if "fishing" in note:
        return "fishing", note == FISHING_NOTE or "edit" in note or "revis" in note
    return None, False


def convert_tasks(user_id: str, raw: dict[str, Any] | None, bank: dict[str, Any],
                  log: ProblemLog) -> list[dict[str, Any]] | None:
    """The release tasks as ``Task`` dicts in file order; None when the file was unusable."""
    if raw is None:
        return None
    rel = Release.tasks(user_id)
    shorts = {e.get("dimension"): e.get("short") for es in bank["categories"].values() for e in es}
    tasks: list[dict[str, Any]] = []
    items: list[Any] = raw["tasks"] if isinstance(raw.get("tasks"), list) else []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            log.add("warning", rel, f"tasks[{i}] is not an object; skipped", user_id=user_id)
            continue
        note = str(item.get("pipeline_note") or "")
        verdict, revised = critic_of(note)
        dimension = _text(item.get("target_dimension"))
        if item.get("target_short") is not None and _text(item.get("target_short")) != shorts.get(dimension):
            log.add("warning", rel, f"tasks[{i}].target_short differs from the bank's short for {dimension}",
                    user_id=user_id)
        tasks.append({"task_id": f"t{i + 1:02d}", "dimension": dimension,
                      "category": _text(item.get("target_category")),
                      "task": _text(item.get("task")), "rationale": _text(item.get("rationale")),
                      "critic_verdict": verdict, "revised": revised, "pipeline_note": note})
    return tasks


def convert_inputs(release: Release, log: ProblemLog) -> ImportedInputs:
    """Read pool, banks and tasks of every user in the bank file, in user-id order."""
    pool = convert_pool(release.read(POOL_FILE, log), log)
    banks = release.read(BANK_FILE, log)
    users: dict[str, ImportedUser] = {}
    raw_users = banks.get("users") if isinstance(banks, dict) else None
    for i, raw in enumerate(raw_users if isinstance(raw_users, list) else []):
        user_id = raw.get("user_id") if isinstance(raw, dict) else None
        if not isinstance(user_id, str) or not user_id:
            log.add("warning", BANK_FILE, f"users[{i}] has no user_id; skipped")
            continue
        if user_id in users:
            log.add("warning", BANK_FILE, f"users[{i}] repeats {user_id}; the first entry is kept", user_id=user_id)
            continue
        base = raw.get("base_profile") if isinstance(raw.get("base_profile"), dict) else {}
        bank = convert_bank(user_id, raw.get("memory_bank"), log)
        tasks = convert_tasks(user_id, release.read(Release.tasks(user_id), log, user_id=user_id), bank, log)
        users[user_id] = ImportedUser(user_id, convert_profile(user_id, base), bank, tasks)
    inputs = ImportedInputs(pool=pool, users=[users[k] for k in sorted(users)])
    add_missing_dimensions(pool, inputs.users, log)
    return inputs


def _dump(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


def write_sessions(inputs: ImportedInputs, sessions: Path) -> None:
    """Write ``pool.json`` and ``users/<id>/{profile,bank,tasks}.json`` (tasks only when readable)."""
    _dump(sessions / POOL_JSON, inputs.pool)
    for user in inputs.users:
        folder = sessions / USERS_DIR / user.user_id
        _dump(folder / PROFILE_FILE, user.profile)
        _dump(folder / BANK_JSON, user.bank)
        if user.tasks is not None:
            _dump(folder / TASKS_FILE, {"user_id": user.user_id, "tasks": user.tasks})
        else:
            (folder / TASKS_FILE).unlink(missing_ok=True)


def is_relaxed(problem: Problem) -> bool:
    """Whether ``problem`` breaks only an authoring text rule that imports relax."""
    last = problem.field.rsplit(".", 1)[-1]
    return any(last == name and fragment in problem.message for name, fragment in RELAXED_RULES)


def validate_imported(sessions: Path, log: ProblemLog) -> dict[str, int]:
    """Validate the written tree; relaxed-rule violations become notices, the rest warnings."""
    counts = {"relaxed": 0, "structural": 0}
    root = sessions.resolve()
    for problem in validate_sessions(sessions, relaxed=False):  # list what the relaxed rules let through
        relaxed = is_relaxed(problem)
        counts["relaxed" if relaxed else "structural"] += 1
        path = Path(problem.file).resolve()
        rel = f"sessions/{path.relative_to(root)}" if path.is_relative_to(root) else problem.file
        what = f"{problem.field}: {problem.message}" if problem.field else problem.message
        log.add("notice" if relaxed else "warning", rel,
                f"{'relaxed authoring rule' if relaxed else 'does not validate'}: {what}",
                user_id=path.parent.name if path.parent.parent.name == USERS_DIR else None)
    return counts
