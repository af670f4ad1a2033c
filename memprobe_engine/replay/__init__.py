"""Replay queries: what a replay UI asks of a recording, answered lazily (no Textual here).

Open a recording with :meth:`ReplaySession.open`, run :meth:`ReplaySession.build_index` once (in a
worker thread: it reports progress and can be stopped), then ask the functions below. Each reads
only the lines its answer needs. :meth:`ReplaySession.follow` picks up events a live run appends.
"""

from memprobe_engine.recovery.case_material import EvidenceTurn
from memprobe_engine.replay.catalog import RecordingEntry, describe_recording, headline, list_recordings
from memprobe_engine.replay.describe import describe, detail_lines, one_line
from memprobe_engine.replay.dimension import DimensionDetail, ModeDetail, Target, dimension_detail, load_target
from memprobe_engine.replay.index import RunIndex, SpanRec, build_run_index, extend_run_index
from memprobe_engine.replay.llm_view import LLMCallView, ResolvedMessage, llm_call_view, llm_calls_in
from memprobe_engine.replay.memory_view import StoreRow, StoreView, item_history, store_view
from memprobe_engine.replay.queries import (EpisodeInfo, StepRef, UnitInfo, episodes, find_step, memory_ops,
                                            retrievals, step_events, step_messages, step_seq_range, systems,
                                            task_text, unit_dimensions, units, users)
from memprobe_engine.replay.rescore_hook import RescoreFunction, RescoreRequest, RescoreSink, resolve_rescore
from memprobe_engine.replay.scores import MODES, ScoreBoard, ScorePair, UnitScores, score_board, score_pairs
from memprobe_engine.replay.session import Damage, ReplaySession, writer_alive

__all__ = [
    "MODES", "Damage", "DimensionDetail", "EpisodeInfo", "EvidenceTurn", "LLMCallView", "ModeDetail",
    "RecordingEntry", "ReplaySession", "RescoreFunction", "RescoreRequest", "RescoreSink", "ResolvedMessage",
    "RunIndex", "ScoreBoard", "ScorePair", "SpanRec", "StepRef", "StoreRow", "StoreView", "Target", "UnitInfo",
    "UnitScores", "build_run_index", "describe", "describe_recording", "detail_lines", "dimension_detail",
    "episodes", "extend_run_index", "find_step", "headline", "item_history", "list_recordings", "llm_call_view",
    "llm_calls_in", "load_target", "memory_ops", "one_line", "resolve_rescore", "retrievals", "score_board",
    "score_pairs", "step_events", "step_messages", "step_seq_range", "store_view", "systems", "task_text",
    "unit_dimensions", "units", "users", "writer_alive",
]
