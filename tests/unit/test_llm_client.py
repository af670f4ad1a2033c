"""ChatClient against scripted backends: recording, cache, retries, structured output, streaming."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from memprobe_engine.errors import LLMError
from memprobe_engine.events.payloads import PayloadReader
from memprobe_engine.llm.cache import ResponseCache
from memprobe_engine.llm.client import MAX_REPAIRS, ChatClient
from memprobe_engine.llm.config import LLMConfig, load_llm_config
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.structured import json_schema_problems
from memprobe_engine.llm.types import (
    ChatBackend,
    ChatMessage,
    ChatRequest,
    ChatResult,
    SamplingParams,
    TransientBackendError,
)
from tests.doubles import ScriptedBackend, read_events, temp_recording


class Verdict(BaseModel):
    reason: str
    score: int


def config(*overrides: str) -> LLMConfig:
    return load_llm_config(None, {}, ["openai:test-model@http://127.0.0.1:1/v1", *overrides])


def factory_for(backend: ChatBackend) -> tuple[list[ModelSpec], Callable[[ModelSpec], ChatBackend]]:
    made: list[ModelSpec] = []

    def factory(spec: ModelSpec) -> ChatBackend:
        made.append(spec)
        return backend
    return made, factory


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content="S" * 300), ChatMessage(role="user", content=text)]


async def test_chat_records_one_call_with_long_content_in_payloads(tmp_path: Path) -> None:
    backend = ScriptedBackend(["hello there"])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda spec: backend)
        outcome = await client.chat("agent", user("hi"), params=SamplingParams(max_tokens=20))
    assert outcome.text == "hello there" and outcome.parsed is None and outcome.excluded is None
    assert outcome.usage.prompt_tokens == 10 and outcome.role == "agent" and outcome.backend == "openai"
    (event,) = read_events(tmp_path / "rec")
    assert event["seq"] == outcome.call_seq
    assert event["request_hash"] == outcome.request_hash
    assert event["messages"][1] == {"role": "user", "content": "hi"}
    ref = event["messages"][0]["content_ref"]
    assert PayloadReader(tmp_path / "rec").get(ref) == "S" * 300
    assert event["params"] == {"temperature": 0.0, "max_tokens": 20}
    assert event["response_text"] == "hello there" and event["cache_hit"] is False
    assert event["model"] == "test-model" and event["role"] == "agent"


async def test_cache_hit_skips_the_backend_and_is_recorded(tmp_path: Path) -> None:
    first = ScriptedBackend(["cached answer"])
    client = ChatClient(config(), cache=ResponseCache(tmp_path / "cache"), backend_factory=lambda s: first)
    miss = await client.chat("agent", user("q"))
    second = ScriptedBackend([])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, ResponseCache(tmp_path / "cache"), backend_factory=lambda s: second)
        hit = await client.chat("agent", user("q"))
    assert not miss.cache_hit and hit.cache_hit and hit.text == "cached answer"
    assert second.requests == [] and hit.request_hash == miss.request_hash
    assert hit.usage == miss.usage  # the call's tokens, though it cost nothing this time
    (event,) = read_events(tmp_path / "rec")
    assert event["cache_hit"] is True


async def test_one_backend_per_distinct_spec_and_default_role() -> None:
    backend = ScriptedBackend(lambda request: "ok")
    made, factory = factory_for(backend)
    client = ChatClient(config("critic=openai:other@http://127.0.0.1:1/v1"), backend_factory=factory)
    for role in ("agent", "simulator", "agent", "critic", "critic"):
        await client.chat(role, user(role))
    assert [spec.model for spec in made] == ["test-model", "other"]
    await client.aclose()
    assert backend.closed


async def test_concurrency_is_bounded_by_the_spec() -> None:
    active = 0
    peak = 0

    class Slow(ScriptedBackend):
        async def complete(self, request: ChatRequest) -> ChatResult:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1
            return await super().complete(request)

    backend = Slow(lambda request: "ok")
    cfg = load_llm_config(None, {}, [])  # local:1.5b -> concurrency 1
    cfg = cfg.model_copy(update={"models": {"default": ModelSpec(backend="openai", model="m", concurrency=3)}})
    client = ChatClient(cfg, backend_factory=lambda s: backend)
    await asyncio.gather(*(client.chat("agent", user(str(i))) for i in range(12)))
    assert peak == 3


async def test_transient_errors_are_retried_and_noted(tmp_path: Path) -> None:
    backend = ScriptedBackend([TransientBackendError("HTTP 429", retry_after_s=0.0),
                               TransientBackendError("HTTP 503"), "finally"])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend, backoff_base_s=0.001)
        outcome = await client.chat("agent", user("q"))
    assert outcome.text == "finally" and outcome.retries == 2
    (event,) = read_events(tmp_path / "rec")
    assert [note["error"] for note in event["retries"]] == ["HTTP 429", "HTTP 503"]
    assert event["retries"][0]["wait_s"] == 0.0  # the server's retry-after, honoured
    assert "error" not in event


async def test_retries_run_out_into_an_llm_error_naming_role_and_spec(tmp_path: Path) -> None:
    backend = ScriptedBackend(lambda request: TransientBackendError("HTTP 500 from server"))
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend, backoff_base_s=0.001)
        with pytest.raises(LLMError) as caught:
            await client.chat("slot_filler", user("q"))
    message = str(caught.value)
    assert "'slot_filler'" in message and "openai:test-model@http://127.0.0.1:1/v1" in message
    assert "--model" in message and "gave up after 5 attempts" in message
    assert len(backend.requests) == 5
    (event,) = read_events(tmp_path / "rec")
    assert event["error"] == message and len(event["retries"]) == 4 and "response_text" not in event


async def test_fatal_error_is_recorded_then_raised(tmp_path: Path) -> None:
    backend = ScriptedBackend([LLMError("model 'x' not found")])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend)
        with pytest.raises(LLMError, match="not found"):
            await client.chat("agent", user("q"))
    (event,) = read_events(tmp_path / "rec")
    assert event["error"] == "model 'x' not found"
    assert len(backend.requests) == 1


async def test_structured_output_repaired_once(tmp_path: Path) -> None:
    backend = ScriptedBackend(['{"reason": "fine"}', 'Sure! ```json\n{"reason": "fine", "score": 4}\n```'])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend)
        outcome = await client.chat("preference_judge", user("judge"), schema=Verdict)
    assert outcome.parsed == Verdict(reason="fine", score=4)
    assert outcome.repairs == 1 and outcome.excluded is None
    first, second = backend.requests
    assert first.response_schema is not None and first.response_schema["required"] == ["reason", "score"]
    assert second.messages[:2] == first.messages
    assert second.messages[2] == ChatMessage(role="assistant", content='{"reason": "fine"}')
    assert "score" in second.messages[3].content and second.messages[3].role == "user"
    (event,) = read_events(tmp_path / "rec")
    assert event["repairs"] == 1 and event["parsed"] == {"reason": "fine", "score": 4}
    assert event["request_hash"] == outcome.request_hash and len(event["messages"]) == 4
    assert PayloadReader(tmp_path / "rec").get(event["response_schema_ref"]) == first.response_schema


async def test_structured_output_that_stays_bad_is_excluded_not_zero(tmp_path: Path) -> None:
    backend = ScriptedBackend(lambda request: "I think the score is high.")
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend)
        outcome = await client.chat("recovery_judge", user("judge"), schema=Verdict)
    assert outcome.parsed is None and outcome.excluded is not None
    assert "no JSON object" in outcome.excluded and f"{MAX_REPAIRS} repair" in outcome.excluded
    assert len(backend.requests) == 1 + MAX_REPAIRS
    (event,) = read_events(tmp_path / "rec")
    assert event["excluded"] == outcome.excluded and event.get("parsed") is None
    assert event["repairs"] == MAX_REPAIRS


async def test_prose_before_json_parses_without_repair() -> None:
    backend = ScriptedBackend(['Here you go: {"reason": "a {brace} inside", "score": 2} hope it helps'])
    client = ChatClient(config(), backend_factory=lambda s: backend)
    outcome = await client.chat("critic", user("q"), schema=Verdict)
    assert outcome.parsed == Verdict(reason="a {brace} inside", score=2) and outcome.repairs == 0


async def test_stream_yields_pieces_records_once_and_caches(tmp_path: Path) -> None:
    backend = ScriptedBackend(['{"reason": "streamed", "score": 5}'], piece_size=5)
    cache = ResponseCache(tmp_path / "cache")
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, cache, backend_factory=lambda s: backend)
        stream = client.stream("recovery_judge", user("q"), schema=Verdict)
        pieces = [piece async for piece in stream]
        assert len(pieces) > 3 and "".join(pieces) == '{"reason": "streamed", "score": 5}'
        assert stream.outcome is not None and stream.outcome.parsed == Verdict(reason="streamed", score=5)
        again = client.stream("recovery_judge", user("q"), schema=Verdict)
        assert [piece async for piece in again] == ["".join(pieces)]
        assert again.outcome is not None and again.outcome.cache_hit
    events = read_events(tmp_path / "rec")
    assert [event["cache_hit"] for event in events] == [False, True]
    assert events[0]["response_text"] == "".join(pieces)


async def test_stream_retries_before_the_first_piece_and_records_abandonment(tmp_path: Path) -> None:
    backend = ScriptedBackend([TransientBackendError("HTTP 502"), "a long answer indeed"], piece_size=2)
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend, backoff_base_s=0.001)
        stream = client.stream("agent", user("q"))
        assert await anext(stream) == "a "
        await stream.aclose()
    (event,) = read_events(tmp_path / "rec")
    assert len(event["retries"]) == 1 and "stopped reading" in event["error"]


async def test_backend_bug_is_recorded_and_not_masked(tmp_path: Path) -> None:
    backend = ScriptedBackend([KeyError("oops")])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend)
        with pytest.raises(KeyError):
            await client.chat("agent", user("q"))
    (event,) = read_events(tmp_path / "rec")
    assert event["error"].startswith("KeyError")


RAW_SCHEMA = {"type": "object", "required": ["label", "n"], "additionalProperties": False,
              "properties": {"label": {"enum": ["yes", "no"]}, "n": {"type": "integer", "minimum": 0},
                             "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "maxItems": 2}},
              "$defs": {"Tag": {"type": "string", "minLength": 1}}}


@pytest.mark.parametrize(("value", "problem"), [
    ({"label": "yes", "n": 1, "tags": ["a"]}, None),
    ({"label": "maybe", "n": 1}, "label: must be one of"),
    ({"label": "no"}, "n: field required"),
    ({"label": "no", "n": True}, "n: expected integer"),
    ({"label": "no", "n": -1}, "n: minimum is 0"),
    ({"label": "no", "n": 1, "tags": ["a", "b", "c"]}, "maxItems is 2"),
    ({"label": "no", "n": 1, "tags": [""]}, "tags[0]: minLength is 1"),
    ({"label": "no", "n": 1, "extra": 1}, "extra: unexpected field"),
])
def test_raw_json_schema_checks(value: dict[str, object], problem: str | None) -> None:
    problems = json_schema_problems(value, RAW_SCHEMA)
    assert (not problems) if problem is None else any(problem in p for p in problems), problems


async def test_raw_json_schema_is_sent_as_is_and_repaired(tmp_path: Path) -> None:
    backend = ScriptedBackend(['{"label": "perhaps", "n": 2}', '{"label": "yes", "n": 2}'])
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, backend_factory=lambda s: backend)
        outcome = await client.chat("default", user("q"), json_schema=RAW_SCHEMA)
    assert outcome.parsed == {"label": "yes", "n": 2} and outcome.repairs == 1
    assert backend.requests[0].response_schema == RAW_SCHEMA
    assert "label: must be one of" in backend.requests[1].messages[-1].content
    (event,) = read_events(tmp_path / "rec")
    assert event["parsed"] == {"label": "yes", "n": 2}
    with pytest.raises(TypeError):
        await client.chat("default", user("q"), schema=Verdict, json_schema=RAW_SCHEMA)


class SlowBackend(ScriptedBackend):
    """Answers after a pause, so identical requests overlap in time."""

    async def complete(self, request: ChatRequest) -> ChatResult:
        await asyncio.sleep(0.05)
        return await super().complete(request)


async def test_identical_concurrent_requests_share_one_backend_call(tmp_path: Path) -> None:
    backend = SlowBackend(lambda request: "shared answer")
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, ResponseCache(tmp_path / "cache"), backend_factory=lambda s: backend)
        outcomes = await asyncio.gather(*(client.chat("agent", user("same question")) for _ in range(3)))
    assert len(backend.requests) == 1
    assert [o.text for o in outcomes] == ["shared answer"] * 3
    assert sorted(o.cache_hit for o in outcomes) == [False, True, True]
    assert len(read_events(tmp_path / "rec")) == 3


async def test_without_a_cache_identical_requests_are_all_sent() -> None:
    backend = SlowBackend(lambda request: "fresh")
    client = ChatClient(config(), backend_factory=lambda s: backend)
    await asyncio.gather(*(client.chat("agent", user("same question")) for _ in range(2)))
    assert len(backend.requests) == 2


class ArrivesFirstElsewhere(SlowBackend):
    """Another process (a Ray worker running another unit) stores its answer to the same request in
    the shared cache while this one's is on its way."""

    def __init__(self, cache: ResponseCache, endpoint: str) -> None:
        super().__init__(lambda request: "this process's answer")
        self.cache, self.endpoint = cache, endpoint

    async def complete(self, request: ChatRequest) -> ChatResult:
        from memprobe_engine.llm.hashing import request_hash

        self.cache.put(request_hash(request, backend="openai"), ChatResult(text="the other unit's answer"),
                       self.endpoint)
        return await super().complete(request)


async def test_an_answer_stored_first_by_another_process_is_the_one_the_call_goes_on_from(tmp_path: Path) -> None:
    backend = ArrivesFirstElsewhere(ResponseCache(tmp_path / "cache"), "http://127.0.0.1:1/v1")
    with temp_recording(tmp_path / "rec") as recorder:
        client = ChatClient(config(), recorder, ResponseCache(tmp_path / "cache"), backend_factory=lambda s: backend)
        outcome = await client.chat("agent", user("same question"))
    assert len(backend.requests) == 1 and outcome.text == "the other unit's answer"
    (event,) = read_events(tmp_path / "rec")
    assert event["response_text"] == "the other unit's answer"  # what a resume serves is what was used
