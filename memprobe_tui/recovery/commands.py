"""Command palette (Ctrl+P): jump to any unit's transcript or memory store, or any dimension."""

from __future__ import annotations

from functools import partial
from typing import cast

from memprobe_engine.recovery.read.scores import ScorePair, category_map, score_board
from memprobe_engine.replay import ReplaySession, units
from memprobe_tui.navigation import Navigator
from memprobe_tui.palette_match import Candidate, CandidateCommands
from memprobe_tui.recovery.navigation import open_dimension, open_transcript


def _score(pair: ScorePair | None) -> str:
    """A case's current judge score as the palette shows it (``—`` not judged, ``excl`` excluded)."""
    if pair is None or pair.current is None:
        return "—"
    if pair.excluded:
        return "excl"
    score = pair.current.score
    return "—" if score is None else f"{score:.2f}"


class ReplayCommands(CandidateCommands):
    """Every unit's transcript and store, every (user, system, dimension) with its judge scores."""

    def candidates(self, session: ReplaySession) -> list[Candidate]:
        nav = cast(Navigator, self.app)
        found: list[Candidate] = []
        unit_list = units(session)
        for unit in unit_list:
            cell = f"{unit.user_id} × {unit.system}"
            found.append((f"transcript {cell}", partial(open_transcript, self.app, session, unit.user_id, unit.system),
                          f"step through the turns of {cell} ({unit.status})"))
            found.append((f"memory store {cell}", partial(nav.open_memory, session, unit.user_id, unit.system, None),
                          f"the final store of {cell}"))
        systems_of = {u.user_id: [x.system for x in unit_list if x.user_id == u.user_id] for u in unit_list}
        pairs = score_board(session).pairs
        for (user_id, dimension), category in sorted(category_map(session).items()):
            for system in systems_of.get(user_id, []):
                scores = " / ".join(f"{label} {_score(pairs.get((user_id, system, dimension, mode)))}"
                                    for mode, label in (("dump_all", "full"), ("retrieve", "top-k")))
                found.append((f"dimension {user_id} × {system} · {dimension}",
                              partial(open_dimension, self.app, session, user_id, system, dimension),
                              f"{category} · judge {scores}: target, scores, attribution, re-run"))
        return found
