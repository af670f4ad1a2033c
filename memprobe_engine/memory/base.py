"""The memory-system protocol and the services a system gets from the engine.

A system is constructed with a :class:`MemoryServices` (chat client, embedder, recorder, simulated
clock, seed) and then driven by the rollout: ``reset`` for a new user, ``observe`` for each new
piece of evidence, ``search`` for the assistant's memory block and retrieve-mode scoring,
``dump`` for dump_all scoring, ``footprint`` for metric E. All of a system's model calls go through
``services.chat`` / ``services.embedder`` so they are recorded and cached; all store mutations go
through :class:`RecordedStore` so each one becomes a ``memory_op`` event with its JSON Patch.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

import orjson
from pydantic import BaseModel

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.jsonpatch import make_patch
from memprobe_engine.events.memory import MemoryFootprint, MemoryOp
from memprobe_engine.events.recorder import Recorder

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.embeddings import TextEmbedder


class SimClock:
    """Simulated time: systems timestamp memories with it, never with the wall clock, so a
    recording replays identically. The rollout advances it (one day per task, minutes per turn)."""

    def __init__(self, start: dt.datetime = dt.datetime(2026, 1, 5, 9, 0, 0)) -> None:
        self._now = start

    def now(self) -> dt.datetime:
        return self._now

    def iso(self) -> str:
        return self._now.isoformat(timespec="seconds")

    def advance(self, *, days: int = 0, minutes: int = 0) -> None:
        self._now += dt.timedelta(days=days, minutes=minutes)


@dataclass
class MemoryServices:
    """What the engine hands a memory system: ``chat`` (role ``memory_writer`` for write-side calls) and
    ``embedder``, each None when the run has none; ``chat_client`` / ``text_embedder`` give them typed
    to a system that required them."""

    recorder: Recorder
    clock: SimClock
    seed: int = 0
    chat: ChatClient | None = None
    embedder: TextEmbedder | None = None
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def require(self, system: str, *, chat: bool = False, embedder: bool = False) -> None:
        """Fail at construction, naming what ``system`` needs, rather than on its first write."""
        missing = [what for what, needed, present in (
            ("a chat client (role memory_writer)", chat, self.chat), ("an embedder", embedder, self.embedder))
            if needed and present is None]
        if missing:
            raise ConfigError(f"memory system {system!r} needs {' and '.join(missing)}, but the run configured "
                              f"none. Set the models and the embedding spec in the run configuration.")

    @property
    def chat_client(self) -> ChatClient:
        """The chat client, for a system that required one in its constructor (``require(chat=True)``)."""
        if self.chat is None:
            raise ConfigError("this memory system calls a model, but the run configured no chat client. Set the "
                              "models in the run configuration.")
        return self.chat

    @property
    def text_embedder(self) -> TextEmbedder:
        """The embedder, for a system that required one in its constructor (``require(embedder=True)``)."""
        if self.embedder is None:
            raise ConfigError("this memory system embeds text, but the run configured no embedder. Set the "
                              "embedding spec in the run configuration.")
        return self.embedder

    def new_id(self, prefix: str = "m") -> str:
        """Deterministic item ids derived from the run's seed."""
        return f"{prefix}{self.rng.getrandbits(48):012x}"


class Observation(BaseModel):
    """One piece of evidence offered to the memory: the task opening, a user turn, an assistant turn,
    or (protocol B's agentic sessions) a tool's output. In protocol B ``task_index`` is the session's
    index and the session's first user turn is its ``task`` opening."""

    kind: Literal["task", "user", "assistant", "tool_output"]
    text: str
    task_index: int
    turn: int = 0
    timestamp: str


class ScoredItem(BaseModel):
    """A search hit: the item's id, its native fields and the system's relevance score."""

    id: str
    item: dict[str, Any]
    score: float | None = None


class AgentContext(BaseModel):
    """What the assistant is shown from memory for one turn (the optional ``agent_context`` hook).

    ``hits`` fill the memory block of the system prompt, one line each (see ``memory_line``);
    ``prior_dialogue`` holds earlier tasks replayed verbatim as chat turns, for a system whose
    memory *is* the transcript (``longctx_full``). A system without the hook is shown its own
    ``search(query, k)``."""

    hits: list[ScoredItem] = []
    prior_dialogue: list[tuple[str, str]] = []


def memory_line(item: dict[str, Any]) -> str:
    """One memory item in the assistant's memory block: its text, with its tags when it has any
    (as the release's agents show A-MEM notes); an item without a ``content`` text is shown as JSON."""
    content = item.get("content")
    if not isinstance(content, str):
        return orjson.dumps(item).decode()
    tags = item.get("tags")
    suffix = f"  [tags: {', '.join(str(t) for t in tags)}]" if isinstance(tags, list) and tags else ""
    return f"• {content}{suffix}"


