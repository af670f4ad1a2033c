"""Flat pandas frames of protocol-A outcomes, read from one or more recordings.

A recording is an event log, so the same benchmark cell can be said more than once: a re-score
appends a later ``judge_score`` (and attribution label) for a case already scored, and a unit that
was interrupted is re-run from its start under a new ``unit`` span. The frames state the *current*
outcome of every cell — the current score per (system, user, dimension, mode), decided by the one
outcomes fold the replay's overview uses too (:mod:`memprobe_engine.recovery.outcomes`), and the
latest attempt of every unit — so that the tables in :mod:`memprobe_engine.recovery.read.tables` never
count a case twice. Several recordings (shards of one run, or runs of different systems) concatenate; where two
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

from memprobe_engine.events.integrity import check_recording, damage_warning, interrupted_note
from memprobe_engine.events.memory import MemoryFootprint
from memprobe_engine.events.reader import RecordingReader, open_recording
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.scoring import AttributionLabel, JudgeScore, SlotFill
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.dialogue_source import description as fixed_description
from memprobe_engine.recovery.outcomes import OutcomeFold

Pair = tuple[str, str]

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


@dataclass
class ReportFrames:
    """The five frames the report tables are computed from, plus what loading had to warn about."""

    scores: pd.DataFrame
    episodes: pd.DataFrame
    preferences: pd.DataFrame
    footprints: pd.DataFrame
    attribution: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    #: Systems whose rollouts were fixed dialogues (``memprobe run --dialogues``) → "fixed dialogues
    #: from …": their A, C and D are not applicable.
    fixed: dict[str, str] = field(default_factory=dict)
    #: What loading names without warning about it (spans closed when a killed run resumed).
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, pd.DataFrame]:
        """The frames by export name (``scores``, ``episodes``, …)."""
        return {"scores": self.scores, "episodes": self.episodes, "preferences": self.preferences,
                "footprints": self.footprints, "attribution": self.attribution}


class _RecordingRows:
    """Everything one recording says, keyed so that a later event replaces an earlier one."""

    def __init__(self, name: str, layer: str | None = None) -> None:
        self.name = name
        #: The current outcome of every recovery case: the fold the replay's overview uses too.
        self.outcomes = OutcomeFold(layer)
        self.episodes: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.preferences: dict[tuple[str, str, int, int], dict[str, Any]] = {}
        self.footprints: dict[Pair, dict[str, Any]] = {}
        self.unscoped = 0
        self.damage_note: str | None = None
        self.interrupted_note: str | None = None
        self.unit_of: dict[Pair, int] = {}
        self.rollout_unit: dict[Pair, int | None] = {}
        self.fixed: str | None = None

    # -- reading ---------------------------------------------------------------------------------
    def add(self, event: AnyEvent) -> None:
        """Fold one event into the current state."""
        if isinstance(event, (SpanBegin, SlotFill, JudgeScore, AttributionLabel)):
            if isinstance(event, SpanBegin) and event.span_kind == "unit" and event.system is not None \
                    and event.user_id is not None:
                self.unit_of[(event.system, event.user_id)] = event.seq
            self.outcomes.add(event)
            return
        if event.system is None or event.user_id is None:
            self.unscoped += 1
            return
        pair: Pair = (event.system, event.user_id)
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
        keys: list[tuple[Any, ...]] = [*self.episodes, *self.preferences, *self.footprints, *self.outcomes.cases]
        return {(k[0], k[1]) for k in keys}

    def score_rows(self, keep: set[Pair]) -> list[dict[str, Any]]:
        rows = []
        for (system, user_id, dimension, mode), case in self.outcomes.scored_cases():
            if (system, user_id) not in keep:
                continue
            score = case.score
            rows.append({"system": system, "user_id": user_id, "dimension": dimension,
                         "category": self.outcomes.category(system, user_id, dimension), "mode": mode,
                         "score": math.nan if score is None else float(score), "excluded": case.excluded,
                         "overflow": case.overflow, "label": case.label, "recording": self.name})
        return rows

    def attribution_rows(self, keep: set[Pair]) -> list[dict[str, Any]]:
        return [{"system": system, "user_id": user_id, "dimension": dimension,
                 "category": self.outcomes.category(system, user_id, dimension), "mode": mode,
                 "label": case.attribution}
                for (system, user_id, dimension, mode), case in self.outcomes.cases.items()
                if (system, user_id) in keep and case.attribution is not None]


def _outcome_events(reader: RecordingReader) -> Iterator[Any]:
    """The events the report needs, in order; the kind check on raw bytes skips parsing the rest."""
    return reader.iter_events(kinds=list(_MODELS))


def _read(path: Path, layer: str | None = None) -> _RecordingRows:
    rows = _RecordingRows(str(path), layer)
    with open_recording(path) as reader:
        rows.fixed = fixed_description(RecoveryConfig.of(reader.header))
        for event in _outcome_events(reader):
            rows.add(event)
        # The same whole-recording check as `recording verify`, the TUI banner and the browser.
        checked = check_recording(reader)
        rows.damage_note = damage_warning(str(path), checked)
        rows.interrupted_note = interrupted_note(str(path), checked)
    return rows


def _frame(rows: list[dict[str, Any]], schema: dict[str, str], order: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows, columns=list(schema)) if rows else pd.DataFrame(columns=list(schema))
    frame = frame.astype(schema)
    return frame.sort_values(order, kind="stable").reset_index(drop=True) if rows else frame


def load_frames(recordings: Sequence[Path], layer: str | None = None) -> ReportFrames:
    """Read the protocol-A outcomes of ``recordings`` into frames (later recordings win on overlap);
    ``layer`` reads that judgment layer's scores and labels instead of the run's own."""
    loaded = [_read(Path(path), layer) for path in recordings]
    warnings: list[str] = []
    notes: list[str] = []
    owner: dict[Pair, int] = {}
    for index, rows in enumerate(loaded):
        for pair in sorted(rows.pairs()):
            if pair in owner:
                warnings.append(f"{pair[0]} × {pair[1]} is in both {loaded[owner[pair]].name} and {rows.name}; "
                                f"using the later recording, {rows.name}.")
            owner[pair] = index
        if rows.damage_note:
            warnings.append(rows.damage_note)
        if rows.interrupted_note:
            notes.append(rows.interrupted_note)
        if unscoped := rows.unscoped + rows.outcomes.unscoped:
            warnings.append(f"{rows.name}: {unscoped} outcome events name no system, user or dimension; "
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
        warnings=warnings, notes=notes,
        fixed={system: rows.fixed for rows, keep in zip(loaded, keeps) if rows.fixed for system, _ in keep})
