"""One protocol-A case of two runs side by side, for the replay's compare screen (no Textual here).

A side is a (recording, system) and the case a (user, dimension, mode). Each side gives its dialogue
of the dimension's task, its final store, its slot-fill, its judge score and reason, and its
attribution stages — all from :func:`memprobe_engine.recovery.read.dimension.dimension_detail`, the
dimension inspector's own query. The two final stores are diffed by item text (item ids of two runs
or two systems never match): what only the base kept, what only the other kept, and how many items
say the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memprobe_engine.memory.timeline import store_at
from memprobe_engine.recovery.read.dimension import DimensionDetail, ModeDetail, dimension_detail
from memprobe_engine.replay.memory_view import item_text
from memprobe_engine.replay.queries import step_messages
from memprobe_engine.replay.session import ReplaySession


@dataclass
class CaseSide:
    """What one run recorded about the case."""

    name: str
    system: str
    dialogue: list[tuple[str, str]]
    store_texts: list[str]
    detail: DimensionDetail

    def mode(self, mode: str) -> ModeDetail | None:
        return self.detail.modes.get(mode)


@dataclass
class CaseComparison:
    user_id: str
    dimension: str
    mode: str
    base: CaseSide
    other: CaseSide
    only_base: list[str] = field(default_factory=list)
    only_other: list[str] = field(default_factory=list)
    shared: int = 0


def case_side(session: ReplaySession, name: str, user_id: str, system: str, dimension: str) -> CaseSide:
    """One side of the case (reads a few spans and rebuilds one store: run it in a worker)."""
    session.build_index()
    detail = dimension_detail(session, user_id, system, dimension)
    dialogue: list[tuple[str, str]] = []
    if detail.episode is not None:
        for step in detail.episode.steps:
            dialogue.extend(step_messages(session, step))
    store = store_at(session.reader, unit=user_id, system=system, upto_seq=len(session) + 1_000_000_000)
    texts = [item_text(item) for item in store.values()]
    return CaseSide(name=name, system=system, dialogue=dialogue, store_texts=texts, detail=detail)


def compare_case(base: ReplaySession, base_system: str, other: ReplaySession, other_system: str, *,
                 user_id: str, dimension: str, mode: str) -> CaseComparison:
    """Both sides of one case and the diff of their final stores."""
    left = case_side(base, str(base.directory), user_id, base_system, dimension)
    right = case_side(other, str(other.directory), user_id, other_system, dimension)
    base_set, other_set = set(left.store_texts), set(right.store_texts)
    return CaseComparison(user_id=user_id, dimension=dimension, mode=mode, base=left, other=right,
                          only_base=[t for t in left.store_texts if t not in other_set],
                          only_other=[t for t in right.store_texts if t not in base_set],
                          shared=len(base_set & other_set))
