"""The run overview's numbers, computed from the run index (no extra pass over the recording).

Per unit (user × system): recovery score B under each access mode (category-balanced: the mean of
per-category means of the judge scores), task completion A (% of episodes the simulator marked
satisfied), mean turns C, preference D (/5: the mean over all judged turns, as the recovery
release computes it) and the memory footprint E. Per system: means over users, A pooled over episodes.

Which score of a case is current (the latest re-score, or a newer original after a re-run unit),
what is excluded (unparseable output, store overflow, filled but never judged) and each case's
category are decided by the one outcomes fold of :mod:`memprobe_engine.recovery.outcomes`, which the
run index feeds as it reads and ``memprobe report`` feeds from the same events, so the overview and
the report count the same cases. Cases without a category are left out of B, as in the report; a
rollout's numbers (A, C, D) come from the latest attempt of a unit that was re-run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.dialogue_source import description
from memprobe_engine.recovery.input_rules import Category
from memprobe_engine.recovery.outcomes import JudgeRecord, Outcome, category_balanced
from memprobe_engine.recovery.read.outcome_index import outcomes
from memprobe_engine.replay.session import ReplaySession

MODES: tuple[str, ...] = ("dump_all", "retrieve")
CellKey = tuple[str, str, str, str]  # user, system, dimension, mode
_CATEGORY_ORDER: tuple[str, ...] = tuple(c.value for c in Category)


@dataclass(frozen=True)
class ScorePair:
    """A case's current original judge score and, when it was re-scored since, the latest re-score;
    ``excluded`` is the case's exclusion as the outcomes fold decides it (None: the case counts)."""

    original: JudgeRecord | None
    latest: JudgeRecord | None = None
    rescores: int = 0
    excluded: str | None = None

    @property
    def current(self) -> JudgeRecord | None:
        return self.latest or self.original

    @property
    def score(self) -> float | None:
        """The current score when the case counts, else None (excluded or not judged)."""
        current = self.current
        return current.score if current is not None and self.excluded is None else None

    @classmethod
    def of(cls, case: Outcome) -> ScorePair:
        return cls(case.original, case.rescores[-1] if case.rescores else None, len(case.rescores), case.excluded)


@dataclass
class UnitScores:
    """The overview numbers of one user × system (None where the run has not produced them yet)."""

    user_id: str
    system: str
    b: dict[str, float | None] = field(default_factory=dict)  # mode -> B
    scored: dict[str, int] = field(default_factory=dict)  # mode -> judged dimensions that count
    excluded: dict[str, int] = field(default_factory=dict)
    overflow: dict[str, int] = field(default_factory=dict)
    rescored: int = 0
    episodes: int = 0
    satisfied: int = 0
    a: float | None = None
    c: float | None = None
    d: float | None = None
    items: int | None = None
    chars: float | None = None


@dataclass
class ScoreBoard:
    """All unit scores plus per-system means; ``pairs`` gives every (original, latest) judge score."""

    units: dict[tuple[str, str], UnitScores]
    pairs: dict[CellKey, ScorePair]
    categories: dict[tuple[str, str], str]  # (user, dimension) -> category

    def system_means(self, system: str) -> UnitScores:
        rows = [u for (_, s), u in self.units.items() if s == system]
        out = UnitScores(user_id="all", system=system)
        for mode in MODES:
            out.b[mode] = _mean([u.b.get(mode) for u in rows])
            out.excluded[mode] = sum(u.excluded.get(mode, 0) for u in rows)
            out.overflow[mode] = sum(u.overflow.get(mode, 0) for u in rows)
            out.scored[mode] = sum(u.scored.get(mode, 0) for u in rows)
        out.episodes, out.satisfied = sum(u.episodes for u in rows), sum(u.satisfied for u in rows)
        out.a = 100.0 * out.satisfied / out.episodes if out.episodes and any(u.a is not None for u in rows) else None
        out.c, out.d = _mean([u.c for u in rows]), _mean([u.d for u in rows])
        items = [float(u.items) for u in rows if u.items is not None]
        out.items = round(fmean(items)) if items else None
        out.chars = _mean([u.chars for u in rows])
        out.rescored = sum(u.rescored for u in rows)
        return out

    def headline(self) -> dict[str, float | None]:
        """B per mode over every unit of the run (mean of system means): the browser's one number."""
        systems = sorted({s for _, s in self.units})
        return {mode: _mean([self.system_means(s).b.get(mode) for s in systems]) for mode in MODES}


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def category_map(session: ReplaySession) -> dict[tuple[str, str], str]:
    """(user, dimension) -> category, as the outcomes fold found it in episode and dimension spans."""
    with session.index.lock:
        fold = outcomes(session)
        return {(user, dimension): category for (_, user, dimension), category in fold.categories.items()}


