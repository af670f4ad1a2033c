"""Answers across Ray workers: a request is asked once in the whole run, whichever worker asks it.

A simulated user's first line of a task, or stage 0 of attribution for a (user, dimension), is the same
request for every memory system; in one process the client's in-flight sharing, the cache and the
stage-0 memo give every unit the first answer without asking again. Across workers the relay actor
(here its plain class, no cluster) does the same: a request answered is served, a request some unit is
asking right now is waited for, and only the first to ask sends it; a resume, which serves the first
answer recorded under a hash, then serves each unit the answer it used."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Sequence
from typing import Any

from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatMessage, ChatRequest, ChatResult
from memprobe_engine.orchestration.ray_executor import _Relay
from memprobe_engine.orchestration.relay import RelayedResponses, RelayShare
from memprobe_engine.orchestration.resume import RecordedResponses
from memprobe_engine.recovery.attribution import Stage0Cache, Stage0Verdict


def test_the_relay_keeps_the_first_answer_claimed_for_a_request() -> None:
    async def go() -> None:
        relay = _Relay({"resumed": {"text": "recorded before the kill"}})
        assert await relay.claim("k", {"text": "unit 1"}) == {"text": "unit 1"}
        assert await relay.claim("k", {"text": "unit 2"}) == {"text": "unit 1"}
        assert await relay.claim("resumed", {"text": "again"}) == {"text": "recorded before the kill"}
        assert (await relay.responses())["k"] == {"text": "unit 1"}
    asyncio.run(go())


def test_a_request_in_flight_is_waited_for_and_a_failed_one_passes_to_the_next() -> None:
    async def go() -> None:
        relay = _Relay({})
        assert await relay.acquire("k", "a1") is None  # a1 sends it
        waiting = asyncio.ensure_future(relay.acquire("k", "b1"))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await relay.claim("k", {"text": "a1's answer"})
        assert await waiting == {"text": "a1's answer"}
        assert await relay.acquire("k", "c1") == {"text": "a1's answer"}
        # a failed call hands the request to the next asker
        assert await relay.acquire("q", "a1") is None
        other = asyncio.ensure_future(relay.acquire("q", "b1"))
        await asyncio.sleep(0.01)
        await relay.release("q")
        assert await other is None  # b1 sends it now
    asyncio.run(go())


def test_a_dead_attempts_requests_go_back_when_its_unit_starts_again() -> None:
    async def go() -> None:
        relay = _Relay({"h": {"text": "held"}, "value:stage0/u/d": {"can_invite": True, "reason": "r"}})
        assert await relay.begin(0, "first") == {"h": {"text": "held"}}  # values are not model answers
        assert await relay.acquire("k", "first") is None
        waiting = asyncio.ensure_future(relay.acquire("k", "unit 1"))
        await asyncio.sleep(0.01)
        await relay.begin(0, "second")  # the first attempt's worker died
        assert await waiting is None  # unit 1 sends it now
    asyncio.run(go())


def test_a_worker_goes_on_from_the_answer_the_driver_holds() -> None:
    async def go() -> None:
        relay = _Relay({})
        await relay.claim("k", ChatResult(text="the other unit's answer").model_dump(mode="json"))
        claimed: list[str] = []

        def claim(key: str, result: dict[str, Any]) -> Any:
            claimed.append(key)
            return relay._held.setdefault(key, result)  # what the actor's claim keeps

        fallback = RecordedResponses({}, None)
        worker = RelayedResponses({}, fallback, claim)
        held = worker.put("k", ChatResult(text="this unit's answer"))
        assert held.text == "the other unit's answer" and claimed == ["k"]
        assert worker.get("k") == held and fallback.get("k") == held
        assert worker.put("fresh", ChatResult(text="new")).text == "new"
        assert (await relay.responses())["fresh"]["text"] == "new"
    asyncio.run(go())


class _Counting:
    """A backend that counts what it is sent and answers after a moment."""

    name = "openai"
    model = "m"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.sent.append(request.messages[-1].content)
        await asyncio.sleep(0.02)
        return ChatResult(text=f"answer to {request.messages[-1].content}")

    def stream(self, request: ChatRequest) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def test_clients_in_two_workers_send_one_request_once() -> None:
    """Two chat clients (two workers) over one relay ask the same request at once and in turn: it is
    sent once; the other client records a cache hit, as the local executor's second unit does."""
    async def go() -> None:
        relay = _Relay({})
        backends = [_Counting(), _Counting()]

        def client(n: int) -> ChatClient:
            async def acquire(key: str) -> Any:
                return await relay.acquire(key, f"attempt{n}")

            def claim(key: str, value: Any) -> Any:
                kept = relay._held.setdefault(key, value)
                relay._settle(key)
                return kept

            store = RelayedResponses({}, None, claim, acquire, lambda key: relay._settle(key))
            return ChatClient(LLMConfig(models={"default": parse_spec("openai:m@http://127.0.0.1:9/v1")}),
                              cache=store, backend_factory=lambda spec: backends[n])

        first, second = client(0), client(1)
        ask: Sequence[ChatMessage] = [ChatMessage(role="user", content="q")]
        a, b = await asyncio.gather(first.chat("default", ask), second.chat("default", ask))
        c = await second.chat("default", [ChatMessage(role="user", content="q")])
        assert len(backends[0].sent) + len(backends[1].sent) == 1
        assert a.text == b.text == c.text == "answer to q"
        assert sorted([a.cache_hit, b.cache_hit]) == [False, True] and c.cache_hit
    asyncio.run(go())


def test_stage0_verdicts_cross_workers_once() -> None:
    async def go() -> None:
        relay = _Relay({})

        def share(attempt: str) -> RelayShare:
            async def acquire(key: str) -> Any:
                return await relay.acquire(key, attempt)

            def claim(key: str, value: Any) -> Any:
                kept = relay._held.setdefault(key, value)
                relay._settle(key)
                return kept
            return RelayShare(acquire, claim, lambda key: relay._settle(key))

        first, second = Stage0Cache(), pickle.loads(pickle.dumps(Stage0Cache()))
        first.shared, second.shared = share("a"), share("b")
        await first.pull("u", "d")  # first asks the oracle
        assert first.get("u", "d") is None
        waiting = asyncio.ensure_future(second.pull("u", "d"))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        first.put("u", "d", Stage0Verdict(can_invite=False, reason="no"))
        first.settle("u", "d")
        await waiting
        assert second.get("u", "d") == Stage0Verdict(can_invite=False, reason="no")
    asyncio.run(go())


def test_a_resume_layer_keeps_the_first_answer_it_holds() -> None:
    layer = RecordedResponses({"k": ChatResult(text="recorded")}, None)
    assert layer.put("k", ChatResult(text="later")).text == "recorded"
    assert layer.put("new", ChatResult(text="first")).text == "first" and layer.get("new") == ChatResult(text="first")
