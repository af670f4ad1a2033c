"""Replay: a recorded run answers the same requests again, by request hash, or fails loudly."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from memprobe_engine.errors import ConfigError, ReplayMiss
from memprobe_engine.events.recorder import NULL_RECORDER, Recorder
from memprobe_engine.llm.backends import make_backend
from memprobe_engine.llm.backends.openai_compat import OpenAICompatBackend
from memprobe_engine.llm.backends.replay import ReplayBackend
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatMessage, ChatRequest, SamplingParams
from tests.doubles import ScriptedBackend, read_events, temp_recording

LIVE = "openai:test-model@http://127.0.0.1:1/v1"
LONG_PROMPT = "You are a careful judge. " * 20


class Verdict(BaseModel):
    reason: str
    score: int


def ask(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content=LONG_PROMPT), ChatMessage(role="user", content=text)]


def answer(request: ChatRequest) -> str:
    last = request.messages[-1].content
    if last.startswith("Your previous reply"):
        # Repair rounds: the 'fixable' conversation is fixed on the first repair, 'hopeless' never is.
        return '{"reason": "fixed", "score": 3}' if "fixable" in request.messages[1].content else "still prose"
    if "fixable" in last:
        return '{"reason": "no score"}'
    if "hopeless" in last:
        return "prose only"
    return f"live answer to {last} (temperature {request.params.temperature})"


async def record_run(directory: Path) -> None:
    backend = ScriptedBackend(answer)
    with temp_recording(directory) as recorder:
        client = ChatClient(load_llm_config(None, {}, [LIVE, "critic=local:fast"]), recorder,
                            backend_factory=lambda spec: backend)
        await client.chat("agent", ask("plain question"))
        await client.chat("agent", ask("plain question"), params=SamplingParams(temperature=0.7), replica=1)
        await client.chat("preference_judge", ask("fixable"), schema=Verdict)
        await client.chat("preference_judge", ask("hopeless"), schema=Verdict)
        await client.chat("critic", ask("critique"))


def replay_client(spec: str, recorder: Recorder = NULL_RECORDER) -> ChatClient:
    return ChatClient(load_llm_config(None, {}, [spec]), recorder)


async def test_replay_reproduces_the_recorded_run(tmp_path: Path) -> None:
    await record_run(tmp_path / "run")
    client = replay_client(f"replay:{tmp_path / 'run'}")
    plain = await client.chat("agent", ask("plain question"))
    assert plain.text == "live answer to plain question (temperature 0.0)" and plain.backend == "replay"
    sampled = await client.chat("agent", ask("plain question"), params=SamplingParams(temperature=0.7), replica=1)
    assert sampled.text.endswith("(temperature 0.7)")
    fixed = await client.chat("preference_judge", ask("fixable"), schema=Verdict)
    assert fixed.parsed == Verdict(reason="fixed", score=3) and fixed.repairs == 1
    hopeless = await client.chat("preference_judge", ask("hopeless"), schema=Verdict)
    assert hopeless.parsed is None and hopeless.excluded is not None and hopeless.repairs == 2
    assert (await client.chat("critic", ask("critique"))).text == "live answer to critique (temperature 0.0)"
    await client.aclose()


async def test_a_replayed_run_can_itself_be_replayed(tmp_path: Path) -> None:
    await record_run(tmp_path / "run")
    with temp_recording(tmp_path / "second") as recorder:
        client = replay_client(f"replay:{tmp_path / 'run'}", recorder)
        await client.chat("preference_judge", ask("fixable"), schema=Verdict)
    (event,) = read_events(tmp_path / "second")
    assert event["backend"] == "replay" and event["repairs"] == 1
    again = replay_client(f"replay:{tmp_path / 'second'}")
    outcome = await again.chat("preference_judge", ask("fixable"), schema=Verdict)
    assert outcome.parsed == Verdict(reason="fixed", score=3)


async def test_miss_names_role_model_message_and_recording(tmp_path: Path) -> None:
    await record_run(tmp_path / "run")
    client = replay_client(f"replay:{tmp_path / 'run'}")
    question = "a question the recorded run never asked, long enough to be cut at eighty characters for the message"
    with pytest.raises(ReplayMiss) as caught:
        await client.chat("agent", ask(question))
    message = str(caught.value)
    assert "'agent'" in message and "openai:test-model" in message and str(tmp_path / "run") in message
    assert question[:80] in message and question[:81] not in message
    assert "replay:" in message and "|local:fast" in message


async def test_fallback_answers_misses(tmp_path: Path) -> None:
    await record_run(tmp_path / "run")
    fallback = ScriptedBackend(lambda request: "from the fallback")
    replay = ReplayBackend(tmp_path / "run", fallback=fallback)
    client = ChatClient(load_llm_config(None, {}, [f"replay:{tmp_path / 'run'}"]), backend_factory=lambda s: replay)
    assert (await client.chat("agent", ask("plain question"))).text.startswith("live answer")
    assert (await client.chat("agent", ask("new question"))).text == "from the fallback"
    stream = client.stream("agent", ask("another new one"))
    assert "".join([piece async for piece in stream]) == "from the fallback"
    assert (replay.hits, replay.misses) == (1, 2) and len(fallback.requests) == 2
    await client.aclose()
    assert fallback.closed


async def test_make_backend_builds_replay_with_a_live_fallback(tmp_path: Path) -> None:
    await record_run(tmp_path / "run")
    backend = make_backend(parse_spec(f"replay:{tmp_path / 'run'}|openai:m@http://127.0.0.1:1/v1"), {})
    assert isinstance(backend, ReplayBackend) and isinstance(backend.fallback, OpenAICompatBackend)
    assert len(backend) >= 5
    await backend.aclose()


async def test_torn_last_line_is_skipped_and_missing_recording_is_clear(tmp_path: Path) -> None:
    await record_run(tmp_path / "run")
    with open(tmp_path / "run" / "events.jsonl", "ab") as handle:
        handle.write(b'{"kind":"llm_call","request_hash":"abc","response_te')
    assert len(ReplayBackend(tmp_path / "run")) >= 5
    with pytest.raises(ConfigError, match="nowhere"):
        ReplayBackend(tmp_path / "nowhere")
