"""``graphiti``: the real ``graphiti-core`` temporal knowledge graph (``memprobe[graphiti]``), Zep's engine.

Configuration, all offline: the graph lives in an embedded Kuzu database in the store folder
(``KuzuDriver``); the LLM is ``OpenAIGenericClient`` (chat completions with a JSON schema — the
default ``OpenAIClient`` uses the Responses API, which the proxy does not serve) and the embedder
``OpenAIEmbedder`` at 384 dimensions, both on the recording proxy; the cross-encoder is pointed at
the proxy too but is never asked, since the default search fuses vector and BM25 ranks without
reranking. Telemetry is off (``GRAPHITI_TELEMETRY_ENABLED=false``). Three settings differ from
graphiti's own: the full-text indices are created through the Kuzu driver's graph operations (the
driver's ``build_indices_and_constraints`` is a no-op in 0.31.2, and searches fail without them);
every call asks for at most :data:`MAX_TOKENS` generated tokens; and a search's full-text half gets
the query without Kuzu's wildcard characters ``?`` and ``*`` (:func:`kuzu_full_text`), since
graphiti passes a question to Kuzu as a wildcard pattern that found nothing.

Ingest = ``Graphiti.add_episode`` with the buffered exchange as one message episode whose
``reference_time`` is the simulated clock; search = graphiti's hybrid search over fact edges, as
``Graphiti.search`` runs it (``search`` with the RRF edge recipe); dump = the user's entity nodes, fact edges and
episodes with their native fields (embeddings left out). Graphiti stamps ``created_at`` with
``utc_now()`` and ids with ``uuid4`` in ``graphiti_core.utils.datetime_utils``, ``nodes`` and
``edges``: those are pinned to the simulated clock and the unit's seed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, TypeVar

from memprobe_engine.memory.adapters.base import LIBRARY_HTTP_TIMEOUT_S, LIBRARY_ROLE, LibraryAdapter, conversation
from memprobe_engine.memory.base import Observation

T = TypeVar("T")

EMBEDDING_DIMS = 384
KUZU_BUFFER_BYTES = 256 * 1024 * 1024
KUZU_MAX_DB_BYTES = 4 * 1024 * 1024 * 1024
#: Cap on generated tokens per call. graphiti asks for up to 16,384 (its client default, and fixed for
#: edge extraction whatever the client says); a small model that starts repeating itself inside a JSON
#: grammar would then generate for many minutes on two CPU cores (16k tokens at ~20 tokens/s), and the
#: truncated reply fails anyway. 1,500 leaves room for dozens of entities or facts per episode.
MAX_TOKENS = 1500
_PINNED = ("graphiti_core.utils.datetime_utils", "graphiti_core.nodes", "graphiti_core.edges",
           "graphiti_core.graphiti", "graphiti_core.utils.maintenance.node_operations",
           "graphiti_core.utils.maintenance.edge_operations")
_SKIP_FIELDS = {"name_embedding", "fact_embedding", "summary_embedding", "embedding"}


class Graphiti(LibraryAdapter):
    """graphiti-core's entity and fact extraction, temporal edge invalidation and hybrid search."""

    name: ClassVar[str] = "graphiti"
    description: ClassVar[str] = ("Graphiti (graphiti-core, Zep's temporal knowledge graph): entities and "
                                  "dated facts extracted per episode into an embedded Kuzu graph; hybrid search.")
    distribution: ClassVar[str] = "graphiti-core"
    extra: ClassVar[str] = "graphiti"
    content_field: ClassVar[str] = "content"

    _graphiti: Any = None

    def _prepare(self, stores_root: Path) -> None:
        os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
        # Loading kuzu's native library before xllamacpp's makes the later import abort the process
        # (std::bad_alloc in xllamacpp's initialisers; measured with kuzu 0.11.3, xllamacpp 2026.10.11549).
        # The other order works, so the embedded model's runtime is loaded first when it is installed.
        with contextlib.suppress(ImportError):
            import xllamacpp  # noqa: F401

    def _clock_modules(self) -> list[ModuleType]:
        return [importlib.import_module(name) for name in _PINNED]

    async def _lib_reset(self, store_dir: Path) -> None:
        from graphiti_core import Graphiti as Library
        from graphiti_core.cross_encoder.openai_reranker_client import OpenAIRerankerClient
        from graphiti_core.driver.kuzu_driver import KuzuDriver
        from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig
        from graphiti_core.llm_client.config import LLMConfig
        from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient

        if self._graphiti is not None:
            await self._graphiti.close()
        driver = _kuzu_driver(KuzuDriver, store_dir / "graph.kuzu")
        llm_config = LLMConfig(api_key=self.api_key, base_url=self.base_url, model=LIBRARY_ROLE,
                               small_model=LIBRARY_ROLE, temperature=0.0, max_tokens=MAX_TOKENS)
        from openai import AsyncOpenAI

        def client() -> AsyncOpenAI:
            return AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, timeout=LIBRARY_HTTP_TIMEOUT_S,
                               max_retries=0)
        # graphiti runs independent calls together (one per edge to date or resolve, one per batch of
        # node summaries) through semaphore_gather(max_coroutines): allow as many as the engine sends
        # to this role's model at once (the embedded server's slots), so they are decoded together.
        parallel = max(1, int(self.services.chat_client.spec_for(LIBRARY_ROLE).concurrency))
        self._graphiti = Library(
            graph_driver=driver,
            llm_client=_capped_client(OpenAIGenericClient)(config=llm_config, max_tokens=MAX_TOKENS,
                                                           client=client()),
            embedder=OpenAIEmbedder(OpenAIEmbedderConfig(api_key=self.api_key, base_url=self.base_url,
                                                         embedding_model="embeddings", embedding_dim=EMBEDDING_DIMS),
                                    client=client()),
            cross_encoder=OpenAIRerankerClient(config=llm_config), max_coroutines=parallel)
        # graphiti-core 0.31.2's KuzuDriver.build_indices_and_constraints is a no-op, so the full-text
        # indices its searches query (edge_name_and_fact, ...) never exist and the first edge
        # resolution of add_episode fails ("Table RelatesToNode_ doesn't have an index"). The Kuzu
        # driver's own graph operations hold the index creation that works; call that instead.
        await driver.graph_ops.build_indices_and_constraints(driver)

    async def _lib_ingest(self, batch: list[Observation]) -> None:
        from graphiti_core.nodes import EpisodeType

        body = "\n".join(f"{m['role']}: {m['content']}" for m in conversation(batch))
        first = batch[0]
        await self._graphiti.add_episode(
            name=f"task {first.task_index} turn {first.turn}", episode_body=body,
            source_description="conversation between the user and an assistant",
            reference_time=self.services.clock.now().replace(tzinfo=dt.timezone.utc),
            source=EpisodeType.message)  # the default group: each user has a database of its own

    async def _lib_search(self, query: str, k: int) -> list[tuple[str, dict[str, Any], float | None]]:
        """``Graphiti.search`` (hybrid BM25 + cosine over fact edges, fused by RRF) with one change: the
        full-text half gets the query without Kuzu's wildcard characters (:func:`kuzu_full_text`);
        the vector half embeds the query as asked, as ``Graphiti.search`` does."""
        from graphiti_core.search.search import search
        from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF
        from graphiti_core.search.search_filters import SearchFilters

        graphiti = self._graphiti
        vector = await graphiti.embedder.create(input_data=[query.replace("\n", " ")])
        # Graphiti.search sets the limit on the shared recipe object; a copy leaves it alone.
        config = EDGE_HYBRID_SEARCH_RRF.model_copy(deep=True)
        config.limit = k
        results = await search(graphiti.clients, kuzu_full_text(query), None, config, SearchFilters(),
                               query_vector=vector)
        return [(str(edge.uuid), _fields(edge, "fact"), None) for edge in results.edges]

    async def _lib_dump(self) -> dict[str, dict[str, Any]]:
        from graphiti_core.edges import EntityEdge
        from graphiti_core.nodes import EntityNode, EpisodicNode

        driver, groups = self._graphiti.driver, [self._group()]
        rows: list[tuple[str, dict[str, Any]]] = []
        for node in await EntityNode.get_by_group_ids(driver, groups):
            rows.append((str(node.uuid), _fields(node, "entity")))
        for edge in await EntityEdge.get_by_group_ids(driver, groups):
            rows.append((str(edge.uuid), _fields(edge, "fact")))
        for episode in await EpisodicNode.get_by_group_ids(driver, groups):
            rows.append((str(episode.uuid), _fields(episode, "episode")))
        rows.sort(key=lambda row: (row[1]["type"], str(row[1].get("created_at")), row[0]))
        return dict(rows)

    def _group(self) -> str:
        """The default group, which every episode goes to: an explicit group id trips graphiti-core
        0.31.2's Kuzu driver (it has no ``_database``), and isolation comes from the per-user database."""
        from graphiti_core.helpers import get_default_group_id

        return str(get_default_group_id(self._graphiti.driver.provider))


