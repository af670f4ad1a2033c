"""Replay queries every protocol shares: what a replay UI asks of a recording, answered lazily (no Textual).

Open a recording with :meth:`ReplaySession.open`, run :meth:`ReplaySession.build_index` once (in a
worker thread: it reports progress and can be stopped), then ask the functions below. Each reads
only the lines its answer needs. :meth:`ReplaySession.follow` picks up events a live run appends.
A protocol's own queries live in its package (``recovery/read``, ``paradigms/read``).
"""

from memprobe_engine.replay.catalog import RecordingEntry, describe_recording, list_recordings
from memprobe_engine.replay.describe import describe, detail_lines, one_line
from memprobe_engine.replay.index import RunIndex, SpanRec, build_run_index, extend_run_index
from memprobe_engine.replay.llm_view import LLMCallView, ResolvedMessage, llm_call_view, llm_calls_in
from memprobe_engine.replay.memory_view import StoreRow, StoreView, item_history, store_view
from memprobe_engine.replay.queries import (
                                            EpisodeInfo,
                                            StepRef,
                                            UnitInfo,
                                            episodes,
                                            find_step,
                                            memory_ops,
                                            retrievals,
                                            step_events,
                                            step_messages,
                                            step_seq_range,
                                            systems,
                                            task_text,
                                            unit_dimensions,
                                            units,
                                            users,
)
from memprobe_engine.replay.session import Damage, ReplaySession, writer_alive

__all__ = [
    "Damage", "EpisodeInfo", "LLMCallView", "RecordingEntry", "ReplaySession", "ResolvedMessage", "RunIndex",
    "SpanRec", "StepRef", "StoreRow", "StoreView", "UnitInfo", "build_run_index", "describe",
    "describe_recording", "detail_lines", "episodes", "extend_run_index", "find_step", "item_history",
    "list_recordings", "llm_call_view", "llm_calls_in", "memory_ops", "one_line", "retrievals", "step_events",
    "step_messages", "step_seq_range", "store_view", "systems", "task_text", "unit_dimensions", "units", "users",
    "writer_alive",
]
