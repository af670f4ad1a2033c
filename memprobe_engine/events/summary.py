"""Whole-recording summaries computed from raw event dicts (no model validation, so fast)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from memprobe_engine.events.reader import DamagedEvent, RecordingReader


@dataclass
class RecordingSummary:
    events: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    spans_by_kind: Counter[str] = field(default_factory=Counter)
    users: set[str] = field(default_factory=set)
    systems: set[str] = field(default_factory=set)
    first_time: float | None = None
    last_time: float | None = None
    llm_calls: int = 0
    llm_cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    run_status: str | None = None


def summarize(reader: RecordingReader) -> RecordingSummary:
    """One pass over every complete line; damaged lines are counted in ``reader.damage``."""
    summary = RecordingSummary()
    for line in range(len(reader)):
        try:
            data = reader.get_dict(line)
        except DamagedEvent:
            continue
        summary.events += 1
        kind = str(data.get("kind"))
        summary.by_kind[kind] += 1
        stamp = data.get("time")
        if isinstance(stamp, (int, float)):
            summary.first_time = stamp if summary.first_time is None else min(summary.first_time, stamp)
            summary.last_time = stamp if summary.last_time is None else max(summary.last_time, stamp)
        if data.get("user_id"):
            summary.users.add(data["user_id"])
        if data.get("system"):
            summary.systems.add(data["system"])
        if kind == "span_begin":
            summary.spans_by_kind[str(data.get("span_kind"))] += 1
        elif kind == "llm_call":
            summary.llm_calls += 1
            summary.llm_cache_hits += bool(data.get("cache_hit"))
            usage = data.get("usage") or {}
            summary.prompt_tokens += int(usage.get("prompt_tokens", 0))
            summary.completion_tokens += int(usage.get("completion_tokens", 0))
        elif kind == "run_end":
            summary.run_status = data.get("status")
    return summary
