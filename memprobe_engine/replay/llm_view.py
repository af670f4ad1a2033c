"""One recorded LLM call with its request resolved: long messages and the response schema are
stored once by hash in ``payloads.jsonl``, so showing the full request means looking them up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memprobe_engine.events.llm import LLMCall
from memprobe_engine.replay.session import ReplaySession


@dataclass(frozen=True)
class ResolvedMessage:
    """A request message with its text, whether it was inline or came from a payload."""

    role: str
    content: str
    ref: str | None = None  # the payload hash it was stored under, when it was long


@dataclass(frozen=True)
class LLMCallView:
    """Everything the inspector shows about a call; ``missing`` names payloads that could not be read."""

    seq: int
    event: LLMCall
    messages: list[ResolvedMessage]
    schema: object
    missing: list[str]


def llm_call_view(session: ReplaySession, seq: int) -> LLMCallView | None:
    """The call recorded at ``seq`` (None when that seq is not an ``llm_call``)."""
    event = session.event_by_seq(seq)
    if event is None or event.kind != "llm_call":
        return None
    missing: list[str] = []
    messages = []
    for message in event.messages:
        if message.content is not None or message.content_ref is None:
            messages.append(ResolvedMessage(message.role, message.content or ""))
            continue
        try:
            data = session.payload(message.content_ref)
            text = data if isinstance(data, str) else str(data)
        except KeyError:
            missing.append(message.content_ref)
            text = f"[payload {message.content_ref} is missing from payloads.jsonl]"
        messages.append(ResolvedMessage(message.role, text, message.content_ref))
    schema = None
    if event.response_schema_ref:
        try:
            schema = session.payload(event.response_schema_ref)
        except KeyError:
            missing.append(event.response_schema_ref)
    return LLMCallView(seq=seq, event=event, messages=messages, schema=schema, missing=missing)


def llm_calls_in(events: list[Any]) -> list[Any]:
    """The LLM calls among a list of events (a turn's, a mode's)."""
    return [e for e in events if e.kind == "llm_call"]
