"""The material of one recovery case: what its slot-filler read, and the dialogue its judges read.

A re-score (``recovery/rescore.py``) must hand the slot-filler exactly what it read when the run was
made, and the replay's dimension inspector (``recovery/read/dimension.py``) shows the same thing to the
person auditing the case, so both ask this module:

* :func:`slot_fill_read` — the store as it stood at the slot-fill (``dump_all``: every item, in
  store order) or the recorded top-k of the retrieve-mode search, each item in the shape the system's
  search returned it (``retrieved_view``: Mem-T returns memory text only) — rebuilt from the recorded
  memory operations through whichever store timeline the caller holds;
* :func:`retrieval_for_fill` — which recorded search fed a retrieve-mode fill (retrievals carry no
  mode: it is the last retrieve-mode search before that fill);
* :func:`evidence_turns` — the dialogue turns that carry a disclosure judge's evidence (or the
  target's words), found by the same rule for every caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memprobe_engine.events.memory import Retrieval

Item = dict[str, Any]
#: The store of the case's (user, system) after every memory event with seq <= the argument.
StoreAt = Callable[[int], dict[str, Item]]
ItemView = Callable[[Item], Item]

_WORD = re.compile(r"[a-z0-9']+")
_STOP = frozenset("the and for with that this from have what when your you are was were but not they "
                  "them their about into just like been will would could should there here also very".split())


@dataclass(frozen=True)
class ReadItem:
    """One memory item as the slot-filler was shown it (``item`` None: not in the rebuilt store)."""

    item_id: str
    score: float | None
    item: Item | None


@dataclass(frozen=True)
class SlotFillRead:
    """What a slot-filler read for one case: the items in the order it saw them."""

    mode: str
    items: list[ReadItem]

    @property
    def memory(self) -> list[Item]:
        """The items themselves, as the slot-filler's prompt held them."""
        return [read.item for read in self.items if read.item is not None]


@dataclass(frozen=True)
class DialogueTurn:
    """One message of a recorded episode."""

    task_index: int
    turn: int
    role: str
    text: str


@dataclass(frozen=True)
class EvidenceTurn:
    """A dialogue message that carries the evidence (quoted or paraphrased) a disclosure judge found."""

    task_index: int
    turn: int
    role: str
    text: str
    overlap: float


def retrieved_view(system: str) -> ItemView:
    """The system's ``retrieved_view(item)`` when it defines one, else the stored item as it is."""
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.memory.registry import load_system_class

    try:
        view = getattr(load_system_class(system), "retrieved_view", None)
    except ConfigError:  # a plug-in not installed here: its items are read as stored
        view = None
    return view if callable(view) else dict


def retrieval_for_fill(retrievals: Iterable[Retrieval], fill_seq: int) -> Retrieval | None:
    """The retrieve-mode search that fed the fill at ``fill_seq``: the last one recorded before it."""
    found: Retrieval | None = None
    for event in retrievals:
        if event.seq < fill_seq and event.purpose == "retrieve_mode" and (found is None or event.seq > found.seq):
            found = event
    return found


def slot_fill_read(store_at: StoreAt, system: str, mode: str, fill_seq: int,
                   retrieval: Retrieval | None) -> SlotFillRead:
    """Rebuild what the slot-filler read at ``fill_seq`` (see the module docstring)."""
    store = store_at(fill_seq)
    if mode == "dump_all":
        return SlotFillRead(mode, [ReadItem(item_id, None, item) for item_id, item in store.items()])
    if retrieval is None:
        return SlotFillRead(mode, [])
    view = retrieved_view(system)
    scores: list[float | None] = [*retrieval.scores, *[None] * len(retrieval.item_ids)]
    return SlotFillRead(mode, [ReadItem(item_id, score, view(store[item_id]) if item_id in store else None)
                               for item_id, score in zip(retrieval.item_ids, scores)])


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 3 and w not in _STOP}


def evidence_turns(dialogue: Iterable[DialogueTurn], probe: str, threshold: float = 0.5) -> list[EvidenceTurn]:
    """Non-system messages that contain ``probe`` or share at least ``threshold`` of its content words."""
    wanted = _words(probe)
    needle = " ".join(probe.lower().split())
    found = []
    for turn in dialogue:
        if turn.role == "system":
            continue
        text = " ".join(turn.text.lower().split())
        overlap = 1.0 if needle and needle in text else (len(wanted & _words(text)) / len(wanted) if wanted else 0.0)
        if overlap >= threshold:
            found.append(EvidenceTurn(turn.task_index, turn.turn, turn.role, turn.text, overlap))
    return found
