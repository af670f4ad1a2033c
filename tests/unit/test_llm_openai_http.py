"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1, through the client.

The server is stdlib ``http.server`` in a thread, answering from a script, so retries, error
mapping, key handling and scrubbing are exercised over real sockets and the real ``openai`` SDK.
Also here: the vLLM launcher against a fake ``vllm`` executable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from memprobe_engine.errors import ConfigError, LLMError
from memprobe_engine.events.recorder import NULL_RECORDER, Recorder
from memprobe_engine.llm.backends import make_backend
from memprobe_engine.llm.backends.openai_compat import OpenAICompatBackend
from memprobe_engine.llm.backends.vllm_server import VLLMBackend
from memprobe_engine.llm.call_progress import reporting_to
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import LLMConfig, load_llm_config
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatMessage
from tests.doubles import read_events, temp_recording

SECRET = "sk-test-SECRET123"
Reply = tuple[int, dict[str, str], bytes]


def completion(text: str) -> Reply:
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "served-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "error", "code": None}}).encode()
    return status, {"Content-Type": "application/json", **(headers or {})}, body


def sse(pieces: list[str]) -> Reply:
    events = [{"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces]
    body = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events) + b"data: [DONE]\n\n"
    return 200, {"Content-Type": "text/event-stream"}, body


class FakeServer:
    """Answers POST /v1/chat/completions from ``script`` (the last entry repeats)."""

    def __init__(self, script: list[Reply | Callable[[dict[str, Any]], Reply]]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 — http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                seen = {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                outer.requests.append(seen)
                entry = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                status, headers, payload = entry(seen) if callable(entry) else entry
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[list[Any]], FakeServer]]:
    servers: list[FakeServer] = []

    def start(script: list[Any]) -> FakeServer:
        servers.append(FakeServer(script))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


def client_for(url: str, *, recorder: Recorder = NULL_RECORDER, env: dict[str, str] | None = None) -> ChatClient:
    """A client on the fake server with tiny backoff, so retry tests take milliseconds."""
    env = env if env is not None else {}
    config = load_llm_config(None, env, [f"openai:test-model@{url}"])
    return ChatClient(config, recorder, backoff_base_s=0.01, backoff_max_s=0.05, env=env)


def ask(text: str = "hello") -> list[ChatMessage]:
    return [ChatMessage(role="user", content=text)]


async def test_429_500_garbage_then_success_is_retried_and_recorded(serve: Any, tmp_path: Path) -> None:
    server = serve([error(429, "slow down", {"Retry-After": "0"}), error(500, "boom"),
                    (200, {"Content-Type": "application/json"}, b"<html>not json{"),
                    (200, {"Content-Type": "text/plain"}, b"garbage"), completion("Hi!")])
    with temp_recording(tmp_path / "rec") as recorder:
        client = client_for(server.url, recorder=recorder)
        outcome = await client.chat("agent", ask())
        await client.aclose()
    assert outcome.text == "Hi!" and outcome.retries == 4
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (7, 3)
    assert len(server.requests) == 5 and server.requests[0]["path"] == "/v1/chat/completions"
    assert server.requests[0]["body"]["model"] == "test-model"
    (event,) = read_events(tmp_path / "rec")
    errors = [note["error"] for note in event["retries"]]
    assert "429" in errors[0] and "500" in errors[1] and "not valid JSON" in errors[2]
    assert "not a chat completion" in errors[3]
    assert event["retries"][0]["wait_s"] == 0.0 and event["response_text"] == "Hi!"


async def test_unreachable_endpoint_fails_fast_naming_the_url() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client = client_for(url)
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        await client.chat("default", ask())
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert f"cannot reach {url}" in message and "'default'" in message
    assert "--model" in message and "MEMPROBE_MODEL" in message and "start the server" in message
    await client.aclose()


async def test_401_names_the_key_variable_and_never_the_key(serve: Any, tmp_path: Path) -> None:
    server = serve([error(401, f"Incorrect API key provided: {SECRET}.")])
    env = {"MY_TEST_KEY": SECRET}
    with temp_recording(tmp_path / "rec") as recorder:
        config = load_llm_config(None, env, [])
        spec = parse_spec(f"openai:test-model@{server.url}").model_copy(update={"api_key_env": "MY_TEST_KEY"})
        config = config.model_copy(update={"models": {"default": spec}})
        client = ChatClient(config, recorder, env=env)
        with pytest.raises(LLMError) as caught:
            await client.chat("agent", ask())
        await client.aclose()
    assert server.requests[0]["auth"] == f"Bearer {SECRET}"
    assert "MY_TEST_KEY" in str(caught.value) and "SECRET123" not in str(caught.value)
    assert "401" in str(caught.value)
    assert len(server.requests) == 1  # a bad key is not retried


async def test_secrets_never_reach_the_recording(serve: Any, tmp_path: Path) -> None:
    echo_auth = lambda seen: error(500, f"upstream failed for {seen['auth']}")  # noqa: E731
    server = serve([echo_auth, completion("fine"), error(400, f"bad request from key {SECRET}"),
                    error(401, f"Incorrect API key provided: {SECRET}")])
    env = {"OPENAI_API_KEY": SECRET}
    texts: list[str] = []
    with temp_recording(tmp_path / "rec") as recorder:
        # A loopback server gets OPENAI_API_KEY only when a spec names it for that server.
        config = load_llm_config(None, env, [f"openai:test-model@{server.url}"])
        spec = config.models["default"].model_copy(update={"api_key_env": "OPENAI_API_KEY"})
        client = ChatClient(config.model_copy(update={"models": {"default": spec}}), recorder,
                            backoff_base_s=0.01, backoff_max_s=0.05, env=env)
        assert (await client.chat("agent", ask())).text == "fine"
        for _ in range(2):
            with pytest.raises(LLMError) as caught:
                await client.chat("agent", ask("again"))
            texts.append(str(caught.value))
        await client.aclose()
    assert all(seen["auth"] == f"Bearer {SECRET}" for seen in server.requests)
    for path in (tmp_path / "rec").iterdir():
        assert b"SECRET123" not in path.read_bytes(), path.name
    assert texts and all("SECRET123" not in text for text in texts)
    events = read_events(tmp_path / "rec")
    assert "***" in events[0]["retries"][0]["error"] and events[1]["error"]


async def test_404_names_the_model_and_how_to_list_models(serve: Any) -> None:
    server = serve([error(404, "The model `test-model` does not exist")])
    client = client_for(server.url)
    with pytest.raises(LLMError) as caught:
        await client.chat("agent", ask())
    assert "'test-model'" in str(caught.value) and f"{server.url}/models" in str(caught.value)
    await client.aclose()


async def test_schema_is_sent_strict_and_stream_reads_sse(serve: Any) -> None:
    class Answer(BaseModel):
        value: int

    server = serve([completion('{"value": 3}'), sse(["Hel", "lo", "!"])])
    client = client_for(server.url)
    outcome = await client.chat("agent", ask(), schema=Answer)
    assert outcome.parsed == Answer(value=3)
    response_format = server.requests[0]["body"]["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["strict"] is True
    assert response_format["json_schema"]["schema"]["additionalProperties"] is False
    stream = client.stream("agent", ask("stream please"))
    assert [piece async for piece in stream] == ["Hel", "lo", "!"]
    assert server.requests[1]["body"]["stream"] is True and stream.outcome is not None
    await client.aclose()


async def test_a_stream_tells_its_progress_before_its_first_piece(serve: Any) -> None:
    """What a live view shows while a slow server evaluates the prompt (issue 36): the client says it
    asks the model, then llama.cpp's ``prompt_progress`` events are passed on, never as text."""
    def progress(processed: int, cache: int = 0) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"content": None}, "finish_reason": None}],
                "prompt_progress": {"total": 1710, "cache": cache, "processed": processed, "time_ms": 0}}

    events = [progress(0), progress(512), progress(1710, cache=256)]
    body = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events)
    status, headers, rest = sse(["Hel", "lo"])
    server = serve([(status, headers, body + rest)])
    client = client_for(server.url)
    told: list[str] = []
    with reporting_to(lambda p: told.append(p.describe())):
        pieces = [piece async for piece in client.stream("agent", ask())]
    assert pieces == ["Hel", "lo"]
    assert told == [f"agent: asking openai:test-model@{server.url}",
                    "agent: evaluating the prompt: 0/1,710 tokens (0 %)",
                    "agent: evaluating the prompt: 512/1,710 tokens (29 %)",
                    "agent: evaluating the prompt: 1,710/1,710 tokens (100 %), 256 from cache"]
    assert "return_progress" not in server.requests[0]["body"]  # only llama.cpp's own backend asks for it
    told.clear()
    assert [piece async for piece in client.stream("agent", ask("nobody listens"))] == ["Hel", "lo"]
    assert told == []
    await client.aclose()


