"""`memprobe export otel`: shipped recordings and a runner-written one (with add, update and delete)
exported as OTLP/JSON to a loopback OTLP/HTTP receiver, read back, and checked against the GenAI
semantic conventions' span names and attributes; ids are deterministic; failures are one line."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.exports.otlp import recording_traces
from tests.export_recordings import churn_run

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "recordings"
MEMORY_OPERATIONS = {"create_memory_store", "create_memory", "update_memory", "upsert_memory", "delete_memory",
                     "delete_memory_store", "search_memory"}


class Receiver:
    """A loopback OTLP/HTTP receiver: keeps each POST body to /v1/traces (JSON parsed, protobuf as bytes)
    and its Content-Type; ``answer`` sets the reply."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []
        self.raw: list[tuple[str, bytes]] = []
        self.answer: tuple[int, bytes] = (200, b"{}")
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.path == "/v1/traces"
                receiver.raw.append((self.headers["Content-Type"], body))
                if self.headers["Content-Type"] == "application/json":
                    receiver.bodies.append(json.loads(body))
                status, reply = receiver.answer
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[dict[str, object]]:
        return [span for body in self.bodies for r in body["resourceSpans"]  # type: ignore[attr-defined]
                for scope in r["scopeSpans"] for span in scope["spans"]]


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()
    found.server.server_close()


