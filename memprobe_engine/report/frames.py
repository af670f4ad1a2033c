"""Flat pandas frames of protocol-A outcomes, read from one or more recordings.

A recording is an event log, so the same benchmark cell can be said more than once: a re-score
appends a later ``judge_score`` (and attribution label) for a case already scored, and a unit that
was interrupted is re-run from its start under a new ``unit`` span. The frames state the *current*
outcome of every cell — the latest score per (system, user, dimension, mode), the latest attempt
of every unit — so that the tables in :mod:`memprobe_engine.report.tables` never count a case
twice. Several recordings (shards of one run, or runs of different systems) concatenate; where two
hold the same (system, user), the later one wins and a warning says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel

from memprobe_engine.events.memory import MemoryFootprint
from memprobe_engine.events.integrity import check_recording, damage_warning
from memprobe_engine.events.reader import RecordingReader, open_recording
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.scoring import AttributionLabel, JudgeScore, SlotFill

Pair = tuple[str, str]
CellKey = tuple[str, str, str, str]

#: Column → dtype of each frame; empty frames keep these dtypes so exports stay well-typed.
SCORE_SCHEMA: dict[str, str] = {
    "system": "object", "user_id": "object", "dimension": "object", "category": "object", "mode": "object",
    "score": "float64", "excluded": "object", "overflow": "bool", "label": "object", "recording": "object"}
EPISODE_SCHEMA: dict[str, str] = {
    "system": "object", "user_id": "object", "task_index": "int64", "end_reason": "object", "turns": "int64"}
PREFERENCE_SCHEMA: dict[str, str] = {
    "system": "object", "user_id": "object", "task_index": "int64", "turn": "int64", "mean": "float64"}
FOOTPRINT_SCHEMA: dict[str, str] = {
    "system": "object", "user_id": "object", "n_items": "int64", "mean_chars": "float64"}
ATTRIBUTION_SCHEMA: dict[str, str] = {
    "system": "object", "user_id": "object", "dimension": "object", "category": "object", "mode": "object",
    "label": "object"}

_MODELS: dict[str, type[BaseModel]] = {
    m.model_fields["kind"].default: m
    for m in (SpanBegin, EpisodeEnd, PreferenceJudgment, MemoryFootprint, SlotFill, JudgeScore, AttributionLabel)}
_CATEGORY_SPANS = ("dimension", "episode")


@dataclass
class ReportFrames:
    """The five frames the report tables are computed from, plus what loading had to warn about."""

    scores: pd.DataFrame
    episodes: pd.DataFrame
    preferences: pd.DataFrame
    footprints: pd.DataFrame
    attribution: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, pd.DataFrame]:
        """The frames by export name (``scores``, ``episodes``, …)."""
        return {"scores": self.scores, "episodes": self.episodes, "preferences": self.preferences,
                "footprints": self.footprints, "attribution": self.attribution}


@dataclass
class _Cell:
    """Current state of one (system, user, dimension, mode): its slot-fill, judge score and label."""

    filled: bool = False
    label: str | None = None
    fill_excluded: str | None = None
    overflow: bool = False
    judged: bool = False
    score: float | None = None
    judge_excluded: str | None = None
    attribution: str | None = None


class _RecordingRows:
    """Everything one recording says, keyed so that a later event replaces an earlier one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.categories: dict[tuple[str, str, str], str] = {}
        self.dimension_categories: dict[str, str] = {}
        self.episodes: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.preferences: dict[tuple[str, str, int, int], dict[str, Any]] = {}
        self.footprints: dict[Pair, dict[str, Any]] = {}
        self.cells: dict[CellKey, _Cell] = {}
        self.judge_keys: dict[int, CellKey] = {}
        self.unscoped = 0
        self.damage_note: str | None = None
        self.unit_of: dict[Pair, int] = {}
        self.rollout_unit: dict[Pair, int | None] = {}

    # -- reading ---------------------------------------------------------------------------------
    def add(self, event: Any) -> None:
        """Fold one event into the current state."""
        if event.kind == "span_begin":
            self._span(event)
            return
        if event.kind == "judge_score" and event.rescore_of in self.judge_keys and \
                (event.system is None or event.user_id is None or event.dimension is None):
            # A re-score emitted outside the case's scope still belongs to the case it re-scores.
            self._judge(self.judge_keys[event.rescore_of], event)
            return
        if event.system is None or event.user_id is None:
            self.unscoped += 1
            return
        pair: Pair = (event.system, event.user_id)
        if event.kind in ("episode_end", "preference_judgment", "memory_footprint"):
            self._enter_rollout(pair)
        if event.kind == "episode_end":
            self.episodes[(*pair, event.task_index)] = {
                "system": pair[0], "user_id": pair[1], "task_index": event.task_index,
                "end_reason": event.end_reason, "turns": event.turns}
        elif event.kind == "preference_judgment":
            self.preferences[(*pair, event.task_index, event.turn)] = {
                "system": pair[0], "user_id": pair[1], "task_index": event.task_index, "turn": event.turn,
                "mean": math.nan if event.mean is None else float(event.mean)}
        elif event.kind == "memory_footprint":
            self.footprints[pair] = {"system": pair[0], "user_id": pair[1], "n_items": event.n_items,
                                     "mean_chars": float(event.mean_chars)}
        elif event.dimension is None:
            self.unscoped += 1
        else:
            self._scoring((*pair, event.dimension, event.mode), event)

    def _span(self, event: Any) -> None:
        if event.span_kind == "unit" and event.system is not None and event.user_id is not None:
            self.unit_of[(event.system, event.user_id)] = event.seq
        elif event.span_kind in _CATEGORY_SPANS:
            dimension = event.dimension or event.attrs.get("dimension")
            category = event.attrs.get("category")
            if isinstance(dimension, str) and isinstance(category, str):
                self.dimension_categories[dimension] = category
                if event.system is not None and event.user_id is not None:
                    self.categories[(event.system, event.user_id, dimension)] = category

    def _scoring(self, key: CellKey, event: Any) -> None:
        if event.kind == "judge_score":
            self._judge(key, event)
            return
        cell = self.cells.setdefault(key, _Cell())
        if event.kind == "slot_fill":
            cell.filled, cell.label, cell.overflow = True, event.label, bool(event.overflow)
            cell.fill_excluded = event.excluded
        else:
            cell.attribution = event.label

    def _judge(self, key: CellKey, event: Any) -> None:
        cell = self.cells.setdefault(key, _Cell())
        cell.judged, cell.score, cell.judge_excluded = True, event.score, event.excluded
        self.judge_keys[event.seq] = key

    def _enter_rollout(self, pair: Pair) -> None:
        """A unit runs again only when its earlier attempt did not finish, so rollout outcomes of a
        newer unit span replace the older attempt's. Scores need no such reset: the new attempt
        scores every dimension again, and the latest score wins anyway."""
        unit = self.unit_of.get(pair)
        if pair in self.rollout_unit and self.rollout_unit[pair] != unit:
            tables: tuple[dict[Any, Any], ...] = (self.episodes, self.preferences)
            for table in tables:
                for key in [k for k in table if k[:2] == pair]:
                    del table[key]
            self.footprints.pop(pair, None)
        self.rollout_unit[pair] = unit

    # -- output ----------------------------------------------------------------------------------
    def pairs(self) -> set[Pair]:
        """Every (system, user) this recording holds an outcome for."""
        keys: list[tuple[Any, ...]] = [*self.episodes, *self.preferences, *self.footprints, *self.cells]
        return {(k[0], k[1]) for k in keys}

    def category(self, system: str, user_id: str, dimension: str) -> str | None:
        return self.categories.get((system, user_id, dimension), self.dimension_categories.get(dimension))

    def score_rows(self, keep: set[Pair]) -> list[dict[str, Any]]:
        rows = []
        for (system, user_id, dimension, mode), cell in self.cells.items():
            if (system, user_id) not in keep or not (cell.filled or cell.judged):
                continue
            excluded = cell.judge_excluded or cell.fill_excluded
            if not cell.judged and excluded is None:
                excluded = "no judge score recorded"
            rows.append({"system": system, "user_id": user_id, "dimension": dimension,
                         "category": self.category(system, user_id, dimension), "mode": mode,
                         "score": math.nan if cell.score is None else float(cell.score), "excluded": excluded,
                         "overflow": cell.overflow, "label": cell.label, "recording": self.name})
        return rows

    def attribution_rows(self, keep: set[Pair]) -> list[dict[str, Any]]:
        return [{"system": system, "user_id": user_id, "dimension": dimension,
                 "category": self.category(system, user_id, dimension), "mode": mode, "label": cell.attribution}
                for (system, user_id, dimension, mode), cell in self.cells.items()
                if (system, user_id) in keep and cell.attribution is not None]