def test_key_resolution() -> None:
    remote = parse_spec("openai:gpt-4o-mini")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_backend(remote, {})
    named = remote.model_copy(update={"api_key_env": "TEAM_KEY"})
    with pytest.raises(ConfigError, match="TEAM_KEY"):
        make_backend(named, {"OPENAI_API_KEY": "sk-other-key-000"})  # never sends another key elsewhere
    backend = make_backend(named, {"TEAM_KEY": "k"})
    assert isinstance(backend, OpenAICompatBackend) and backend.api_key_env == "TEAM_KEY"
    loopback = make_backend(parse_spec("openai:m@http://localhost:8000/v1"), {})
    assert isinstance(loopback, OpenAICompatBackend) and loopback.base_url == "http://localhost:8000/v1"
    named_loopback = parse_spec("openai:m@http://localhost:8000/v1").model_copy(update={"api_key_env": "UNSET_KEY"})
    with pytest.raises(ConfigError, match="UNSET_KEY is not set"):  # named, so no placeholder hides it
        make_backend(named_loopback, {})


FAKE_VLLM = r'''
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
args = sys.argv[1:]
if "--die" in args:
    print("loading weights...", flush=True)
    print("RuntimeError: CUDA out of memory (fake)", flush=True)
    sys.exit(3)
port = int(args[args.index("--port") + 1])
model = args[1]
class H(BaseHTTPRequestHandler):
    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        self._send({"data": [{"id": model}]} if self.path == "/v1/models" else {})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "served " + body["model"]},
                                 "finish_reason": "stop"}]})
    def log_message(self, *a): pass
time.sleep(0.5)
HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def fake_vllm(tmp_path: Path) -> str:
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\n{FAKE_VLLM}")
    script.chmod(0o755)
    return str(script)


async def test_vllm_backend_starts_checks_health_and_serves(tmp_path: Path) -> None:
    spec = parse_spec("vllm:EdwinYue/Mem-T-4B").model_copy(update={"startup_timeout_s": 30.0})
    backend = VLLMBackend(spec, executable=fake_vllm(tmp_path), require_gpu=False)
    client = ChatClient(LLMConfig(models={"default": spec}), backend_factory=lambda s: backend)
    try:
        outcome = await client.chat("reader", ask())
        assert outcome.text == "served EdwinYue/Mem-T-4B" and outcome.backend == "vllm"
    finally:
        await client.aclose()
    assert backend.base_url is not None


async def test_vllm_startup_failures_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_spec("vllm:some/model").model_copy(update={"extra_args": ("--die",), "startup_timeout_s": 30.0})
    dying = VLLMBackend(spec, executable=fake_vllm(tmp_path), require_gpu=False)
    with pytest.raises(LLMError) as caught:
        await dying.start()
    assert "exited with status 3" in str(caught.value) and "CUDA out of memory (fake)" in str(caught.value)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(LLMError, match=r"pip install 'memprobe\[vllm\]'"):
        await VLLMBackend(parse_spec("vllm:some/model")).start()


async def test_loopback_servers_are_reached_past_a_proxy(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy configured for the outside world must not swallow traffic to a server on this machine."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    server = serve([completion("direct")])
    client = client_for(server.url)
    outcome = await client.chat("agent", ask())
    await client.aclose()
    assert outcome.text == "direct" and len(server.requests) == 1


async def test_a_request_longer_than_the_context_is_a_context_overflow_not_retried(serve: Any) -> None:
    """Issue #22 (9): llama.cpp's own answer to a prompt longer than a slot's context becomes
    ContextOverflow, which the slot-filler records as a per-case overflow; it is not retried."""
    from memprobe_engine.errors import ContextOverflow

    body = json.dumps({"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                 "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 15822,
                                 "n_ctx": 8192}}).encode()
    server = serve([(400, {"Content-Type": "application/json"}, body)])
    client = client_for(server.url)
    with pytest.raises(ContextOverflow) as caught:
        await client.chat("slot_filler", ask("x" * 1000))
    await client.aclose()
    assert "longer than the model's context" in str(caught.value) and len(server.requests) == 1


@pytest.fixture
def quick_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The silence watch's clocks shrunk from tens of seconds to fractions, same logic."""
    from memprobe_engine.llm.backends import silence

    monkeypatch.setattr(silence, "SILENCE_CHECK_S", 0.3)
    monkeypatch.setattr(silence, "PROBE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(silence, "HEARTBEAT_S", 0.2)


def test_a_silent_endpoint_is_reported_within_a_minute_by_default() -> None:
    from memprobe_engine.llm.backends import silence

    assert silence.SILENCE_CHECK_S + silence.PROBE_TIMEOUT_S <= 60


async def test_hung_endpoint_that_accepts_and_never_answers_is_reported_as_silent(quick_silence: None) -> None:
    """Issue #22 (8): a loopback server that accepts every connection and never answers ends the call
    in one line naming the URL, without retries, and the line does not advise raising max_retries."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    connections: list[socket.socket] = []

    def accept_forever() -> None:
        with contextlib.suppress(OSError):
            while True:
                connections.append(listener.accept()[0])  # read nothing, answer nothing

    threading.Thread(target=accept_forever, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    client = client_for(url)
    started = time.monotonic()
    try:
        with pytest.raises(LLMError) as caught:
            await client.chat("slot_filler", ask())
    finally:
        await client.aclose()
        listener.close()
        for connection in connections:
            connection.close()
    message = str(caught.value)
    assert time.monotonic() - started < 5
    assert url in message and "sent nothing" in message and "hung" in message
    assert "max_retries" not in message and "\n" not in message
    assert len(connections) == 2, "one request and one probe: a silent endpoint is not retried"


async def test_busy_endpoint_that_answers_probes_is_waited_for_with_a_heartbeat(
        serve: Any, quick_silence: None, caplog: pytest.LogCaptureFixture) -> None:
    def slow(seen: dict[str, Any]) -> Reply:
        time.sleep(1.0)
        return completion("done at last")

    server = serve([slow])
    client = client_for(server.url)
    with caplog.at_level("WARNING", logger="memprobe_engine.llm"):
        outcome = await client.chat("slot_filler", ask())
    await client.aclose()
    assert outcome.text == "done at last" and len(server.requests) == 1
    beats = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
    assert beats and server.url in beats[0] and "busy, not hung" in beats[0]


async def test_calls_waiting_on_one_busy_endpoint_share_one_heartbeat_line(
        serve: Any, quick_silence: None, caplog: pytest.LogCaptureFixture) -> None:
    def slow(seen: dict[str, Any]) -> Reply:
        time.sleep(0.9)
        return completion("done at last")

    server = serve([slow] * 4)
    client = client_for(server.url)
    with caplog.at_level("WARNING", logger="memprobe_engine.llm"):
        outcomes = await asyncio.gather(*(client.chat("slot_filler", ask(f"question {i}")) for i in range(4)))
    await client.aclose()
    assert [o.text for o in outcomes] == ["done at last"] * 4
    beats = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
    # Four calls wait about 0.9 s with a heartbeat every 0.2 s: about four lines, not sixteen.
    assert 1 <= len(beats) <= 6, beats
    assert "4 calls wait" in beats[0] and server.url in beats[0]


async def test_timeouts_on_every_attempt_do_not_advise_more_retries(serve: Any) -> None:
    def slow(seen: dict[str, Any]) -> Reply:
        time.sleep(0.5)
        return completion("late")

    server = serve([slow])
    config = load_llm_config(None, {}, [f"openai:test-model@{server.url}"])
    spec = config.spec_for("default").model_copy(update={"timeout_s": 0.1, "max_retries": 1})
    client = ChatClient(LLMConfig(models={"default": spec}), backoff_base_s=0.01, backoff_max_s=0.02, env={})
    with pytest.raises(LLMError) as caught:
        await client.chat("default", ask())
    await client.aclose()
    assert "did not answer in time" in str(caught.value) and "max_retries" not in str(caught.value)


async def test_a_request_the_http_client_cannot_send_fails_once_without_retries(serve: Any) -> None:
    """A key with a line break in it makes an Authorization header aiohttp refuses to send (a ValueError
    before any byte goes out). It was classified as "a body that is not valid JSON" and retried 5 times;
    the same request can only fail the same way, so it is one attempt and a message that says so."""
    server = serve([completion("never sent")])
    env = {"BROKEN_KEY": "sk-first-half\nSECRET123-second-half"}
    spec = parse_spec(f"openai:test-model@{server.url}").model_copy(update={"api_key_env": "BROKEN_KEY"})
    config = LLMConfig(models={"default": spec})
    client = ChatClient(config, NULL_RECORDER, backoff_base_s=0.01, backoff_max_s=0.05, env=env)
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        await client.chat("agent", ask())
    await client.aclose()
    message = str(caught.value)
    assert "could not be sent" in message and "retrying cannot help" in message, message
    assert "not valid JSON" not in message and "attempts" not in message and "SECRET123" not in message, message
    assert server.requests == [] and time.monotonic() - started < 5


@pytest.mark.parametrize("where", ["spec", "env"])
def test_a_url_with_credentials_is_refused_without_quoting_them(where: str) -> None:
    """``http://user:KEY@host`` as a spec's URL or as OPENAI_BASE_URL: refused, naming api_key_env as the
    fix, and the key is in no message (a spec's origin quotes the flag, so that is redacted too)."""
    url = "http://user:SECRET123@127.0.0.1:9/v1"
    with pytest.raises(ConfigError) as caught:
        if where == "spec":
            load_llm_config(None, {}, [f"default=openai:m@{url}"])
        else:
            OpenAICompatBackend.from_spec(parse_spec("openai:m"), {"OPENAI_BASE_URL": url})
    message = str(caught.value)
    assert "credentials" in message and "api_key_env" in message, message
    assert "SECRET123" not in message and "user:SECRET" not in message, message
