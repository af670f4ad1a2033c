"""``nomem``: the no-memory baseline (paper §4.1).

It keeps nothing, so every access mode sees an empty store: the floor against which the recovery
score of a real memory is read. It records no memory operations because it performs none.
"""

from __future__ import annotations

from typing import Any, ClassVar

from memprobe_engine.memory.base import Footprint, MemoryServices, Observation, ScoredItem


class NoMemory:
    """A memory system that stores nothing: search finds nothing, the dump is empty."""

    name: ClassVar[str] = "nomem"
    description: ClassVar[str] = "No memory: stores nothing; the baseline floor for recovery scores."
    needs_embedder: ClassVar[bool] = False
    model_roles: ClassVar[tuple[str, ...]] = ()

    def __init__(self, services: MemoryServices) -> None:
        self.services = services

    async def reset(self, user_id: str) -> None:
        """Nothing to forget."""

    async def observe(self, observation: Observation) -> None:
        """Evidence is discarded by design."""

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        return []

    def dump(self) -> list[dict[str, Any]]:
        return []

    def footprint(self) -> Footprint:
        return Footprint(n_items=0, total_chars=0)
