"""Value types shared by the chat client and every backend.

A backend only turns a :class:`ChatRequest` into a :class:`ChatResult`; hashing, caching,
retries, structured-output repair and recording live in the client so that every backend gets
them identically.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict


class ChatMessage(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str


class SamplingParams(BaseModel):
    """Sampling settings that change the output, and therefore take part in the request hash."""

    model_config = ConfigDict(frozen=True)

    temperature: float = 0.0
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None


class ChatRequest(BaseModel):
    """A fully resolved request: backend-level model name, messages, parameters, output format.

    ``response_schema`` is a JSON Schema the backend should enforce (constrained decoding where
    the server supports it). ``replica`` distinguishes deliberate repeats of the same request
    (e.g. several samples) so that the cache does not collapse them.
    """

    model_config = ConfigDict(frozen=True)

    model: str
    messages: tuple[ChatMessage, ...]
    params: SamplingParams = SamplingParams()
    response_schema: dict[str, Any] | None = None
    replica: int = 0


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Of ``prompt_tokens``, how many the server did not evaluate because it still held their KV state
    #: (llama.cpp's and vLLM's prefix cache, OpenAI's ``prompt_tokens_details.cached_tokens``).
    cached_prompt_tokens: int = 0


class ChatResult(BaseModel):
    """What a backend returns for one attempt."""

    text: str
    usage: Usage = Usage()
    model: str | None = None
    finish_reason: str | None = None
    #: Which of a role's several endpoints answered (its index in the spec's URL list); None for a role
    #: with one endpoint. Recorded on the call, never cached.
    endpoint: int | None = None


class TransientBackendError(Exception):
    """A failure worth retrying: HTTP 429/5xx, timeout, dropped connection.

    ``refused`` marks a connection the host refused (nothing listens on that port): retried once,
    quickly, since waiting rarely brings a server up, so a wrong URL fails in about a second rather
    than after the full backoff that timeouts and 5xx answers keep. ``down`` marks a failure that says
    the endpoint itself is failing (unreachable, timed out, a 5xx answer), not that it is busy (429):
    a role with several endpoints takes such an endpoint out of rotation."""

    def __init__(self, message: str, *, retry_after_s: float | None = None, refused: bool = False,
                 down: bool = False) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.refused = refused
        self.down = down or refused


@runtime_checkable
class ChatBackend(Protocol):
    """What every backend implements. ``name`` appears in recordings (e.g. ``openai``, ``local``)."""

    name: str

    async def complete(self, request: ChatRequest) -> ChatResult:
        """One attempt. Raise TransientBackendError to ask for a retry, LLMError for a fatal one."""
        ...

    def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        """Yield the response text in pieces as it is generated (used by the TUI's live re-run)."""
        ...

    async def aclose(self) -> None:
        ...
