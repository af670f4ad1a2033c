"""Integrity of the recording format: seals, parsed-kind filters, payload hashes and torn payload
tails, span-tree rules, header versions."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.checksum import seal, unseal
from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.header import new_header
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.memory import MemoryOp
from memprobe_engine.events.payloads import PayloadError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.scoring import JudgeScore
from memprobe_engine.events.spans import SpanTree
from memprobe_engine.events.writer import open_writer


def test_seal_round_trip_and_a_flip_is_caught() -> None:
    body = orjson.dumps({"seq": 1, "kind": "message", "content": "abc"})
    line = seal(body) + b"\n"
    assert unseal(line) == (body, True)
    flipped = line.replace(b"abc", b"abd")
    assert orjson.loads(unseal(flipped)[0])["content"] == "abd" and unseal(flipped)[1] is False
    assert unseal(body + b"\n") == (body, None)  # an unsealed (schema 1) line


def test_kind_filter_checks_the_parsed_kind(tmp_path: Path) -> None:
    with open_writer(tmp_path / "rec", new_header("r", "t", {})) as writer:
        writer.write(MemoryOp(op="add", item_ids=["m"], patch=[{"op": "add", "path": "/items/m",
                                                               "value": {"kind": "judge_score", "score": 1}}]))
        writer.write(JudgeScore(mode="dump_all", score=0.5))
    with open_recording(tmp_path / "rec") as reader:
        assert [e.kind for e in reader.iter_events(kinds=["judge_score"])] == ["judge_score"]
        assert [type(e).__name__ for e in reader.iter_of(JudgeScore)] == ["JudgeScore"]
        assert [line for line, _ in reader.iter_dicts(["judge_score"])] == [1]


def test_payloads_are_checked_and_a_torn_tail_is_moved_aside(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    with open_writer(record, new_header("r", "t", {})) as writer:
        ref = writer.put_payload({"prompt": "x" * 500})
        writer.write(Message(role="user", content="hi"))
    with open(record / "payloads.jsonl", "ab") as handle:
        handle.write(b'{"hash":"sha256:abc","data":{"tor')  # a crash mid-write
    with open_writer(record) as writer:
        second = writer.put_payload({"prompt": "y"})
    assert (record / "payloads.damaged-0").read_bytes().startswith(b'{"hash":"sha256:abc"')
    with open_recording(record) as reader:
        assert reader.payload(ref) == {"prompt": "x" * 500} and reader.payload(second) == {"prompt": "y"}
        assert check_recording(reader).clean
    blob = (record / "payloads.jsonl").read_bytes().replace(b"xxxx", b"xxxy", 1)
    (record / "payloads.jsonl").write_bytes(blob)
    with open_recording(record) as reader:
        with pytest.raises(PayloadError, match="does not match its hash"):
            reader.payload(ref)
        assert ref in check_recording(reader).payload_problems


def test_span_tree_rules() -> None:
    tree = SpanTree()
    assert tree.begin("a", None, 0) is None and tree.begin("b", "a", 1) is None
    assert "cycle" in (tree.begin("a", "b", 2) or "")            # reopened under its own descendant
    assert "unknown parent" in (tree.begin("c", "later", 3) or "")
    assert "cycle" in (tree.begin("later", "c", 4) or "")       # named as a parent before it existed
    assert tree.end("b") is None and "twice" in (tree.end("b") or "")
    assert "unknown span" in (tree.end("zzz") or "")
    assert tree.unclosed() == ["a", "c", "later"]


@pytest.mark.parametrize("version", [-1, 4, "2", None, True, 1.5])
def test_header_versions_outside_the_readable_set_are_refused(tmp_path: Path, version: object) -> None:
    with open_writer(tmp_path / "rec", new_header("r", "t", {})) as writer:
        writer.write(Message(role="user", content="hi"))
    header = orjson.loads((tmp_path / "rec" / "header.json").read_bytes())
    header["schema_version"] = version
    (tmp_path / "rec" / "header.json").write_bytes(orjson.dumps(header))
    with pytest.raises(RecordingError, match="schema"):
        open_recording(tmp_path / "rec")