def kuzu_full_text(query: str) -> str:
    """``query`` as literal words for Kuzu's full-text search: ``?`` and ``*`` become spaces.

    graphiti-core 0.31.2 passes the query to Kuzu unchanged (``search_utils.fulltext_query``: "Kuzu
    only supports simple queries"), but Kuzu 0.11's FTS keeps those two characters when it normalises
    a query and reads them as wildcards (one character, any run). A question ("... reply layout?")
    then asks for "layout" plus one letter and, worse, sends the whole query down Kuzu's
    pattern-matching path, which in kuzu 0.11.3 misses the terms held only by a row whose indexed
    text was written again (their index entries are deleted and re-added; a plain term lookup finds
    them, the pattern scan does not) — and graphiti re-writes a fact edge each time a later episode
    repeats it. The search found nothing. Every other punctuation mark Kuzu drops itself. A query of nothing but
    wildcards is left as it is (graphiti returns nothing for a blank one)."""
    literal = " ".join(query.replace("?", " ").replace("*", " ").split())
    return literal or query


def _capped_client(base: type) -> type:
    """``OpenAIGenericClient`` whose every call asks for at most :data:`MAX_TOKENS` generated tokens
    (graphiti passes its own, larger, figure for some prompts, past the client's setting)."""

    class CappedClient(base):  # type: ignore[misc]
        async def _generate_response(self, messages: Any, response_model: Any = None, max_tokens: int = MAX_TOKENS,
                                     *args: Any, **kwargs: Any) -> Any:
            return await super()._generate_response(messages, response_model, min(max_tokens, MAX_TOKENS),
                                                    *args, **kwargs)
    return CappedClient


