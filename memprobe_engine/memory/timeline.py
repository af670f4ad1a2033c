"""Time travel over a recording: a memory system's store as it was at any event.

Every store mutation is a ``memory_op`` event carrying the JSON Patch from the previous state
``{"items": {id: item}}`` to the next, and a ``memory_snapshot`` event may checkpoint the whole state
(payload ``{"items": {...}}``, see :func:`record_snapshot`). :class:`StoreTimeline` scans a recording
once for the memory events of every (unit, system), then rebuilds a store at any ``seq`` by starting
from the nearest snapshot or in-memory checkpoint (one every :data:`CHECKPOINT_EVERY` events) and
applying at most that many patches, so stepping through a million-event recording stays fast.
"""

from __future__ import annotations

import bisect
import copy
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.jsonpatch import apply_patch, unescape_token
from memprobe_engine.events.memory import MemoryOp, MemorySnapshot
from memprobe_engine.events.reader import DamagedEvent, RecordingReader
from memprobe_engine.events.recorder import Recorder

CHECKPOINT_EVERY = 200
#: Stores kept per (unit, system) from the latest rebuilds: stepping a turn or a session needs the store
#: a few ops from the one just shown, not up to CHECKPOINT_EVERY patches from the last checkpoint.
RECENT_STATES = 8
MEMORY_KINDS = ("memory_op", "memory_snapshot")
_TOKENS = tuple(f'"kind":"{kind}"'.encode() for kind in MEMORY_KINDS)

Key = tuple[str | None, str | None]
Items = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class StoreDiff:
    """Item ids that appear, change or disappear between two stores (in store order)."""

    added: list[str]
    updated: list[str]
    deleted: list[str]

    @property
    def empty(self) -> bool:
        return not (self.added or self.updated or self.deleted)


@dataclass
class _Track:
    """The memory events of one (unit, system), in recording order, and the states cached so far."""

    seqs: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    snapshot_positions: list[int] = field(default_factory=list)  # indexes into seqs
    #: Resets (a new user, a resumed unit): they empty the store, so damage before one cannot matter.
    reset_positions: list[int] = field(default_factory=list)
    checkpoint_positions: list[int] = field(default_factory=lambda: [0])
    checkpoints: dict[int, dict[str, Any]] = field(default_factory=lambda: {0: {"items": {}}})
    #: Position → state of the latest rebuilds (oldest first, at most RECENT_STATES), shared like
    #: the checkpoints: a rebuild starting from one copies before it changes an item.
    recent: dict[int, dict[str, Any]] = field(default_factory=dict)


