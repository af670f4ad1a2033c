"""A memory store at one step, as rows to show: every item with its diff mark against the step
before (added, updated, unchanged) plus the items that step deleted, and an item's history."""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import orjson

from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.events.memory import MemoryOp, MemorySnapshot
from memprobe_engine.memory.timeline import Items
from memprobe_engine.replay.session import ReplaySession

#: Native fields that group items, in order of preference (systems name them differently).
GROUP_FIELDS: tuple[str, ...] = ("category", "collection", "type", "memory_type", "tags")
#: Native fields that hold an item's text, in order of preference.
TEXT_FIELDS: tuple[str, ...] = ("content", "memory", "text", "note", "value")
#: Native fields that point at other items.
LINK_FIELDS: tuple[str, ...] = ("links", "linked", "related", "neighbors", "parent_id")


@dataclass(frozen=True)
class StoreRow:
    """One row of a store view; ``mark`` is "+" added, "~" updated, "-" deleted, " " unchanged."""

    item_id: str
    mark: str
    item: dict[str, Any]
    #: The item in the store before the step (an update's old side; None for an added item).
    before: dict[str, Any] | None = None


@dataclass(frozen=True)
class StoreView:
    """A store after ``after_seq`` compared with the store after ``before_seq``."""

    unit: str
    system: str
    before_seq: int
    after_seq: int
    rows: list[StoreRow]
    size: int
    added: int
    updated: int
    deleted: int
    #: Said above the store when the recording cannot show per-step writes (an imported release).
    note: str | None = None

    def groups(self) -> tuple[str | None, list[str]]:
        """(grouping field, its values) for the category filter; (None, []) when items have none."""
        for name in GROUP_FIELDS:
            values = sorted({_group_value(r.item.get(name)) for r in self.rows if name in r.item})
            if values:
                return name, values
        return None, []


def _group_value(value: object) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


#: longctx_full's native opening of a task's item (the paper's release counts tasks from 0).
_NATIVE_TASK = re.compile(r"^\[Task (\d+)\] ")


def step_numbered(text: str) -> str:
    """``text`` with a native ``[Task N] `` opening (N counted from 0, as longctx_full and the paper's
    release write it) named as the steps name that task, ``[T{N+1} task] ``, so one numbering is on
    screen (issue 36: store items said ``[Task 0]`` beside steps saying ``T1.1``). For display only:
    the stored text, which the slot-filler read, is unchanged."""
    return _NATIVE_TASK.sub(lambda m: f"[T{int(m.group(1)) + 1} task] ", text, count=1)


def item_text(item: dict[str, Any]) -> str:
    """The item's main text (its first text-like native field), else all its fields."""
    for name in TEXT_FIELDS:
        if isinstance(item.get(name), str):
            return str(item[name])
    return ", ".join(f"{k}={v}" for k, v in item.items() if k != "id")


