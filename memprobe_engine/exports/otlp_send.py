"""``memprobe export otel``: write a recording's traces to a file and/or POST them to an OTLP/HTTP
receiver (``/v1/traces``, ``Content-Type: application/json``).

The endpoint is either a base URL (``http://localhost:4318``, to which ``/v1/traces`` is added, as
``OTEL_EXPORTER_OTLP_ENDPOINT`` works) or the full traces URL. Headers a receiver needs (an API key)
come from ``OTEL_EXPORTER_OTLP_HEADERS`` / ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (``k=v,k2=v2``), the
standard variables: they are sent, never written or printed. Any failure — refused, timed out, a
non-2xx answer, spans the receiver rejected — is one line naming the endpoint and what happened.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import orjson

from memprobe_engine.errors import ConfigError, MemProbeError
from memprobe_engine.exports.files import write_file
from memprobe_engine.exports.otlp import Traces, recording_traces, trace_bytes
from memprobe_engine.exports.job import ExportJob, ExportResult, default_out

TRACES_PATH = "/v1/traces"
HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")


class ExportFailed(MemProbeError):
    """The receiver did not take the traces (the file, if asked for, was written first)."""


def traces_url(endpoint: str) -> str:
    """The URL to POST to: ``endpoint`` itself when it ends in ``/v1/traces``, else with it added."""
    parsed = urllib.parse.urlsplit(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"--endpoint {endpoint!r}: give an http(s) URL of an OTLP/HTTP receiver, e.g. "
                          f"http://localhost:4318 (its {TRACES_PATH} is added).")
    if parsed.path.rstrip("/").endswith(TRACES_PATH):
        return endpoint
    return urllib.parse.urlunsplit(parsed._replace(path=parsed.path.rstrip("/") + TRACES_PATH))


def _headers() -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    for name in HEADER_VARIABLES:
        for pair in (os.environ.get(name) or "").split(","):
            key, sep, value = pair.partition("=")
            if sep and key.strip():
                headers[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return headers


def post_traces(traces: Traces, endpoint: str, timeout_s: float = 15.0) -> str:
    """POST every batch of ``traces``; the line to print on success, ExportFailed (one line) otherwise."""
    url = traces_url(endpoint)
    headers = _headers()
    sent = 0
    for batch, count in traces.batches():
        body = orjson.dumps(batch)
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                answer = response.read()
        except urllib.error.HTTPError as err:
            detail = err.read()[:200].decode("utf-8", "replace").strip()
            raise ExportFailed(f"--endpoint {url}: the receiver answered HTTP {err.code} {err.reason}"
                               f"{': ' + detail if detail else ''}; {sent} of {len(traces.spans)} spans were sent.")
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            reason = getattr(err, "reason", None) or err
            raise ExportFailed(f"--endpoint {url}: cannot send the traces ({reason}); is an OTLP/HTTP receiver "
                               f"listening there? {sent} of {len(traces.spans)} spans were sent.") from None
        rejected = _rejected(answer)
        if rejected:
            raise ExportFailed(f"--endpoint {url}: the receiver rejected {rejected} span(s) "
                               f"({_partial_message(answer)}).")
        sent += count
    return f"sent {sent} spans in {traces.traces} traces to {url}"


def _partial(answer: bytes) -> dict[str, object]:
    try:
        data = orjson.loads(answer) if answer.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    found = data.get("partialSuccess") if isinstance(data, dict) else None
    return found if isinstance(found, dict) else {}


def _rejected(answer: bytes) -> int:
    value = _partial(answer).get("rejectedSpans")
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _partial_message(answer: bytes) -> str:
    return str(_partial(answer).get("errorMessage") or "no reason given")


def export_otel(job: ExportJob) -> ExportResult:
    """The registry's ``otel`` writer: the file (``--out``, or the default when no ``--endpoint`` is
    given) first, then the POST."""
    if len(job.recordings) != 1:
        raise ConfigError("export otel takes one recording.")
    traces = recording_traces(Path(job.recordings[0]), content=job.content)
    result = ExportResult()
    if traces.skipped_lines:
        result.lines.append(f"warning: {traces.skipped_lines} damaged line(s) skipped "
                            f"(memprobe recording verify names them)")
    if job.out is not None or job.endpoint is None:
        out = job.out if job.out is not None else default_out(job, ".otlp.json")
        result.written.append(write_file(out, trace_bytes(traces)))
        result.lines.append(f"wrote {len(traces.spans)} spans in {traces.traces} traces to {out}")
    if job.endpoint is not None:
        try:
            result.lines.append(post_traces(traces, job.endpoint))
        except ExportFailed as err:
            if result.written:
                raise ExportFailed(f"{err} The file {result.written[0]} was written.") from None
            raise
    return result
