"""Taxonomy constants and the plain-data rules behind protocol-A input validation.

Kept free of pydantic models so the same rules serve two callers: the model validators in
:mod:`memprobe_engine.recovery.inputs` (on already-parsed models) and ``validate_sessions`` (on raw
JSON that may also have field errors, so cross-file problems are still reported). Every rule
returns ``(dotted field, message)`` pairs instead of raising, and never stops at the first issue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any


class Category(StrEnum):
    """The five bank categories, in the canonical order used for display and scoring."""

    SKILL = "skill_memory"
    KNOWLEDGE = "knowledge_memory"
    EPISODIC = "episodic_memory"
    SELF = "self_model"
    PREFERENCE = "assistance_preference"


#: Dimensions per user and category; 7+7+7+5+5 = 31 recovery targets per user.
CATEGORY_SLOTS: dict[Category, int] = {Category.SKILL: 7, Category.KNOWLEDGE: 7,
                                       Category.EPISODIC: 7, Category.SELF: 5,
                                       Category.PREFERENCE: 5}
CATEGORY_DISPLAY: dict[Category, str] = {
    Category.SKILL: "Skill Memory", Category.KNOWLEDGE: "Knowledge Memory",
    Category.EPISODIC: "Episodic Memory", Category.SELF: "Self Model",
    Category.PREFERENCE: "Assistance Preference"}
#: What each category covers and where its borders run: shown to the slot-filler with the category
#: and appended to retrieve-mode queries. User-independent. The content (scope, then the "not"
#: clauses naming the neighbouring categories) follows the recovery release's category guide.
CATEGORY_GUIDE: dict[Category, str] = {
    Category.SKILL: (
        "What the person can actually DO: practical, operational abilities, how far their proficiency "
        "reaches, what they carry out well or badly. Not facts they merely know (knowledge_memory), not "
        "what they BELIEVE about their abilities (self_model), not particular past events (episodic_memory)."),
    Category.KNOWLEDGE: (
        "What the person knows, does not know or gets wrong about the OUTSIDE WORLD: facts, subject areas, "
        "concepts and misconceptions about things beyond themselves. Not about themselves (self_model), not "
        "what they can DO with it (skill_memory), not particular remembered events (episodic_memory)."),
    Category.EPISODIC: (
        "Particular PAST EVENTS that shaped how the person judges things now: concrete and placed in time, "
        "'when X happened to me, it led to Y'. Not lasting traits, abilities or beliefs (the other "
        "categories): every entry is an event, not a stable property."),
    Category.SELF: (
        "What the person BELIEVES ABOUT THEMSELVES: how they see their own abilities, identity and traits, "
        "which may contradict their real skills and knowledge; over- and under-confidence, blind spots and "
        "self-deception belong here, and each entry is a self-belief that may be right or wrong. Not "
        "objective ability (skill_memory), not objective knowledge (knowledge_memory)."),
    Category.PREFERENCE: (
        "How the person wants to be HELPED, the delivery side of an interaction: format, tone, pace, level "
        "of detail, language, what they dislike in help. Only interaction style, not content. Not what they "
        "know or can do (other categories), not how they see themselves (self_model)."),
}

POOL_FILE, USERS_DIR = "pool.json", "users"
#: Present at the root of a sessions tree imported from a published release: its text is kept
#: verbatim, so the *authoring* rules (sentence counts, phrase length, age range, the leak check,
#: pool names that spell out an answer) are relaxed there; structural rules always hold.
IMPORTED_MARKER = "IMPORTED.json"
PROFILE_FILE, BANK_FILE, TASKS_FILE = "profile.json", "bank.json", "tasks.json"
USER_FILES = (PROFILE_FILE, BANK_FILE, TASKS_FILE)
MAX_SHORT_WORDS = 15
SNAKE = r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$"
IDENT = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"


def retrieve_query(dimension: str, category: Category) -> str:
    """Axis-only query for retrieve mode: no user content, so only the read interface is tested. As in
    the release, the dimension's underscores become spaces and the category guide follows."""
    return f"What best describes the user's {dimension.replace('_', ' ')}? {CATEGORY_GUIDE[category]}"


