"""Model-call events: every chat completion and every embedding batch, with accounting."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from memprobe_engine.events.base import EventBase


class RecordedMessage(BaseModel):
    """A chat message as stored: short content inline, long content by payload hash."""

    role: str
    content: str | None = None
    content_ref: str | None = None


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Prompt tokens the server served from its prefix cache instead of evaluating (0 where the
    #: backend does not say, and in recordings made before this field existed).
    cached_prompt_tokens: int = 0


class RetryNote(BaseModel):
    """One failed attempt that was retried: why, and how long we waited before the next."""

    attempt: int
    error: str
    wait_s: float


class LLMCall(EventBase):
    """One logical chat call, after retries and structured-output repair.

    ``request_hash`` is the canonical key (model, messages, sampling parameters, response format,
    replica) that the cache and the replay backend use. ``excluded`` is set when structured output
    stayed unparseable after repair: the caller must then exclude the item, never score it as zero.
    """

    kind: Literal["llm_call"] = "llm_call"
    role: str
    backend: str
    model: str
    request_hash: str
    messages: list[RecordedMessage]
    params: dict[str, Any] = {}
    response_schema_ref: str | None = None
    response_text: str | None = None
    parsed: object = None
    usage: TokenUsage = TokenUsage()
    latency_s: float = 0.0
    cache_hit: bool = False
    retries: list[RetryNote] = []
    repairs: int = 0
    error: str | None = None
    excluded: str | None = None
    replica: int = 0
    #: Why generation stopped, as the backend said: "stop", "length" (cut off by max_tokens), …;
    #: None where the backend does not say (streamed calls, older recordings).
    finish_reason: str | None = None
    #: For a role with several endpoints (``URL1,URL2,…``): the index in that list of the endpoint
    #: that answered; None for one endpoint, a cache hit, and recordings made before this field.
    endpoint: int | None = None


class EmbeddingBatch(EventBase):
    """One batch of texts embedded; texts are stored once by hash in the payload store."""

    kind: Literal["embedding"] = "embedding"
    backend: str
    model: str
    n_texts: int
    dim: int
    texts_ref: str | None = None
    cache_hits: int = 0
    latency_s: float = 0.0
    error: str | None = None
