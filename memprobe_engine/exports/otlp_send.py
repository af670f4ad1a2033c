"""``memprobe export otel``: write a recording's traces to a file and/or POST them to an OTLP/HTTP
receiver (``/v1/traces``): OTLP/JSON (``Content-Type: application/json``) by default, or with
``--protocol http/protobuf`` the binary encoding (``application/x-protobuf``: Phoenix takes only that;
:mod:`memprobe_engine.exports.otlp_proto`). The file is JSON either way.

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
#: The OTLP/HTTP encodings ``--protocol`` takes (the names of OTEL_EXPORTER_OTLP_PROTOCOL); JSON first,
#: the default.
PROTOCOLS = ("http/json", "http/protobuf")
HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
#: Resource attributes to add (``k=v,k2=v2``), as an OpenTelemetry SDK reads them; MemProbe's own
#: (``service.name``, ``memprobe.run_id``…) win over them.
RESOURCE_VARIABLE = "OTEL_RESOURCE_ATTRIBUTES"


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


def _pairs(*variables: str) -> dict[str, str]:
    """The ``k=v,k2=v2`` pairs of the environment variables (percent-decoded; later ones win)."""
    found: dict[str, str] = {}
    for name in variables:
        for pair in (os.environ.get(name) or "").split(","):
            key, sep, value = pair.partition("=")
            if sep and key.strip():
                found[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return found


def _headers(protocol: str) -> dict[str, str]:
    content_type = "application/json" if protocol == "http/json" else "application/x-protobuf"
    return {"Content-Type": content_type, **_pairs(*HEADER_VARIABLES)}


def check_protocol(protocol: str) -> str:
    """``protocol`` when it is one ``--protocol`` takes, else ConfigError (one line)."""
    if protocol not in PROTOCOLS:
        grpc = " (gRPC is not sent: use the receiver's OTLP/HTTP port)" if protocol == "grpc" else ""
        raise ConfigError(f"--protocol {protocol!r}: use {' or '.join(PROTOCOLS)}{grpc}.")
    return protocol


def post_traces(traces: Traces, endpoint: str, timeout_s: float = 15.0, protocol: str = "http/json") -> str:
    """POST every batch of ``traces`` in ``protocol``'s encoding; the line to print on success,
    ExportFailed (one line) otherwise."""
    url = traces_url(endpoint)
    headers = _headers(check_protocol(protocol))
    sent = 0
    for batch, count in traces.batches():
        if protocol == "http/json":
            body = orjson.dumps(batch)
        else:
            from memprobe_engine.exports.otlp_proto import encode_request

            body = encode_request(batch)
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
        rejected, message = _rejected(answer, protocol)
        if rejected:
            raise ExportFailed(f"--endpoint {url}: the receiver rejected {rejected} span(s) "
                               f"({message or 'no reason given'}).")
        sent += count
    return f"sent {sent} spans in {traces.traces} traces to {url} ({protocol})"


def _partial(answer: bytes) -> dict[str, object]:
    try:
        data = orjson.loads(answer) if answer.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    found = data.get("partialSuccess") if isinstance(data, dict) else None
    return found if isinstance(found, dict) else {}


def _rejected(answer: bytes, protocol: str) -> tuple[int, str]:
    """The answer's rejected span count and its error message (its ``partialSuccess``)."""
    if protocol == "http/protobuf":
        from memprobe_engine.exports.otlp_proto import decode_partial

        return decode_partial(answer)
    partial = _partial(answer)
    value = partial.get("rejectedSpans")
    try:
        rejected = int(str(value)) if value is not None else 0
    except ValueError:
        rejected = 0
    return rejected, str(partial.get("errorMessage") or "")


def export_otel(job: ExportJob) -> ExportResult:
    """The registry's ``otel`` writer: the file (``--out``, or the default when no ``--endpoint`` is
    given) first, then the POST."""
    if len(job.recordings) != 1:
        raise ConfigError("export otel takes one recording.")
    check_protocol(job.protocol)
    traces = recording_traces(Path(job.recordings[0]), content=job.content,
                              extra_resource=_pairs(RESOURCE_VARIABLE))
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
            result.lines.append(post_traces(traces, job.endpoint, protocol=job.protocol))
        except ExportFailed as err:
            if result.written:
                raise ExportFailed(f"{err} The file {result.written[0]} was written.") from None
            raise
    return result