def item_links(item: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name in LINK_FIELDS:
        value = item.get(name)
        if isinstance(value, list):
            out += [str(v) for v in value]
        elif isinstance(value, str) and value:
            out.append(value)
    return out


def matches(row: StoreRow, group: tuple[str, str] | None, search: str) -> bool:
    """Whether a row passes the category filter and the (case-insensitive) search text."""
    if group is not None and _group_value(row.item.get(group[0])) != group[1]:
        return False
    if search:
        needle = search.lower()
        return needle in row.item_id.lower() or any(needle in str(v).lower() for v in row.item.values())
    return True


def diff_rows(before: Items, after: Items) -> list[StoreRow]:
    rows = [StoreRow(i, "+" if i not in before else ("~" if before[i] != item else " "), item, before.get(i))
            for i, item in after.items()]
    rows += [StoreRow(i, "-", item, item) for i, item in before.items() if i not in after]
    return rows


def store_view(session: ReplaySession, unit: str, system: str, after_seq: int, before_seq: int) -> StoreView:
    """Rebuild both stores and compare them (may scan the recording once: run it in a worker)."""
    after = session.store_at(unit, system, after_seq)
    before = session.store_at(unit, system, before_seq) if before_seq >= 0 else {}
    rows = diff_rows(before, after)
    count = {mark: sum(1 for r in rows if r.mark == mark) for mark in "+~-"}
    return StoreView(unit, system, before_seq, after_seq, rows, len(after), count["+"], count["~"], count["-"],
                     note=store_note(session))


def store_note(session: ReplaySession) -> str | None:
    """What the memory view must say about the recording's store history, if anything."""
    if HeaderConfig.of(session.header).source == "release-a":
        return ("imported from the published release, which holds only each user's final store: it "
                "appears once, after the last episode; there are no per-turn writes")
    return None


@dataclass(frozen=True)
class _OpLine:
    """What the memory view needs to know of one memory event without parsing it as a model."""

    seq: int
    line: int | None
    kind: str | None  # None: a damaged line (the store view reports it)
    reset: bool
    item_ids: tuple[str, ...]
    #: The op's name (``add``, ``update``…; ``snapshot`` for a snapshot), "" on a damaged line.
    op: str = ""


#: Per session, per (unit, system): its memory events read once as plain JSON. Every stepping key
#: asked which ops wrote each item (and an item's history) by re-reading every op of the store.
_OPS: weakref.WeakKeyDictionary[ReplaySession, dict[tuple[str, str], list[_OpLine]]] = weakref.WeakKeyDictionary()
_OPS_LOCK = threading.Lock()


def _ops(session: ReplaySession, unit: str, system: str) -> list[_OpLine]:
    """The store's memory events in order, extended with those a live run appended since."""
    seqs = session.memory_seqs(unit, system)
    with _OPS_LOCK:
        known = _OPS.setdefault(session, {}).setdefault((unit, system), [])
        for seq in seqs[len(known):]:
            line = session.line_of_seq(seq)
            try:
                data = orjson.loads(session.raw(line)) if line is not None else None
            except orjson.JSONDecodeError:
                data = None
            if not isinstance(data, dict):
                known.append(_OpLine(seq, line, None, False, ()))
                continue
            ids = data.get("item_ids")
            kind = str(data.get("kind"))
            known.append(_OpLine(seq, line, kind, data.get("op") == "reset",
                                 tuple(str(i) for i in ids) if isinstance(ids, list) else (),
                                 "snapshot" if kind == "memory_snapshot" else str(data.get("op") or "")))
        return list(known)


def op_names(session: ReplaySession, unit: str, system: str) -> dict[int, str]:
    """seq → the name of the store's memory event there (``add``, ``delete``, ``snapshot``…)."""
    return {op.seq: op.op for op in _ops(session, unit, system) if op.op}


def item_history(session: ReplaySession, unit: str, system: str, item_id: str,
                 upto_seq: int | None = None) -> list[MemoryOp | MemorySnapshot]:
    """Every memory op of the store that touched ``item_id`` (up to ``upto_seq``), oldest first, with the
    snapshots (checkpoints) among them."""
    out: list[MemoryOp | MemorySnapshot] = []
    for op in _ops(session, unit, system):
        if upto_seq is not None and op.seq > upto_seq:
            break
        if op.line is None or op.kind is None:
            continue
        if not op.reset and op.kind != "memory_snapshot" and item_id not in op.item_ids:
            continue  # most ops of a big store touch other items
        event = session.event_or_none(op.line)
        if event is None:
            continue
        if event.kind == "memory_op" and event.op == "reset":
            out = [event]  # a new user or a resumed unit: what came before is another attempt's store
        elif event.kind == "memory_snapshot" or (event.kind == "memory_op" and item_id in event.item_ids):
            out.append(event)
    return out


@dataclass(frozen=True)
class ItemWrites:
    """Per item id, the seqs of the ops that named it since the store's last reset (oldest first);
    ``snapshot`` the seq of a later snapshot that stands for every item it holds (an import)."""

    seqs: dict[str, list[int]]
    snapshot: int | None = None

    def of(self, item_id: str) -> list[int]:
        found = self.seqs.get(item_id)
        return found if found else ([self.snapshot] if self.snapshot is not None else [])


def item_writes(session: ReplaySession, unit: str, system: str, upto_seq: int) -> ItemWrites:
    """Which ops wrote each item of the store at ``upto_seq``: one pass over the store's op lines
    (plain JSON, no validation, read once per store), restarting at each reset, so a failed
    attempt's writes never mix with its resume's."""
    seqs: dict[str, list[int]] = {}
    snapshot: int | None = None
    for op in _ops(session, unit, system):
        if op.seq > upto_seq:
            break
        if op.kind is None:
            continue  # a damaged line: the store view reports it
        if op.kind == "memory_snapshot":
            snapshot = op.seq
        elif op.reset:
            seqs, snapshot = {}, None
        else:
            for item_id in op.item_ids:
                seqs.setdefault(item_id, []).append(op.seq)
    return ItemWrites(seqs, snapshot)