class Footprint(BaseModel):
    n_items: int
    total_chars: int

    @property
    def mean_chars(self) -> float:
        return self.total_chars / self.n_items if self.n_items else 0.0


@dataclass(frozen=True)
class SystemNeeds:
    """What a memory system needs from a run, declared on its class as optional class attributes
    ``needs_embedder: ClassVar[bool]`` and ``model_roles: ClassVar[tuple[str, ...]]``. A system that
    declares nothing is taken to need both an embedder and the ``memory_writer`` role."""

    embedder: bool = True
    model_roles: tuple[str, ...] = ("memory_writer",)


def needs_of(system_class: type[object]) -> SystemNeeds:
    """The needs ``system_class`` declares (defaults for what it leaves out)."""
    default = SystemNeeds()
    return SystemNeeds(embedder=bool(getattr(system_class, "needs_embedder", default.embedder)),
                       model_roles=tuple(getattr(system_class, "model_roles", default.model_roles)))


def record_footprint(recorder: Recorder, system: MemorySystem) -> None:
    """Metric E: the store's size once the evidence is in (end of a user's tasks or an episode's sessions)."""
    fp = system.footprint()
    recorder.emit(MemoryFootprint(n_items=fp.n_items, total_chars=fp.total_chars, mean_chars=fp.mean_chars))


@runtime_checkable
class MemorySystem(Protocol):
    """What every memory system implements (built-in or plug-in)."""

    name: ClassVar[str]
    description: ClassVar[str]

    async def reset(self, user_id: str) -> None:
        """Forget everything: a new user (or episode) starts from an empty store."""
        ...

    async def observe(self, observation: Observation) -> None:
        """Take in new evidence; the system decides what to write."""
        ...

    async def search(self, query: str, k: int) -> list[ScoredItem]:
        """The system's own read interface: up to ``k`` items, best first."""
        ...

    def dump(self) -> list[dict[str, Any]]:
        """The whole store as items with their native fields (dump_all mode)."""
        ...

    # Optional: ``async def agent_context(self, query: str, k: int, task_index: int) -> AgentContext``
    # — what the assistant sees for this turn, when it is not simply ``search(query, k)``.
    # Optional: ``needs_embedder: ClassVar[bool]`` and ``model_roles: ClassVar[tuple[str, ...]]`` —
    # what the system needs from a run (see SystemNeeds); undeclared means an embedder and memory_writer.
    # Optional: ``async def finish(self) -> None`` — called once after the user's last task, before
    # the store is measured and read, for systems that write in batches (e.g. memt). Not part of
    # the runtime-checked protocol, so systems without batching need not define it.

    def footprint(self) -> Footprint:
        ...


class RecordedStore:
    """An ordered id → item store that records every mutation as a ``memory_op`` event.

    The recorded state is ``{"items": {id: item}}``; each op carries the JSON Patch from the state
    before to the state after, so the store at any step can be rebuilt from the recording.
    ``content_field`` names the field counted for the footprint's characters per item.
    """

    def __init__(self, recorder: Recorder, *, content_field: str = "content") -> None:
        self._recorder = recorder
        self._items: dict[str, dict[str, Any]] = {}
        self._content_field = content_field

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def get(self, item_id: str) -> dict[str, Any]:
        return self._items[item_id]

    def ids(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[dict[str, Any]]:
        return list(self._items.values())

    def _emit(self, op: str, item_ids: list[str], patch: list[dict[str, Any]], note: str | None) -> None:
        self._recorder.emit(MemoryOp(op=op, item_ids=item_ids, patch=patch, store_size=len(self._items), note=note))

    def add(self, item_id: str, item: dict[str, Any], *, op: str = "add", note: str | None = None) -> None:
        if item_id in self._items:
            raise KeyError(f"memory item {item_id} already exists")
        self._items[item_id] = dict(item)
        self._emit(op, [item_id], [{"op": "add", "path": f"/items/{_escape(item_id)}", "value": dict(item)}], note)

    def update(self, item_id: str, new_item: dict[str, Any], *, op: str = "update", note: str | None = None) -> None:
        old = self._items[item_id]
        patch = make_patch(old, new_item, f"/items/{_escape(item_id)}")
        self._items[item_id] = dict(new_item)
        if patch:
            self._emit(op, [item_id], patch, note)

    def delete(self, item_id: str, *, op: str = "delete", note: str | None = None) -> None:
        del self._items[item_id]
        self._emit(op, [item_id], [{"op": "remove", "path": f"/items/{_escape(item_id)}"}], note)

    def clear(self, *, note: str | None = None) -> None:
        """Empty the store (a new user); recorded as one ``reset`` op replacing the items object."""
        self._items.clear()
        self._emit("reset", [], [{"op": "replace", "path": "/items", "value": {}}], note)

    def footprint(self) -> Footprint:
        total = sum(len(str(item.get(self._content_field, ""))) for item in self._items.values())
        return Footprint(n_items=len(self._items), total_chars=total)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
