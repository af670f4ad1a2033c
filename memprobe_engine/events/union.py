"""The discriminated union of all event kinds and the one function that parses a stored event."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.llm import EmbeddingBatch, LLMCall
from memprobe_engine.events.memory import MemoryFootprint, MemoryOp, MemorySnapshot, Retrieval
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment, TaskVerdict
from memprobe_engine.events.run import ErrorEvent, Metric, RunEnd, RunStart, SpanBegin, SpanEnd
from memprobe_engine.events.scoring import AttributionLabel, AttributionStage, JudgeScore, SlotFill

_EVENT_TYPES = (
    RunStart, RunEnd, SpanBegin, SpanEnd, ErrorEvent, Metric,
    Message,
    LLMCall, EmbeddingBatch,
    MemoryOp, MemorySnapshot, Retrieval, MemoryFootprint,
    EpisodeEnd, PreferenceJudgment, TaskVerdict,
    SlotFill, JudgeScore, AttributionStage, AttributionLabel,
)

Event = Annotated[Union[_EVENT_TYPES], Field(discriminator="kind")]  # type: ignore[valid-type]

EVENT_KINDS: frozenset[str] = frozenset(t.model_fields["kind"].default for t in _EVENT_TYPES)

_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


def parse_event(data: dict[str, Any]) -> Any:
    """Validate one event dict (already upgraded to the current schema) into its model."""
    return _ADAPTER.validate_python(data)
