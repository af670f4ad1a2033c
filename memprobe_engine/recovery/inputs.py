"""Typed inputs of the recovery protocol (protocol A) and the loaders/validator for a sessions tree.

A sessions tree is ``<root>/pool.json`` (the taxonomy pool every bank draws its dimension names
from) plus ``<root>/users/<user_id>/{profile,bank,tasks}.json``. The bank is the hidden ground
truth — 31 dimensions in five categories (7/7/7/5/5) — and ``tasks.json`` holds one ordinary
help request per bank dimension that must not give the target away. The models enforce single-file
rules; cross-file rules (slot counts, names verbatim from the pool, one task per dimension, leak
check) run on plain data so :func:`validate_sessions` can report them even when a file also has
field errors. Inside a model they run as validators, with the pool / bank taken from the
validation context (``context={"pool": pool}`` / ``context={"bank": bank}``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memprobe_engine.errors import MemProbeError
from memprobe_engine.recovery.input_rules import (
    BANK_FILE,
    CATEGORY_DISPLAY,
    CATEGORY_GUIDE,
    CATEGORY_SLOTS,
    IDENT,
    IMPORTED_MARKER,
    MAX_SHORT_WORDS,
    POOL_FILE,
    PROFILE_FILE,
    SNAKE,
    TASKS_FILE,
    USER_FILES,
    USERS_DIR,
    Category,
    bank_issues,
    bank_view,
    content_words,
    count_sentences,
    leak_reason,
    pool_issues,
    retrieve_query,
    task_issues,
)

__all__ = ["BANK_FILE", "CATEGORY_DISPLAY", "CATEGORY_GUIDE", "CATEGORY_SLOTS", "POOL_FILE",
           "PROFILE_FILE", "TASKS_FILE", "USERS_DIR", "USER_FILES", "BankEntry", "Category",
           "DimensionPool", "PersonaProfile", "PoolDimension", "Problem", "SessionDataError",
           "SimUser", "Task", "UserBank", "UserTasks", "content_words", "count_sentences",
           "leak_reason", "load_pool", "load_user", "load_users", "retrieve_query",
           "validate_sessions"]


# --------------------------------------------------------------------------- models

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


def _skip_cross(info: ValidationInfo) -> bool:
    return bool((info.context or {}).get("skip_cross"))


def _relaxed(info: ValidationInfo) -> bool:
    """Authoring rules are off for trees imported from a release (``IMPORTED.json`` at the root)."""
    return bool((info.context or {}).get("relaxed"))


def is_imported(root: Path) -> bool:
    """Whether the sessions tree at ``root`` was imported from a published release."""
    return (root / IMPORTED_MARKER).exists()


def _raise_issues(issues: list[tuple[str, str]]) -> None:
    if issues:
        raise ValueError("; ".join(f"{f}: {m}" if f else m for f, m in issues))


class PoolDimension(_Strict):
    """A candidate dimension: axis-neutral name, the question its axis asks, example answers."""

    name: str = Field(pattern=SNAKE)
    axis: str = Field(min_length=8)
    answer_space: list[str] = Field(min_length=2)
    source: str = Field(min_length=2, description="source construct, e.g. 'O*NET Knowledge'")

    @field_validator("answer_space")
    @classmethod
    def _distinct_answers(cls, value: list[str]) -> list[str]:
        if any(not a.strip() for a in value) or len({a.lower() for a in value}) != len(value):
            raise ValueError("answers must be non-empty and distinct")
        return value


class DimensionPool(_Strict):
    """The taxonomy every bank draws from; names are unique across all categories."""

    version: str = Field(min_length=1)
    notes: str = ""
    categories: dict[Category, list[PoolDimension]]

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> DimensionPool:
        if not _skip_cross(info):
            _raise_issues(pool_issues(self.model_dump(mode="json")["categories"], authoring=not _relaxed(info)))
        return self

    def names(self, category: Category | None = None) -> list[str]:
        """Dimension names of one category, or of all categories in canonical order."""
        cats = [category] if category else [c for c in Category if c in self.categories]
        return [d.name for c in cats for d in self.categories.get(c, [])]

    def get(self, name: str) -> PoolDimension | None:
        """The pool dimension called ``name``, if any."""
        return next((d for ds in self.categories.values() for d in ds if d.name == name), None)

    def index(self) -> dict[str, Category]:
        """Every dimension name mapped to its category."""
        return {d.name: c for c, ds in self.categories.items() for d in ds}

    def category_of(self, name: str) -> Category | None:
        """The category ``name`` belongs to, if it is in the pool."""
        return self.index().get(name)


class BankEntry(_Strict):
    """One hidden target: a short phrase the judge scores against plus a grounding explanation."""

    dimension: str = Field(pattern=SNAKE)
    category: Category
    short: str = Field(min_length=2)
    explanation: str

    @field_validator("short")
    @classmethod
    def _short_is_short(cls, value: str, info: ValidationInfo) -> str:
        if not _relaxed(info) and len(value.split()) > MAX_SHORT_WORDS:
            raise ValueError(f"target phrase has {len(value.split())} words; keep it to "
                             f"{MAX_SHORT_WORDS} or fewer")
        return value

    @field_validator("explanation")
    @classmethod
    def _two_to_four_sentences(cls, value: str, info: ValidationInfo) -> str:
        if not _relaxed(info) and not 2 <= (n := count_sentences(value)) <= 4:
            raise ValueError(f"explanation must have 2-4 sentences, found {n}")
        return value


class UserBank(_Strict):
    """A user's 31 hidden dimensions, grouped by category (7/7/7/5/5), names verbatim from the pool.

    On disk the entries omit ``category``; it is filled from the group they are filed under.
    """

    user_id: str = Field(pattern=IDENT)
    categories: dict[Category, list[BankEntry]]

    @model_validator(mode="before")
    @classmethod
    def _fill_category(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("categories"), dict):
            data = {**data, "categories": {
                key: [{"category": key, **e} if isinstance(e, dict) else e for e in entries]
                if isinstance(entries, list) else entries
                for key, entries in data["categories"].items()}}
        return data

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> UserBank:
        if not _skip_cross(info):
            pool: DimensionPool | None = (info.context or {}).get("pool")
            _raise_issues(bank_issues(self.model_dump(mode="json")["categories"],
                                      pool.index() if pool else None))
        return self

    @property
    def entries(self) -> list[BankEntry]:
        """All entries in canonical category order."""
        return [e for c in Category for e in self.categories.get(c, [])]

    def entry(self, dimension: str) -> BankEntry | None:
        return next((e for e in self.entries if e.dimension == dimension), None)


class PersonaProfile(_Strict):
    """The persona the simulated user acts from; typed core fields plus free-form ``extra``."""

    name: str = Field(min_length=1)
    age: int = Field(ge=0, le=130)
    gender: str
    location: str
    occupation: str
    background: str = Field(min_length=20)
    values: list[str] = Field(min_length=1)
    communication_style: str = Field(min_length=10)
    extra: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("age")
    @classmethod
    def _adult_enough(cls, value: int, info: ValidationInfo) -> int:
        if not _relaxed(info) and not 13 <= value <= 110:
            raise ValueError(f"age {value} is outside 13-110, the range simulated users are written for")
        return value


class Task(_Strict):
    """One leak-controlled help request, opened by the simulated user, aimed at one dimension.

    ``critic_verdict`` is the blind anti-fishing critic's verdict on the first draft (None: the
    critic was not run); ``revised`` says the editor rewrote that draft after a fishing verdict.
    """

    task_id: str = Field(pattern=IDENT)
    dimension: str = Field(pattern=SNAKE)
    category: Category
    task: str = Field(min_length=10)
    rationale: str = Field(min_length=10)
    critic_verdict: Literal["neutral", "fishing"] | None = None
    revised: bool = False
    pipeline_note: str = ""

    @field_validator("task")
    @classmethod
    def _one_to_three_sentences(cls, value: str, info: ValidationInfo) -> str:
        if not _relaxed(info) and not 1 <= (n := count_sentences(value)) <= 3:
            raise ValueError(f"task statement must have 1-3 sentences, found {n}")
        return value

    @model_validator(mode="after")
    def _revision_needs_flag(self) -> Task:
        if self.revised and self.critic_verdict != "fishing":
            raise ValueError("revised=true requires critic_verdict='fishing'")
        return self


class UserTasks(_Strict):
    """Exactly one task per bank dimension; checked against ``context={"bank": UserBank}``."""

    user_id: str = Field(pattern=IDENT)
    tasks: list[Task]

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> UserTasks:
        if not _skip_cross(info):
            bank = (info.context or {}).get("bank")
            view = bank_view(bank.model_dump(mode="json")["categories"]) if bank else None
            _raise_issues(task_issues(self.model_dump(mode="json")["tasks"], view, authoring=not _relaxed(info)))
        return self

    def for_dimension(self, dimension: str) -> Task | None:
        return next((t for t in self.tasks if t.dimension == dimension), None)


class SimUser(_Strict):
    """Everything the benchmark holds about one simulated user; built by :func:`load_user`."""

    user_id: str = Field(pattern=IDENT)
    profile: PersonaProfile
    bank: UserBank
    tasks: UserTasks

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> SimUser:
        if {self.bank.user_id, self.tasks.user_id} != {self.user_id}:
            raise ValueError(f"bank/tasks user_id must equal {self.user_id!r}")
        view = bank_view(self.bank.model_dump(mode="json")["categories"])
        _raise_issues(task_issues(self.tasks.model_dump(mode="json")["tasks"], view, authoring=not _relaxed(info)))
        return self


# --------------------------------------------------------------------------- validation, loading

class Problem(BaseModel):
    """One thing wrong in a sessions tree: file, dotted field path ('' = whole file), and why."""

    model_config = ConfigDict(frozen=True)

    file: str
    field: str = ""
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}" if self.field else \
            f"{self.file}: {self.message}"


class SessionDataError(MemProbeError):
    """Session inputs failed validation; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the session inputs; fix these fields "
                         f"and load again:\n{lines}")


