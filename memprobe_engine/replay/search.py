"""Text search over a unit's transcript: which steps and events hold a piece of text.

A raw-byte test per line comes first (most lines do not match and are never parsed); only the
steps with a candidate line are parsed, and an event counts when its text — message content, LLM
response, note, query, label, reason — contains the query, case-insensitive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from memprobe_engine.events.union import AnyEvent
from memprobe_engine.replay.queries import StepRef, step_events
from memprobe_engine.replay.session import ReplaySession

#: Event fields whose text a search looks in (the fields a reader sees in the detail pane).
TEXT_FIELDS: tuple[str, ...] = ("content", "response_text", "note", "query", "label", "reason", "message",
                                "verdict", "op", "role", "item_ids", "evidence", "explanation")


def _strings(value: object) -> list[str]:
    """Every string inside a JSON value (a memory op's patch values: the item texts it wrote)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def event_text(event: AnyEvent) -> str:
    """The searchable text of one event (its readable fields joined, and the values a memory op
    wrote: the detail pane shows them, so a search finds them)."""
    parts: list[str] = []
    for name in TEXT_FIELDS:
        value = getattr(event, name, None)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            parts += [str(v) for v in value]
    if event.kind == "memory_op":
        parts += [s for change in event.patch for s in _strings(change.get("value"))]
    return "\n".join(parts)


def _needle(query: str) -> tuple[str, bytes]:
    lowered = query.lower()
    # Lines hold JSON: a quote or a newline in the query is escaped there.
    return lowered, orjson.dumps(lowered)[1:-1]


def find_in_steps(session: ReplaySession, steps: Sequence[StepRef], query: str,
                  limit: int = 5_000) -> list[tuple[int, int]]:
    """(step position, event position in :func:`step_events`) of every event containing ``query``,
    in transcript order, at most ``limit``."""
    return [(step, event) for step, event, _ in count_in_steps(session, steps, query, limit)]


def count_in_steps(session: ReplaySession, steps: Sequence[StepRef], query: str,
                   limit: int = 5_000) -> list[tuple[int, int, int]]:
    """As :func:`find_in_steps`, each with how many times ``query`` occurs in that event."""
    if not query:
        return []
    text, raw_needle = _needle(query)
    out: list[tuple[int, int, int]] = []
    for pos, step in enumerate(steps):
        last = min(step.last_line, len(session) - 1)
        if not any(raw_needle in session.raw(line).lower() for line in range(step.first_line, last + 1)):
            continue
        out += [(pos, i, n) for i, n in _matching(step_events(session, step), text)]
        if len(out) >= limit:
            return out[:limit]
    return out


def _matching(events: Iterable[Any], text: str) -> list[tuple[int, int]]:
    counts = ((i, event_text(event).lower().count(text)) for i, event in enumerate(events))
    return [(i, n) for i, n in counts if n]
