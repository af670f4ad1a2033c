"""The recording proxy, driven by the real ``openai`` client over loopback HTTP.

The engine side uses a scripted chat backend and the bag-of-words embedder double, so these tests
check the proxy's own work: the wire format, attribution of every call to the bound system and
span, caching by request hash, and errors a client can act on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from memprobe_engine.llm.cache import ResponseCache
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.proxy import RecordingProxy
from memprobe_engine.llm.secrets import key_label
from memprobe_engine.llm.types import ChatRequest
from tests.doubles import (
    BagOfWordsEmbedder,
    ScriptedBackend,
    read_events,
    temp_recording,
)


def _client_for(proxy: RecordingProxy, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key=key, max_retries=0)


async def _call(fn: Callable[[], Any]) -> Any:
    return await asyncio.to_thread(fn)


def _chat(backend: ScriptedBackend, recorder: Any, cache: Any = None) -> ChatClient:
    config = load_llm_config(None, {}, ["openai:writer-model@http://127.0.0.1:1/v1"])
    return ChatClient(config, recorder, cache, backend_factory=lambda spec: backend)


async def test_chat_call_is_recorded_in_the_attached_span_with_the_system_name(tmp_path: Path) -> None:
    backend = ScriptedBackend(["the answer"])
    with temp_recording(tmp_path / "rec") as recorder:
        chat = _chat(backend, recorder)
        async with RecordingProxy(chat, BagOfWordsEmbedder()) as proxy:
            token = proxy.register("mem0ai")
            with recorder.span("user 1", "unit", user_id="u1", system="mem0ai") as span_id, proxy.attach(token):
                reply = await _call(lambda: _client_for(proxy, token).chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "system", "content": "be brief"},
                                                   {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                    temperature=0.2, max_tokens=20))
    assert reply.choices[0].message.content == "the answer"
    assert reply.choices[0].finish_reason == "stop"
    [call] = read_events(tmp_path / "rec")
    assert call["system"] == "mem0ai" and call["user_id"] == "u1" and call["span_id"] == span_id
    assert call["role"] == "memory_writer"
    assert call["params"]["temperature"] == 0.2 and call["params"]["max_tokens"] == 20
    assert [m["content"] for m in call["messages"]] == ["be brief", "hi"]


async def test_a_repeated_request_is_served_from_the_cache(tmp_path: Path) -> None:
    backend = ScriptedBackend(["once"])
    cache = ResponseCache(tmp_path / "cache")
    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(backend, recorder, cache)) as proxy:
            token = proxy.register("lib")
            client = _client_for(proxy, token)
            ask = lambda: client.chat.completions.create(model="x", messages=[{"role": "user", "content": "q"}])
            first, second = await _call(ask), await _call(ask)
    assert first.choices[0].message.content == second.choices[0].message.content == "once"
    assert len(backend.requests) == 1
    calls = read_events(tmp_path / "rec")
    assert [c["cache_hit"] for c in calls] == [False, True]
    assert calls[0]["request_hash"] == calls[1]["request_hash"]


async def test_streaming_sends_the_pieces_and_records_one_call(tmp_path: Path) -> None:
    backend = ScriptedBackend(["streamed reply text"], piece_size=5)
    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(backend, recorder)) as proxy:
            token = proxy.register("lib")

            def consume() -> list[str]:
                stream = _client_for(proxy, token).chat.completions.create(
                    model="x", messages=[{"role": "user", "content": "q"}], stream=True,
                    stream_options={"include_usage": True})
                return [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
            pieces = await _call(consume)
    assert "".join(pieces) == "streamed reply text" and len([p for p in pieces if p]) == 4
    [call] = read_events(tmp_path / "rec")
    assert call["response_text"] == "streamed reply text" and call["system"] == "lib"


async def test_tools_become_a_schema_and_the_reply_a_tool_call(tmp_path: Path) -> None:
    seen: list[ChatRequest] = []

    def answer(request: ChatRequest) -> str:
        seen.append(request)
        return '{"tool_calls": [{"name": "add_memory", "arguments": {"text": "User likes tea"}}]}'
    backend = ScriptedBackend(answer)
    tools = [{"type": "function", "function": {
        "name": "add_memory", "description": "Store a memory.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]
    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(backend, recorder)) as proxy:
            token = proxy.register("langmem")
            messages: list[Any] = [{"role": "user", "content": "I like tea"}]
            reply = await _call(lambda: _client_for(proxy, token).chat.completions.create(
                model="x", messages=messages, tools=tools, tool_choice="required"))
            call = reply.choices[0].message.tool_calls[0]
            # The tool result goes back as the next turn, named after the function it answers.
            backend._script = lambda request: (seen.append(request), '{"content": "done"}')[1]
            follow = await _call(lambda: _client_for(proxy, token).chat.completions.create(
                model="x", tools=tools, messages=[*messages, reply.choices[0].message.model_dump(exclude_none=True),
                                                  {"role": "tool", "tool_call_id": call.id, "content": "stored"}]))
    assert reply.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "add_memory" and json.loads(call.function.arguments) == {"text": "User likes tea"}
    schema = seen[0].response_schema
    assert schema is not None and schema["properties"]["tool_calls"]["items"]["properties"]["name"] == {"const": "add_memory"}
    assert "add_memory: Store a memory." in seen[0].messages[0].content
    assert follow.choices[0].message.content == "done"
    assert any(m.content == "Result of add_memory:\nstored" for m in seen[1].messages)
    assert "content" in str(seen[1].response_schema)  # tool_choice auto allows a plain answer


async def test_response_format_json_schema_is_enforced(tmp_path: Path) -> None:
    backend = ScriptedBackend(['{"facts": ["User likes tea"]}'])
    schema = {"type": "object", "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
              "required": ["facts"]}
    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(backend, recorder)) as proxy:
            token = proxy.register("lib")
            reply = await _call(lambda: _client_for(proxy, token).chat.completions.create(
                model="x", messages=[{"role": "user", "content": "q"}],
                response_format={"type": "json_schema", "json_schema": {"name": "Facts", "schema": schema}}))
    assert json.loads(reply.choices[0].message.content) == {"facts": ["User likes tea"]}
    assert backend.requests[0].response_schema == schema
    [call] = read_events(tmp_path / "rec")
    assert call["parsed"] == {"facts": ["User likes tea"]}


async def test_embeddings_float_and_base64_are_recorded(tmp_path: Path) -> None:
    embedder = BagOfWordsEmbedder(dim=16)
    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(ScriptedBackend([]), recorder), embedder) as proxy:
            token = proxy.register("graphiti")
            client = _client_for(proxy, token)
            sdk = await _call(lambda: client.embeddings.create(model="e", input=["tea time", "coffee"]))
            floats = await _call(lambda: client.embeddings.create(model="e", input="tea", encoding_format="float"))
            with pytest.raises(openai.BadRequestError, match="16-dimensional"):
                await _call(lambda: client.embeddings.create(model="e", input="tea", dimensions=1536))
    assert len(sdk.data) == 2 and len(sdk.data[0].embedding) == 16  # the SDK asked for base64 and decoded it
    assert abs(sum(x * x for x in floats.data[0].embedding) - 1.0) < 1e-5
    assert embedder.embedded[:3] == ["tea time", "coffee", "tea"]


async def test_unknown_keys_bad_requests_and_models(tmp_path: Path) -> None:
    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(ScriptedBackend([]), recorder)) as proxy:
            proxy.register("lib")
            with pytest.raises(openai.AuthenticationError, match="unknown API key"):
                await _call(lambda: _client_for(proxy, "sk-wrong").chat.completions.create(
                    model="x", messages=[{"role": "user", "content": "q"}]))
            token = proxy.register("other")
            with pytest.raises(openai.BadRequestError, match="messages"):
                await _call(lambda: _client_for(proxy, token).chat.completions.create(model="x", messages=[]))
            models = await _call(lambda: _client_for(proxy, token).models.list())
    assert {"memory_writer", "default", "agent"} <= {m.id for m in models.data}


async def test_open_keys_name_the_system_and_the_model_field_picks_the_role(tmp_path: Path) -> None:
    backend = ScriptedBackend(lambda request: "ok")
    key = "hf_" + "secretsecretsecret" * 2
    with temp_recording(tmp_path / "rec") as recorder:
        chat = _chat(backend, recorder)
        async with RecordingProxy(chat, open_keys=True, default_role="default", key_salt="run-1") as proxy:
            await _call(lambda: _client_for(proxy, "mp-my-harness").chat.completions.create(
                model="agent", messages=[{"role": "user", "content": "q"}]))
            await _call(lambda: _client_for(proxy, key).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": f"my key is {key}"}]))
            labelled = openai.OpenAI(base_url=proxy.base_url, api_key=key, max_retries=0,
                                     default_headers={"X-MemProbe-Client": "named-by-header"})
            await _call(lambda: labelled.chat.completions.create(model="agent", messages=[{"role": "user", "content": "q"}]))
    first, second, third = read_events(tmp_path / "rec")
    assert (first["system"], first["role"]) == ("my-harness", "agent")
    assert (second["system"], second["role"]) == (key_label(key, "run-1"), "default")  # never the key itself
    assert second["system"].startswith("client-") and len(second["system"]) == len("client-") + 8
    assert second["messages"][0]["content"] == "my key is ***"
    assert third["system"] == "named-by-header"
    assert key not in (tmp_path / "rec" / "events.jsonl").read_text()


async def test_a_recording_made_through_the_proxy_answers_it_again_under_replay(tmp_path: Path) -> None:
    backend = ScriptedBackend(["recorded answer"])
    ask: dict[str, Any] = {"model": "x", "messages": [{"role": "user", "content": "what was it?"}], "temperature": 0.0}
    with temp_recording(tmp_path / "first") as recorder:
        async with RecordingProxy(_chat(backend, recorder)) as proxy:
            token = proxy.register("lib")
            await _call(lambda: _client_for(proxy, token).chat.completions.create(**ask))
    replaying = ChatClient(load_llm_config(None, {}, [f"replay:{tmp_path / 'first'}"]))
    async with RecordingProxy(replaying) as proxy:
        token = proxy.register("lib")
        again = await _call(lambda: _client_for(proxy, token).chat.completions.create(**ask))
        with pytest.raises(openai.APIStatusError, match="not in the recording|no recorded|miss"):
            await _call(lambda: _client_for(proxy, token).chat.completions.create(
                model="x", messages=[{"role": "user", "content": "never asked"}]))
    assert again.choices[0].message.content == "recorded answer" and len(backend.requests) == 1


async def test_proxy_answers_a_bad_temperature_with_400_not_500(tmp_path: Path) -> None:
    """Issue #22 (10): a client's malformed sampling field is its error (400 naming the field), not
    a proxy failure (500)."""
    import httpx

    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(ScriptedBackend([]), recorder)) as proxy:
            token = proxy.register("lib")
            async with httpx.AsyncClient(trust_env=False) as http:
                answers = [await http.post(f"{proxy.base_url}/chat/completions", headers={
                    "Authorization": f"Bearer {token}"}, json={"model": "x", "messages": [
                        {"role": "user", "content": "q"}], **bad}) for bad in
                    ({"temperature": "hot"}, {"temperature": -1}, {"max_tokens": 2.5}, {"n": "two"})]
    assert [a.status_code for a in answers] == [400, 400, 400, 400]
    assert "temperature" in answers[0].json()["error"]["message"]
    assert "temperature" in answers[1].json()["error"]["message"]


async def test_proxy_answers_413_to_a_body_over_64_mb(tmp_path: Path) -> None:
    import httpx

    from memprobe_engine.llm.proxy_http import MAX_BODY_BYTES

    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(ScriptedBackend([]), recorder)) as proxy:
            token = proxy.register("lib")
            async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
                answer = await http.post(f"{proxy.base_url}/chat/completions", content=b"x" * (MAX_BODY_BYTES + 1),
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
    assert answer.status_code == 413 and "64 MB" in answer.json()["error"]["message"]


async def test_proxy_closes_a_connection_idle_past_its_timeout(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.llm import proxy_http

    monkeypatch.setattr(proxy_http, "IDLE_TIMEOUT_S", 0.3)
    with temp_recording(tmp_path / "rec") as recorder:
        async with RecordingProxy(_chat(ScriptedBackend([]), recorder)) as proxy:
            host, port = proxy.base_url.split("//")[1].split("/")[0].split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # and then nothing
            await writer.drain()
            closed = await asyncio.wait_for(reader.read(), 5)  # b"" once the proxy closes the socket
            writer.close()
    assert closed == b""