_MISSING = object()
M = TypeVar("M", bound=BaseModel)


def _read_json(path: Path, problems: list[Problem]) -> object:
    """Parsed JSON, or ``_MISSING`` after recording why it could not be read."""
    if path.exists() and not path.is_file():  # a FIFO or device would block the read for ever
        problems.append(Problem(file=str(path), message="not a regular file (a folder, pipe or device); "
                                                        "put the JSON file here"))
        return _MISSING
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(Problem(file=str(path), message="file is missing"))
    except json.JSONDecodeError as err:
        problems.append(Problem(file=str(path), message=f"invalid JSON at line {err.lineno}, "
                                                        f"column {err.colno}: {err.msg}"))
    except (OSError, UnicodeDecodeError) as err:
        problems.append(Problem(file=str(path), message=f"cannot read file: {err}"))
    except RecursionError:
        problems.append(Problem(file=str(path), message="JSON nested too deeply to read (thousands of levels)"))
    return _MISSING


def _validate(model: type[M], raw: object, path: Path, problems: list[Problem], relaxed: bool) -> M | None:
    """Field-level validation only (cross rules skipped); pydantic errors become Problems."""
    if raw is _MISSING:
        return None
    try:
        return model.model_validate(raw, context={"skip_cross": True, "relaxed": relaxed})
    except ValidationError as err:
        for e in err.errors(include_url=False):
            msg = e["msg"].removeprefix("Value error, ")
            problems.append(Problem(file=str(path), field=".".join(map(str, e["loc"])),
                                    message=msg))
        return None


