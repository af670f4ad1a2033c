"""A refused connection fails after one quick retry; other transient failures keep their backoff."""

from __future__ import annotations

import socket
import time

import pytest

from memprobe_engine.errors import LLMError
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.types import ChatMessage, ChatRequest, ChatResult, TransientBackendError
from tests.doubles import ScriptedBackend


def _closed_port() -> int:
    with socket.socket() as probe:  # bound, then closed: nothing listens there now
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_endpoint_fails_in_two_quick_attempts() -> None:
    config = load_llm_config(None, {}, [f"openai:m@http://127.0.0.1:{_closed_port()}/v1"])
    client = ChatClient(config, env={})
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"connection refused.*gave up after 2 attempts"):
        await client.chat("agent", [ChatMessage(role="user", content="hi")])
    await client.aclose()
    assert time.monotonic() - started < 5  # the backoff alone (1+2+4+8 s) would take longer


class _Unavailable(ScriptedBackend):
    async def complete(self, request: ChatRequest) -> ChatResult:
        raise TransientBackendError("HTTP 503", refused=False)


async def test_a_failing_server_still_gets_every_retry_with_backoff() -> None:
    config = load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"])
    client = ChatClient(config, backend_factory=lambda spec: _Unavailable([]), backoff_base_s=0.001, env={})
    with pytest.raises(LLMError, match="gave up after 5 attempts"):
        await client.chat("agent", [ChatMessage(role="user", content="hi")])