def attrs(span: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in span.get("attributes", []):  # type: ignore[attr-defined]
        (kind, value), = kv["value"].items()
        out[kv["key"]] = int(value) if kind == "intValue" else \
            [v["stringValue"] for v in value["values"]] if kind == "arrayValue" else value
    return out


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_a_shipped_run_reaches_a_receiver_as_genai_spans(receiver: Receiver, tmp_path: Path) -> None:
    rec = SHIPPED / "sample-quick-fixed-user_001"
    out = cli("export", "otel", str(rec), "--endpoint", receiver.url, "--content", "--out", str(tmp_path / "t.json"))
    assert f"to {receiver.url}/v1/traces (http/json)" in out
    assert [content_type for content_type, _ in receiver.raw] == ["application/json"]
    spans = receiver.spans()
    assert spans == json.loads((tmp_path / "t.json").read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    # one trace per unit (nomem, longctx_full of user_001) and one for the run
    roots = [s for s in spans if "parentSpanId" not in s]
    assert sorted(s["name"] for s in roots) == ["run", "user_001 × longctx_full", "user_001 × nomem"]
    assert len({s["traceId"] for s in spans}) == 3
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    units = [s for s in roots if s["name"] != "run"]
    run = next(s for s in roots if s["name"] == "run")
    assert all(s["links"][0]["spanId"] == run["spanId"] for s in units)
    # every parent is a span of the same trace
    by_id = {s["spanId"]: s for s in spans}
    assert all(by_id[s["parentSpanId"]]["traceId"] == s["traceId"] for s in spans if "parentSpanId" in s)
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert len(chats) == 15 and all(s["kind"] == 3 for s in chats)
    for span in chats:
        a = attrs(span)
        assert a["gen_ai.operation.name"] == "chat" and span["name"] == f"chat {a['gen_ai.request.model']}"
        assert a["gen_ai.provider.name"] == "local" and a["memprobe.role"] in {
            "slot_filler", "recovery_judge", "attribution_judge"}
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        messages = json.loads(str(a["gen_ai.input.messages"]))
        assert messages[0]["parts"][0]["type"] == "text" and messages[0]["parts"][0]["content"]
        assert json.loads(str(a["gen_ai.output.messages"]))[0]["role"] == "assistant"
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"])
    memory = [s for s in spans if attrs(s).get("gen_ai.operation.name") in MEMORY_OPERATIONS]
    assert {s["name"] for s in memory} == {"create_memory_store", "create_memory", "search_memory"}
    for span in memory:
        a = attrs(span)
        assert span["name"] == a["gen_ai.operation.name"] and a["gen_ai.memory.store.id"] in (
            "nomem:user_001", "longctx_full:user_001")
    created = [attrs(s) for s in memory if s["name"] == "create_memory"]
    assert len(created) == 8 and all(a["gen_ai.memory.record.count"] == 1 and a["gen_ai.memory.record.id"]
                                     for a in created)
    assert all(json.loads(str(a["gen_ai.memory.records"]))[0]["id"] == a["gen_ai.memory.record.id"] for a in created)
    searches = [attrs(s) for s in memory if s["name"] == "search_memory"]
    assert len(searches) == 14 and all(isinstance(a["gen_ai.memory.query.text"], str) for a in searches)
    hits = [a for a in searches if a["gen_ai.memory.record.count"]]
    assert hits and all(len(json.loads(str(a["gen_ai.memory.records"]))) == a["gen_ai.memory.record.count"]
                        for a in hits)
    # judge scores and attribution labels are the conventions' evaluation events
    evaluations = [e for s in spans for e in s.get("events", []) if e["name"] == "gen_ai.evaluation.result"]
    names = {attrs(e)["gen_ai.evaluation.name"] for e in evaluations}
    assert names == {"memprobe.recovery_judge", "memprobe.attribution"} and len(evaluations) == 24


def test_content_is_opt_in_and_a_reexport_is_identical(tmp_path: Path) -> None:
    rec = SHIPPED / "release-a-user_001-mem0"
    cli("export", "otel", str(rec), "--out", str(tmp_path / "a.json"))
    cli("export", "otel", str(rec), "--out", str(tmp_path / "b.json"))
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    text = (tmp_path / "a.json").read_text()
    for opt_in in ("gen_ai.input.messages", "gen_ai.memory.records", "gen_ai.memory.query.text",
                   "gen_ai.evaluation.explanation"):
        assert opt_in not in text
    spans = json.loads(text)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert sum(s["name"] == "search_memory" for s in spans) == 31
    # the user's words stay out: no message event carries content without --content
    assert not any(attrs(e).get("memprobe.content") for s in spans for e in s.get("events", []))


def test_a_runner_written_run_maps_add_update_delete(receiver: Receiver, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    rec = churn_run(tmp_path / "churn")
    cli("export", "otel", str(rec), "--endpoint", receiver.url, "--content")
    spans = receiver.spans()
    mem0 = [attrs(s) for s in spans if attrs(s).get("memprobe.system") == "mem0"
            and attrs(s).get("gen_ai.operation.name") in MEMORY_OPERATIONS]
    ops = {(a["memprobe.memory.op"], a["gen_ai.operation.name"]) for a in mem0 if a["gen_ai.operation.name"] !=
           "search_memory"}
    assert ops == {("reset", "create_memory_store"), ("add", "create_memory"), ("update", "update_memory"),
                   ("delete", "delete_memory")}
    for a in mem0:
        assert a["gen_ai.memory.store.id"] == "mem0:PILOT-01A"
        if a["gen_ai.operation.name"] in ("update_memory", "delete_memory"):
            assert a["gen_ai.memory.record.id"] and a["gen_ai.memory.record.count"] == 1
    deleted = next(a for a in mem0 if a["gen_ai.operation.name"] == "delete_memory")
    assert json.loads(str(deleted["gen_ai.memory.records"])) == [{"id": deleted["gen_ai.memory.record.id"],
                                                                   "content": None}]
    # the episode × system is the trace root
    roots = {s["name"] for s in spans if "parentSpanId" not in s}
    assert {"PILOT-01A × mem0", "PILOT-01A × naive_rag"} <= roots
    probe_scores = [e for s in spans for e in s.get("events", []) if e["name"] == "gen_ai.evaluation.result"]
    assert {attrs(e)["gen_ai.evaluation.name"] for e in probe_scores} == {"memprobe.probe_scorer"}


def test_the_shipped_protocol_b_run_has_embedding_and_reader_spans() -> None:
    traces = recording_traces(SHIPPED / "sample-paradigms-quick")
    embeddings = [attrs(s) for s in traces.spans if s["name"].startswith("embeddings ")]
    assert len(embeddings) == 34 and all(a["gen_ai.operation.name"] == "embeddings" and
                                         a["gen_ai.embeddings.dimension.count"] for a in embeddings)
    readers = [attrs(s) for s in traces.spans if attrs(s).get("memprobe.role") == "reader"]
    assert len(readers) == 24 and all(a["gen_ai.operation.name"] == "chat" for a in readers)
    assert traces.traces == 7  # the run and 6 episode × system units


def test_a_receiver_failure_is_one_line_and_exit_2(receiver: Receiver, tmp_path: Path) -> None:
    rec = str(SHIPPED / "sample-quick-fixed-user_001")
    receiver.answer = (400, b'{"error": "bad"}')
    run = [sys.executable, "-m", "memprobe_tui.main", "export", "otel", rec]
    done = subprocess.run([*run, "--endpoint", receiver.url, "--out", str(tmp_path / "t.json")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "HTTP 400" in done.stderr and "t.json was written" in done.stderr
    receiver.answer = (200, b'{"partialSuccess": {"rejectedSpans": "3", "errorMessage": "too old"}}')
    result = CliRunner().invoke(app, ["export", "otel", rec, "--endpoint", receiver.url])
    assert "rejected 3 span(s) (too old)" in str(result.exception)
    result = CliRunner().invoke(app, ["export", "otel", rec, "--endpoint", "http://127.0.0.1:9"])
    assert "cannot send the traces" in str(result.exception) and "127.0.0.1:9/v1/traces" in str(result.exception)
    result = CliRunner().invoke(app, ["export", "otel", rec, "--endpoint", "localhost:4318"])
    assert "--endpoint 'localhost:4318': give an http(s) URL" in str(result.exception)
    result = CliRunner().invoke(app, ["export", "otel", str(tmp_path / "nope")])
    assert "nope: does not exist" in str(result.exception)


def test_a_damaged_line_is_skipped_and_named(tmp_path: Path) -> None:
    import shutil

    rec = tmp_path / "rec"
    shutil.copytree(SHIPPED / "sample-quick-fixed-user_001", rec)
    lines = (rec / "events.jsonl").read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'"kind":"message"' in line)
    lines[at] = lines[at].replace(b'"role":"user"', b'"role":"usex"', 1)  # the seal no longer matches
    (rec / "events.jsonl").write_bytes(b"\n".join(lines))
    out = cli("export", "otel", str(rec), "--out", str(tmp_path / "t.json"))
    assert "warning: 1 damaged line(s) skipped" in out and "wrote 90 spans in 3 traces" in out


def test_protobuf_on_request_with_resource_attributes(receiver: Receiver, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--protocol http/protobuf (Phoenix takes only that; tests/functional/test_export_phoenix.py sends to
    one): the same document in OpenTelemetry's own messages, ids as bytes; OTEL_RESOURCE_ATTRIBUTES adds
    resource attributes (Phoenix's project) under MemProbe's own; a rejection in the protobuf answer is
    one line; gRPC is refused in one line."""
    pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto: pip install 'memprobe[otel]'")
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    rec = SHIPPED / "sample-quick-fixed-user_001"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=audit%20one,service.name=other")
    receiver.answer = (200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())
    out = cli("export", "otel", str(rec), "--endpoint", receiver.url, "--protocol", "http/protobuf", "--content",
              "--out", str(tmp_path / "t.json"))
    assert f"sent 90 spans in 3 traces to {receiver.url}/v1/traces (http/protobuf)" in out
    (content_type, body), = receiver.raw
    assert content_type == "application/x-protobuf"
    got = json_format.MessageToDict(trace_service_pb2.ExportTraceServiceRequest.FromString(body),
                                    use_integers_for_enums=True)
    for span in got["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64decode(span[key]).hex()
        for link in span.get("links", []):
            link.update(traceId=base64.b64decode(link["traceId"]).hex(), spanId=base64.b64decode(link["spanId"]).hex())
    # the file is the OTLP/JSON of the same request (protobuf leaves an empty array's values out)
    written = json.loads((tmp_path / "t.json").read_text().replace('{"values":[]}', "{}"))
    assert got == written
    resource = attrs(got["resourceSpans"][0]["resource"])
    assert resource["openinference.project.name"] == "audit one" and resource["service.name"] == "memprobe"
    rejected = trace_service_pb2.ExportTraceServiceResponse()
    rejected.partial_success.rejected_spans = 3
    rejected.partial_success.error_message = "too old"
    receiver.answer = (200, rejected.SerializeToString())
    result = CliRunner().invoke(app, ["export", "otel", str(rec), "--endpoint", receiver.url,
                                      "--protocol", "http/protobuf"])
    assert "rejected 3 span(s) (too old)" in str(result.exception)
    result = CliRunner().invoke(app, ["export", "otel", str(rec), "--endpoint", receiver.url, "--protocol", "grpc"])
    assert "--protocol 'grpc': use http/json or http/protobuf (gRPC is not sent" in str(result.exception)
