"""Answers across Ray workers: two units that ask one request word for word go on from one answer.

A simulated user's first line of a task is the same request for every memory system; in one process
the client's in-flight sharing and the cache give every unit the first answer. Across workers the
relay actor (here its plain class, no cluster) keeps the first answer claimed, and a resume, which
serves the first answer recorded under a hash, then serves each unit the answer it used."""

from __future__ import annotations

from typing import Any

from memprobe_engine.llm.types import ChatResult
from memprobe_engine.orchestration.ray_executor import _Relay
from memprobe_engine.orchestration.relay import RelayedResponses
from memprobe_engine.orchestration.resume import RecordedResponses


def test_the_relay_keeps_the_first_answer_claimed_for_a_request() -> None:
    relay = _Relay({"resumed": {"text": "recorded before the kill"}})
    assert relay.claim("k", {"text": "unit 1"}) == {"text": "unit 1"}
    assert relay.claim("k", {"text": "unit 2"}) == {"text": "unit 1"}
    assert relay.claim("resumed", {"text": "again"}) == {"text": "recorded before the kill"}
    assert relay.responses()["k"] == {"text": "unit 1"}


def test_a_worker_goes_on_from_the_answer_the_driver_holds() -> None:
    relay = _Relay({})
    relay.claim("k", ChatResult(text="the other unit's answer").model_dump(mode="json"))
    claimed: list[str] = []

    def claim(key: str, result: dict[str, Any]) -> dict[str, Any]:
        claimed.append(key)
        return relay.claim(key, result)

    fallback = RecordedResponses({}, None)
    worker = RelayedResponses({}, fallback, claim)
    held = worker.put("k", ChatResult(text="this unit's answer"))
    assert held.text == "the other unit's answer" and claimed == ["k"]
    assert worker.get("k") == held and fallback.get("k") == held
    assert worker.put("fresh", ChatResult(text="new")).text == "new"
    assert relay.responses()["fresh"]["text"] == "new"


def test_a_resume_layer_keeps_the_first_answer_it_holds() -> None:
    layer = RecordedResponses({"k": ChatResult(text="recorded")}, None)
    assert layer.put("k", ChatResult(text="later")).text == "recorded"
    assert layer.put("new", ChatResult(text="first")).text == "first" and layer.get("new") == ChatResult(text="first")