def _add(path: Path, issues: list[tuple[str, str]], problems: list[Problem]) -> None:
    problems.extend(Problem(file=str(path), field=f, message=m) for f, m in issues)


def _categories(raw: object) -> object:
    return raw.get("categories") if isinstance(raw, dict) else None


def _check_pool(path: Path, relaxed: bool) -> tuple[DimensionPool | None, list[Problem]]:
    problems: list[Problem] = []
    raw = _read_json(path, problems)
    if raw is _MISSING:
        return None, problems
    pool = _validate(DimensionPool, raw, path, problems, relaxed)
    _add(path, pool_issues(_categories(raw), authoring=not relaxed), problems)
    return (pool if isinstance(pool, DimensionPool) and not problems else None), problems


def _check_user(user_dir: Path, pool: DimensionPool | None, relaxed: bool,
                only: str | None = None) -> tuple[SimUser | None, list[Problem]]:
    """Validate one user directory; with ``only`` set, report problems of that file alone."""
    found: dict[str, list[Problem]] = {name: [] for name in USER_FILES}
    raw = {name: _read_json(user_dir / name, found[name]) for name in USER_FILES}
    profile = _validate(PersonaProfile, raw[PROFILE_FILE], user_dir / PROFILE_FILE,
                        found[PROFILE_FILE], relaxed)
    bank = _validate(UserBank, raw[BANK_FILE], user_dir / BANK_FILE, found[BANK_FILE], relaxed)
    tasks = _validate(UserTasks, raw[TASKS_FILE], user_dir / TASKS_FILE, found[TASKS_FILE], relaxed)
    for name in (BANK_FILE, TASKS_FILE):
        data = raw[name]
        ident = data.get("user_id") if isinstance(data, dict) else None
        if isinstance(ident, str) and ident != user_dir.name:
            found[name].append(Problem(file=str(user_dir / name), field="user_id", message=(
                f"{ident!r} does not match the directory name {user_dir.name!r}")))
    if raw[BANK_FILE] is not _MISSING:
        if pool is None and only == BANK_FILE:
            found[BANK_FILE].append(Problem(file=str(user_dir / BANK_FILE), message=(
                f"no valid {POOL_FILE} two levels up; dimension names were not checked")))
        _add(user_dir / BANK_FILE, bank_issues(_categories(raw[BANK_FILE]),
                                               pool.index() if pool else None),
             found[BANK_FILE])
    if raw[TASKS_FILE] is not _MISSING:
        view = None if raw[BANK_FILE] is _MISSING else bank_view(_categories(raw[BANK_FILE]))
        if view is None and only == TASKS_FILE:
            found[TASKS_FILE].append(Problem(file=str(user_dir / TASKS_FILE), message=(
                f"no readable {BANK_FILE} beside it; tasks were not checked against the bank")))
        tasks_data = raw[TASKS_FILE]
        raw_tasks = tasks_data.get("tasks") if isinstance(tasks_data, dict) else None
        _add(user_dir / TASKS_FILE, task_issues(raw_tasks, view, authoring=not relaxed), found[TASKS_FILE])
    problems = found[only] if only else [p for name in USER_FILES for p in found[name]]
    if any(found.values()) or pool is None or profile is None or bank is None or tasks is None:
        return None, problems
    return SimUser.model_validate({"user_id": user_dir.name, "profile": profile, "bank": bank, "tasks": tasks},
                                  context={"relaxed": relaxed}), problems


