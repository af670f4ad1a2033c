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


def event_text(event: AnyEvent) -> str:
    """The searchable text of one event (its readable fields joined)."""
    parts: list[str] = []
    for name in TEXT_FIELDS:
        value = getattr(event, name, None)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            parts += [str(v) for v in value]
    return "\n".join(parts)


def _needle(query: str) -> tuple[str, bytes]:
    lowered = query.lower()
    # Lines hold JSON: a quote or a newline in the query is escaped there.
    return lowered, orjson.dumps(lowered)[1:-1]


def find_in_steps(session: ReplaySession, steps: Sequence[StepRef], query: str,
                  limit: int = 5_000) -> list[tuple[int, int]]:
    """(step position, event position in :func:`step_events`) of every event containing ``query``,
    in transcript order, at most ``limit``."""
    if not query:
        return []
    text, raw_needle = _needle(query)
    out: list[tuple[int, int]] = []
    for pos, step in enumerate(steps):
        last = min(step.last_line, len(session) - 1)
        if not any(raw_needle in session.raw(line).lower() for line in range(step.first_line, last + 1)):
            continue
        out += [(pos, i) for i in _matching(step_events(session, step), text)]
        if len(out) >= limit:
            return out[:limit]
    return out


def _matching(events: Iterable[Any], text: str) -> list[int]:
    return [i for i, event in enumerate(events) if text in event_text(event).lower()]
