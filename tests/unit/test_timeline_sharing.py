"""The store timeline shares item dicts between checkpoints and results (copy on write): every
rebuild, in any order and across checkpoints, equals applying every patch from the start on a copy."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest

from memprobe_engine.events.jsonpatch import apply_patch
from memprobe_engine.events.reader import open_recording
from memprobe_engine.memory import timeline as timeline_module
from memprobe_engine.memory.timeline import StoreTimeline

REPO = Path(__file__).resolve().parents[2]
RECORDINGS = [REPO / "tests" / "fixtures" / "tui" / "run",  # mem0 with updates and deletes
              REPO / "recordings" / "sample-quick-sim_01", REPO / "recordings" / "sample-quick-live-sim_01",
              REPO / "recordings" / "sample-paradigms-quick"]


@pytest.mark.parametrize("every", [2, 3, 200])
@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_every_rebuild_in_any_order_equals_replaying_every_patch(path: Path, every: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeline_module, "CHECKPOINT_EVERY", every)
    with open_recording(path) as reader:
        timeline = StoreTimeline(reader)
        updates = 0
        for unit, system in timeline.keys():
            assert unit is not None and system is not None
            expected: dict[int, dict[str, object]] = {}
            state: dict[str, object] = {"items": {}}
            for seq in timeline.event_seqs(unit=unit, system=system):
                event = reader.get(reader_line(reader, seq))
                assert event.kind == "memory_op"
                updates += sum(1 for op in event.patch if op["path"].count("/") >= 3)
                state = apply_patch(copy.deepcopy(state), event.patch)
                expected[seq] = copy.deepcopy(state["items"])  # type: ignore[arg-type]
            order = list(expected)
            random.Random(7).shuffle(order)
            for seq in order + order[::-1] + sorted(order):  # sorted: each rebuild starts from the last one
                assert timeline.store_at(unit=unit, system=system, upto_seq=seq) == expected[seq], (unit, system, seq)
        if path.name == "run":
            assert updates, "the fixture's mem0 store changes fields inside items (the copy-on-write case)"


def reader_line(reader: object, seq: int) -> int:
    for line in range(len(reader)):  # type: ignore[arg-type]
        if reader.get(line).seq == seq:  # type: ignore[attr-defined]
            return line
    raise LookupError(seq)
