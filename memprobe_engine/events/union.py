"""The discriminated union of all event kinds and the one function that parses a stored event."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args

from pydantic import Field, TypeAdapter

from memprobe_engine.events.base import EventBase, pointer_fields
from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.llm import EmbeddingBatch, LLMCall
from memprobe_engine.events.memory import MemoryFootprint, MemoryOp, MemorySnapshot, Retrieval
from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore, SessionIngest
from memprobe_engine.events.realize import RealizeCheck, RealizeExclusion
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment, TaskVerdict
from memprobe_engine.events.run import ErrorEvent, Metric, RunEnd, RunStart, SpanBegin, SpanEnd
from memprobe_engine.events.scoring import AttributionLabel, AttributionStage, JudgeScore, SlotFill

#: Every event model, spelled out for the type checker: ``event.kind == "judge_score"`` narrows an
#: ``AnyEvent`` to ``JudgeScore``. The one list of event kinds: everything below derives from it.
AnyEvent = Union[
    RunStart, RunEnd, SpanBegin, SpanEnd, ErrorEvent, Metric,
    Message,
    LLMCall, EmbeddingBatch,
    MemoryOp, MemorySnapshot, Retrieval, MemoryFootprint,
    EpisodeEnd, PreferenceJudgment, TaskVerdict,
    SlotFill, JudgeScore, AttributionStage, AttributionLabel,
    SessionIngest, ProbeAnswer, ProbeScore,
    RealizeCheck, RealizeExclusion,
]

_EVENT_TYPES: tuple[type[EventBase], ...] = get_args(AnyEvent)

Event = Annotated[AnyEvent, Field(discriminator="kind")]

EVENT_KINDS: frozenset[str] = frozenset(t.model_fields["kind"].default for t in _EVENT_TYPES)
MODEL_OF_KIND: dict[str, type[EventBase]] = {t.model_fields["kind"].default: t for t in _EVENT_TYPES}
#: Per kind, the fields that point at another event (``"seq"``) or span (``"span"``), as declared on
#: the models with :data:`~memprobe_engine.events.base.SeqRef` / ``SpanRef``.
POINTERS_OF_KIND: dict[str, dict[str, Literal["seq", "span"]]] = {
    kind: pointer_fields(model) for kind, model in MODEL_OF_KIND.items()}

_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(Event)


def parse_event(data: dict[str, Any]) -> AnyEvent:
    """Validate one event dict (already upgraded to the current schema) into its model.

    Raises pydantic's ValidationError; the reader turns it into a DamagedEvent naming seq and field.
    """
    return _ADAPTER.validate_python(data)