def _outcome_events(reader: RecordingReader) -> Iterator[Any]:
    """The events the report needs, in order; the kind check on raw bytes skips parsing the rest."""
    return reader.iter_events(kinds=list(_MODELS))


def _read(path: Path) -> _RecordingRows:
    rows = _RecordingRows(str(path))
    with open_recording(path) as reader:
        for event in _outcome_events(reader):
            rows.add(event)
        # The same whole-recording check as `recording verify`, the TUI banner and the browser.
        rows.damage_note = damage_warning(str(path), check_recording(reader))
    return rows


def _frame(rows: list[dict[str, Any]], schema: dict[str, str], order: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows, columns=list(schema)) if rows else pd.DataFrame(columns=list(schema))
    frame = frame.astype(schema)
    return frame.sort_values(order, kind="stable").reset_index(drop=True) if rows else frame


def load_frames(recordings: Sequence[Path]) -> ReportFrames:
    """Read the protocol-A outcomes of ``recordings`` into frames (later recordings win on overlap)."""
    loaded = [_read(Path(path)) for path in recordings]
    warnings: list[str] = []
    owner: dict[Pair, int] = {}
    for index, rows in enumerate(loaded):
        for pair in sorted(rows.pairs()):
            if pair in owner:
                warnings.append(f"{pair[0]} × {pair[1]} is in both {loaded[owner[pair]].name} and {rows.name}; "
                                f"using the later recording, {rows.name}.")
            owner[pair] = index
        if rows.damage_note:
            warnings.append(rows.damage_note)
        if rows.unscoped:
            warnings.append(f"{rows.name}: {rows.unscoped} outcome events name no system, user or dimension; "
                            f"they are left out.")
    keeps = [{pair for pair, index in owner.items() if index == i} for i in range(len(loaded))]
    scores = [row for rows, keep in zip(loaded, keeps) for row in rows.score_rows(keep)]
    uncategorized = sum(1 for row in scores if row["category"] is None)
    if uncategorized:
        warnings.append(f"{uncategorized} scores have no category (no dimension or episode span names one); "
                        f"they are left out of B.")
    return ReportFrames(
        scores=_frame(scores, SCORE_SCHEMA, ["system", "user_id", "mode", "dimension"]),
        episodes=_frame([r for rows, keep in zip(loaded, keeps) for k, r in rows.episodes.items() if k[:2] in keep],
                        EPISODE_SCHEMA, ["system", "user_id", "task_index"]),
        preferences=_frame([r for rows, keep in zip(loaded, keeps) for k, r in rows.preferences.items()
                            if k[:2] in keep], PREFERENCE_SCHEMA, ["system", "user_id", "task_index", "turn"]),
        footprints=_frame([r for rows, keep in zip(loaded, keeps) for k, r in rows.footprints.items() if k in keep],
                          FOOTPRINT_SCHEMA, ["system", "user_id"]),
        attribution=_frame([row for rows, keep in zip(loaded, keeps) for row in rows.attribution_rows(keep)],
                           ATTRIBUTION_SCHEMA, ["system", "user_id", "mode", "dimension"]),
        warnings=warnings)
