"""``mem0``: extract-then-consolidate fact memory, our implementation of Mem0 (Chhikara et al. 2025).

Two phases per piece of user evidence (the task opening and every user turn), as in the paper:

1. **Extraction.** One ``memory_writer`` call reads the new user message, with the latest messages
   of the current task (assistant turns included) as context only, and returns a list of short
   facts about the user.
2. **Update.** Each fact is embedded and its :data:`NEIGHBOURS` most similar existing memories are
   retrieved. The union of those candidates is shown to the model under small integer ids
   ``"0".."n-1"`` (never the store's ids, which a model would copy wrongly or invent), and ONE call
   returns, per fact, an event: ``ADD`` (store new text), ``UPDATE`` (rewrite candidate ``target``),
   ``DELETE`` (remove candidate ``target``, contradicted) or ``NONE``. An id not offered, a target
   already deleted in the same batch or a fact index out of range is rejected: nothing changes, and
   the rejection is recorded as a recoverable ``error`` event. With no candidates at all (an empty
   store) only ADD is possible, so the facts are added without a call.

Departures from the paper, kept small and deliberate: no rolling conversation summary (the recent
messages of the current task are the extraction context), and ``metadata`` holds the evidence's
provenance (``task_index``, ``turn``) where the release wrote null. Items keep the release's fields
(``id``, ``content``, ``category`` = ``"fact"``, ``metadata``, ``timestamp``) plus ``history``, one
``{timestamp, event, old, new}`` per write; ``timestamp`` is the simulated time of the latest
write. Ops: ``add``, ``update``, ``delete`` (and ``reset``). Retrieval is cosine top-k.

"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, StringConstraints

from memprobe_engine.events.jsonpatch import json_copy
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.memory.base import Footprint, MemoryServices, Observation, RecordedStore, ScoredItem
from memprobe_engine.memory.vectors import VectorIndex

#: Existing memories retrieved per extracted fact for the update call.
NEIGHBOURS = 5
#: Messages of the current task shown to the extraction call before the new one.
CONTEXT_MESSAGES = 4
#: Characters of one message shown to a model (the stored content is never cut).
PROMPT_CHARS = 3000

FactText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]


class ExtractedFacts(BaseModel):
    """Reply of the extraction call: short facts about the user (possibly none)."""

    facts: list[FactText] = Field(max_length=12)


class FactEvent(BaseModel):
    """What to do with one extracted fact; ``target`` is a candidate's small id, or empty."""

    fact: int
    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    target: str = Field(max_length=40)
    text: str = Field(max_length=400)


class UpdatePlan(BaseModel):
    """Reply of the update call: the events for the batch of facts."""

    events: list[FactEvent] = Field(max_length=24)


EXTRACT_SYSTEM = (
    "You keep a long-term memory about one user. Read the NEW USER MESSAGE and write down short facts "
    "about the user that could matter in later conversations: preferences, circumstances, plans, "
    "skills, knowledge, habits, constraints and what they are asking for. One sentence per fact, "
    "starting with \"User\". Use only what the user says or clearly implies; earlier messages are "
    "context, and what the assistant says is never a fact about the user. Return an empty list when "
    "nothing is worth keeping.\n"
    "Reply with JSON only, in this shape:\n"
    '{"facts": ["<fact about the user>", "<fact about the user>"]}'
)

UPDATE_SYSTEM = (
    "You maintain a memory of facts about one user. NEW FACTS are numbered; EXISTING MEMORIES that may "
    "relate to them are listed with ids. Give every new fact one event:\n"
    "- ADD: new information. text = the memory to store.\n"
    "- UPDATE: it refines or changes an existing memory. target = that memory's id, text = the "
    "rewritten memory holding the up-to-date information.\n"
    "- DELETE: it shows an existing memory is no longer true. target = that memory's id.\n"
    "- NONE: the memories already say this.\n"
    "Use only the ids listed; leave target empty for ADD and NONE, and text empty for DELETE and NONE.\n"
    "Reply with JSON only, in this shape:\n"
    '{"events": [{"fact": <fact number>, "event": "<ADD, UPDATE, DELETE or NONE>", '
    '"target": "<memory id or empty>", "text": "<memory text or empty>"}]}'
)


