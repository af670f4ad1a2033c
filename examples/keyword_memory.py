"""A small memory system written against MemProbe's plug-in protocol (see docs/memory-systems.md).

It keeps only what the user says and retrieves by keyword overlap with the query. Run it with
``memprobe run --system examples.keyword_memory:KeywordMemory`` from the repository root.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from memprobe_engine.memory.base import (Footprint, MemoryServices, Observation, RecordedStore,
                                         ScoredItem)


def keywords(text: str) -> set[str]:
    """Lower-cased words of three letters or more: a crude but transparent notion of topic."""
    return {word for word in re.findall(r"[a-z0-9']+", text.lower()) if len(word) >= 3}


class KeywordMemory:
    """Stores user turns verbatim; search ranks them by the share of query keywords they contain."""

    name: ClassVar[str] = "keyword"
    description: ClassVar[str] = "Example plug-in: keeps user turns, retrieves by keyword overlap."
    # What it needs from a run: no embedder, no model of its own (a run then loads neither for it).
    needs_embedder: ClassVar[bool] = False
    model_roles: ClassVar[tuple[str, ...]] = ()

    def __init__(self, services: MemoryServices) -> None:
        self.services = services
        # Every mutation goes through RecordedStore, so it is recorded as a memory_op event.
        self.store = RecordedStore(services.recorder)

    async def reset(self, user_id: str) -> None:
        self.store.clear(note=f"new user {user_id}")

    async def observe(self, observation: Observation) -> None:
        if observation.kind != "user":
            return  # this system's write policy: remember only what the user said
        item_id = self.services.new_id("k")
        self.store.add(item_id, {"id": item_id, "content": observation.text,
                                 "task_index": observation.task_index,
                                 "timestamp": observation.timestamp})  # simulated clock, never wall time

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        wanted = keywords(query)
        scored = []
        for item in self.store.items():
            overlap = len(wanted & keywords(item["content"]))
            if overlap:
                scored.append(ScoredItem(id=item["id"], item=dict(item), score=overlap / len(wanted)))
        scored.sort(key=lambda hit: -(hit.score or 0.0))  # stable: ties keep insertion order
        return scored[:k]

    def dump(self) -> list[dict[str, Any]]:
        return [dict(item) for item in self.store.items()]

    def footprint(self) -> Footprint:
        return self.store.footprint()
