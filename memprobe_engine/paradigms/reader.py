"""The unified reader (role ``reader``): evidence + one probe → the probe type's JSON answer.

Every input protocol ends here, so systems differ only in the evidence they hand over: a memory
system's own search results, the whole episode, retrieved or oracle sessions. The answer formats
are the paper's (App. C) per probe type:

- value probes (``current_value``, ``previous_value``): ``{answer, reason}``;
- ``change_detection``: ``{changed, current_value, previous_value, reason}``;
- ``source``: ``{source_description, source_class, accepted, reason}``;
- ``conflict_value``: ``{conflict_value_mentioned, conflict_value, source_class, status_class,
  applies_to_target, current_value, reason}``;
- ``temporal``: ``{changed, old_value, new_value, trigger, reason, timing}``.

The call goes through the engine's ChatClient with a pydantic schema, so it is recorded, cached,
repaired and — when still unusable — excluded: :class:`ReaderResult` then carries ``error`` and no
answer, and the probe is left out of denominators rather than scored wrong.

Prompt layout is stable part first: the system text (identical for every call), then the evidence
(identical for every probe of one episode under full context), then the question and the answer
format. A server with prefix caching (llama.cpp, vLLM) reuses the shared prefix across probes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

import orjson
from pydantic import BaseModel, StringConstraints

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.paradigms import RetrievedItem
from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.memory.base import ScoredItem
from memprobe_engine.paradigms.config import DEFAULT_READER_MAX_TOKENS

if TYPE_CHECKING:
    from memprobe_engine.llm.call import ChatOutcome

READER_ROLE = "reader"
#: Bounded strings keep a small model from rambling inside a field.
Short = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]
Reason = Annotated[str, StringConstraints(strip_whitespace=True, max_length=400)]

SourceClass = Literal["user", "assistant", "third_party", "tool", "stale_tool", "other_entity", "hypothetical",
                      "unknown"]
ConflictSource = Literal["assistant", "third_party", "stale_tool", "other_entity", "hypothetical", "unknown"]
StatusClass = Literal["accepted", "not_accepted", "stale", "hypothetical", "other_entity", "superseded", "unknown"]


class ValueAnswer(BaseModel):
    """current_value / previous_value."""

    answer: Short
    reason: Reason = ""


class ChangeAnswer(BaseModel):
    changed: bool
    current_value: Short | None = None
    previous_value: Short | None = None
    reason: Reason = ""


class SourceAnswer(BaseModel):
    source_description: Short
    source_class: SourceClass
    accepted: bool
    reason: Reason = ""


class ConflictAnswer(BaseModel):
    conflict_value_mentioned: bool
    conflict_value: Short | None = None
    source_class: ConflictSource = "unknown"
    status_class: StatusClass = "unknown"
    applies_to_target: bool
    current_value: Short | None = None
    reason: Reason = ""


class TemporalAnswer(BaseModel):
    changed: bool
    old_value: Short | None = None
    new_value: Short | None = None
    trigger: Short = ""
    reason: Reason = ""
    timing: Short = ""


#: Probe type → answer model.
ANSWER_MODELS: dict[str, type[BaseModel]] = {
    "current_value": ValueAnswer, "previous_value": ValueAnswer, "change_detection": ChangeAnswer,
    "source": SourceAnswer, "conflict_value": ConflictAnswer, "temporal": TemporalAnswer,
}

#: What each probe type asks for, in our words; field names and allowed labels match the schema.
ANSWER_FORMATS: dict[str, str] = {
    "current_value": 'Reply with JSON {"answer": the value that holds NOW, "reason": the evidence}.',
    "previous_value": ('Reply with JSON {"answer": the value that held BEFORE the most recent accepted change '
                       '(the original value), "reason": the evidence}.'),
    "change_detection": ('Reply with JSON {"changed": true if the fact itself really changed, false if it did not '
                         '(a rumour, a mistake or another person\'s value is not a change), "current_value": the '
                         'value now, "previous_value": the value before the change or null, "reason": the '
                         'evidence}.'),
    "source": ('Reply with JSON {"source_description": who or what introduced the latest value and how, '
               '"source_class": one of user, assistant, third_party, tool, stale_tool, other_entity, '
               'hypothetical, unknown, "accepted": true if that value was accepted as the fact\'s value, '
               '"reason": the evidence}.'),
    "conflict_value": ('Reply with JSON {"conflict_value_mentioned": true if a competing value for this fact came '
                       'up, "conflict_value": that competing value or null, "source_class": who introduced it, one '
                       'of assistant, third_party, stale_tool, other_entity, hypothetical, unknown, "status_class": '
                       'what became of it, one of accepted, not_accepted, stale, hypothetical, other_entity, '
                       'superseded, unknown, "applies_to_target": true if it applies to this user\'s own fact, '
                       '"current_value": the value that holds now, "reason": the evidence}.'),
    "temporal": ('Reply with JSON {"changed": true if the value changed, "old_value": the value before, '
                 '"new_value": the value after, "trigger": what caused the change, "timing": when or in what '
                 'context it happened, "reason": the evidence}.'),
}

READER_SYSTEM = (
    "You answer questions about one user's facts from the evidence you are given: memories kept by a memory "
    "system, or records of past conversations between the user and an assistant (tool results included). "
    "Rely only on that evidence. Values change only when the evidence shows a real, accepted change; a value "
    "that was merely suggested, guessed, misremembered, stale or about someone else does not replace the "
    "user's own. Answer with the single JSON object the question asks for and nothing else.")


@dataclass(frozen=True)
class Evidence:
    """What the reader sees for one probe: a heading, the text, and the items it came from."""

    heading: str
    text: str
    retrieved: list[RetrievedItem] = field(default_factory=list)


@dataclass(frozen=True)
class ReaderSettings:
    max_tokens: int = DEFAULT_READER_MAX_TOKENS
    temperature: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class ReaderResult:
    """The reader's answer (the schema's JSON) or an execution error; ``llm_call_seq`` is the call."""

    answer: dict[str, Any] | None
    error: str | None
    llm_call_seq: int | None


class ChatLike(Protocol):
    """The part of ChatClient the reader uses (kept narrow so tests can pass the real client)."""

    async def chat(self, role: str, messages: Sequence[ChatMessage], *, params: SamplingParams | None = ...,
                   schema: type[BaseModel] | None = ...) -> ChatOutcome: ...


def answer_model(probe_type: str) -> type[BaseModel]:
    try:
        return ANSWER_MODELS[probe_type]
    except KeyError:
        raise ConfigError(f"probe type {probe_type!r} has no reader answer format; known types: "
                          f"{', '.join(ANSWER_MODELS)}.") from None


def reader_messages(evidence: Evidence, question: str, probe_type: str) -> list[ChatMessage]:
    """System text, then evidence, then question and answer format (stable part first)."""
    body = (f"{evidence.heading}\n{evidence.text.strip() or '(nothing)'}\n\n"
            f"QUESTION\n{question.strip()}\n\n{ANSWER_FORMATS[probe_type]}")
    return [ChatMessage(role="system", content=READER_SYSTEM), ChatMessage(role="user", content=body)]


async def read_probe(chat: ChatLike, evidence: Evidence, question: str, probe_type: str,
                     settings: ReaderSettings = ReaderSettings()) -> ReaderResult:
    """Ask the reader one probe; an excluded reply becomes an error, never a wrong answer."""
    model = answer_model(probe_type)
    outcome = await chat.chat(READER_ROLE, reader_messages(evidence, question, probe_type),
                              params=SamplingParams(temperature=settings.temperature, max_tokens=settings.max_tokens,
                                                    seed=settings.seed), schema=model)
    if outcome.parsed is None:
        return ReaderResult(answer=None, error=f"reader reply unusable: {outcome.excluded}",
                            llm_call_seq=outcome.call_seq)
    parsed: BaseModel = outcome.parsed
    return ReaderResult(answer=parsed.model_dump(mode="json"), error=None, llm_call_seq=outcome.call_seq)


def item_text(hit: ScoredItem) -> str:
    """A retrieved memory as the reader sees it: its native fields as one JSON line (as protocol A)."""
    return orjson.dumps(hit.item, default=str).decode()


#: The heading of a memory system's search results in the reader's prompt.
MEMORY_HEADING = "MEMORIES (retrieved by the memory system for this question, best first)"


def memory_evidence(hits: Sequence[ScoredItem]) -> Evidence:
    """Evidence from a memory system's own search results, best first."""
    retrieved = [RetrievedItem(id=hit.id, text=item_text(hit), score=hit.score) for hit in hits]
    return Evidence(heading=MEMORY_HEADING,
                    text="\n".join(item.text for item in retrieved), retrieved=retrieved)


__all__ = [
    "ANSWER_FORMATS",
    "ANSWER_MODELS",
    "READER_ROLE",
    "READER_SYSTEM",
    "Evidence",
    "ReaderResult",
    "ReaderSettings",
    "answer_model",
    "memory_evidence",
    "read_probe",
    "reader_messages",
]