def _user_dirs(root: Path) -> list[Path]:
    users = root / USERS_DIR
    return sorted(p for p in users.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))) \
        if users.is_dir() else []


def validate_sessions(path: str | Path, *, relaxed: bool | None = None) -> list[Problem]:
    """Every problem under ``path``: a sessions root, one user directory, or one JSON file.

    Never stops at the first problem; an empty list means the inputs load cleanly. ``relaxed``
    turns the authoring rules off; by default they are off exactly for imported trees.
    """
    path = Path(path)
    if not path.exists():
        return [Problem(file=str(path), message="path does not exist")]
    if path.is_file():
        root = path.parent if path.name == POOL_FILE else path.parent.parent.parent
        lax = is_imported(root) if relaxed is None else relaxed
        if path.name == POOL_FILE:
            return _check_pool(path, lax)[1]
        if path.name not in USER_FILES:
            return [Problem(file=str(path), message=f"not a sessions file; expected {POOL_FILE} "
                                                    f"or one of {', '.join(USER_FILES)}")]
        pool = _check_pool(root / POOL_FILE, lax)[0]
        return _check_user(path.parent, pool, lax, only=path.name)[1]
    is_user = path.parent.name == USERS_DIR or any((path / f).exists() for f in USER_FILES)
    if is_user and not (path / POOL_FILE).exists():
        lax = is_imported(path.parent.parent) if relaxed is None else relaxed
        pool, problems = _check_pool(path.parent.parent / POOL_FILE, lax)
        return problems + _check_user(path, pool, lax)[1]
    lax = is_imported(path) if relaxed is None else relaxed
    pool, problems = _check_pool(path / POOL_FILE, lax)
    dirs = _user_dirs(path)
    if not dirs:
        problems.append(Problem(file=str(path / USERS_DIR), message="no user directories found"))
    for user_dir in dirs:
        problems.extend(_check_user(user_dir, pool, lax)[1])
    return problems


def load_pool(path: str | Path) -> DimensionPool:
    """Load and fully validate a taxonomy pool; raises :class:`SessionDataError` on problems."""
    path = Path(path)
    pool, problems = _check_pool(path, is_imported(path.parent))
    if pool is None:
        raise SessionDataError(problems)
    return pool


def load_user(user_dir: str | Path, pool: DimensionPool | None = None) -> SimUser:
    """Load one user directory, checked against ``pool`` (default: ``<dir>/../../pool.json``)."""
    user_dir = Path(user_dir)
    relaxed = is_imported(user_dir.parent.parent)
    problems: list[Problem] = []
    if pool is None:
        pool, problems = _check_pool(user_dir.parent.parent / POOL_FILE, relaxed)
    user, user_problems = _check_user(user_dir, pool, relaxed)
    if user is None:
        raise SessionDataError(problems + user_problems)
    return user


def load_users(sessions_dir: str | Path, ids: Iterable[str] | None = None) -> list[SimUser]:
    """Load all users under ``<sessions_dir>/users`` (or just ``ids``), sorted by user id."""
    root = Path(sessions_dir)
    pool = load_pool(root / POOL_FILE)
    dirs = _user_dirs(root)
    if ids is not None:
        wanted = list(dict.fromkeys(ids))
        known = {d.name: d for d in dirs}
        if unknown := [i for i in wanted if i not in known]:
            raise SessionDataError([Problem(file=str(root / USERS_DIR), message=(
                f"unknown user id {i!r}; available: {', '.join(sorted(known)) or 'none'}"))
                for i in unknown])
        dirs = [known[i] for i in sorted(wanted)]
    problems: list[Problem] = []
    users: list[SimUser] = []
    for user_dir in dirs:
        user, found = _check_user(user_dir, pool, is_imported(root))
        problems.extend(found)
        if user is not None:
            users.append(user)
    if problems:
        raise SessionDataError(problems)
    return users
