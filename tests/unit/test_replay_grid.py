"""Score grids, category bars, distributions and the baseline-free headline, from the TUI fixture
run (amem, mem0) and a board with a nomem baseline."""

from __future__ import annotations

from pathlib import Path

from memprobe_engine.recovery.read import score_board
from memprobe_engine.recovery.read.grid import (
    category_scores,
    headline_without_baselines,
    score_distribution,
    score_grid,
)
from memprobe_engine.recovery.read.scores import ScoreBoard, ScorePair, UnitScores
from memprobe_engine.protocols import open_session

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "tui" / "run"


def _board() -> ScoreBoard:
    session = open_session(RUN)
    try:
        session.build_index()
        return score_board(session)
    finally:
        session.close()


def test_grid_cells_are_the_mean_current_score_per_dimension_and_system() -> None:
    board = _board()
    grid = score_grid(board)
    assert grid.systems == ["amem", "mem0"]
    for (user, system, dimension, mode), pair in board.pairs.items():
        current = pair.score
        cell = grid.cell(dimension, system)
        assert cell is not None
        assert cell.scores[mode] == (None if current is None else float(current))  # one user: the mean is the score


def test_category_bars_and_distribution_cover_every_judged_score() -> None:
    board = _board()
    judged = [p for k, p in board.pairs.items() if k[3] == "dump_all" and p.score is not None]
    dist = score_distribution(board, "dump_all")
    assert sum(len(v) for v in dist.values()) == len(judged)
    bars = category_scores(board, "dump_all")
    assert set(bars) <= {"amem", "mem0"} and all(0.0 <= v <= 1.0 for per in bars.values() for v in per.values())


def test_headline_leaves_the_nomem_baseline_out_unless_it_is_alone() -> None:
    def unit(system: str, b: float) -> UnitScores:
        return UnitScores(user_id="u", system=system, b={"dump_all": b, "retrieve": b})

    pairs: dict[tuple[str, str, str, str], ScorePair] = {}
    board = ScoreBoard(units={("u", "nomem"): unit("nomem", 0.0), ("u", "amem"): unit("amem", 0.8)},
                       pairs=pairs, categories={})
    means, left_out = headline_without_baselines(board)
    assert means["dump_all"] == 0.8 and left_out
    alone = ScoreBoard(units={("u", "nomem"): unit("nomem", 0.1)}, pairs=pairs, categories={})
    assert headline_without_baselines(alone) == ({"dump_all": 0.1, "retrieve": 0.1}, False)
