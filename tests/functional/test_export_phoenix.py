"""`memprobe export otel` into a real OpenTelemetry receiver: Phoenix (arize-phoenix, in a venv of its own that `make test` makes)
started on loopback with its own sqlite folder. A shipped recording and a runner-written one (mem0 with
add, update and delete) are sent with the real CLI over OTLP/HTTP — protobuf, the only body Phoenix's
/v1/traces takes (JSON gets HTTP 415) — each into a Phoenix project named by OTEL_RESOURCE_ATTRIBUTES,
then read back through Phoenix's REST API (GET /v1/projects/{name}/spans/otlpv1). Checked: every span
arrived once with the exported ids, parent, name, attributes and events; the span names and attributes
follow the GenAI conventions (model calls, memory operations, evaluation events). Part of `make test`,
which installs Phoenix and sets MEMPROBE_REQUIRE_EXTRAS (a missing Phoenix then fails, never skips).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.exports.otlp import recording_traces
from tests.export_recordings import churn_run
from tests.ray_cluster import free_port

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "recordings" / "sample-quick-fixed-user_001"
START_S = 120.0  # Phoenix took 8-15 s to answer /healthz on 2 busy cores (imports and sqlite migrations)
INGEST_S = 60.0  # spans are inserted by a background task after the POST is answered
MEMORY_OPERATIONS = {"create_memory_store", "create_memory", "update_memory", "upsert_memory", "delete_memory",
                     "delete_memory_store", "search_memory"}

Json = dict[str, object]


def phoenix_python() -> str:
    """The Python of the venv Phoenix is installed in (`make test` makes it under .test-cache/ and names it
    in MEMPROBE_PHOENIX_PYTHON); a missing one skips, unless MEMPROBE_REQUIRE_EXTRAS is set: then it fails."""
    python = os.environ.get("MEMPROBE_PHOENIX_PYTHON") or str(ROOT / ".test-cache" / "phoenix-venv" / "bin" / "python")
    found = subprocess.run([python, "-c", "import phoenix.server.main"], capture_output=True, text=True) \
        if Path(python).is_file() else None
    if found is None or found.returncode != 0:
        reason = (f"no Phoenix at {python} (`make test` installs arize-phoenix==14.6.0 into .test-cache/phoenix-venv; "
                  f"or set MEMPROBE_PHOENIX_PYTHON to a Python that has it)")
        if os.environ.get("MEMPROBE_REQUIRE_EXTRAS"):
            pytest.fail(reason + "; MEMPROBE_REQUIRE_EXTRAS is set, so this does not skip")
        pytest.skip(reason)
    return python


@dataclass
class Phoenix:
    """A Phoenix server of this test: its URL, process and log file."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"

    def get(self, path: str) -> Json:
        with urllib.request.urlopen(self.url + path, timeout=30) as answer:
            found = json.loads(answer.read())
        assert isinstance(found, dict)
        return found

    def spans(self, project: str) -> list[Json]:
        """Every span of ``project``, page by page (an unknown project is no span yet)."""
        spans: list[Json] = []
        cursor: object = None
        while True:
            query = {"limit": "1000", **({"cursor": str(cursor)} if cursor else {})}
            try:
                page = self.get(f"/v1/projects/{project}/spans/otlpv1?{urllib.parse.urlencode(query)}")
            except urllib.error.HTTPError as err:
                if err.code == 404:  # the project is created with its first span
                    return []
                raise
            spans.extend(page["data"])  # type: ignore[arg-type]
            cursor = page.get("next_cursor")
            if not cursor:
                return spans

    def wait_for(self, project: str, count: int) -> list[Json]:
        """The project's spans once ``count`` of them are in (bounded; the failure says what came)."""
        deadline = time.monotonic() + INGEST_S
        while True:
            spans = self.spans(project)
            if len(spans) >= count or time.monotonic() > deadline:
                assert len(spans) == count, (f"Phoenix holds {len(spans)} spans of project {project!r}, "
                                             f"{count} were sent\n{self.log_tail()}")
                return spans
            time.sleep(0.3)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server's process group (its own session: nothing else is in it)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    python = phoenix_python()
    folder = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = free_port(), free_port()
    # Nothing of the caller's Phoenix or OpenTelemetry settings (a Postgres URL, an exporter of its own).
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PHOENIX_", "OTEL_"))}
    env.update({"PHOENIX_WORKING_DIR": str(folder), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
                "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{folder}/phoenix.db",
                "PHOENIX_TELEMETRY_ENABLED": "false", "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
                "PHOENIX_LOG_MIGRATIONS": "false", "HOME": str(folder)})
    log = folder / "phoenix.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([python, "-m", "phoenix.server.main", "serve", "--no-ui"], env=env,
                                   cwd=folder, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    server = Phoenix(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + START_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"Phoenix exited with status {process.returncode} before answering:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(server.url + "/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not answer {server.url}/healthz within {START_S:.0f} s:\n"
                            f"{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        _stop(process)


def export(recording: Path, phoenix: Phoenix, project: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The real CLI: `memprobe export otel REC --endpoint URL --protocol http/protobuf --content`, the
    Phoenix project as the OpenTelemetry resource attribute Phoenix reads."""
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    result = CliRunner().invoke(app, ["export", "otel", str(recording), "--endpoint", phoenix.url,
                                      "--protocol", "http/protobuf", "--content"])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def _value(value: Json) -> object:
    """An OTLP AnyValue (OTLP/JSON camelCase or Phoenix's snake_case) as a Python value."""
    for key, found in value.items():
        if found is None:
            continue
        if key in ("arrayValue", "array_value"):
            return [_value(v) for v in found["values"]]  # type: ignore[index]
        if key in ("intValue", "int_value"):
            return int(str(found))
        return found
    return None


def attrs(item: Json) -> dict[str, object]:
    return {kv["key"]: _value(kv["value"]) for kv in item.get("attributes") or []}  # type: ignore[attr-defined,index]


def events(span: Json) -> list[Json]:
    found = span.get("events")
    return found if isinstance(found, list) else []


def _status(span: Json) -> object:
    """The status code (0, unset, when there is none)."""
    status = span.get("status")
    return status.get("code") or 0 if isinstance(status, dict) else 0


def _hex(value: object) -> str:
    """A trace or span id as hex (Phoenix answers hex; a base64 id would be 24 or 12 characters)."""
    text = str(value or "")
    return text if len(text) in (16, 32) else base64.b64decode(text).hex() if text else ""


def check_same_spans(sent: list[Json], stored: list[Json]) -> dict[str, Json]:
    """Each exported span is in Phoenix once, with its ids, parent, name, times (Phoenix keeps
    microseconds), status, attributes and events. Phoenix keeps no OTLP span kind (it answers INTERNAL
    for every span; its own kind is OpenInference's), no link and no resource attribute but the project."""
    by_id: dict[str, Json] = {}
    for span in stored:
        span_id = _hex(span.get("span_id") or span.get("spanId"))
        assert span_id not in by_id, f"span {span_id} stored twice"
        by_id[span_id] = span
    assert set(by_id) == {str(s["spanId"]) for s in sent}
    for span in sent:
        back = by_id[str(span["spanId"])]
        assert _hex(back.get("trace_id") or back.get("traceId")) == span["traceId"]
        assert _hex(back.get("parent_span_id") or back.get("parentSpanId")) == span.get("parentSpanId", "")
        assert back["name"] == span["name"]
        for key, stored_key in (("startTimeUnixNano", "start_time_unix_nano"),
                                ("endTimeUnixNano", "end_time_unix_nano")):
            assert abs(int(str(back[stored_key])) - int(str(span[key]))) < 1000, (span["name"], key)
        assert _status(back) == _status(span), span["name"]
        assert attrs(back) == attrs(span), span["name"]
        assert [(e["name"], attrs(e)) for e in events(back)] == [(e["name"], attrs(e)) for e in events(span)]
    return by_id


def check_conventions(spans: list[Json]) -> None:
    """The GenAI conventions' names and attributes, on what Phoenix gives back."""
    for span in spans:
        a = attrs(span)
        operation = a.get("gen_ai.operation.name")
        if operation == "chat":
            assert span["name"] == f"chat {a['gen_ai.request.model']}"
            assert a["gen_ai.provider.name"] and a["memprobe.role"]
            assert isinstance(a["gen_ai.usage.input_tokens"], int) and a["gen_ai.usage.input_tokens"] > 0
            assert isinstance(a["gen_ai.usage.output_tokens"], int) and a["gen_ai.usage.output_tokens"] > 0
            assert json.loads(str(a["gen_ai.input.messages"]))[0]["parts"][0]["type"] == "text"
            assert json.loads(str(a["gen_ai.output.messages"]))[0]["role"] == "assistant"
        elif operation == "embeddings":
            assert span["name"] == f"embeddings {a['gen_ai.request.model']}"
            dimensions = a["gen_ai.embeddings.dimension.count"]
            assert isinstance(dimensions, int) and dimensions > 0
        elif operation in MEMORY_OPERATIONS:
            assert span["name"] == operation
            assert a["gen_ai.memory.store.id"] == f"{a['memprobe.system']}:{a['memprobe.unit']}"
            if operation in ("create_memory", "update_memory", "delete_memory"):
                assert a["gen_ai.memory.record.count"] == 1 and a["gen_ai.memory.record.id"]
                assert json.loads(str(a["gen_ai.memory.records"]))[0]["id"] == a["gen_ai.memory.record.id"]
            if operation == "search_memory":
                assert isinstance(a["gen_ai.memory.query.text"], str) and a["gen_ai.memory.query.text"]
                assert len(json.loads(str(a["gen_ai.memory.records"]))) == a["gen_ai.memory.record.count"]
        else:
            assert operation is None and a["memprobe.span_kind"], span["name"]  # a recorded span
        for event in events(span):
            if event["name"] == "gen_ai.evaluation.result":
                e = attrs(event)
                assert str(e["gen_ai.evaluation.name"]).startswith("memprobe.")
                assert isinstance(e.get("gen_ai.evaluation.score.value"), float)


def names(spans: list[Json]) -> Counter[str]:
    return Counter(str(s["name"]) for s in spans)


def test_phoenix_refuses_json_and_takes_protobuf(phoenix: Phoenix) -> None:
    """Why --protocol http/protobuf: the default JSON body is refused in one line."""
    result = CliRunner().invoke(app, ["export", "otel", str(SHIPPED), "--endpoint", phoenix.url])
    assert result.exit_code != 0 and "HTTP 415" in str(result.exception)


def test_a_shipped_recording_reads_back_from_phoenix(phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = recording_traces(SHIPPED, content=True, extra_resource={"openinference.project.name": "shipped"})
    out = export(SHIPPED, phoenix, "shipped", monkeypatch)
    assert f"sent {len(sent.spans)} spans in 3 traces to {phoenix.url}/v1/traces (http/protobuf)" in out
    stored = phoenix.wait_for("shipped", len(sent.spans))
    check_same_spans(sent.spans, stored)
    check_conventions(stored)
    counts = names(stored)
    assert counts == names(sent.spans)
    assert sum(n for name, n in counts.items() if name.startswith("chat ")) == 15
    assert {name: counts[name] for name in MEMORY_OPERATIONS if counts[name]} == {
        "create_memory_store": 1, "create_memory": 8, "search_memory": 14}
    evaluations = [e for s in stored for e in events(s) if e["name"] == "gen_ai.evaluation.result"]
    assert len(evaluations) == 24
    # the project is the resource attribute the export was given; nothing landed in Phoenix's default one
    projects = [p["name"] for p in phoenix.get("/v1/projects")["data"]]  # type: ignore[attr-defined]
    assert "shipped" in projects and phoenix.spans("default") == []


def test_add_update_delete_read_back_from_phoenix(phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    rec = churn_run(tmp_path / "churn")
    sent = recording_traces(rec, content=True)
    export(rec, phoenix, "churn", monkeypatch)
    stored = phoenix.wait_for("churn", len(sent.spans))
    check_same_spans(sent.spans, stored)
    check_conventions(stored)
    assert names(stored) == names(sent.spans)
    mem0 = [attrs(s) for s in stored if attrs(s).get("memprobe.system") == "mem0"
            and attrs(s).get("gen_ai.operation.name") in MEMORY_OPERATIONS]
    assert {(a["memprobe.memory.op"], a["gen_ai.operation.name"]) for a in mem0
            if a["gen_ai.operation.name"] != "search_memory"} == {
        ("reset", "create_memory_store"), ("add", "create_memory"), ("update", "update_memory"),
        ("delete", "delete_memory")}
    deleted = next(a for a in mem0 if a["gen_ai.operation.name"] == "delete_memory")
    assert json.loads(str(deleted["gen_ai.memory.records"])) == [
        {"id": deleted["gen_ai.memory.record.id"], "content": None}]
    assert any(str(s["name"]).startswith("chat ") for s in stored)
    assert {"PILOT-01A × mem0", "PILOT-01A × naive_rag"} <= {
        str(s["name"]) for s in stored if not _hex(s.get("parent_span_id"))}
