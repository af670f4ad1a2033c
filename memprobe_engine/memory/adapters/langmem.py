"""``langmem``: LangChain's ``langmem`` memory manager (``memprobe[langmem]``) on a langgraph store.

Configuration, all offline: ``create_memory_store_manager`` with a ``ChatOpenAI`` model and an
``InMemoryStore`` indexed by ``OpenAIEmbeddings`` (384 dimensions, ``check_embedding_ctx_length``
off so tiktoken never fetches an encoding), both on the recording proxy. The manager is langmem's
own: it searches the store with the new messages, then asks the model — through tool calls, via
``trustcall`` — to insert, patch or delete memories. The in-memory store lives as long as one user;
``reset`` builds a new one. After each ingest its items are also written to ``memories.json`` in the
store folder, so the folder shows what the library held.

Ingest = ``manager.ainvoke({"messages": …})`` for the user's namespace; search = the store's own
vector search in that namespace; dump = every item with its native fields (``namespace``, ``key``,
``value``, ``created_at``, ``updated_at``). langmem, trustcall and the store read ``datetime`` and
``uuid`` in their modules; those are pinned to the simulated clock and the unit's seed.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from memprobe_engine.memory.adapters.base import LIBRARY_HTTP_TIMEOUT_S, LIBRARY_ROLE, LibraryAdapter, conversation
from memprobe_engine.memory.base import Observation

if TYPE_CHECKING:  # the optional langmem extra (untyped libraries: for the names only)
    from langgraph.store.base import Item
    from langgraph.store.memory import InMemoryStore

EMBEDDING_DIMS = 384
MAX_TOKENS = 1000
_PINNED = ("langmem.knowledge.extraction", "trustcall._base", "langgraph.store.memory", "langgraph.store.base")



class _Manager(Protocol):
    """What the adapter asks of langmem's memory store manager (a langchain runnable)."""

    async def ainvoke(self, input: dict[str, object], config: dict[str, object]) -> object: ...

class LangMem(LibraryAdapter):
    """langmem's memory manager: search, then insert / patch / delete memories by tool calls."""

    name: ClassVar[str] = "langmem"
    description: ClassVar[str] = ("LangMem (langmem): LLM memory manager that inserts, patches and deletes "
                                  "memories by tool calls over a langgraph in-memory vector store.")
    distribution: ClassVar[str] = "langmem"
    extra: ClassVar[str] = "langmem"
    content_field: ClassVar[str] = "content"

    _manager: _Manager | None = None
    _store: InMemoryStore | None = None

    def _opened(self) -> tuple[_Manager, InMemoryStore]:
        """The memory manager and its store (made by ``_lib_reset``)."""
        if self._manager is None or self._store is None:
            raise RuntimeError("langmem: the store is used before _lib_reset made it")
        return self._manager, self._store

    def _clock_modules(self) -> list[ModuleType]:
        return [importlib.import_module(name) for name in _PINNED]

    def _namespace(self) -> tuple[str, str]:
        return ("memories", self.user_id)

    def _lib_reset(self, store_dir: Path) -> None:
        from langchain_openai import ChatOpenAI, OpenAIEmbeddings
        from langgraph.store.base import IndexConfig
        from langgraph.store.memory import InMemoryStore
        from langmem import create_memory_store_manager

        # Keyword dictionaries: these pydantic models take aliases (base_url, api_key, timeout) that
        # their type stubs do not all declare.
        client: dict[str, Any] = {"base_url": self.base_url, "api_key": self.api_key, "max_retries": 0}
        embeddings = OpenAIEmbeddings(**client, model="embeddings", check_embedding_ctx_length=False,
                                      request_timeout=LIBRARY_HTTP_TIMEOUT_S)
        index: IndexConfig = {"dims": EMBEDDING_DIMS, "embed": embeddings}
        self._store = InMemoryStore(index=index)
        model = ChatOpenAI(**client, model=LIBRARY_ROLE, temperature=0.0, max_tokens=MAX_TOKENS,
                           timeout=LIBRARY_HTTP_TIMEOUT_S)
        self._manager = create_memory_store_manager(model, namespace=("memories", "{langgraph_user_id}"),
                                                    store=self._store, enable_deletes=True)

    async def _lib_ingest(self, batch: list[Observation]) -> None:
        await self._opened()[0].ainvoke({"messages": conversation(batch)},
                                    config={"configurable": {"langgraph_user_id": self.user_id}})
        items = await self._lib_dump()
        (self.store_dir / "memories.json").write_text(json.dumps(items, indent=1, ensure_ascii=False))

    async def _lib_search(self, query: str, k: int) -> list[tuple[str, dict[str, Any], float | None]]:
        found = await self._opened()[1].asearch(self._namespace(), query=query, limit=k)
        return [(str(item.key), _fields(item), item.score) for item in found]

    async def _lib_dump(self) -> dict[str, dict[str, Any]]:
        found = await self._opened()[1].asearch(self._namespace(), limit=100_000)
        items = sorted(found, key=lambda item: (item.created_at.isoformat(), str(item.key)))
        return {str(item.key): _fields(item) for item in items}


def _fields(item: Item) -> dict[str, Any]:
    """A store item's native fields; ``content`` is the memory's text (langmem's default schema
    stores ``{"kind": "Memory", "content": {"content": "…"}}``)."""
    value = item.value if isinstance(item.value, dict) else {"value": item.value}
    inner = value.get("content")
    text = inner.get("content") if isinstance(inner, dict) else inner
    return {"namespace": list(item.namespace), "key": str(item.key), "value": value,
            "created_at": item.created_at.isoformat(), "updated_at": item.updated_at.isoformat(),
            "content": text if isinstance(text, str) else json.dumps(inner, ensure_ascii=False)}
