"""Score grids computed from a :class:`ScoreBoard`: dimension × system (the overview's grid view),
per-category B (the bar plots) and the distribution of judge scores (the histograms).

The current score of a judged cell is the one the outcomes fold (``recovery/outcomes.py``) decides —
the same rule the overview's B and the report use. Baseline systems (``nomem``: the no-memory lower bound) are
kept in grids and plots, where they are a reference, and left out of a recording's headline.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean

from memprobe_engine.recovery.read.scores import MODES, ScoreBoard

#: Systems that are reference points, not memory systems under test.
BASELINES: frozenset[str] = frozenset({"nomem"})


@dataclass(frozen=True)
class GridCell:
    """Mean current judge score over users per access mode (None: nothing judged), and how many."""

    scores: dict[str, float | None]
    counts: dict[str, int]


@dataclass(frozen=True)
class ScoreGrid:
    """Rows = dimensions (with their category), columns = systems."""

    dimensions: list[tuple[str, str]]  # (category, dimension), sorted
    systems: list[str]
    cells: dict[tuple[str, str], GridCell]  # (dimension, system) -> cell

    def cell(self, dimension: str, system: str) -> GridCell | None:
        return self.cells.get((dimension, system))


def current_scores(board: ScoreBoard) -> dict[tuple[str, str, str, str], float]:
    """(user, system, dimension, mode) -> current judge score, excluded cases left out."""
    out: dict[tuple[str, str, str, str], float] = {}
    for key, pair in board.pairs.items():
        if pair.score is not None:  # the outcomes fold's current score of a case that counts
            out[key] = float(pair.score)
    return out


def score_grid(board: ScoreBoard) -> ScoreGrid:
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    dims: dict[str, str] = {}
    systems: set[str] = {s for _, s in board.units}
    for (user, system, dimension, mode), score in current_scores(board).items():
        values[(dimension, system, mode)].append(score)
        dims[dimension] = board.categories.get((user, dimension), dims.get(dimension, "?"))
        systems.add(system)
    cells: dict[tuple[str, str], GridCell] = {}
    for dimension in dims:
        for system in systems:
            got = {mode: values.get((dimension, system, mode), []) for mode in MODES}
            if any(got.values()):
                cells[(dimension, system)] = GridCell({m: fmean(v) if v else None for m, v in got.items()},
                                                      {m: len(v) for m, v in got.items()})
    return ScoreGrid(sorted((c, d) for d, c in dims.items()), sorted(systems), cells)


def category_scores(board: ScoreBoard, mode: str) -> dict[str, dict[str, float]]:
    """system -> category -> mean current score under ``mode`` (users pooled): the bar plot."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (user, system, dimension, m), score in current_scores(board).items():
        if m == mode:
            values[(system, board.categories.get((user, dimension), "?"))].append(score)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (system, category), scores in sorted(values.items()):
        out[system][category] = fmean(scores)
    return dict(out)


def score_distribution(board: ScoreBoard, mode: str) -> dict[str, list[float]]:
    """system -> every current judge score under ``mode``: the histogram."""
    out: dict[str, list[float]] = defaultdict(list)
    for (_, system, _, m), score in sorted(current_scores(board).items()):
        if m == mode:
            out[system].append(score)
    return dict(out)


def headline_without_baselines(board: ScoreBoard) -> tuple[dict[str, float | None], bool]:
    """(B per mode over the systems under test, whether baselines were left out). A recording of
    baselines only keeps them (there is nothing else to headline)."""
    systems = sorted({s for _, s in board.units})
    tested = [s for s in systems if s not in BASELINES] or systems
    means = {mode: _mean([board.system_means(s).b.get(mode) for s in tested]) for mode in MODES}
    return means, len(tested) < len(systems)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None
