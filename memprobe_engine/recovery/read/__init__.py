"""Protocol A's read side: replay queries (a dimension's why-chain, the score board, the grid), the
report's frames, tables and terminal form, and run-against-run comparison — everything that reads a
recovery recording, none of it calling a model (the re-score lives in ``recovery/rescore.py``).
"""

from memprobe_engine.recovery.case_material import EvidenceTurn
from memprobe_engine.recovery.read.dimension import DimensionDetail, ModeDetail, Target, dimension_detail, load_target
from memprobe_engine.recovery.read.frames import ReportFrames, load_frames
from memprobe_engine.recovery.read.render import fmt_mean_std, print_tables, render
from memprobe_engine.recovery.read.rescore_hook import RescoreFunction, RescoreRequest, RescoreSink, resolve_rescore
from memprobe_engine.recovery.read.scores import MODES, ScoreBoard, ScorePair, UnitScores, score_board, score_pairs
from memprobe_engine.recovery.read.tables import (
                                                  TABLES,
                                                  build_tables,
                                                  category_means,
                                                  parse_table_names,
                                                  table2,
                                                  table3,
                                                  table4,
                                                  table13,
                                                  table14,
                                                  user_b,
)

__all__ = [
    "MODES", "TABLES", "DimensionDetail", "EvidenceTurn", "ModeDetail", "ReportFrames", "RescoreFunction",
    "RescoreRequest", "RescoreSink", "ScoreBoard", "ScorePair", "Target", "UnitScores", "build_tables",
    "category_means", "dimension_detail", "fmt_mean_std", "load_frames", "load_target", "parse_table_names",
    "print_tables", "render", "resolve_rescore", "score_board", "score_pairs", "table2", "table3", "table4",
    "table13", "table14", "user_b",
]
