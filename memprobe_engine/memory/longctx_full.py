"""``longctx_full``: every task opening and turn stored verbatim, cosine top-k retrieval (paper §4.1).

The raw evidence-preservation baseline: nothing is summarised, merged or dropped, so dump_all shows
exactly what the user and agent said. Items mirror the release's native fields
(``content``/``category``/``task_index``, plus ``turn`` for replies) and add ``id`` and the
simulated-clock ``timestamp``. Embeddings go through ``services.embedder`` (recorded and cached);
they are computed in one batch for the items written since the last search and kept in an
in-memory matrix, so a search embeds only its query and what is new.

The assistant of ``longctx_full`` is not shown a top-k: as in the release (``use_in_reply``), every
earlier task's transcript is replayed to it verbatim as chat turns (:meth:`agent_context`). The
rollout never offers a task's final assistant reply, so, as in the release, it is not stored.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from memprobe_engine.llm.embeddings import cosine_top_k
from memprobe_engine.memory.base import AgentContext, Footprint, MemoryServices, Observation, RecordedStore, ScoredItem

#: Observation kind -> (native category, content prefix) as the release's longctx_full agent wrote them.
_CATEGORY: dict[str, tuple[str, str]] = {
    "user": ("user_reply", "User: "),
    "assistant": ("agent_reply", "Agent: "),
    "tool_output": ("tool_output", "Tool: "),  # protocol B's agentic sessions
}


def native_item(item_id: str, observation: Observation) -> dict[str, Any]:
    """The stored item for one observation, in the release's field layout plus ``id``/``timestamp``."""
    if observation.kind == "task":
        return {"id": item_id, "content": f"[Task {observation.task_index}] {observation.text}",
                "category": "task", "task_index": observation.task_index,
                "timestamp": observation.timestamp}
    category, prefix = _CATEGORY[observation.kind]
    return {"id": item_id, "content": prefix + observation.text, "category": category,
            "task_index": observation.task_index, "turn": observation.turn,
            "timestamp": observation.timestamp}


class LongContextFull:
    """Verbatim turn store with sentence-embedding cosine retrieval."""

    name: ClassVar[str] = "longctx_full"
    description: ClassVar[str] = ("Stores every task opening and turn verbatim; retrieve mode ranks them "
                                  "by cosine similarity of sentence embeddings.")
    #: Verbatim storage: no model call of its own, only embeddings.
    model_roles: ClassVar[tuple[str, ...]] = ()

    def __init__(self, services: MemoryServices) -> None:
        services.require("longctx_full", embedder=True)
        self.services = services
        self.store = RecordedStore(services.recorder)
        self._next = 1
        self._row_ids: list[str] = []  # item id of each matrix row, then of each pending item
        self._matrix: npt.NDArray[np.float32] | None = None  # rows for _row_ids[:n_embedded]
        # Dimensions are scored concurrently over one store: without this, two searches that both
        # find the same items pending embed them twice and the matrix outgrows _row_ids.
        self._embedding = asyncio.Lock()

    @property
    def _n_embedded(self) -> int:
        return 0 if self._matrix is None else int(self._matrix.shape[0])

    async def reset(self, user_id: str) -> None:
        """Empty the store (recorded as a ``reset`` op) and drop the embeddings with it."""
        self.store.clear(note=f"new user {user_id}")
        self._next = 1
        self._row_ids = []
        self._matrix = None

    async def observe(self, observation: Observation) -> None:
        """Store the observation verbatim; its embedding is computed at the next search."""
        item_id = f"t{self._next:04d}"
        self._next += 1
        self.store.add(item_id, native_item(item_id, observation))
        self._row_ids.append(item_id)

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        """The ``k`` items most cosine-similar to ``query``, best first, with their similarity."""
        if k <= 0 or not self._row_ids:
            return []
        await self._embed_pending()
        assert self._matrix is not None
        query_vec = await self._embed([query])
        hits = cosine_top_k(query_vec[0], self._matrix, min(k, len(self._row_ids)))
        return [ScoredItem(id=self._row_ids[row], item=dict(self.store.get(self._row_ids[row])),
                           score=float(score)) for row, score in hits]

    async def agent_context(self, query: str, k: int, task_index: int) -> AgentContext:
        """Every earlier task's transcript, in order, as (speaker, text) turns: the task opening and
        the user's replies as user turns, the stored assistant replies as assistant turns. The
        current task's own dialogue is already in the assistant's messages, so it is left out."""
        del query, k  # the whole transcript, not a search
        prior: list[tuple[str, str]] = []
        for item in self.store.items():
            if item["task_index"] == task_index:
                continue
            prior.append(_turn_of(item))
        return AgentContext(prior_dialogue=prior)

    def dump(self) -> list[dict[str, Any]]:
        return [dict(item) for item in self.store.items()]

    def footprint(self) -> Footprint:
        return self.store.footprint()

    async def _embed_pending(self) -> None:
        """Embed, in one batch, the items written since the last search and append their rows."""
        async with self._embedding:
            pending = self._row_ids[self._n_embedded:]
            if not pending:
                return
            rows = await self._embed([str(self.store.get(item_id)["content"]) for item_id in pending])
            self._matrix = rows if self._matrix is None else np.vstack([self._matrix, rows])

    async def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        rows = np.asarray(await self.services.text_embedder.embed(texts), dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(texts):
            raise ValueError(f"the embedder returned an array of shape {rows.shape} for {len(texts)} "
                             f"texts; expected one row per text")
        return rows


def _turn_of(item: dict[str, Any]) -> tuple[str, str]:
    """A stored item back as the chat turn it was: speaker and the text without its prefix."""
    content = str(item["content"])
    if item["category"] == "task":
        return "user", content.removeprefix(f"[Task {item['task_index']}] ")
    if item["category"] == "agent_reply":
        return "assistant", content.removeprefix("Agent: ")
    return "user", content.removeprefix("User: ")
