"""Protocol-B report input: the scored probes of one or more paradigm recordings as a pandas frame.

Recordings are read through the replay queries (:mod:`memprobe_engine.paradigms.read.queries`):
the episode spans give each (system, episode) its paradigm, condition, expected behaviour and split
flag, and :func:`score_cells` folds the probe scores so the latest re-score of each probe counts.
Nothing here scans ``events.jsonl`` itself. With several recordings a later one wins for a
(system, episode) both hold, with a warning, as in protocol A's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memprobe_engine.events.integrity import damage_warning
from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.paradigms.read.queries import (
    EpisodeRow,
    episode_rows,
    is_paradigm_recording,
)
from memprobe_engine.replay.session import ReplaySession

#: Sub-scores that become their own columns (conflict's four parts and temporal's checks).
SUBSCORE_COLUMNS: tuple[str, ...] = ("value", "source", "status", "applicability", "direction", "trigger",
                                     "old_value")
PROBE_SCHEMA: dict[str, str] = {
    "system": "string", "episode_id": "string", "paradigm": "string", "condition": "string",
    "expected_behavior": "string", "split": "boolean", "probe_index": "int64", "probe_type": "string",
    "score": "float64", "excluded": "bool", "exclusion_reason": "string", "reason": "string",
    "rescored": "int64", "scorer_version": "string", "input_protocol": "string", "recording": "string",
    **{f"sub_{name}": "float64" for name in SUBSCORE_COLUMNS},
}


@dataclass
class ParadigmFrames:
    """The probe frame and what the reading noticed (damage, overlaps, unscored probes)."""

    probes: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)


def recording_is_paradigm(path: Path) -> bool:
    session = ReplaySession.open(path)
    try:
        return is_paradigm_recording(session)
    finally:
        session.close()


def _rows_of(row: EpisodeRow, protocols: dict[str, Any], recording: str) -> list[dict[str, Any]]:
    out = []
    for cell in row.probes:
        current = cell.current
        if current is None:
            continue
        subs = current.get("subscores") or {}
        out.append({
            "system": row.system, "episode_id": row.episode_id, "paradigm": row.paradigm,
            "condition": row.condition, "expected_behavior": row.expected_behavior, "split": row.split,
            "probe_index": cell.probe_index, "probe_type": cell.probe_type,
            "score": None if current.get("excluded") else float(current.get("score", 0.0)),
            "excluded": bool(current.get("excluded")), "exclusion_reason": current.get("exclusion_reason"),
            "reason": current.get("reason"), "rescored": cell.rescores,
            "scorer_version": current.get("scorer_version"),
            "input_protocol": str(protocols.get(row.system, "")), "recording": recording,
            **{f"sub_{name}": subs.get(name) for name in SUBSCORE_COLUMNS},
        })
    return out


def _read(path: Path, layer: str | None) -> tuple[list[EpisodeRow], dict[str, Any], list[str], list[str]]:
    session = ReplaySession.open(path)
    warnings: list[str] = []
    try:
        session.build_index()
        rows = episode_rows(session, layer=layer)
        config = ParadigmConfig.of(session.header)
        protocols = dict(config.input_protocols)
        # The same whole-recording check as `recording verify`, the TUI banner and protocol A's report.
        report = session.integrity if session.integrity is not None else session.check()
        note = damage_warning(str(path), report)
        if note:
            warnings.append(note)
        planned = list(config.systems)
        return rows, protocols, warnings, planned
    finally:
        session.close()


def load_paradigm_frames(recordings: Sequence[Path], layer: str | None = None) -> ParadigmFrames:
    """Read the scored probes of ``recordings`` (later recordings win on a shared system × episode),
    the run's own scores or those of the named ``layer``."""
    owner: dict[tuple[str, str], tuple[str, EpisodeRow, dict[str, Any]]] = {}
    warnings: list[str] = []
    systems: list[str] = []
    for path in recordings:
        rows, protocols, notes, planned = _read(Path(path), layer)
        warnings += notes
        systems += planned
        for row in rows:
            key = (row.system, row.episode_id)
            if key in owner and owner[key][0] != str(path):
                warnings.append(f"{row.system} × {row.episode_id} is in both {owner[key][0]} and {path}; "
                                f"using the later recording, {path}.")
            owner[key] = (str(path), row, protocols)
            systems.append(row.system)
    records = [r for path, row, protocols in owner.values() for r in _rows_of(row, protocols, path)]
    unscored = sum(1 for _, row, _ in owner.values() for c in row.probes if c.current is None)
    if unscored:
        warnings.append(f"{unscored} probe(s) have an answer but no score (an unfinished run — resume it — or "
                        f"an imported episode whose gold the data lacks); they are left out.")
    frame = pd.DataFrame.from_records(records, columns=list(PROBE_SCHEMA)) if records else \
        pd.DataFrame(columns=list(PROBE_SCHEMA))
    frame = frame.astype(PROBE_SCHEMA)
    frame = frame.sort_values(["system", "episode_id", "probe_index"], kind="stable").reset_index(drop=True)
    order = list(dict.fromkeys(systems))
    if order:
        frame["system"] = pd.Categorical(frame["system"], categories=order, ordered=True)
        frame = frame.sort_values(["system", "episode_id", "probe_index"], kind="stable").reset_index(drop=True)
        frame["system"] = frame["system"].astype("string")
    return ParadigmFrames(probes=frame, warnings=warnings, systems=[s for s in order if s in set(frame["system"])])
