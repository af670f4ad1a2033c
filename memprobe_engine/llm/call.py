"""What one logical chat call is while it runs and when it ends: :class:`LogicalCall` (its book-keeping
across retries and repair rounds), :class:`ChatOutcome` (what the caller gets) and :class:`ChatStream`
(the pieces of a streamed one). :class:`~memprobe_engine.llm.client.ChatClient` makes and fills them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from memprobe_engine.events.llm import RetryNote
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.types import ChatBackend, ChatMessage, ChatRequest, SamplingParams, Usage


@dataclass(frozen=True)
class ChatOutcome:
    """The result of one logical call. ``usage`` counts the call's tokens even when it was served
    from the cache (``cache_hit`` says it cost nothing); ``call_seq`` is the recorded event's seq."""

    text: str
    parsed: Any  # an instance of the ``schema`` model, the checked JSON value for ``json_schema``, or None
    excluded: str | None
    call_seq: int | None
    cache_hit: bool
    usage: Usage
    latency_s: float
    backend: str
    model: str
    request_hash: str
    role: str
    repairs: int = 0
    retries: int = 0


@dataclass
class LogicalCall:
    """Book-keeping of one logical call across retries and repair rounds."""

    role: str
    spec: ModelSpec
    backend: ChatBackend
    semaphore: asyncio.Semaphore
    conversation: list[ChatMessage]
    params: SamplingParams
    schema: dict[str, Any] | None
    parse: Callable[[str], Any] | None
    schema_name: str
    replica: int
    request_hash: str
    started: float = field(default_factory=time.perf_counter)
    retries: list[RetryNote] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    requests: int = 0
    cache_hits: int = 0
    repairs: int = 0
    text: str | None = None
    #: The index, in the role's list of endpoints, of the one that answered the last round sent (None:
    #: one endpoint, or no round was sent).
    endpoint: int | None = None
    finish_reason: str | None = None  # of the last round, as the backend reported it ("length": cut off)

    def request(self) -> ChatRequest:
        return ChatRequest(model=self.spec.model, messages=tuple(self.conversation), params=self.params,
                           response_schema=self.schema, replica=self.replica)

    def add_usage(self, usage: Usage) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_prompt_tokens += usage.cached_prompt_tokens


class ChatStream:
    """Async iterator of text pieces from :meth:`ChatClient.stream`; ``outcome`` is set once the
    stream has been read to the end (parsed/excluded like :meth:`ChatClient.chat`)."""

    def __init__(self) -> None:
        self.outcome: ChatOutcome | None = None
        self._source: AsyncIterator[str] | None = None

    def __aiter__(self) -> "ChatStream":
        return self

    async def __anext__(self) -> str:
        assert self._source is not None
        return await self._source.__anext__()

    async def aclose(self) -> None:
        """Stop early; the call is recorded with an error saying the stream was abandoned."""
        if self._source is not None and hasattr(self._source, "aclose"):
            await self._source.aclose()


__all__ = ["ChatOutcome", "ChatStream", "LogicalCall"]
