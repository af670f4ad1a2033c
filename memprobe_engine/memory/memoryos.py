"""``memoryos``: hierarchical memory after MemoryOS (Kang et al. 2025), our own implementation.

MemoryOS has no package that runs offline against our clients, so this is a built-in with the
paper's three tiers and their update rules (parameters from the authors' released code):

- **Short-term memory (STM):** dialogue *pages* (one user input + the assistant's response, with a
  timestamp) in a FIFO queue of :data:`SHORT_TERM_CAPACITY` pages.
- **STM → mid-term (MTM):** when the queue is full, the oldest page leaves it. Each leaving page is
  checked for continuity with the page that left before it (an LLM call); a continuous page is
  chained to it (``pre_page`` / ``next_page``) and the chain's ``meta_info`` overview is rewritten,
  otherwise a new chain starts. The leaving pages are then summarised into one to three topics
  (summary + keywords, one call) and joined to the *segment* that matches best —
  ``cos(summary embeddings) + KEYWORD_WEIGHT · Jaccard(keywords)`` at least :data:`MERGE_THRESHOLD`
  — or start a new segment.
- **Heat:** ``H = α·N_visit + β·L_interaction + γ·R_recency`` with ``R_recency =
  exp(−Δt / τ)`` (Δt since the segment's last visit, simulated clock). A retrieval that reaches a
  segment counts a visit; new pages add to ``L_interaction``. When MTM holds more than
  :data:`MID_TERM_CAPACITY` segments the coolest one is evicted.
- **MTM → long-term persona memory (LPM):** when the hottest segment's heat reaches
  :data:`HEAT_THRESHOLD`, its not-yet-analysed pages update the user's *profile* (one call rewriting
  it) and add *user knowledge* and *assistant knowledge* entries (one call; FIFO stores of
  :data:`KNOWLEDGE_CAPACITY` each); the segment's ``N_visit`` and ``L_interaction`` are reset.
- **Retrieval:** the top :data:`TOP_SEGMENTS` segments by summary similarity, the best
  :data:`RETRIEVAL_PAGES` of their pages, the short-term pages, and the knowledge entries closest to
  the query; the profile always comes first.

Every item is in one :class:`RecordedStore` (``type`` = page / segment / profile / user_knowledge /
assistant_knowledge, each with a ``content`` text), so every tier change is a recorded op.
Deliberate differences, in docs/memory-systems.md: eviction by lowest heat as the paper describes
(the released code evicts least-frequently-used); a page in several topics is one item listed by
each segment (the released code copies it).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from memprobe_engine.events.jsonpatch import json_copy
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.memory import memoryos_prompts as prompts
from memprobe_engine.memory.base import (
    Footprint,
    MemoryServices,
    Observation,
    RecordedStore,
    ScoredItem,
)
from memprobe_engine.memory.vectors import VectorIndex

SHORT_TERM_CAPACITY = 10
MID_TERM_CAPACITY = 2000
KNOWLEDGE_CAPACITY = 100
MERGE_THRESHOLD = 0.6
KEYWORD_WEIGHT = 1.0
HEAT_THRESHOLD = 5.0
HEAT_ALPHA, HEAT_BETA, HEAT_GAMMA = 1.0, 1.0, 1.0
RECENCY_TAU_HOURS = 24.0
TOP_SEGMENTS = 5
SEGMENT_THRESHOLD = 0.1
PAGE_THRESHOLD = 0.1
RETRIEVAL_PAGES = 7
KNOWLEDGE_K = 10
PROMPT_CHARS = 2000

M = TypeVar("M", bound=BaseModel)


def _clip(text: str) -> str:
    return text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS] + " [...]"


def _page_text(page: dict[str, Any]) -> str:
    return f"User: {_clip(page['user_input'])}\nAssistant: {_clip(page['agent_response'])}"


class MemoryOS:
    """Short-term pages, mid-term heat-scored segments, long-term profile and knowledge (MemoryOS)."""

    name: ClassVar[str] = "memoryos"
    description: ClassVar[str] = ("MemoryOS: short-term FIFO dialogue pages, mid-term topic segments promoted "
                                  "by heat, long-term user profile and knowledge (Kang et al. 2025).")

    def __init__(self, services: MemoryServices) -> None:
        services.require("memoryos", chat=True, embedder=True)
        self.services = services
        self.store = RecordedStore(services.recorder)
        self.page_index = VectorIndex(services.text_embedder)
        self.segment_index = VectorIndex(services.text_embedder)
        self.knowledge_index = VectorIndex(services.text_embedder)
        self._short: list[str] = []
        self._pending: Observation | None = None
        self._last_evicted: str | None = None

    # -- protocol --------------------------------------------------------------------------------

    async def reset(self, user_id: str) -> None:
        self.store.clear(note=f"new user {user_id}")
        for index in (self.page_index, self.segment_index, self.knowledge_index):
            index.clear()
        self._short, self._pending, self._last_evicted = [], None, None

    async def observe(self, observation: Observation) -> None:
        """User-side evidence waits for the assistant's reply; the pair becomes one page."""
        if observation.kind == "assistant":
            user = self._pending.text if self._pending is not None else ""
            await self._add_page(user, observation.text, observation)
            self._pending = None
            return
        text = f"Tool output: {observation.text}" if observation.kind == "tool_output" else observation.text
        if observation.kind == "task" and self._pending is not None:
            await self.finish()  # a new task: the unanswered message of the last one is a page of its own
        if self._pending is not None:
            self._pending = self._pending.model_copy(update={"text": f"{self._pending.text}\n{text}"})
        else:
            self._pending = observation.model_copy(update={"text": text})

    async def finish(self) -> None:
        """An unanswered user message still becomes a page (with an empty response)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            await self._add_page(pending.text, "", pending)

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        """Profile first, then the closest pages (short-term and retrieved mid-term) and knowledge."""
        if k <= 0 or not len(self.store):
            return []
        query_row = (await self.page_index.embed([query]))[0]
        scored: dict[str, float] = {}
        page_scores = dict(self.page_index.top_k(query_row, len(self.page_index)))
        mid_pages: list[tuple[str, float]] = []
        for segment_id, score in self.segment_index.top_k(query_row, TOP_SEGMENTS):
            if score < SEGMENT_THRESHOLD:
                continue
            self._visit(segment_id)
            mid_pages += [(p, page_scores[p]) for p in self.store.get(segment_id)["pages"]
                          if p in page_scores and page_scores[p] >= PAGE_THRESHOLD]
        for page_id, score in sorted(dict(mid_pages).items(), key=lambda kv: -kv[1])[:RETRIEVAL_PAGES]:
            scored[page_id] = score
        for page_id in self._short:
            if page_id in page_scores:
                scored[page_id] = page_scores[page_id]
        for item_id, score in self.knowledge_index.top_k(query_row, KNOWLEDGE_K):
            scored[item_id] = score
        hits = [ScoredItem(id=i, item=json_copy(self.store.get(i)), score=s)
                for i, s in sorted(scored.items(), key=lambda kv: -kv[1])]
        if "profile" in self.store:
            hits.insert(0, ScoredItem(id="profile", item=json_copy(self.store.get("profile")), score=None))
        return hits[:k]

    def dump(self) -> list[dict[str, Any]]:
        return [json_copy(item) for item in self.store.items()]

    def footprint(self) -> Footprint:
        return self.store.footprint()

    # -- short-term ------------------------------------------------------------------------------

    async def _add_page(self, user: str, agent: str, observation: Observation) -> None:
        if len(self._short) >= SHORT_TERM_CAPACITY:
            await self._short_to_mid()
        page_id = self.services.new_id("p")
        page = {"type": "page", "tier": "short", "content": f"User: {user}\nAssistant: {agent}".strip(),
                "user_input": user, "agent_response": agent, "timestamp": observation.timestamp,
                "task_index": observation.task_index, "turn": observation.turn, "segments": [],
                "pre_page": None, "next_page": None, "meta_info": None, "keywords": [], "analyzed": False}
        self.store.add(page_id, page, op="add_page", note="a new dialogue page enters short-term memory")
        self.page_index.put(page_id, (await self.page_index.embed([_page_text(page)]))[0])
        self._short.append(page_id)
        await self._update_long_term_if_hot()

    async def _short_to_mid(self) -> None:
        """The oldest pages leave STM: chained by continuity, summarised into topics, put in segments."""
        leaving: list[str] = []
        while len(self._short) >= SHORT_TERM_CAPACITY:
            leaving.append(self._short.pop(0))
        for page_id in leaving:
            page = json_copy(self.store.get(page_id))
            previous = self._last_evicted if self._last_evicted in self.store else None
            if previous is not None and await self._continuous(self.store.get(previous), page):
                page["pre_page"] = previous
                page["meta_info"] = await self._meta(self.store.get(previous).get("meta_info"), page)
                self._set(previous, next_page=page_id)
                self._propagate_meta(previous, page["meta_info"])
            else:
                page["meta_info"] = await self._meta(None, page)
            page["tier"] = "mid"
            self.store.update(page_id, page, op="move_to_mid", note="left the full short-term queue")
            self._last_evicted = page_id
        themes = await self._themes(leaving)
        for theme in themes:
            await self._insert(theme.summary, [k.lower() for k in theme.keywords], leaving)

    def _propagate_meta(self, start: str, meta: str) -> None:
        """The whole chain through ``start`` shares the new overview."""
        seen, queue = {start}, [start]
        while queue:
            page_id = queue.pop()
            self._set(page_id, meta_info=meta)
            page = self.store.get(page_id)
            for link in (page.get("pre_page"), page.get("next_page")):
                if link and link in self.store and link not in seen:
                    seen.add(link)
                    queue.append(link)

    # -- mid-term --------------------------------------------------------------------------------

    async def _insert(self, summary: str, keywords: list[str], page_ids: list[str]) -> None:
        row = (await self.segment_index.embed([summary]))[0]
        best, best_score = None, -1.0
        for segment_id, similarity in self.segment_index.top_k(row, len(self.segment_index)):
            theirs = set(self.store.get(segment_id)["keywords"])
            jaccard = len(theirs & set(keywords)) / len(theirs | set(keywords)) if theirs and keywords else 0.0
            if similarity + KEYWORD_WEIGHT * jaccard > best_score:
                best, best_score = segment_id, similarity + KEYWORD_WEIGHT * jaccard
        now = self.services.clock.iso()
        if best is not None and best_score >= MERGE_THRESHOLD:
            segment = json_copy(self.store.get(best))
            new = [p for p in page_ids if p not in segment["pages"]]
            segment.update(pages=segment["pages"] + new, L_interaction=segment["L_interaction"] + len(new),
                           last_visit=now)
            segment["heat"] = self._heat(segment)
            self.store.update(best, segment, op="merge_segment", note=f"topic match {best_score:.2f}")
            target = best
        else:
            target = self.services.new_id("s")
            segment = {"type": "segment", "content": summary, "summary": summary, "keywords": keywords,
                       "pages": list(page_ids), "N_visit": 0, "L_interaction": len(page_ids), "created": now,
                       "last_visit": now, "heat": 0.0}
            segment["heat"] = self._heat(segment)
            self.store.add(target, segment, op="new_segment", note=f"best topic match {best_score:.2f}")
            self.segment_index.put(target, row)
            await self._evict_if_full()
        for page_id in page_ids:
            page = self.store.get(page_id)
            if target not in page["segments"]:
                self._set(page_id, segments=[*page["segments"], target], keywords=page["keywords"] or keywords)

    async def _evict_if_full(self) -> None:
        segments = [i for i in self.store.ids() if self.store.get(i)["type"] == "segment"]
        if len(segments) <= MID_TERM_CAPACITY:
            return
        coolest = min(segments, key=lambda i: (self._heat(self.store.get(i)), i))
        pages = self.store.get(coolest)["pages"]
        self.store.delete(coolest, op="evict_segment", note="mid-term memory full: the coolest segment goes")
        self.segment_index.remove(coolest)
        for page_id in pages:
            if page_id not in self.store:
                continue
            remaining = [s for s in self.store.get(page_id)["segments"] if s != coolest]
            if remaining:
                self._set(page_id, segments=remaining)
            else:
                self.store.delete(page_id, op="evict_page", note="its last segment was evicted")
                self.page_index.remove(page_id)

    def _heat(self, segment: dict[str, Any]) -> float:
        last = dt.datetime.fromisoformat(str(segment["last_visit"]))
        hours = max(0.0, (self.services.clock.now() - last).total_seconds() / 3600.0)
        recency = math.exp(-hours / RECENCY_TAU_HOURS)
        visits, length = float(segment["N_visit"]), float(segment["L_interaction"])
        return round(HEAT_ALPHA * visits + HEAT_BETA * length + HEAT_GAMMA * recency, 6)

    def _visit(self, segment_id: str) -> None:
        segment = json_copy(self.store.get(segment_id))
        segment.update(N_visit=segment["N_visit"] + 1, last_visit=self.services.clock.iso())
        segment["heat"] = self._heat(segment)
        self.store.update(segment_id, segment, op="visit_segment", note="reached by a retrieval")

    # -- long-term -------------------------------------------------------------------------------

    async def _update_long_term_if_hot(self) -> None:
        segments = [i for i in self.store.ids() if self.store.get(i)["type"] == "segment"]
        if not segments:
            return
        hottest = max(segments, key=lambda i: (self._heat(self.store.get(i)), i))
        segment = self.store.get(hottest)
        if self._heat(segment) < HEAT_THRESHOLD:
            return
        pages = [self.store.get(p) for p in segment["pages"] if p in self.store and not self.store.get(p)["analyzed"]]
        if not pages:
            return
        text = "\n\n".join(_page_text(page) for page in pages)
        current = self.store.get("profile")["profile"] if "profile" in self.store else "(no profile yet)"
        profile = await self._ask(prompts.PROFILE_SYSTEM, f"CURRENT PROFILE\n{current}\n\nNEW PAGES\n{text}",
                                  prompts.Profile, "profile update")
        knowledge = await self._ask(prompts.KNOWLEDGE_SYSTEM, f"PAGES\n{text}", prompts.Knowledge,
                                    "knowledge extraction")
        now = self.services.clock.iso()
        if profile is not None and profile.profile.strip():
            item = {"type": "profile", "content": profile.profile.strip(), "profile": profile.profile.strip(),
                    "timestamp": now}
            if "profile" in self.store:
                self.store.update("profile", item, op="update_profile", note=f"from hot segment {hottest}")
            else:
                self.store.add("profile", item, op="update_profile", note=f"from hot segment {hottest}")
        if knowledge is not None:
            for kind, lines in (("user_knowledge", knowledge.user_knowledge),
                                ("assistant_knowledge", knowledge.assistant_knowledge)):
                await self._add_knowledge(kind, [line for line in lines if line], now, hottest)
        for page_id in segment["pages"]:
            if page_id in self.store:
                self._set(page_id, analyzed=True)
        updated = json_copy(self.store.get(hottest))
        updated.update(N_visit=0, L_interaction=0, last_visit=now)
        updated["heat"] = self._heat(updated)
        self.store.update(hottest, updated, op="cool_segment", note="analysed into long-term memory")

    async def _add_knowledge(self, kind: str, lines: list[str], now: str, source: str) -> None:
        if not lines:
            return
        rows = await self.knowledge_index.embed(lines)
        for line, row in zip(lines, rows):
            item_id = self.services.new_id("k")
            self.store.add(item_id, {"type": kind, "content": line, "knowledge": line, "timestamp": now,
                                     "segment": source}, op=f"add_{kind}", note=f"from hot segment {source}")
            self.knowledge_index.put(item_id, row)
        entries = [i for i in self.store.ids() if self.store.get(i)["type"] == kind]
        for oldest in entries[:max(0, len(entries) - KNOWLEDGE_CAPACITY)]:
            self.store.delete(oldest, op=f"evict_{kind}", note=f"{kind} holds at most {KNOWLEDGE_CAPACITY}")
            self.knowledge_index.remove(oldest)

    # -- model calls -----------------------------------------------------------------------------

    async def _continuous(self, previous: dict[str, Any], page: dict[str, Any]) -> bool:
        reply = await self._ask(prompts.CONTINUITY_SYSTEM, f"FIRST\n{_page_text(previous)}\n\nSECOND\n"
                                f"{_page_text(page)}", prompts.Continuity, "continuity check")
        return bool(reply is not None and reply.continuous)

    async def _meta(self, previous: str | None, page: dict[str, Any]) -> str:
        reply = await self._ask(prompts.META_SYSTEM, f"OVERVIEW SO FAR\n{previous or '(none)'}\n\nNEWEST EXCHANGE\n"
                                f"{_page_text(page)}", prompts.MetaInfo, "chain overview")
        return reply.meta_info.strip() if reply is not None else (previous or "")

    async def _themes(self, page_ids: list[str]) -> list[prompts.Theme]:
        text = "\n\n".join(_page_text(self.store.get(p)) for p in page_ids)
        reply = await self._ask(prompts.THEMES_SYSTEM, f"CONVERSATION\n{text}", prompts.Themes, "topic summary")
        if reply is None:  # the released code's fallback: one general segment without keywords
            return [prompts.Theme(theme="general", keywords=[], summary="General conversation segment.")]
        return reply.themes

    async def _ask(self, system: str, body: str, schema: type[M], what: str) -> M | None:
        outcome = await self.services.chat_client.chat(
            "memory_writer", [ChatMessage(role="system", content=system), ChatMessage(role="user", content=body)],
            params=SamplingParams(temperature=0.0, max_tokens=700), schema=schema)
        if outcome.parsed is None:
            self.services.recorder.emit(ErrorEvent(where="memoryos", error_type="WriteExcluded", recoverable=True,
                                                   message=f"the {what} call was excluded ({outcome.excluded})"))
            return None
        parsed: M = outcome.parsed
        return parsed

    def _set(self, item_id: str, **fields: object) -> None:
        item = json_copy(self.store.get(item_id))
        item.update(fields)
        self.store.update(item_id, item, op="link" if {"pre_page", "next_page", "segments"} & fields.keys()
                          else "update", note=", ".join(sorted(fields)))
