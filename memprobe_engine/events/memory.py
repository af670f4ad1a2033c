"""Memory-system events: store mutations (with JSON Patch), snapshots and retrievals.

A store's state is the JSON object ``{"items": {item_id: item_fields}}``; each ``memory_op`` carries
the RFC 6902 patch that takes the previous state to the next, so the store at any step can be
rebuilt by applying patches from the last snapshot.
"""

from __future__ import annotations

from typing import Any, Literal

from memprobe_engine.events.base import EventBase


class MemoryOp(EventBase):
    """One operation of a memory system (add, update, delete, link, evolve, reset, …)."""

    kind: Literal["memory_op"] = "memory_op"
    op: str
    item_ids: list[str] = []
    patch: list[dict[str, Any]] = []
    store_size: int | None = None
    note: str | None = None


class MemorySnapshot(EventBase):
    """The whole store at this point, stored once by content hash (checkpoint for time travel)."""

    kind: Literal["memory_snapshot"] = "memory_snapshot"
    snapshot_ref: str
    n_items: int


class Retrieval(EventBase):
    """A ``search(query, k)`` on a memory system and what it returned, best first."""

    kind: Literal["retrieval"] = "retrieval"
    query: str
    k: int
    item_ids: list[str]
    scores: list[float | None] = []
    purpose: str | None = None


class MemoryFootprint(EventBase):
    """Size of a store at a point (metric E): item count and characters of content per item."""

    kind: Literal["memory_footprint"] = "memory_footprint"
    n_items: int
    total_chars: int
    mean_chars: float