def _clip(text: str) -> str:
    return text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS] + " [...]"


class Mem0:
    """Fact memory with LLM extraction and ADD/UPDATE/DELETE/NONE consolidation (Mem0)."""

    name: ClassVar[str] = "mem0"
    description: ClassVar[str] = ("Mem0: extracts short facts about the user from each user turn and "
                                  "consolidates them into the store by ADD/UPDATE/DELETE/NONE decisions.")

    def __init__(self, services: MemoryServices) -> None:
        services.require("mem0", chat=True, embedder=True)
        self.services = services
        self.store = RecordedStore(services.recorder)
        self.index = VectorIndex(services.text_embedder)
        self._recent: list[tuple[str, str]] = []  # (speaker, text) of the current task, oldest first

    async def reset(self, user_id: str) -> None:
        """Empty the store (one recorded ``reset`` op), the embeddings and the message window."""
        self.store.clear(note=f"new user {user_id}")
        self.index.clear()
        self._recent = []

    async def observe(self, observation: Observation) -> None:
        """Extract facts from a task opening or user turn and consolidate them; an assistant turn
        only joins the context window of the next extraction."""
        if observation.kind == "task":
            self._recent = []
        if observation.kind != "assistant" and observation.text.strip():
            facts = await self._extract(observation)
            if facts:
                await self._consolidate(facts, observation)
        speaker = "assistant" if observation.kind == "assistant" else "user"
        self._recent = (self._recent + [(speaker, observation.text)])[-CONTEXT_MESSAGES:]

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        """The ``k`` memories most cosine-similar to ``query``, best first."""
        if k <= 0 or not len(self.index):
            return []
        query_row = (await self.index.embed([query]))[0]
        return [ScoredItem(id=item_id, item=json_copy(self.store.get(item_id)), score=score)
                for item_id, score in self.index.top_k(query_row, k)]

    def dump(self) -> list[dict[str, Any]]:
        return [json_copy(item) for item in self.store.items()]

    def footprint(self) -> Footprint:
        return self.store.footprint()

    # -- phase 1: extraction ---------------------------------------------------------------------

    async def _extract(self, observation: Observation) -> list[str]:
        earlier = "\n".join(f"[{speaker}] {_clip(text)}" for speaker, text in self._recent) or "(none)"
        body = (f"TODAY: {self.services.clock.now().date().isoformat()}\n\n"
                f"EARLIER MESSAGES (context only)\n{earlier}\n\n"
                f"NEW USER MESSAGE\n{_clip(observation.text)}")
        outcome = await self.services.chat_client.chat(
            "memory_writer", [ChatMessage(role="system", content=EXTRACT_SYSTEM),
                              ChatMessage(role="user", content=body)],
            params=SamplingParams(temperature=0.0, max_tokens=600), schema=ExtractedFacts)
        if outcome.parsed is None:
            self._error("WriteExcluded", f"fact extraction for the {observation.kind} message of task "
                                         f"{observation.task_index}, turn {observation.turn} was excluded "
                                         f"({outcome.excluded}); nothing was written for it")
            return []
        parsed: ExtractedFacts = outcome.parsed
        return list(dict.fromkeys(fact for fact in parsed.facts if fact))

    # -- phase 2: update -------------------------------------------------------------------------

    async def _consolidate(self, facts: list[str], observation: Observation) -> None:
        """Retrieve candidates per fact, ask for one event per fact, apply the valid ones."""
        rows = await self.index.embed(facts)
        candidates: list[str] = []
        for row in rows:
            for item_id, _ in self.index.top_k(row, NEIGHBOURS):
                if item_id not in candidates:
                    candidates.append(item_id)
        if not candidates:
            events = [FactEvent(fact=index, event="ADD", target="", text="") for index in range(len(facts))]
        else:
            plan = await self._plan(facts, candidates, observation)
            if plan is None:
                return
            events = plan.events
        await self._apply(facts, candidates, events, observation)

    async def _plan(self, facts: list[str], candidates: list[str], observation: Observation) -> UpdatePlan | None:
        memories = "\n".join(f'id "{index}": {self.store.get(item_id)["content"]}'
                             for index, item_id in enumerate(candidates))
        new = "\n".join(f"{index}: {fact}" for index, fact in enumerate(facts))
        body = f"EXISTING MEMORIES\n{memories}\n\nNEW FACTS\n{new}"
        outcome = await self.services.chat_client.chat(
            "memory_writer", [ChatMessage(role="system", content=UPDATE_SYSTEM),
                              ChatMessage(role="user", content=body)],
            params=SamplingParams(temperature=0.0, max_tokens=1000), schema=UpdatePlan)
        if outcome.parsed is None:
            self._error("WriteExcluded", f"the memory update for {len(facts)} fact(s) from task "
                                         f"{observation.task_index}, turn {observation.turn} was excluded "
                                         f"({outcome.excluded}); the store was left unchanged")
            return None
        plan: UpdatePlan = outcome.parsed
        return plan

    async def _apply(self, facts: list[str], candidates: list[str], events: list[FactEvent],
                     observation: Observation) -> None:
        """Apply the events in order; rejected ones change nothing and are reported together."""
        rejected: list[str] = []
        changed: list[str] = []
        now = self.services.clock.iso()
        for event in events:
            if not 0 <= event.fact < len(facts):
                rejected.append(f"{event.event} for fact {event.fact}: no such fact (0..{len(facts) - 1})")
                continue
            fact = facts[event.fact]
            text = event.text.strip() or fact
            if event.event == "NONE":
                continue
            if event.event == "ADD":
                item_id = self.services.new_id("f")
                self.store.add(item_id, {
                    "id": item_id, "content": text, "category": "fact",
                    "metadata": {"task_index": observation.task_index, "turn": observation.turn},
                    "timestamp": now, "history": [{"timestamp": now, "event": "ADD", "old": None, "new": text}]},
                    note=f"ADD from fact {event.fact}")
                changed.append(item_id)
                continue
            key = event.target.strip().strip('"')
            if not key.isdigit() or int(key) >= len(candidates):
                offered = f"0..{len(candidates) - 1}" if candidates else "none were offered"
                rejected.append(f"{event.event} of id {event.target!r} for fact {event.fact}: not an offered "
                                f"memory id ({offered})")
                continue
            target = candidates[int(key)]
            if target not in self.store:
                rejected.append(f"{event.event} of id {key!r} for fact {event.fact}: that memory was deleted "
                                f"earlier in this batch")
                continue
            if event.event == "DELETE":
                self.store.delete(target, note=f"DELETE (id {event.target}) from fact {event.fact}")
                self.index.remove(target)
                changed = [item_id for item_id in changed if item_id != target]
                continue
            item = json_copy(self.store.get(target))
            entry = {"timestamp": now, "event": "UPDATE", "old": item["content"], "new": text}
            item.update(content=text, timestamp=now, history=[*item["history"], entry])
            self.store.update(target, item, note=f"UPDATE (id {event.target}) from fact {event.fact}")
            changed.append(target)
        if rejected:
            self._error("RejectedMemoryEvent", "the update call proposed events that were not applied: "
                        + "; ".join(rejected))
        changed = list(dict.fromkeys(changed))
        if changed:
            rows = await self.index.embed([str(self.store.get(item_id)["content"]) for item_id in changed])
            for item_id, row in zip(changed, rows):
                self.index.put(item_id, row)

    def _error(self, error_type: str, message: str) -> None:
        self.services.recorder.emit(ErrorEvent(where="mem0", error_type=error_type, message=message,
                                               recoverable=True))