def score_pairs(session: ReplaySession, layer: str | None = None) -> dict[CellKey, ScorePair]:
    """Every judged (user, system, dimension, mode) with its original and latest re-score, in judgment
    ``layer`` (None: the run's own; a named layer holds the cases ``rescore --as`` judged)."""
    with session.index.lock:
        return {(user, system, dimension, mode): ScorePair.of(case)
                for (system, user, dimension, mode), case in outcomes(session, layer).judged_cases()}


def score_board(session: ReplaySession, layer: str | None = None) -> ScoreBoard:
    """Compute every overview number from the current index (cheap: only indexed events); B from the
    judgments of ``layer`` (None: the run's own)."""
    with session.index.lock:
        return _score_board(session, layer)


def _score_board(session: ReplaySession, layer: str | None) -> ScoreBoard:
    index = session.index
    categories = category_map(session)
    pairs = score_pairs(session, layer)
    units: dict[tuple[str, str], UnitScores] = {}

    def unit(event: dict[str, Any]) -> UnitScores | None:
        user, system = event.get("user_id"), event.get("system")
        if not user or not system:
            return None
        return units.setdefault((user, system), UnitScores(user_id=user, system=system))

    for key in index.units:
        units.setdefault(key, UnitScores(user_id=key[0], system=key[1]))
    fold = outcomes(session, layer)
    per_cat: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (system, user, dim, mode), case in fold.scored_cases():
        row = units.setdefault((user, system), UnitScores(user_id=user, system=system))
        row.rescored += len(case.rescores)
        if case.overflow:
            row.overflow[mode] = row.overflow.get(mode, 0) + 1
        category = fold.category(system, user, dim)
        if not case.usable or category is None:  # the report leaves uncategorized cases out of B too
            row.excluded[mode] = row.excluded.get(mode, 0) + 1
            continue
        row.scored[mode] = row.scored.get(mode, 0) + 1
        per_cat[(user, system, mode)][category].append(float(case.score or 0.0))
    for (user, system, mode), cats in per_cat.items():
        units[(user, system)].b[mode] = category_balanced(cats, _CATEGORY_ORDER)
    latest = {key: attempts[-1] for key, attempts in index.units.items()}
    ends: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for end in index.events("episode_end"):
        if (found := unit(end)) is not None and index.unit_of(end.get("span_id")) == latest.get(
                (found.user_id, found.system)):
            ends[(found.user_id, found.system)].append(end)
    # A fixed-dialogue run (memprobe run --dialogues) had no live rollout: A and C stay undefined, never 0.
    live = description(RecoveryConfig.of(session.header)) is None
    for key, rows in ends.items():
        units[key].episodes = len(rows)
        units[key].satisfied = sum(e.get("end_reason") == "satisfied" for e in rows)
        if live:
            units[key].a = 100.0 * units[key].satisfied / len(rows)
            units[key].c = fmean(float(e.get("turns", 0)) for e in rows)
    per_unit: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (unit_span, _), (total, count) in index.preference.items():
        per_unit[unit_span][0] += total
        per_unit[unit_span][1] += count
    for key, span_id in latest.items():
        total, count = per_unit.get(span_id, (0.0, 0.0))
        if count:
            units[key].d = total / count
    for foot in index.events("memory_footprint"):
        if (found := unit(foot)) is not None:  # the last footprint of a unit wins (end of trajectory)
            found.items, found.chars = int(foot.get("n_items", 0)), float(foot.get("mean_chars", 0.0))
    return ScoreBoard(units=units, pairs=pairs, categories=categories)
