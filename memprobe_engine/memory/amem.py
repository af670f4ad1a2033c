"""``amem``: agentic Zettelkasten notes, our implementation of A-MEM (Xu et al. 2025).

Stored units are the task opening and the user's turns (assistant turns are not stored, as in the
recovery paper's runs). For each unit:

1. **Note construction.** One ``memory_writer`` call writes the note's ``keywords`` (at least 3),
   a one-sentence ``context`` and ``tags`` (at least 3). The note is embedded as its content,
   context, keywords and tags together.
2. **Neighbours.** The :data:`NEIGHBOURS` existing notes most cosine-similar to it.
3. **Evolution.** One call sees the new note and its neighbours, numbered ``0..n-1`` (the model
   never sees store ids, so it cannot invent one), and decides ``should_evolve`` and its actions:
   ``strengthen`` links the new note to the chosen neighbours and replaces the new note's tags;
   ``update_neighbor`` gives chosen neighbours a new context and new tags. A number outside
   ``0..n-1`` or repeated is rejected and named in the ``add`` op's note; an empty replacement
   (no tags, blank context) keeps the old value rather than wiping it.

Ops recorded, in order: ``add`` (the constructed note, with the evolution decision and any
rejections in its note), ``link`` (the new note's links), ``evolve`` (the new note's tags),
``update_neighbor`` (one per rewritten neighbour), and ``reset``. Every change after ``add`` is also
appended to the item's ``evolution_history`` as ``{timestamp, change}``; changed notes are
re-embedded so search sees their current text. An excluded model reply is an ``error`` event:
an excluded construction stores the note with the library's empty defaults (no keywords, context
"General", no tags), as the release's A-MEM did; an excluded evolution keeps the note unevolved.
The ``context`` is a one-sentence summary of the text's topic, points and purpose (the library's
analysis prompt), not a statement of user traits.

Retrieval is plain cosine top-k, as the release ran it: its agent and its retrieve mode call the
library's ``search``, never the linked-neighbour search. Links are still built and recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, StringConstraints

from memprobe_engine.events.jsonpatch import json_copy
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.memory.base import Footprint, MemoryServices, Observation, RecordedStore, ScoredItem
from memprobe_engine.memory.vectors import VectorIndex

#: Existing notes offered to the evolution call (numbered 0..NEIGHBOURS-1).
NEIGHBOURS = 5
#: What the library stores when content analysis fails.
EMPTY_CONTEXT = "General"
#: Characters of a unit's text shown to a model (the stored content is never cut).
PROMPT_CHARS = 3000
#: Characters of a neighbour's content shown to the evolution call.
NEIGHBOUR_CHARS = 500
#: A note's written fields as a prompt shows them (a one-sentence context, 3–8 keywords and tags), and
#: as its JSON line adds them (with id, timestamp, category, links): for estimates only.
_NOTE_FIELDS_CHARS = 250
_NOTE_JSON_CHARS = 450

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]
Sentence = Annotated[str, StringConstraints(strip_whitespace=True, max_length=400)]


class NoteFields(BaseModel):
    """Reply of the note-construction call."""

    keywords: list[Label] = Field(min_length=3, max_length=12)
    context: Sentence = Field(min_length=1)
    tags: list[Label] = Field(min_length=3, max_length=12)


class NeighbourRevision(BaseModel):
    """A new context and tags for the neighbour numbered ``index``."""

    index: int
    context: Sentence
    tags: list[Label] = Field(max_length=12)


class EvolutionDecision(BaseModel):
    """Reply of the evolution call; indices refer to the numbered neighbours."""

    should_evolve: bool
    actions: list[Literal["strengthen", "update_neighbor"]] = Field(max_length=2)
    link_to: list[int] = Field(max_length=2 * NEIGHBOURS)
    tags: list[Label] = Field(max_length=12)
    neighbor_updates: list[NeighbourRevision] = Field(max_length=2 * NEIGHBOURS)


NOTE_SYSTEM = (
    "You write index notes for an agent's long-term memory of one user. For the TEXT you are given, "
    "write:\n"
    "- keywords: 3 to 8 key terms taken from the text, most important first;\n"
    "- context: one sentence summarising the text's main topic or domain, its key points and its purpose;\n"
    "- tags: 3 to 8 broad labels for filing the note (topic, domain, kind of request).\n"
    "Reply with JSON only, in this shape:\n"
    '{"keywords": ["<term>", "<term>", "<term>"], "context": "<one sentence>", '
    '"tags": ["<label>", "<label>", "<label>"]}'
)

EVOLVE_SYSTEM = (
    "You organise an agent's memory of linked notes. A NEW NOTE arrived; the existing notes closest to "
    "it are numbered from 0. Decide whether the memory should evolve.\n"
    "- strengthen: link the new note to the numbered notes it belongs with (link_to) and give the new "
    "note a better set of tags (tags).\n"
    "- update_neighbor: for numbered notes the new note sheds light on, write a new one-sentence "
    "context and new tags (neighbor_updates, each with the note's number as index).\n"
    "If nothing should change, set should_evolve to false and leave every list empty. Use only the "
    "numbers shown.\n"
    "Reply with JSON only, in this shape:\n"
    '{"should_evolve": <true or false>, "actions": ["<strengthen or update_neighbor>"], '
    '"link_to": [<note number>], "tags": ["<label>"], '
    '"neighbor_updates": [{"index": <note number>, "context": "<one sentence>", "tags": ["<label>"]}]}'
)


def embedding_text(note: dict[str, Any]) -> str:
    """What a note is embedded as: content, context, keywords and tags together."""
    return (f"{note['content']}\ncontext: {note['context']}\nkeywords: {', '.join(note['keywords'])}\n"
            f"tags: {', '.join(note['tags'])}")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


class AMem:
    """Agentic memory: LLM-built notes, linked to their neighbours, evolving as notes arrive."""

    name: ClassVar[str] = "amem"
    description: ClassVar[str] = ("A-MEM: LLM-written notes (keywords, context, tags) linked to similar notes, "
                                  "whose neighbours evolve as new notes arrive; cosine top-k search.")

    @classmethod
    def expected_writes(cls, observations: Sequence[tuple[str, str]]) -> tuple[list[tuple[float, int]], list[float]]:
        """For a dry run's estimate: the ``memory_writer`` calls observing ``observations`` ((kind, text)
        in order) would make, as (prompt characters, reply cap), and the stored notes' sizes as the reader
        sees them (one JSON line each). A construction call per stored unit; an evolution call per unit
        after the first, its neighbours taken at the mean clipped size of the notes before it."""
        calls: list[tuple[float, int]] = []
        notes: list[float] = []
        for kind, text in observations:
            if kind == "assistant" or not text.strip():
                continue
            calls.append((len(NOTE_SYSTEM) + len("TEXT\n") + min(len(text), PROMPT_CHARS), 400))
            if notes:
                neighbours = min(NEIGHBOURS, len(notes))
                clipped = sum(min(size, NEIGHBOUR_CHARS) for size in notes) / len(notes)
                calls.append((len(EVOLVE_SYSTEM) + min(len(text), PROMPT_CHARS) + _NOTE_FIELDS_CHARS
                              + neighbours * (clipped + _NOTE_FIELDS_CHARS), 900))
            notes.append(len(text) + _NOTE_JSON_CHARS)
        return calls, notes

    def __init__(self, services: MemoryServices) -> None:
        services.require("amem", chat=True, embedder=True)
        self.services = services
        self.store = RecordedStore(services.recorder)
        self.index = VectorIndex(services.text_embedder)

    async def reset(self, user_id: str) -> None:
        """Empty the store (one recorded ``reset`` op) and the embeddings."""
        self.store.clear(note=f"new user {user_id}")
        self.index.clear()

    async def observe(self, observation: Observation) -> None:
        """Build, link and evolve a note for a task opening or user turn; assistant turns are skipped."""
        if observation.kind == "assistant" or not observation.text.strip():
            return
        fields = await self._construct(observation)
        keywords, context, tags = (list(fields.keywords), fields.context, list(fields.tags)) if fields is not None \
            else ([], EMPTY_CONTEXT, [])
        now = self.services.clock.iso()
        note: dict[str, Any] = {
            "id": self.services.new_id("n"), "content": observation.text, "keywords": keywords,
            "links": [], "context": context, "tags": tags, "category": observation.kind,
            "timestamp": now, "evolution_history": []}
        row = (await self.index.embed([embedding_text(note)]))[0]
        neighbours = [item_id for item_id, _ in self.index.top_k(row, NEIGHBOURS)]
        decision = await self._decide(note, neighbours) if neighbours else None
        summary, problems = self._summarise(decision, neighbours)
        self.store.add(note["id"], note, note="; ".join([summary, *problems]))
        self.index.put(note["id"], row)
        if decision is not None and decision.should_evolve:
            changed = self._evolve(note["id"], decision, neighbours, now)
            if changed:
                rows = await self.index.embed([embedding_text(self.store.get(item_id)) for item_id in changed])
                for item_id, new_row in zip(changed, rows):
                    self.index.put(item_id, new_row)

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        """The ``k`` notes most cosine-similar to ``query``, best first."""
        if k <= 0 or not len(self.index):
            return []
        query_row = (await self.index.embed([query]))[0]
        return [ScoredItem(id=item_id, item=json_copy(self.store.get(item_id)), score=score)
                for item_id, score in self.index.top_k(query_row, k)]

    def dump(self) -> list[dict[str, Any]]:
        return [json_copy(item) for item in self.store.items()]

    def footprint(self) -> Footprint:
        return self.store.footprint()

    # -- model calls -----------------------------------------------------------------------------

    async def _construct(self, observation: Observation) -> NoteFields | None:
        outcome = await self.services.chat_client.chat(
            "memory_writer", [ChatMessage(role="system", content=NOTE_SYSTEM),
                              ChatMessage(role="user", content=f"TEXT\n{_clip(observation.text, PROMPT_CHARS)}")],
            params=SamplingParams(temperature=0.0, max_tokens=400), schema=NoteFields)
        if outcome.parsed is None:
            self._error(f"note construction for the {observation.kind} message of task {observation.task_index}, "
                        f"turn {observation.turn} was excluded ({outcome.excluded}); stored with empty fields, "
                        f"as the library does")
            return None
        fields: NoteFields = outcome.parsed
        return fields

    async def _decide(self, note: dict[str, Any], neighbours: list[str]) -> EvolutionDecision | None:
        listed = "\n".join(
            f"[{index}] content: {_clip(str(item['content']), NEIGHBOUR_CHARS)}\n    context: {item['context']}\n"
            f"    tags: {', '.join(item['tags'])}"
            for index, item in enumerate(self.store.get(item_id) for item_id in neighbours))
        body = (f"NEW NOTE\ncontent: {_clip(str(note['content']), PROMPT_CHARS)}\ncontext: {note['context']}\n"
                f"keywords: {', '.join(note['keywords'])}\ntags: {', '.join(note['tags'])}\n\n"
                f"NUMBERED NOTES (0 to {len(neighbours) - 1})\n{listed}")
        outcome = await self.services.chat_client.chat(
            "memory_writer", [ChatMessage(role="system", content=EVOLVE_SYSTEM),
                              ChatMessage(role="user", content=body)],
            params=SamplingParams(temperature=0.0, max_tokens=900), schema=EvolutionDecision)
        if outcome.parsed is None:
            self._error(f"the evolution decision for note {note['id']} was excluded ({outcome.excluded}); "
                        f"the note is stored without links or evolution")
            return None
        decision: EvolutionDecision = outcome.parsed
        return decision

    # -- applying a decision ---------------------------------------------------------------------

    @staticmethod
    def _summarise(decision: EvolutionDecision | None, neighbours: list[str]) -> tuple[str, list[str]]:
        """The ``add`` op's note: what was decided, and every index that will be rejected."""
        if not neighbours:
            return "first note: no neighbours, no evolution", []
        if decision is None:
            return "evolution excluded", []
        if not decision.should_evolve:
            return "should_evolve false", []
        problems: list[str] = []
        valid = f"0..{len(neighbours) - 1}"
        if "strengthen" in decision.actions:
            problems += [f"rejected link_to index {index} (valid {valid})"
                         for index in decision.link_to if not 0 <= index < len(neighbours)]
        if "update_neighbor" in decision.actions:
            seen: set[int] = set()
            for revision in decision.neighbor_updates:
                if not 0 <= revision.index < len(neighbours):
                    problems.append(f"rejected neighbor_updates index {revision.index} (valid {valid})")
                elif revision.index in seen:
                    problems.append(f"rejected repeated neighbor_updates index {revision.index}")
                seen.add(revision.index)
        return f"should_evolve true, actions {', '.join(decision.actions) or 'none'}", problems

    def _evolve(self, note_id: str, decision: EvolutionDecision, neighbours: list[str], now: str) -> list[str]:
        """Apply the valid parts of an evolution decision; return the ids whose text changed."""
        changed: list[str] = []
        if "strengthen" in decision.actions:
            links = [neighbours[index] for index in dict.fromkeys(decision.link_to) if 0 <= index < len(neighbours)]
            if links:
                note = json_copy(self.store.get(note_id))
                note["links"] = list(dict.fromkeys([*note["links"], *links]))
                note["evolution_history"].append({"timestamp": now, "change": "strengthen: linked to "
                                                  + ", ".join(links)})
                self.store.update(note_id, note, op="link", note=f"strengthen: {len(links)} link(s)")
            tags = list(dict.fromkeys(decision.tags))
            note = json_copy(self.store.get(note_id))
            if tags and tags != note["tags"]:
                note["evolution_history"].append({"timestamp": now, "change": "strengthen: tags replaced; were "
                                                  + ", ".join(note["tags"])})
                note["tags"] = tags
                self.store.update(note_id, note, op="evolve", note="strengthen: tags replaced")
                changed.append(note_id)
        if "update_neighbor" in decision.actions:
            done: set[int] = set()
            for revision in decision.neighbor_updates:
                if not 0 <= revision.index < len(neighbours) or revision.index in done:
                    continue
                done.add(revision.index)
                if self._revise(neighbours[revision.index], revision, note_id, now):
                    changed.append(neighbours[revision.index])
        return changed

    def _revise(self, item_id: str, revision: NeighbourRevision, note_id: str, now: str) -> bool:
        """Give one neighbour its new context and tags (blank values keep the old ones)."""
        item = json_copy(self.store.get(item_id))
        context = revision.context or item["context"]
        tags = list(dict.fromkeys(revision.tags)) or item["tags"]
        if context == item["context"] and tags == item["tags"]:
            return False
        item["evolution_history"].append({
            "timestamp": now, "change": f"update_neighbor after note {note_id}; context was: {item['context']}; "
                                        f"tags were: {', '.join(item['tags'])}"})
        item.update(context=context, tags=tags)
        self.store.update(item_id, item, op="update_neighbor", note=f"evolved by note {note_id}")
        return True

    def _error(self, message: str) -> None:
        self.services.recorder.emit(ErrorEvent(where="amem", error_type="WriteExcluded", message=message,
                                               recoverable=True))