# --------------------------------------------------------------------------- text heuristics

_ABBREV = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "u.s", "a.m",
           "p.m", "approx", "mt", "ft", "inc", "co"}
_SENT_END = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")
_STOP = set("""a an the and or but nor so yet if then than that this these those there here of in
on at to from by for with about into onto over under after before during without within through
up down out off again is am are was were be been being have has had do does did doing i me my
mine myself we us our you your yours he him his she her hers it its they them their what which
who whom whose when where why how all any both each few more most other some such only own same
too very just can could will would shall should may might must not no also as get got lot lots
really want need like one two make something anything help please thanks""".split())


def count_sentences(text: str) -> int:
    """Count sentences, ignoring full stops after common abbreviations and single initials."""
    count, start = 0, 0
    for match in _SENT_END.finditer(text):
        words = text[start:match.start()].split()
        last = words[-1].lower().rstrip(".") if words else ""
        initial = len(last) == 1 and last.isalpha()
        if match.group().startswith(".") and (last in _ABBREV or initial):
            continue
        rest = text[match.end():].lstrip()
        if rest and rest[0].islower():
            continue
        count, start = count + 1, match.end()
    return count + (1 if text[start:].strip() else 0)


def _stem(word: str) -> str:
    """Crude suffix stripping so 'negotiates', 'negotiated' and 'negotiate' compare equal."""
    if word.endswith("s") and not word.endswith("ss") and len(word) > 4:
        word = word[:-1]
    for suffix in ("ing", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def content_words(text: str) -> list[str]:
    """Lower-cased, lightly stemmed words of three or more letters that are not function words."""
    tokens = re.findall(r"[^\W_]+", text.lower().replace("'", "").replace("\u2019", ""))
    return [_stem(t) for t in tokens if len(t) >= 3 and t not in _STOP]


def leak_reason(task: str, short: str) -> str | None:
    """Why ``task`` gives away ``short`` (verbatim, or most of its content words), else None."""
    norm_short, norm_task = (" ".join(re.findall(r"[^\W_]+", s.lower())) for s in (short, task))
    if norm_short and f" {norm_short} " in f" {norm_task} ":
        return f"contains the target phrase {short!r} verbatim"
    targets = list(dict.fromkeys(content_words(short)))
    present = set(content_words(task))
    hits = [w for w in targets if w in present]
    if len(hits) >= 2 and 2 * len(hits) > len(targets):
        return (f"repeats {len(hits)} of {len(targets)} content words of the target phrase "
                f"{short!r} ({', '.join(hits)})")
    return None


# --------------------------------------------------------------------------- cross-file rules
# These take plain (possibly invalid) JSON data and return (dotted field, message) pairs.

def _dicts(value: object) -> Iterable[tuple[int, dict[str, Any]]]:
    return ((i, e) for i, e in enumerate(value) if isinstance(e, dict)) \
        if isinstance(value, list) else ()


def _group_counts(categories: object, noun: str, exact: bool) -> list[tuple[str, str]]:
    """Per category: present, and exactly (bank) / at least (pool) its slot count long."""
    issues: list[tuple[str, str]] = []
    if not isinstance(categories, Mapping):
        return issues
    how = "exactly" if exact else "at least"
    for cat in Category:
        entries, want = categories.get(cat.value), CATEGORY_SLOTS[cat]
        if entries is None:
            issues.append((f"categories.{cat.value}",
                           f"category is missing; expected {how} {want} {noun}"))
        elif isinstance(entries, list) and (len(entries) != want if exact else len(entries) < want):
            issues.append((f"categories.{cat.value}",
                           f"expected {how} {want} {noun}, found {len(entries)}"))
    return issues


def pool_issues(categories: object, *, authoring: bool = True) -> list[tuple[str, str]]:
    """Every category present with at least its slot count; names unique; names not answers
    (that last one an authoring rule, skipped when ``authoring`` is False)."""
    issues = _group_counts(categories, "dimensions", exact=False)
    seen: dict[str, str] = {}
    for cat, dims in (categories.items() if isinstance(categories, Mapping) else ()):
        for i, dim in _dicts(dims):
            name, at = dim.get("name"), f"categories.{cat}.{i}"
            if not isinstance(name, str):
                continue
            if name in seen:
                issues.append((f"{at}.name", f"{name!r} is already defined at {seen[name]}"))
            seen.setdefault(name, at)
            answers = dim.get("answer_space")
            answers = answers if isinstance(answers, list) else []
            named = [a for a in answers if isinstance(a, str) and a.lower() in name.split("_")]
            if named and authoring:
                issues.append((f"{at}.name", f"name spells out an answer ({named[0]!r}); name "
                                             f"the axis, not a position on it"))
    return issues


def bank_issues(categories: object,
                pool_index: Mapping[str, Category] | None) -> list[tuple[str, str]]:
    """Slot counts 7/7/7/5/5, no duplicate dimensions, names verbatim from the pool if given.

    ``pool_index`` maps every pool dimension name to its category (``DimensionPool.index()``).
    """
    issues = _group_counts(categories, "entries", exact=True)
    seen: dict[str, str] = {}
    for cat, entries in (categories.items() if isinstance(categories, Mapping) else ()):
        for i, entry in _dicts(entries):
            name, at = entry.get("dimension"), f"categories.{cat}.{i}"
            if entry.get("category", cat) != cat:
                issues.append((f"{at}.category", f"entry says {entry['category']!r} but is filed "
                                                  f"under {cat!r}"))
            if not isinstance(name, str):
                continue
            if name in seen:
                issues.append((f"{at}.dimension", f"{name!r} appears twice (first at "
                                                   f"{seen[name]})"))
            seen.setdefault(name, at)
            home = pool_index.get(name) if pool_index is not None else None
            if pool_index is not None and home is None:
                issues.append((f"{at}.dimension", f"{name!r} is not a dimension in {POOL_FILE}"))
            elif home is not None and home != cat:
                issues.append((f"{at}.dimension", f"{name!r} belongs to {home.value} in "
                                                   f"{POOL_FILE}, not {cat}"))
    return issues


def bank_view(categories: object) -> dict[str, tuple[str, str]] | None:
    """dimension -> (category, short) from plain bank data; None when it is not a mapping."""
    if not isinstance(categories, Mapping):
        return None
    return {e["dimension"]: (str(cat), str(e.get("short", "")))
            for cat, entries in categories.items() for _, e in _dicts(entries)
            if isinstance(e.get("dimension"), str)}


def task_issues(tasks: object, bank: Mapping[str, tuple[str, str]] | None, *,
                authoring: bool = True) -> list[tuple[str, str]]:
    """Unique ids; one task per bank dimension with the bank's category; no target leak (the leak
    check is an authoring rule, skipped when ``authoring`` is False)."""
    issues: list[tuple[str, str]] = []
    ids: dict[str, int] = {}
    dims: dict[str, int] = {}
    for i, task in _dicts(tasks):
        at, tid, dim = f"tasks.{i}", task.get("task_id"), task.get("dimension")
        if isinstance(tid, str):
            if tid in ids:
                issues.append((f"{at}.task_id", f"{tid!r} is already used by tasks.{ids[tid]}"))
            ids.setdefault(tid, i)
        if not isinstance(dim, str):
            continue
        if dim in dims:
            issues.append((f"{at}.dimension", f"second task for {dim!r} (first is "
                                              f"tasks.{dims[dim]})"))
        dims.setdefault(dim, i)
        if bank is None:
            continue
        if dim not in bank:
            issues.append((f"{at}.dimension", f"{dim!r} is not a dimension in this user's "
                                              f"{BANK_FILE}"))
            continue
        cat, short = bank[dim]
        if task.get("category", cat) != cat:
            issues.append((f"{at}.category", f"{BANK_FILE} files {dim!r} under {cat}, the task "
                                             f"says {task['category']}"))
        if authoring and isinstance(task.get("task"), str) and (why := leak_reason(task["task"], short)):
            issues.append((f"{at}.task", f"task statement leaks the target: it {why}"))
    for dim, (cat, _) in (bank or {}).items():
        if dim not in dims:
            issues.append(("tasks", f"no task for bank dimension {dim!r} ({cat})"))
    return issues

