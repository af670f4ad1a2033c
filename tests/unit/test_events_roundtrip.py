"""Writer/reader round trip of every event kind, payloads, JSON Patch and schema upgrade."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memprobe_engine.errors import RecordingError
from memprobe_engine.events import EVENT_KINDS
from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.header import new_header
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.jsonpatch import apply_patch, json_copy, make_patch
from memprobe_engine.events.llm import EmbeddingBatch, LLMCall, RecordedMessage, RetryNote, TokenUsage
from memprobe_engine.events.memory import MemoryFootprint, MemoryOp, MemorySnapshot, Retrieval
from memprobe_engine.events.paradigms import IngestedTurn, ProbeAnswer, ProbeScore, RetrievedItem, SessionIngest
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.realize import RealizeCheck, RealizeExclusion
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment, TaskVerdict
from memprobe_engine.events.run import ErrorEvent, Metric, RunEnd, RunStart
from memprobe_engine.events.scoring import AttributionLabel, AttributionStage, JudgeScore, SlotFill
from memprobe_engine.events.writer import open_writer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def one_of_each(recorder: Recorder) -> list[object]:
    ref = recorder.put_payload({"system": "You are a helpful assistant. " * 20})
    return [
        RunStart(run_id="r1", suite="recovery"),
        Message(role="user", content="Help me plan a garden.", task_index=0, turn=1),
        LLMCall(role="agent", backend="local", model="qwen", request_hash="sha256:00",
                messages=[RecordedMessage(role="system", content_ref=ref), RecordedMessage(role="user", content="hi")],
                params={"temperature": 0.0}, response_text="{}", parsed={"a": 1},
                usage=TokenUsage(prompt_tokens=10, completion_tokens=2), latency_s=0.5,
                retries=[RetryNote(attempt=1, error="429", wait_s=0.1)]),
        EmbeddingBatch(backend="st", model="minilm", n_texts=3, dim=384),
        MemoryOp(op="add", item_ids=["m1"], patch=[{"op": "add", "path": "/items/m1", "value": {"c": "x"}}]),
        MemorySnapshot(snapshot_ref=ref or "", n_items=1),
        Retrieval(query="q", k=5, item_ids=["m1"], scores=[0.5]),
        MemoryFootprint(n_items=1, total_chars=10, mean_chars=10.0),
        EpisodeEnd(task_index=0, end_reason="satisfied", turns=2),
        PreferenceJudgment(task_index=0, turn=1, scores={"verbosity_preference": 4.0, "tone": None}, mean=4.0),
        TaskVerdict(attempt=0, task="Help me plan", verdict="neutral"),
        SlotFill(mode="dump_all", label="prefers short answers", reason="item m1"),
        JudgeScore(mode="retrieve", score=0.75, reason="close"),
        AttributionStage(mode="dump_all", stage=0, verdict="can_invite", reason="fits"),
        AttributionLabel(mode="dump_all", label="memory_failure", score=0.25),
        SessionIngest(episode_id="E1", session_idx=0, phase="encoding", session_type="encoding",
                      turns=[IngestedTurn(role="tool_output", content="port=8080")], clock="2026-01-01T09:00:00"),
        ProbeAnswer(episode_id="E1", input_protocol="memory", probe_index=0, probe_type="current_value",
                    question="q?", retrieved=[RetrievedItem(id="m1", text="x", score=0.3)], answer={"answer": "8080"}),
        ProbeScore(episode_id="E1", probe_index=0, probe_type="current_value", score=0.5,
                   subscores={"value": 1.0}, reason="contains gold", scorer_version="b1"),
        RealizeCheck(episode_id="E1", session_idx=3, session_type="filler_decoy_nonupdate", attempt=1,
                     role="realizer", call_seq=7, problems=['"X" must appear word for word'], outcome="retry"),
        RealizeExclusion(episode_id="E1", scope="session", session_idx=3, session_type="filler_decoy_nonupdate",
                         reason="rules still failed after 3 attempts"),
        Metric(name="B", value=0.6, scope={"mode": "dump_all"}),
        ErrorEvent(where="agent", error_type="LLMError", message="boom"),
        RunEnd(status="completed"),
    ]


def test_every_kind_round_trips(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r1", "recovery", {"k": 5}))
    recorder = Recorder(writer)
    written = []
    with recorder.span("run", "run"):
        with recorder.span("user", "user", user_id="u1", system="nomem"):
            for event in one_of_each(recorder):
                written.append(recorder.emit(event))  # type: ignore[arg-type]
    writer.close()

    kinds = {e.kind for e in written} | {"span_begin", "span_end"}  # type: ignore[attr-defined]
    assert kinds == EVENT_KINDS, "the round trip must cover every event kind"
    reader = open_recording(tmp_path / "rec")
    assert reader.header.config == {"k": 5}
    assert len(reader) == len(written) + 4
    by_seq = {e.seq: e for e in reader.iter_events()}
    for event in written:
        assert by_seq[event.seq] == event  # type: ignore[attr-defined]
    user_events = [e for e in reader.iter_events() if e.kind == "message"]
    assert user_events[0].user_id == "u1" and user_events[0].system == "nomem"
    spans = [e for e in reader.iter_events(kinds=["span_begin"])]
    assert spans[1].parent_span_id == spans[0].span_id
    llm = next(reader.iter_events(kinds=["llm_call"]))
    assert reader.payload(llm.messages[0].content_ref)["system"].startswith("You are")
    assert reader.damage.clean


def test_payloads_are_stored_once(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r1", "t", {}))
    refs = {writer.put_payload({"big": "x" * 1000}) for _ in range(10)}
    writer.close()
    assert len(refs) == 1
    assert (tmp_path / "rec" / "payloads.jsonl").read_bytes().count(b"\n") == 1


def test_truncated_tail_is_reported_and_skipped(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r1", "t", {}))
    for i in range(10):
        writer.write(Message(role="user", content=f"m{i}"))
    writer.close()
    with open(tmp_path / "rec" / "events.jsonl", "ab") as handle:
        handle.write(b'{"seq":10,"kind":"mess')
    reader = open_recording(tmp_path / "rec")
    assert len(reader) == 10
    assert reader.damage.tail_bytes == len(b'{"seq":10,"kind":"mess')
    assert [e.content for e in reader.iter_events()] == [f"m{i}" for i in range(10)]


def test_resume_moves_torn_tail_aside_and_continues_seq(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r1", "t", {}))
    for i in range(3):
        writer.write(Message(role="user", content=f"m{i}"))
    writer.close()
    with open(tmp_path / "rec" / "events.jsonl", "ab") as handle:
        handle.write(b'{"seq":3,"ki')
    writer = open_writer(tmp_path / "rec")
    assert writer.next_seq == 3
    writer.write(Message(role="user", content="after"))
    writer.close()
    assert (tmp_path / "rec" / "events.damaged-0").read_bytes() == b'{"seq":3,"ki'
    reader = open_recording(tmp_path / "rec")
    assert [e.seq for e in reader.iter_events()] == [0, 1, 2, 3] and reader.damage.clean


def test_second_writer_is_refused(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r1", "t", {}))
    with pytest.raises(RecordingError, match="One writer per recording"):
        open_writer(tmp_path / "rec")
    writer.close()
    open_writer(tmp_path / "rec").close()  # free again once the first writer closed


def test_damaged_middle_line_is_reported_not_fatal(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r1", "t", {}))
    for i in range(3):
        writer.write(Message(role="user", content=f"m{i}"))
    writer.close()
    path = tmp_path / "rec" / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"seq":1,"kind":"no_such_kind"}\n'
    path.write_bytes(b"".join(lines))
    reader = open_recording(tmp_path / "rec")
    assert [e.seq for e in reader.iter_events()] == [0, 2]
    damage = check_recording(reader)
    assert list(damage.bad_lines) == [1]


def test_upgrade_of_schema_v0_fixture() -> None:
    reader = open_recording(FIXTURES / "recording-v0")
    assert reader.header.schema_version == 0
    events = list(reader.iter_events())
    assert [e.kind for e in events] == ["run_start", "span_begin", "message", "llm_call", "span_end", "run_end"]
    call = events[3]
    assert call.usage.prompt_tokens == 12 and call.usage.completion_tokens == 3
    assert events[2].span_id == "s1" and events[2].time == 1700000002.0
    assert reader.damage.clean


def test_not_a_recording_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "foo.txt").write_text("hello")
    with pytest.raises(RecordingError, match="foo.txt is a file, not a recording"):
        open_recording(tmp_path / "foo.txt")
    with pytest.raises(RecordingError, match="header.json is missing"):
        open_recording(tmp_path)
    (tmp_path / "header.json").write_text('{"format": "something-else"}')
    with pytest.raises(RecordingError, match="not a MemProbe recording header"):
        open_recording(tmp_path)


def test_json_patch_round_trip() -> None:
    before = {"items": {"a": {"content": "x", "tags": ["t1"]}, "b/c": {"content": "y"}}}
    after = {"items": {"a": {"content": "x2", "tags": ["t1", "t2"]}, "d": {"content": "z"}}}
    patch = make_patch(before, after)
    assert apply_patch(before, patch) == after
    assert {op["op"] for op in patch} == {"remove", "replace", "add"}
    assert any(op["path"] == "/items/b~1c" for op in patch)
    assert make_patch(after, after) == []


def test_json_copy_is_a_deep_copy() -> None:
    item = {"id": "m1", "tags": ["a", {"b": [1, 2.5, None, True]}], "meta": {"when": (1, 2)}}
    copied = json_copy(item)
    assert copied == item and copied is not item
    assert copied["tags"] is not item["tags"] and copied["tags"][1]["b"] is not item["tags"][1]["b"]
    copied["tags"][1]["b"].append(3)
    assert item["tags"][1]["b"] == [1, 2.5, None, True]  # the original is untouched
    assert copied["meta"]["when"] == (1, 2)  # anything else is deepcopy's


def test_event_lines_are_orjson_with_kind(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "rec", new_header("r1", "t", {}))
    writer.write(Message(role="user", content="é ☃"))
    writer.close()
    data = orjson.loads((tmp_path / "rec" / "events.jsonl").read_bytes())
    assert data["kind"] == "message" and data["content"] == "é ☃" and data["seq"] == 0


def test_events_with_null_fields_read_back(tmp_path: Path) -> None:
    """Nulls are omitted on disk, so every optional field must have a default to read back."""
    from memprobe_engine.events.union import _EVENT_TYPES

    writer = open_writer(tmp_path / "rec", new_header("r1", "t", {}))
    written = []
    for event_type in _EVENT_TYPES:
        required = {name: field for name, field in event_type.model_fields.items() if field.is_required()}
        values = {name: _minimal(field.annotation) for name, field in required.items()}
        if event_type.model_fields["kind"].default in ("span_begin", "span_end"):
            values["span_id"] = "s1"  # a span event without an id is span-tree damage
        written.append(writer.write(event_type(**values)))
    writer.close()
    reader = open_recording(tmp_path / "rec")
    assert [e.kind for e in reader.iter_events()] == [e.kind for e in written]
    assert check_recording(reader).clean


def _minimal(annotation: object) -> object:
    """The simplest valid value for a required field: None wherever the type admits it."""
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if type(None) in args:
        return None
    if origin is typing.Literal:
        return args[0]
    if origin is list:
        return []
    if origin is dict:
        return {}
    return {bool: True, int: 1, float: 1.0, str: "x"}[annotation]  # type: ignore[index]
