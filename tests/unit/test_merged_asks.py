"""Which shard sent which request, read from a merged recording's span ids (``events/merged.py``)."""

from __future__ import annotations

from memprobe_engine.events.merged import AskedTwice, input_of_span, span_prefix


def call(span: str, key: str, **extra: object) -> dict[str, object]:
    return {"kind": "llm_call", "span_id": span, "request_hash": key, **extra}


def test_the_prefix_merge_writes_names_the_input() -> None:
    assert [span_prefix(i) for i in (0, 1, 25, 26, 27)] == ["a/", "b/", "z/", "aa/", "ab/"]
    assert input_of_span("ab/s0-12") == "ab/" and input_of_span("s0-12") is None and input_of_span(None) is None


def test_requests_sent_by_several_shards_are_counted_once_each() -> None:
    asked = AskedTwice()
    events: list[dict[str, object]] = [
        call("a/s0-1", "k1"), call("b/s0-4", "k1"), call("c/s0-2", "k1"),  # three shards sent k1
        call("a/s0-2", "k2"), call("a/s0-3", "k2"),                        # one shard, twice: not counted
        call("a/s0-5", "k3"), call("b/s0-5", "k3", cache_hit=True),        # a cache hit sent nothing
        call("a/s0-6", "k4"), call("b/s0-6", "k4", error="refused"),       # nor did a failed call
        {"kind": "judge_score", "span_id": "b/s0-9"}]
    for event in events:
        asked.add(event)
    assert (asked.requests, asked.sent_again) == (1, 2)
    assert asked.line().startswith("1 model request(s) were sent by more than one shard, 2 sends beyond the first")
    assert AskedTwice().line() == ""