def _kuzu_driver(driver_class: Callable[..., T], path: Path) -> T:
    """A KuzuDriver whose database is sized for a small per-user graph. KuzuDriver opens
    ``kuzu.Database(path)`` with Kuzu's defaults — a buffer pool of 80 % of RAM and an 8 TB address
    reservation — which aborts the process (std::bad_alloc) beside the embedded model; the sizes are
    passed by wrapping that one constructor call."""
    import kuzu

    real = kuzu.Database

    def sized(database_path: str, **kwargs: Any) -> Any:
        return real(database_path, buffer_pool_size=KUZU_BUFFER_BYTES, max_db_size=KUZU_MAX_DB_BYTES,
                    max_num_threads=1, **kwargs)
    setattr(kuzu, "Database", sized)  # noqa: B010 - a module attribute swapped for one call
    try:
        return driver_class(db=str(path))
    finally:
        setattr(kuzu, "Database", real)  # noqa: B010


def _fields(model: Any, kind: str) -> dict[str, Any]:
    """A node's or edge's native fields, JSON-safe, without embeddings; ``content`` is its text."""
    raw = model.model_dump(mode="python", exclude={field for field in _SKIP_FIELDS if hasattr(model, field)})
    fields = {key: _json(value) for key, value in raw.items() if value is not None}
    fields["type"] = kind
    text = fields.get("fact") if kind == "fact" else fields.get("content") if kind == "episode" else \
        f"{fields.get('name', '')}: {fields.get('summary', '')}".strip(": ")
    fields["content"] = text or ""
    return fields


def _json(value: object) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value
