"""An embedding matrix kept in step with a memory store, keyed by item id.

Systems that rank items by cosine similarity (mem0, amem) embed each item once when it is written,
replace its row when it is rewritten and drop it when it is deleted, so a search never re-embeds
the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from memprobe_engine.llm.embeddings import cosine_top_k

if TYPE_CHECKING:
    from memprobe_engine.llm.embeddings import TextEmbedder

Matrix = npt.NDArray[np.float32]


class VectorIndex:
    """One L2-normalised embedding row per item id, kept in step with a store.

    Systems call :meth:`put` after an add or rewrite and :meth:`remove` after a delete, so search
    never sees a stale row; embedding goes through the engine's recorded, cached embedder.
    """

    def __init__(self, embedder: TextEmbedder) -> None:
        self._embedder = embedder
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._matrix: Matrix | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def clear(self) -> None:
        self._ids, self._row, self._matrix = [], {}, None

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Rows for ``texts`` from the embedder, checked to be one per text."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows = np.asarray(await self._embedder.embed(list(texts)), dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(texts):
            raise ValueError(f"the embedder returned an array of shape {rows.shape} for {len(texts)} texts; "
                             f"expected one row per text")
        return rows

    def put(self, item_id: str, row: npt.ArrayLike) -> None:
        """Set the row of ``item_id``: replaced in place if present, appended otherwise."""
        vector = np.asarray(row, dtype=np.float32).reshape(1, -1)
        if item_id in self._row:
            assert self._matrix is not None
            self._matrix[self._row[item_id]] = vector[0]
            return
        self._row[item_id] = len(self._ids)
        self._ids.append(item_id)
        self._matrix = vector.copy() if self._matrix is None else np.vstack([self._matrix, vector])

    def remove(self, item_id: str) -> None:
        position = self._row.pop(item_id, None)
        if position is None or self._matrix is None:
            return
        del self._ids[position]
        self._matrix = np.delete(self._matrix, position, axis=0) if self._ids else None
        self._row = {row_id: index for index, row_id in enumerate(self._ids)}

    def top_k(self, query: npt.ArrayLike, k: int) -> list[tuple[str, float]]:
        """The ``k`` ids most cosine-similar to ``query``, best first (ties: earlier row first)."""
        if self._matrix is None or k <= 0:
            return []
        return [(self._ids[row], score) for row, score in cosine_top_k(query, self._matrix, k)]
