"""The finish reason a backend reports is recorded on the call (a reply cut off by max_tokens is
then visible in the replay), and is None where the backend says nothing."""

from __future__ import annotations

from pathlib import Path

from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.types import ChatMessage, ChatResult, SamplingParams, Usage
from tests.doubles import ScriptedBackend, read_events, temp_recording


async def test_finish_reason_of_each_call_is_recorded(tmp_path: Path) -> None:
    backend = ScriptedBackend([ChatResult(text="a long answer that", usage=Usage(completion_tokens=4),
                                          finish_reason="length"),
                               "complete answer"])
    config = load_llm_config(None, {}, ["openai:test-model@http://127.0.0.1:1/v1"])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config, recorder, backend_factory=lambda spec: backend)
        for text in ("first", "second"):
            await client.chat("agent", [ChatMessage(role="user", content=text)], params=SamplingParams(max_tokens=4))
    cut, whole = read_events(tmp_path / "rec")
    assert cut["finish_reason"] == "length"
    assert whole.get("finish_reason") is None  # the scripted backend said nothing