class StoreTimeline:
    """Rebuilds the store of any (unit, system) at any seq of one recording.

    The first query scans the memory events; later queries scan only lines appended since (a live
    recording followed with ``reader.refresh()``). A damaged memory event of the requested store, or an
    unreadable line that names a memory kind and so may be one, between the starting state and the
    requested seq raises RecordingError rather than returning a store that silently misses an op.
    """

    def __init__(self, reader: RecordingReader) -> None:
        self.reader = reader
        self._tracks: dict[Key, _Track] = {}
        self._unattributed_damage: list[int] = []
        self._scanned = 0

    def refresh(self) -> None:
        """Index the memory events on lines the reader has that were not scanned yet.

        Lines are read as plain JSON (no model validation, nothing put in the reader's event cache);
        an event is validated when a rebuild applies it.
        """
        stop = len(self.reader)
        for line, raw in self.reader.raw_lines(self.reader.lines_with(_TOKENS, self._scanned, stop)):
            try:
                data = self.reader.decode(line, raw)
            except DamagedEvent:
                self._unattributed_damage.append(line)
                continue
            if data.get("kind") not in MEMORY_KINDS:
                continue
            unit, system = data.get("unit"), data.get("system")
            if not isinstance(unit, (str, type(None))) or not isinstance(system, (str, type(None))):
                self._unattributed_damage.append(line)  # a wrong-typed scope: whose store it is is unknown
                continue
            track = self._tracks.setdefault((unit, system), _Track())
            if data["kind"] == "memory_snapshot":
                track.snapshot_positions.append(len(track.seqs))
            elif data.get("op") == "reset":
                track.reset_positions.append(len(track.seqs))
            track.seqs.append(int(data.get("seq", line)))
            track.lines.append(line)
        self._scanned = stop

    def keys(self) -> list[Key]:
        """Every (unit, system) that has memory events, in order of first appearance."""
        self.refresh()
        return list(self._tracks)

    def event_seqs(self, *, unit: str, system: str) -> list[int]:
        """The seqs of the memory events of one store: the points where it can change."""
        self.refresh()
        track = self._tracks.get((unit, system))
        return list(track.seqs) if track is not None else []

    def store_at(self, *, unit: str, system: str, upto_seq: int) -> Items:
        """The store's items by id (insertion order) after every memory event with seq <= ``upto_seq``.

        The item dicts are shared with the timeline's checkpoints (copy on write: a patch copies the
        items it changes first), so a rebuild copies the few items its patches touch instead of the
        whole store (bench/tui.py at 1M events: a checkpoint of ~600 items was deep-copied on every
        store step, and the result again). Read them; never modify them."""
        self.refresh()
        track = self._tracks.get((unit, system)) or _Track()  # no events yet: the empty store
        target = bisect.bisect_right(track.seqs, upto_seq)  # apply events [0, target)
        checkpoint = track.checkpoint_positions[bisect.bisect_right(track.checkpoint_positions, target) - 1]
        recent = max((p for p in track.recent if checkpoint < p <= target), default=None)
        snapshot = bisect.bisect_left(track.snapshot_positions, target) - 1
        snapshot_start = track.snapshot_positions[snapshot] if snapshot >= 0 else -1
        if snapshot_start >= (checkpoint if recent is None else recent):
            snapshot_event = self._event(track.lines[snapshot_start], unit, system)
            assert snapshot_event.kind == "memory_snapshot"  # snapshot_positions index snapshots only
            state = self._snapshot_state(snapshot_event)
            start = snapshot_start + 1
        elif recent is not None:
            state = _share(track.recent[recent])
            start = recent
        else:
            state = _share(track.checkpoints[checkpoint])
            start = checkpoint
        owned: set[str] = set()  # items this rebuild copied already (its own to change)
        self._check_damage(track, start, target, upto_seq, unit, system)
        for position in range(start, target):
            event = self._event(track.lines[position], unit, system)
            if event.kind == "memory_snapshot":
                state = self._snapshot_state(event)
                owned = set(state["items"])
            else:
                try:
                    _own_touched(state, event.patch, owned)
                    state = apply_patch(state, event.patch, in_place=True)
                except (ValueError, KeyError, IndexError, TypeError) as err:
                    raise RecordingError(
                        f"{self.reader.path}: the memory patch at seq {event.seq} (unit {unit}, system "
                        f"{system}) does not apply to the store before it ({err}); the recording is "
                        f"inconsistent. Run `memprobe recording verify {self.reader.directory}`.") from None
            if (position + 1) % CHECKPOINT_EVERY == 0 and position + 1 not in track.checkpoints:
                track.checkpoints[position + 1] = _share(state)
                owned = set()  # the checkpoint holds them now: copy before changing them again
                bisect.insort(track.checkpoint_positions, position + 1)
        track.recent.pop(target, None)
        track.recent[target] = state  # no longer changed here: the next rebuild from it copies first
        while len(track.recent) > RECENT_STATES:
            del track.recent[next(iter(track.recent))]
        return dict(state["items"])

    def _event(self, line: int, unit: str, system: str) -> MemoryOp | MemorySnapshot:
        try:
            event = self.reader.get(line)
        except DamagedEvent as err:
            raise RecordingError(f"{err} It is a memory event of unit {unit}, system {system}, so that "
                                 f"store cannot be rebuilt past it. Run `memprobe recording verify "
                                 f"{self.reader.directory}`.") from None
        if event.kind != "memory_op" and event.kind != "memory_snapshot":  # the scan kept memory lines only
            raise RecordingError(f"{self.reader.path}: line {line + 1} changed kind since it was indexed "
                                 f"({event.kind}); the recording was modified while it was read.")
        return event

    def _snapshot_state(self, event: MemorySnapshot) -> dict[str, Any]:
        try:
            data = self.reader.payload(event.snapshot_ref)
        except KeyError:
            raise RecordingError(f"{self.reader.path}: the memory snapshot at seq {event.seq} refers to payload "
                                 f"{event.snapshot_ref}, which payloads.jsonl does not hold.") from None
        if not isinstance(data, dict) or not isinstance(data.get("items"), dict):
            raise RecordingError(f"{self.reader.path}: the memory snapshot at seq {event.seq} is not a store "
                                 f"state (expected {{\"items\": {{id: item}}}}).")
        return copy.deepcopy(data)

    def _check_damage(self, track: _Track, start: int, target: int, upto_seq: int,
                      unit: str, system: str) -> None:
        first = track.lines[start - 1] if start > 0 else -1
        reset = bisect.bisect_left(track.reset_positions, target) - 1
        if reset >= 0:
            first = max(first, track.lines[track.reset_positions[reset]])
        last = track.lines[target] if target < len(track.lines) else upto_seq + 1
        for line in self._unattributed_damage:
            # A damaged line after the requested point cannot hold an op the store at that point needs,
            # even when it lies before the store's next op: bound by the point, not by that op.
            if first < line < last and self._seq_before(line) < upto_seq:
                raise RecordingError(
                    f"{self.reader.path}: line {line + 1} is damaged and may be a memory operation of unit "
                    f"{unit}, system {system}, so the store at seq {upto_seq} cannot be rebuilt exactly. "
                    f"Run `memprobe recording verify {self.reader.directory}`.")

    def _seq_before(self, line: int, reach: int = 1000) -> int:
        """The seq of the nearest readable line before ``line`` (seqs increase along the file), or -1
        when none is found within ``reach`` lines: then the damage counts as before any point."""
        for prev in range(line - 1, max(-1, line - 1 - reach), -1):
            match = _SEQ_PREFIX.match(self.reader.raw(prev))
            if match is not None:
                return int(match.group(1))
        return -1


