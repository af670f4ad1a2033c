"""``memt``: a trained memory-operation policy over five typed collections (paper §4.1, Mem-T).

Our own implementation of the published algorithm; prompts are in :mod:`.memt_prompts`, the read
loop in :mod:`.memt_react`.

Write side. The user's words (the task opening and each user turn) are stored at once as raw
turns (collection ``turns``), so no evidence waits in a buffer that a dump could miss; assistant
turns are not stored, as in the released runs, whose ``turns`` hold only what the user said
(:data:`STORED_KINDS`). Turns are also queued for formation, which runs per batch of
:data:`BATCH_TURNS` turns and for the remainder of a task as soon as the next task begins: one
``memory_writer`` call, shown the current persona and summary, returns new facts and experiences
(each citing batch turns by index; its time span is that of the cited turns on the simulated
clock) and the rewritten persona and summary. Each new
fact or experience is then compared with its :data:`NEIGHBOURS` nearest entries of its collection,
and a second ``memory_writer`` call chooses ``add`` / ``update`` (rewrite the target) / ``delete``
(drop the target, keep the new entry) / ``ignore``. Neighbours are named by index, so an id cannot
be invented; an out-of-range index, an unusable (excluded) reply or a bad source index is recorded
as a recoverable ``error`` event and the evidence is kept as a new entry rather than lost.

The trailing turns of a user's last task are stored raw but not formed: the protocol gives no
end-of-trajectory signal, and forming them during scoring would change a store that scoring
reads concurrently (and after its footprint was recorded).

Read side. ``search`` runs the ReAct loop (role ``reader``, at most six policy calls) over the
tools ``search_turns`` / ``search_facts`` / ``search_experiences`` / ``search_personas`` /
``get_summary`` / ``finish``; surfaced items are de-duplicated by id and the top k returned.

Items mirror the release's native fields: ``id``, ``content`` (the memory text followed by the
turns it rests on), ``category`` (the collection), ``metadata`` (``session_id``, ``turn_time``,
``source_turn_ids``, ``col_name``, ``memory_content``, ``original_turns``, ``start_time``,
``end_time``, …) and ``timestamp``. Ids come from per-collection counters (``t0001``, ``f0001``,
``e0001``, ``p0001``, ``s0001``); every mutation is a recorded ``memory_op``.

Running the real policy. Serve ``EdwinYue/Mem-T-4B`` with vLLM for both roles, with its chat
template's thinking mode off so replies are the JSON or tool calls alone (``extra_body`` is sent
with every request; nothing here is hard-coded). Identical specs share one server::

    [models.memory_writer]
    spec = "vllm:EdwinYue/Mem-T-4B"
    context_tokens = 16384
    extra_body = { chat_template_kwargs = { enable_thinking = false } }

    [models.reader]
    spec = "vllm:EdwinYue/Mem-T-4B"
    context_tokens = 16384
    extra_body = { chat_template_kwargs = { enable_thinking = false } }

Any other spec runs the same protocol; every ``llm_call`` event records which model played the policy.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from memprobe_engine.events.memory import MemoryOp
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.embeddings import cosine_top_k
from memprobe_engine.llm.types import SamplingParams
from memprobe_engine.memory.base import (AgentContext, Footprint, MemoryServices, Observation, RecordedStore,
                                         ScoredItem)
from memprobe_engine.memory.memt_prompts import (Formation, UpdateDecision, formation_messages, shorten,
                                                 update_messages)
from memprobe_engine.memory.memt_react import SEARCH_TOOLS, ReactResult, ToolCall, react_search

Vector = npt.NDArray[np.float32]

COLLECTIONS = ("turns", "facts", "experiences", "personas", "summary")
BATCH_TURNS = 4
#: Observation kinds kept as turns: the user's words, not the assistant's replies.
STORED_KINDS = ("task", "user")
NEIGHBOURS = 3
WRITER_ROLE = "memory_writer"
READER_ROLE = "reader"
SOURCE_MARK = "\n\n[source turns]\n"
FORMATION_PARAMS = SamplingParams(temperature=0.0, max_tokens=1500)
UPDATE_PARAMS = SamplingParams(temperature=0.0, max_tokens=400)
_PREFIX = {"turns": "t", "facts": "f", "experiences": "e", "personas": "p", "summary": "s"}
TURN_PREFIX = "user said: "
#: The assistant is shown at most this many surfaced memories, and, when the loop surfaced none,
#: the first this-many stored items cut to FALLBACK_CHARS (the release's memt agent).
AGENT_ITEMS = 20
FALLBACK_CHARS = 400
_KIND = {"facts": "fact", "experiences": "experience"}


class MemT:
    """Mem-T-style typed memory written and read by a policy model."""

    name: ClassVar[str] = "memt"
    description: ClassVar[str] = ("Mem-T: a memory-operation policy forms facts, experiences, persona and summary "
                                  "from batches of turns, revises them against near neighbours, and retrieves "
                                  "with a ReAct tool loop.")

    def __init__(self, services: MemoryServices) -> None:
        services.require("memt", chat=True, embedder=True)
        self.services = services
        self.store = RecordedStore(services.recorder)
        self._session = "user"
        self._counters = dict.fromkeys(COLLECTIONS, 0)
        self._pending: list[str] = []  # ids of raw turns awaiting formation
        self._pending_task: int | None = None
        self._vectors: dict[str, tuple[str, Vector]] = {}  # item id -> (text embedded, its vector)
        self._refresh_lock = asyncio.Lock()

    # -- protocol ------------------------------------------------------------------------------

    async def reset(self, user_id: str) -> None:
        """Empty every collection (one recorded ``reset`` op) and forget queued turns and vectors."""
        self.store.clear(note=f"new user {user_id}")
        self._session = user_id
        self._counters = dict.fromkeys(COLLECTIONS, 0)
        self._pending, self._pending_task = [], None
        self._vectors.clear()

    async def observe(self, observation: Observation) -> None:
        """Store a user-side turn raw; form memories when a batch is full or the previous task ended."""
        if observation.kind not in STORED_KINDS:
            return
        if self._pending and observation.task_index != self._pending_task:
            await self._form()
        self._pending.append(self._store_turn(observation))
        self._pending_task = observation.task_index
        if len(self._pending) >= BATCH_TURNS:
            await self._form()

    async def finish(self) -> None:
        """End of the user's trajectory: form memories from the turns still queued."""
        if self._pending:
            await self._form()

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        """The policy's ReAct retrieval: items it surfaced, de-duplicated, best ``k`` first."""
        if k <= 0 or len(self.store) == 0:
            return []
        return (await self._react(query)).top(k)

    async def _react(self, query: str) -> ReactResult:
        """One ReAct loop for ``query``: everything it surfaced, in first-seen order."""
        query_vector: list[Vector] = []

        async def run_tool(call: ToolCall) -> list[ScoredItem]:
            if call.name in SEARCH_TOOLS:
                return await self._search_collection(SEARCH_TOOLS[call.name], call.query, call.k)
            if not query_vector:
                query_vector.append((await self._embed([query]))[0])
            return await self._summary_hit(query_vector[0])

        return await react_search(self.services.chat, query, run_tool, self._error, role=READER_ROLE)

    async def agent_context(self, query: str, k: int, task_index: int) -> AgentContext:
        """What the release's memt agent shows the assistant: the memory text (without its source
        turns) of up to :data:`AGENT_ITEMS` items in the order the ReAct loop surfaced them; when it
        surfaced nothing, the first stored items, each cut to :data:`FALLBACK_CHARS` characters."""
        del k, task_index
        if len(self.store) == 0:
            return AgentContext()
        hits = list((await self._react(query)).hits.values())[:AGENT_ITEMS]
        if not hits:
            hits = [ScoredItem(id=item["id"], item={"id": item["id"], "content": _embedded_text(item)[:FALLBACK_CHARS]})
                    for item in self.store.items()[:AGENT_ITEMS]]
        return AgentContext(hits=[ScoredItem(id=hit.id, score=hit.score,
                                             item={"id": hit.id, "content": _embedded_text(hit.item)})
                                  for hit in hits])

    def dump(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(item) for item in self.store.items()]

    def footprint(self) -> Footprint:
        return self.store.footprint()

    # -- write side ----------------------------------------------------------------------------

    def _next_id(self, collection: str) -> str:
        self._counters[collection] += 1
        return f"{_PREFIX[collection]}{self._counters[collection]:04d}"

    def _metadata(self, item_id: str, collection: str, **fields: Any) -> dict[str, Any]:
        return {"id": item_id, "col_name": f"{self._session}_{collection}", "session_id": self._session, **fields}

    def _store_turn(self, observation: Observation) -> str:
        item_id = self._next_id("turns")
        metadata = self._metadata(item_id, "turns", turn_time=observation.timestamp, source_turn_ids=[[item_id]],
                                  task_index=observation.task_index, turn=observation.turn)
        self.store.add(item_id, {"id": item_id, "content": TURN_PREFIX + observation.text,
                                 "category": "turns", "metadata": metadata, "timestamp": observation.timestamp},
                       note="turns: raw turn")
        return item_id

    async def _form(self) -> None:
        """One formation call for the queued turns, then the update step for each new memory."""
        batch, self._pending = self._pending, []
        lines = [f"({self.store.get(t)['timestamp']}) {self.store.get(t)['content']}" for t in batch]
        persona, summary = self._single_text("personas"), self._single_text("summary")
        outcome = await self.services.chat.chat(WRITER_ROLE, formation_messages(persona, summary, lines),
                                                params=FORMATION_PARAMS, schema=Formation)
        if outcome.parsed is None:
            self._error("MemTFormationExcluded", f"formation for turns {batch[0]}–{batch[-1]} was unusable "
                                                 f"({outcome.excluded}); the turns stay stored raw only")
            return
        formation: Formation = outcome.parsed
        for collection in ("facts", "experiences"):
            entries = [entry for entry in getattr(formation, collection) if entry.content.strip()]
            if not entries:
                continue
            vectors = await self._embed([entry.content.strip() for entry in entries])
            for entry, vector in zip(entries, vectors):
                sources = self._sources(entry.source_turns, batch, collection)
                await self._integrate(collection, entry.content.strip(), sources, vector)
        self._set_single("personas", formation.persona, batch)
        self._set_single("summary", formation.summary, batch)

    def _sources(self, indexes: Sequence[int], batch: list[str], collection: str) -> list[str]:
        """Batch turn ids for the cited indexes; out-of-range ones are noted, none valid means all."""
        valid = [batch[i] for i in dict.fromkeys(indexes) if 0 <= i < len(batch)]
        bad = [i for i in indexes if not 0 <= i < len(batch)]
        if bad or not valid:
            self._error("MemTBadSourceTurn", f"a new {_KIND[collection]} cited turn index(es) {bad or indexes} of a "
                                             f"{len(batch)}-turn batch; " +
                                             ("kept the valid ones" if valid else "attributed it to the whole batch"))
        return valid or list(batch)

    async def _integrate(self, collection: str, content: str, sources: list[str], vector: Vector) -> None:
        """The update step: compare with the nearest entries and apply the policy's decision."""
        neighbours = await self._neighbours(collection, vector)
        if not neighbours:
            self._add_memory(collection, content, sources, vector, note=f"{collection}: add (nothing to compare)")
            return
        texts = [self.store.get(n)["metadata"]["memory_content"] for n in neighbours]
        outcome = await self.services.chat.chat(WRITER_ROLE, update_messages(_KIND[collection], content, texts),
                                                params=UPDATE_PARAMS, schema=UpdateDecision)
        if outcome.parsed is None:
            self._error("MemTUpdateExcluded", f"update decision for a new {_KIND[collection]} was unusable "
                                              f"({outcome.excluded}); stored it as new")
            self._add_memory(collection, content, sources, vector, note=f"{collection}: add (decision unusable)")
            return
        decision: UpdateDecision = outcome.parsed
        if decision.action == "add":
            self._add_memory(collection, content, sources, vector, note=f"{collection}: add")
            return
        target = decision.target
        in_range = target is not None and 0 <= target < len(neighbours)
        if decision.action == "ignore":
            matched = [neighbours[target]] if in_range and target is not None else neighbours
            self.services.recorder.emit(MemoryOp(op="ignore", item_ids=matched, patch=[], store_size=len(self.store),
                                                 note=f"{collection}: ignore {shorten(content, 120)!r}"))
            return
        if not in_range or target is None:
            self._error("MemTInvalidTarget", f"{decision.action} named entry {target} but only {len(neighbours)} "
                                             f"neighbour(s) were shown; rejected, stored the new {_KIND[collection]} "
                                             f"as new")
            self._add_memory(collection, content, sources, vector,
                             note=f"{collection}: add ({decision.action} target {target} out of range)")
            return
        target_id = neighbours[target]
        if decision.action == "update":
            merged = (decision.content or "").strip() or content
            self._update_memory(target_id, merged, sources)
        else:
            self.store.delete(target_id, note=f"{collection}: delete (superseded by a new {_KIND[collection]})")
            self._vectors.pop(target_id, None)
            self._add_memory(collection, content, sources, vector, note=f"{collection}: add (replaces {target_id})")

    def _memory_item(self, item_id: str, collection: str, content: str, sources: list[str],
                     **extra: Any) -> dict[str, Any]:
        """A fact/experience/persona/summary item: the text, then the turns it rests on."""
        turns = [self.store.get(t) for t in sources if t in self.store]
        times = sorted(t["timestamp"] for t in turns)
        originals = [t["content"] for t in turns]
        metadata = self._metadata(item_id, collection, turn_time=times[-1] if times else self.services.clock.iso(),
                                  memory_content=content, source_turn_ids=[[t] for t in sources],
                                  original_turns=originals, **extra)
        return {"id": item_id, "content": content + SOURCE_MARK + "\n".join(originals), "category": collection,
                "metadata": metadata, "timestamp": metadata["turn_time"]}

    def _add_memory(self, collection: str, content: str, sources: list[str], vector: Vector, *, note: str) -> None:
        item_id = self._next_id(collection)
        turns = sorted(self.store.get(t)["timestamp"] for t in sources)
        self.store.add(item_id, self._memory_item(item_id, collection, content, sources,
                                                  start_time=turns[0], end_time=turns[-1]), note=note)
        self._vectors[item_id] = (content, vector)

    def _update_memory(self, item_id: str, content: str, sources: list[str]) -> None:
        old = self.store.get(item_id)
        merged = list(dict.fromkeys([ids[0] for ids in old["metadata"]["source_turn_ids"]] + sources))
        times = sorted(self.store.get(t)["timestamp"] for t in merged if t in self.store)
        item = self._memory_item(item_id, old["category"], content, merged, start_time=times[0], end_time=times[-1],
                                 updated_time=self.services.clock.iso())
        item["timestamp"] = old["timestamp"]
        item["metadata"]["turn_time"] = old["metadata"]["turn_time"]
        self.store.update(item_id, item, note=f"{old['category']}: update")

    def _single_text(self, collection: str) -> str:
        item = self._single(collection)
        return str(item["metadata"]["memory_content"]) if item is not None else ""

    def _single(self, collection: str) -> dict[str, Any] | None:
        return next((item for item in self.store.items() if item["category"] == collection), None)

    def _set_single(self, collection: str, text: str, batch: list[str]) -> None:
        """Create or rewrite the one persona / summary item; an empty or unchanged text keeps it."""
        text = text.strip()
        current = self._single(collection)
        if not text or (current is not None and current["metadata"]["memory_content"] == text):
            return
        extra: dict[str, Any] = {"name": "User"} if collection == "personas" else {}
        if current is None:
            item_id = self._next_id(collection)
            item = self._memory_item(item_id, collection, text, batch, updated_time=self.services.clock.iso(), **extra)
            self.store.add(item_id, item, note=f"{collection}: add")
            return
        sources = list(dict.fromkeys([ids[0] for ids in current["metadata"]["source_turn_ids"]] + batch))
        item = self._memory_item(current["id"], collection, text, sources, updated_time=self.services.clock.iso(),
                                 **extra)
        self.store.update(current["id"], item, note=f"{collection}: update")

    # -- embeddings and tools ------------------------------------------------------------------

    async def _embed(self, texts: list[str]) -> Vector:
        rows = np.asarray(await self.services.embedder.embed(texts), dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(texts):
            raise ValueError(f"the embedder returned an array of shape {rows.shape} for {len(texts)} texts; "
                             f"expected one row per text")
        return rows

    async def _collection_matrix(self, collection: str) -> tuple[list[str], Vector | None]:
        """Ids of a collection's items and their vectors, embedding (in one batch) only changed texts."""
        async with self._refresh_lock:
            ids = [item["id"] for item in self.store.items() if item["category"] == collection]
            texts = {item_id: _embedded_text(self.store.get(item_id)) for item_id in ids}
            stale = [item_id for item_id in ids if _cached_text(self._vectors.get(item_id)) != texts[item_id]]
            if stale:
                rows = await self._embed([texts[item_id] for item_id in stale])
                self._vectors.update({item_id: (texts[item_id], rows[n]) for n, item_id in enumerate(stale)})
        if not ids:
            return ids, None
        return ids, np.stack([self._vectors[item_id][1] for item_id in ids])

    async def _neighbours(self, collection: str, vector: Vector) -> list[str]:
        ids, matrix = await self._collection_matrix(collection)
        if matrix is None:
            return []
        return [ids[row] for row, _ in cosine_top_k(vector, matrix, NEIGHBOURS)]

    async def _search_collection(self, collection: str, query: str, k: int) -> list[ScoredItem]:
        ids, matrix = await self._collection_matrix(collection)
        if matrix is None:
            return []
        hits = cosine_top_k((await self._embed([query]))[0], matrix, k)
        return [ScoredItem(id=ids[row], item=copy.deepcopy(self.store.get(ids[row])), score=score)
                for row, score in hits]

    async def _summary_hit(self, query_vector: Vector) -> list[ScoredItem]:
        """The summary item, scored by its similarity to the original request."""
        ids, matrix = await self._collection_matrix("summary")
        if matrix is None:
            return []
        row, score = cosine_top_k(query_vector, matrix, 1)[0]
        return [ScoredItem(id=ids[row], item=copy.deepcopy(self.store.get(ids[row])), score=score)]

    def _error(self, error_type: str, message: str) -> None:
        """Record a recoverable problem with the policy's output; the run goes on."""
        self.services.recorder.emit(ErrorEvent(where="memt", error_type=error_type, message=message, recoverable=True))


def _embedded_text(item: dict[str, Any]) -> str:
    """What an item is searched by: the memory text (a raw turn: the whole turn)."""
    return str(item["metadata"].get("memory_content") or item["content"])


def _cached_text(entry: tuple[str, Vector] | None) -> str | None:
    return entry[0] if entry is not None else None
