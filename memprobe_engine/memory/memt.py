"""``memt``: a trained memory-operation policy over five typed collections (paper §4.1, Mem-T).

Our own implementation of the published algorithm; prompts are in :mod:`.memt_prompts`, the read
loop in :mod:`.memt_react`.

Write side, once per turn, as the recovery release's memt agent ran it. Each user-side turn (the
task opening and each user reply; assistant turns are not stored, :data:`STORED_KINDS`) is stored
raw at once in ``turns`` as ``user said: ...``, then one ``memory_writer`` formation call sees the
running summary, the personas and that turn, with the tools in the tool-call format Mem-T-4B was
trained on (:mod:`.memt_prompts`): ``create_fact``, ``create_experience`` (an actionable lesson),
``update_persona`` (one profile per named person), ``update_summary``. Every fact or experience
is then compared with its :data:`NEIGHBOURS` nearest entries of its collection and a second
``memory_writer`` call answers with ``add_item`` / ``update_item`` / ``delete_item`` /
``ignore_item`` calls, run in order. Existing entries are shown under small integer ids, so an id
cannot be invented; an unreadable block, an unknown tool or an id that was not shown is recorded
as a recoverable ``error`` event and skipped, as Mem-T's runner skips it. With nothing to compare
against, the new entry is added without a call.

Read side. ``search`` runs the ReAct loop (role ``reader``, at most six policy calls) over the
tools ``search_turns`` / ``search_facts`` / ``search_experiences`` / ``search_personas`` /
``get_summary`` / ``finish``; surfaced items are de-duplicated by id and the top k returned.

The assistant is shown what the ReAct loop surfaced (:meth:`MemT.agent_context`).

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
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from memprobe_engine.events.jsonpatch import json_copy
from memprobe_engine.events.memory import MemoryOp
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.embeddings import cosine_top_k
from memprobe_engine.llm.types import SamplingParams
from memprobe_engine.memory.base import AgentContext, Footprint, MemoryServices, Observation, RecordedStore, ScoredItem
from memprobe_engine.memory.memt_prompts import (
    PolicyCall,
    formation_messages,
    parse_policy_calls,
    shorten,
    update_messages,
)
from memprobe_engine.memory.memt_react import SEARCH_TOOLS, ReactResult, ToolCall, react_search

Vector = npt.NDArray[np.float32]

COLLECTIONS = ("turns", "facts", "experiences", "personas", "summary")
#: Observation kinds kept as turns: the user's words, not the assistant's replies.
STORED_KINDS = ("task", "user")
NEIGHBOURS = 3
WRITER_ROLE = "memory_writer"
READER_ROLE = "reader"
SOURCE_MARK = "\n\n[source turns]\n"
FORMATION_PARAMS = SamplingParams(temperature=0.0, max_tokens=1500)
UPDATE_PARAMS = SamplingParams(temperature=0.0, max_tokens=600)
_CREATE = {"create_fact": ("facts", "fact"), "create_experience": ("experiences", "experience")}
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
    description: ClassVar[str] = ("Mem-T: a memory-operation policy forms facts, experiences, personas and a "
                                  "summary from every user turn with tool calls, revises them against near "
                                  "neighbours, and retrieves with a ReAct tool loop.")
    #: Writes with memory_writer; retrieves with a ReAct policy on the reader role.
    model_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "reader")

    def __init__(self, services: MemoryServices) -> None:
        services.require("memt", chat=True, embedder=True)
        self.services = services
        self.store = RecordedStore(services.recorder)
        self._session = "user"
        self._counters = dict.fromkeys(COLLECTIONS, 0)
        self._vectors: dict[str, tuple[str, Vector]] = {}  # item id -> (text embedded, its vector)
        self._refresh_lock = asyncio.Lock()

    # -- protocol ------------------------------------------------------------------------------

    async def reset(self, user_id: str) -> None:
        """Empty every collection (one recorded ``reset`` op) and forget queued turns and vectors."""
        self.store.clear(note=f"new user {user_id}")
        self._session = user_id
        self._counters = dict.fromkeys(COLLECTIONS, 0)
        self._vectors.clear()

    async def observe(self, observation: Observation) -> None:
        """Store a user-side turn raw, then form memories from it (one formation call per turn)."""
        if observation.kind not in STORED_KINDS:
            return
        await self._form(self._store_turn(observation))

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        """The policy's ReAct retrieval: items it surfaced, de-duplicated, best ``k`` first, each as
        :meth:`retrieved_view` (memory text only, as the release's memt search returned them)."""
        if k <= 0 or len(self.store) == 0:
            return []
        return [ScoredItem(id=hit.id, item=self.retrieved_view(hit.item), score=hit.score)
                for hit in (await self._react(query)).top(k)]

    @staticmethod
    def retrieved_view(item: dict[str, Any]) -> dict[str, Any]:
        """A stored item as a search returns it: id, the memory text without the source turns
        appended to it, collection and time. Re-scoring rebuilds retrieve mode through this too."""
        return {"id": item["id"], "content": _embedded_text(item), "category": item["category"],
                "timestamp": item.get("timestamp")}

    async def _react(self, query: str) -> ReactResult:
        """One ReAct loop for ``query``: everything it surfaced, in first-seen order."""
        query_vector: list[Vector] = []

        async def run_tool(call: ToolCall) -> list[ScoredItem]:
            if call.name in SEARCH_TOOLS:
                return await self._search_collection(SEARCH_TOOLS[call.name], call.query, call.k)
            if not query_vector:
                query_vector.append((await self._embed([query]))[0])
            return await self._summary_hit(query_vector[0])

        return await react_search(self.services.chat_client, query, run_tool, self._error, role=READER_ROLE)

    async def agent_context(self, query: str, k: int, task_index: int) -> AgentContext:
        """What the release's memt agent shows the assistant: the memory text (without its source
        turns) of up to :data:`AGENT_ITEMS` items in the order the ReAct loop surfaced them; when it
        surfaced nothing, the first stored items, each cut to :data:`FALLBACK_CHARS` characters."""
        del k, task_index
        if len(self.store) == 0:
            return AgentContext()
        hits = [ScoredItem(id=hit.id, item=self.retrieved_view(hit.item), score=hit.score)
                for hit in list((await self._react(query)).hits.values())[:AGENT_ITEMS]]
        if not hits:
            hits = [ScoredItem(id=item["id"], item={**self.retrieved_view(item),
                                                    "content": _embedded_text(item)[:FALLBACK_CHARS]})
                    for item in self.store.items()[:AGENT_ITEMS]]
        return AgentContext(hits=hits)

    def dump(self) -> list[dict[str, Any]]:
        return [json_copy(item) for item in self.store.items()]

    def footprint(self) -> Footprint:
        return self.store.footprint()

    # -- write side ----------------------------------------------------------------------------

    def _next_id(self, collection: str) -> str:
        self._counters[collection] += 1
        return f"{_PREFIX[collection]}{self._counters[collection]:04d}"

    def _metadata(self, item_id: str, collection: str, **fields: object) -> dict[str, Any]:
        return {"id": item_id, "col_name": f"{self._session}_{collection}", "session_id": self._session, **fields}

    def _store_turn(self, observation: Observation) -> str:
        item_id = self._next_id("turns")
        metadata = self._metadata(item_id, "turns", turn_time=observation.timestamp, source_turn_ids=[[item_id]],
                                  task_index=observation.task_index, turn=observation.turn)
        self.store.add(item_id, {"id": item_id, "content": TURN_PREFIX + observation.text,
                                 "category": "turns", "metadata": metadata, "timestamp": observation.timestamp},
                       note="turns: raw turn")
        return item_id

    async def _form(self, turn_id: str) -> None:
        """The formation call for one stored turn, then the update step for each new fact/experience."""
        turn = str(self.store.get(turn_id)["content"])
        personas = [(str(item["metadata"].get("name") or "User"), str(item["metadata"]["memory_content"]))
                    for item in self.store.items() if item["category"] == "personas"]
        outcome = await self.services.chat_client.chat(WRITER_ROLE, formation_messages(self._single_text("summary"),
                                                                                personas, turn),
                                                params=FORMATION_PARAMS)
        calls = self._calls(outcome.text, f"formation for {turn_id}")
        created: list[tuple[str, str]] = []
        for call in calls:
            text = _argument(call, "fact" if call.name == "create_fact" else
                             "experience" if call.name == "create_experience" else
                             "profile" if call.name == "update_persona" else "content")
            if call.name in _CREATE:
                if text:
                    created.append((_CREATE[call.name][0], text))
            elif call.name == "update_persona":
                if text:
                    self._set_persona(_argument(call, "name") or "User", text, turn_id)
            elif call.name == "update_summary":
                if text:
                    self._set_summary(text, turn_id)
            else:
                self._error("MemTUnknownTool", f"formation for {turn_id} called {call.name!r}, which is not a "
                                               f"formation tool; skipped")
        for collection, text in created:
            vector = (await self._embed([text]))[0]
            await self._integrate(collection, text, [turn_id], vector)

    def _calls(self, text: str, what: str) -> list[PolicyCall]:
        """The tool calls of a write-side reply; unreadable blocks and a reply without any are recorded."""
        calls, problems = parse_policy_calls(text)
        for problem in problems:
            self._error("MemTToolCallUnparseable", f"{what}: {problem}; skipped")
        if not calls and not problems:
            self._error("MemTNoToolCall", f"{what}: the reply held no tool call ({shorten(text, 80)!r})")
        return calls

    async def _integrate(self, collection: str, content: str, sources: list[str], vector: Vector) -> None:
        """The update step: show the nearest entries under ids 0..n-1 and run the policy's calls in order."""
        neighbours = await self._neighbours(collection, vector)
        if not neighbours:
            self._add_memory(collection, content, sources, vector, note=f"{collection}: add (nothing to compare)")
            return
        turn_time = self.store.get(sources[0])["timestamp"]
        shown = [{"id": str(n), "document": self.store.get(item_id)["metadata"]["memory_content"],
                  "turn_time": self.store.get(item_id)["metadata"].get("turn_time")}
                 for n, item_id in enumerate(neighbours)]
        new = {"type": _KIND[collection], "document": content, "turn_time": turn_time}
        outcome = await self.services.chat_client.chat(WRITER_ROLE, update_messages(_KIND[collection], new, shown),
                                                params=UPDATE_PARAMS)
        for call in self._calls(outcome.text, f"update of a new {_KIND[collection]}"):
            if call.name == "add_item":
                text = _argument(call, "document") or content
                self._add_memory(collection, text, sources, (await self._embed([text]))[0] if text != content
                                 else vector, note=f"{collection}: add")
            elif call.name == "ignore_item":
                self.services.recorder.emit(MemoryOp(op="ignore", item_ids=list(neighbours), patch=[],
                                                     store_size=len(self.store),
                                                     note=f"{collection}: ignore {shorten(content, 120)!r}"))
            elif call.name in ("update_item", "delete_item"):
                target = _shown_id(_argument(call, "id"), neighbours)
                if target is None or target not in self.store:
                    self._error("MemTInvalidTarget", f"{call.name} named id {_argument(call, 'id')!r} but only ids "
                                                     f"0..{len(neighbours) - 1} were shown; skipped")
                elif call.name == "update_item":
                    self._update_memory(target, _argument(call, "document") or content, sources)
                else:
                    self.store.delete(target, note=f"{collection}: delete (negated by a new {_KIND[collection]})")
                    self._vectors.pop(target, None)
            else:
                self._error("MemTUnknownTool", f"update called {call.name!r}, which is not an update tool; skipped")

    def _memory_item(self, item_id: str, collection: str, content: str, sources: list[str],
                     **extra: object) -> dict[str, Any]:
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

    def _single(self, collection: str, name: str | None = None) -> dict[str, Any] | None:
        return next((item for item in self.store.items() if item["category"] == collection
                     and (name is None or item["metadata"].get("name") == name)), None)

    def _set_summary(self, text: str, turn_id: str) -> None:
        self._set_single("summary", text, turn_id)

    def _set_persona(self, name: str, text: str, turn_id: str) -> None:
        self._set_single("personas", text, turn_id, name=name)

    def _set_single(self, collection: str, text: str, turn_id: str, *, name: str | None = None) -> None:
        """Create or rewrite the summary, or the persona of ``name``, accumulating its source turns."""
        current = self._single(collection, name)
        if current is not None and current["metadata"]["memory_content"] == text:
            return
        extra: dict[str, Any] = {"name": name} if name is not None else {}
        if current is None:
            item_id = self._next_id(collection)
            item = self._memory_item(item_id, collection, text, [turn_id], updated_time=self.services.clock.iso(),
                                     **extra)
            self.store.add(item_id, item, note=f"{collection}: add")
            return
        sources = list(dict.fromkeys([ids[0] for ids in current["metadata"]["source_turn_ids"]] + [turn_id]))
        item = self._memory_item(current["id"], collection, text, sources, updated_time=self.services.clock.iso(),
                                 **extra)
        self.store.update(current["id"], item, note=f"{collection}: update")

    # -- embeddings and tools ------------------------------------------------------------------

    async def _embed(self, texts: list[str]) -> Vector:
        rows = np.asarray(await self.services.text_embedder.embed(texts), dtype=np.float32)
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
        return [ScoredItem(id=ids[row], item=json_copy(self.store.get(ids[row])), score=score)
                for row, score in hits]

    async def _summary_hit(self, query_vector: Vector) -> list[ScoredItem]:
        """The summary item, scored by its similarity to the original request."""
        ids, matrix = await self._collection_matrix("summary")
        if matrix is None:
            return []
        row, score = cosine_top_k(query_vector, matrix, 1)[0]
        return [ScoredItem(id=ids[row], item=json_copy(self.store.get(ids[row])), score=score)]

    def _error(self, error_type: str, message: str) -> None:
        """Record a recoverable problem with the policy's output; the run goes on."""
        self.services.recorder.emit(ErrorEvent(where="memt", error_type=error_type, message=message, recoverable=True))


def _embedded_text(item: dict[str, Any]) -> str:
    """What an item is searched by: the memory text (a raw turn: the whole turn)."""
    return str(item["metadata"].get("memory_content") or item["content"])


def _cached_text(entry: tuple[str, Vector] | None) -> str | None:
    return entry[0] if entry is not None else None


def _argument(call: PolicyCall, name: str) -> str:
    """A tool call's string argument, stripped ('' when missing or not a string)."""
    value = call.arguments.get(name)
    return value.strip() if isinstance(value, str) else ""


def _shown_id(value: str, neighbours: Sequence[str]) -> str | None:
    """The stored id behind an id the update call was shown (``"0"`` .. ``"n-1"``), or None."""
    return neighbours[int(value)] if value.isdigit() and int(value) < len(neighbours) else None