_SEQ_PREFIX = re.compile(rb'\{"seq":(\d+),')


def _share(state: dict[str, Any]) -> dict[str, Any]:
    """A new state whose ``items`` mapping is new but whose item dicts are the same objects."""
    return {key: dict(value) if key == "items" else copy.deepcopy(value) for key, value in state.items()}


def _own_touched(state: dict[str, Any], patch: list[dict[str, Any]], owned: set[str]) -> None:
    """Before ``patch`` changes the inside of a shared item (``/items/<id>/…``), give the state its own
    copy of that item; a whole item added, replaced or removed changes only the state's own mapping."""
    items = state.get("items")
    for op in patch:
        tokens = [unescape_token(t) for t in op["path"].split("/")[1:]]
        if len(tokens) >= 3 and tokens[0] == "items" and isinstance(items, dict):
            item_id = tokens[1]
            if item_id not in owned and item_id in items:
                items[item_id] = copy.deepcopy(items[item_id])
                owned.add(item_id)
        elif len(tokens) >= 2 and tokens[0] != "items" and "/" + tokens[0] not in owned:
            if tokens[0] in state:  # another top-level part (none today): copied whole, once
                state[tokens[0]] = copy.deepcopy(state[tokens[0]])
            owned.add("/" + tokens[0])
        elif len(tokens) == 2 and tokens[0] == "items":
            owned.discard(tokens[1])  # a whole new (deep-copied) value or gone: nothing shared to protect
            if op["op"] in ("add", "replace"):
                owned.add(tokens[1])


_TIMELINES: "weakref.WeakKeyDictionary[RecordingReader, StoreTimeline]" = weakref.WeakKeyDictionary()


def timeline_for(reader: RecordingReader) -> StoreTimeline:
    """The reader's shared :class:`StoreTimeline`, built on first use."""
    timeline = _TIMELINES.get(reader)
    if timeline is None:
        timeline = _TIMELINES[reader] = StoreTimeline(reader)
    return timeline


def store_at(reader: RecordingReader, *, unit: str, system: str, upto_seq: int) -> Items:
    """The store of (``unit``, ``system``) after every memory event with seq <= ``upto_seq``."""
    return timeline_for(reader).store_at(unit=unit, system=system, upto_seq=upto_seq)


def store_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> StoreDiff:
    """What changed from ``before`` to ``after`` (two stores as returned by :func:`store_at`)."""
    return StoreDiff(added=[item_id for item_id in after if item_id not in before],
                     updated=[item_id for item_id in after if item_id in before and before[item_id] != after[item_id]],
                     deleted=[item_id for item_id in before if item_id not in after])


def record_snapshot(recorder: Recorder, items: Mapping[str, Mapping[str, Any]]) -> MemorySnapshot:
    """Checkpoint a whole store as a ``memory_snapshot`` event in the format :class:`StoreTimeline` reads.

    Call it inside the recorder scope of the store's user and system. Raises ValueError when the
    recorder records nothing, since a snapshot without its payload could never be read back.
    """
    ref = recorder.put_payload({"items": {item_id: dict(item) for item_id, item in items.items()}})
    if ref is None:
        raise ValueError("record_snapshot needs a recorder that writes a recording (this one has no writer)")
    return recorder.emit(MemorySnapshot(snapshot_ref=ref, n_items=len(items)))
