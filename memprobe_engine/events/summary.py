"""Whole-recording summaries computed from raw event dicts (no model validation, so fast)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from memprobe_engine.events.reader import RecordingReader


@dataclass
class RecordingSummary:
    events: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    spans_by_kind: Counter[str] = field(default_factory=Counter)
    #: The units seen (users in protocol A, episodes in protocol B).
    units: set[str] = field(default_factory=set)
    systems: set[str] = field(default_factory=set)
    first_time: float | None = None
    last_time: float | None = None
    llm_calls: int = 0
    llm_cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    run_status: str | None = None


def summarize(reader: RecordingReader) -> RecordingSummary:
    """One pass over every complete line in the fast dict mode; damaged lines are counted in
    ``reader.damage``. Fields of the wrong type are ignored here (``verify`` names them)."""
    summary = RecordingSummary()
    for _, data in reader.iter_dicts():
        summary.events += 1
        kind = data["kind"]
        summary.by_kind[kind] += 1
        stamp = data.get("time")
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
            summary.first_time = stamp if summary.first_time is None else min(summary.first_time, stamp)
            summary.last_time = stamp if summary.last_time is None else max(summary.last_time, stamp)
        unit, system = data.get("unit"), data.get("system")
        if isinstance(unit, str) and unit:
            summary.units.add(unit)
        if isinstance(system, str) and system:
            summary.systems.add(system)
        if kind == "span_begin":
            summary.spans_by_kind[str(data.get("span_kind"))] += 1
        elif kind == "llm_call":
            summary.llm_calls += 1
            summary.llm_cache_hits += data.get("cache_hit") is True
            usage = data.get("usage")
            if isinstance(usage, dict):
                summary.prompt_tokens += _count(usage.get("prompt_tokens"))
                summary.completion_tokens += _count(usage.get("completion_tokens"))
                summary.cached_prompt_tokens += _count(usage.get("cached_prompt_tokens"))
        elif kind == "run_end":
            status = data.get("status")
            summary.run_status = status if isinstance(status, str) else None
    return summary


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
