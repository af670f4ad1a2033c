"""``mem0ai``: the real ``mem0ai`` package (``memprobe[mem0ai]``) behind the MemorySystem protocol.

Configuration, all offline: the LLM (``openai`` provider) and the embedder (``openai`` provider,
384-dimensional to match the engine's MiniLM) point at the recording proxy; the vector store is
Qdrant in local (embedded) mode in the store folder; the history database is SQLite there too;
telemetry is off (``MEM0_TELEMETRY=False``) and mem0's home folder (``MEM0_DIR``) is inside the run's
stores folder, so nothing is written to ``~/.mem0``.

Ingest = ``Memory.add(messages, user_id=…)`` with the buffered exchange; search =
``Memory.search(query, filters={"user_id": …}, top_k=k)``; dump = ``Memory.get_all`` with the
library's own fields (``id``, ``memory``, ``hash``, ``metadata``, ``created_at``, ``updated_at``,
``user_id``). mem0's timestamps and memory ids come from ``datetime`` and ``uuid`` in
``mem0.memory.main``, which are pinned to the simulated clock and the unit's seed.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from memprobe_engine.memory.adapters.base import LIBRARY_HTTP_TIMEOUT_S, LIBRARY_ROLE, LibraryAdapter, conversation
from memprobe_engine.memory.base import Observation

if TYPE_CHECKING:  # the optional mem0ai extra (untyped: for the name only)
    from mem0 import Memory

#: Vector size of the engine's embedder (all-MiniLM-L6-v2); the library is configured to match.
EMBEDDING_DIMS = 384
#: Cap on generated tokens per library call (mem0's JSON replies are short; the CPU model is slow).
MAX_TOKENS = 800


class Mem0AI(LibraryAdapter):
    """The ``mem0ai`` library's own extraction, consolidation and retrieval."""

    name: ClassVar[str] = "mem0ai"
    description: ClassVar[str] = ("mem0ai (the published library): its own LLM fact extraction and memory "
                                  "update over a local Qdrant store, every call through the recording proxy.")
    distribution: ClassVar[str] = "mem0ai"
    extra: ClassVar[str] = "mem0ai"
    content_field: ClassVar[str] = "memory"

    _memory: Memory | None = None

    @property
    def _open(self) -> Memory:
        """The library's store (opened by ``_lib_reset``)."""
        if self._memory is None:
            raise RuntimeError("mem0ai: the store is used before _lib_reset opened it")
        return self._memory

    def _prepare(self, stores_root: Path) -> None:
        os.environ["MEM0_TELEMETRY"] = "False"  # read when mem0 is imported: no posthog calls, ever
        os.environ.setdefault("MEM0_DIR", str(stores_root / ".mem0"))

    def _clock_modules(self) -> list[ModuleType]:
        return [importlib.import_module("mem0.memory.main"), importlib.import_module("mem0.configs.prompts")]

    def _lib_reset(self, store_dir: Path) -> None:
        from mem0 import Memory

        if self._memory is not None:
            self._memory.close()
        config = {
            "llm": {"provider": "openai", "config": {
                "model": LIBRARY_ROLE, "api_key": self.api_key, "openai_base_url": self.base_url,
                "temperature": 0.0, "max_tokens": MAX_TOKENS}},
            "embedder": {"provider": "openai", "config": {
                "model": "embeddings", "api_key": self.api_key, "openai_base_url": self.base_url,
                "embedding_dims": EMBEDDING_DIMS}},
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": "memprobe", "path": str(store_dir / "qdrant"), "on_disk": True,
                "embedding_model_dims": EMBEDDING_DIMS}},
            "history_db_path": str(store_dir / "history.db"),
        }
        self._memory = Memory.from_config(config)
        # mem0 builds its OpenAI clients without a timeout setting: give them the adapter's (no SDK
        # retries either — the engine's client behind the proxy retries).
        from openai import OpenAI

        for holder in (self._open.llm, self._open.embedding_model):
            holder.client = OpenAI(api_key=self.api_key, base_url=self.base_url, timeout=LIBRARY_HTTP_TIMEOUT_S,
                                   max_retries=0)

    def _lib_ingest(self, batch: list[Observation]) -> None:
        self._open.add(conversation(batch), user_id=self.user_id,
                         metadata={"task_index": batch[-1].task_index, "turn": batch[-1].turn})

    def _lib_search(self, query: str, k: int) -> list[tuple[str, dict[str, Any], float | None]]:
        found = self._open.search(query, filters={"user_id": self.user_id}, top_k=k)
        return [(str(hit["id"]), _fields(hit), hit.get("score")) for hit in found.get("results", [])]

    def _lib_dump(self) -> dict[str, dict[str, Any]]:
        listed = self._open.get_all(filters={"user_id": self.user_id}, top_k=100_000)
        rows = sorted(listed.get("results", []), key=lambda row: (str(row.get("created_at")), str(row["id"])))
        return {str(row["id"]): _fields(row) for row in rows}


def _fields(row: dict[str, Any]) -> dict[str, Any]:
    """A row's native fields, JSON-safe (the score is a property of a search, not of the item)."""
    return {key: value for key, value in row.items() if key != "score" and value is not None}
