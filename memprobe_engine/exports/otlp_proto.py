"""The OTLP/JSON document of :mod:`memprobe_engine.exports.otlp` in the binary protobuf encoding, for
receivers that take only ``application/x-protobuf`` on ``/v1/traces`` (Phoenix answers JSON with
HTTP 415). ``memprobe export otel --protocol http/protobuf`` sends it; the file stays JSON.

The messages are OpenTelemetry's own (``opentelemetry-proto``, in the ``otel`` extra). The document is
read with protobuf's JSON parser, which rejects any field the schema does not have; the one difference
between OTLP/JSON and protobuf's JSON mapping is handled first: OTLP/JSON writes trace and span ids as
hex, the mapping reads ``bytes`` fields as base64.
"""

from __future__ import annotations

import base64
from typing import Any

from memprobe_engine.errors import ConfigError

Json = dict[str, object]
CONTENT_TYPE = "application/x-protobuf"
#: The id fields of spans and links (hex in OTLP/JSON, bytes in protobuf).
ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _modules() -> tuple[Any, Any]:
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ImportError:
        raise ConfigError("--protocol http/protobuf needs opentelemetry-proto: pip install 'memprobe[otel]' "
                          "(or send OTLP/JSON, the default).") from None
    return json_format, trace_service_pb2


def _ids_as_base64(item: Json) -> Json:
    out = dict(item)
    for key in ID_FIELDS:
        value = out.get(key)
        if isinstance(value, str) and value:
            out[key] = base64.b64encode(bytes.fromhex(value)).decode()
    return out


def _protobuf_json(document: Json) -> Json:
    """``document`` with every span's and link's ids in the protobuf JSON mapping (base64)."""
    resources = []
    for resource in _list(document.get("resourceSpans")):
        scopes = []
        for scope in _list(resource.get("scopeSpans")):
            spans = []
            for span in _list(scope.get("spans")):
                converted = _ids_as_base64(span)
                if "links" in span:
                    converted["links"] = [_ids_as_base64(link) for link in _list(span["links"])]
                spans.append(converted)
            scopes.append({**scope, "spans": spans})
        resources.append({**resource, "scopeSpans": scopes})
    return {**document, "resourceSpans": resources}


def encode_request(document: Json) -> bytes:
    """One OTLP/JSON ``ExportTraceServiceRequest`` as protobuf bytes."""
    json_format, trace_service_pb2 = _modules()
    request = trace_service_pb2.ExportTraceServiceRequest()
    json_format.ParseDict(_protobuf_json(document), request)
    return bytes(request.SerializeToString())


def decode_partial(answer: bytes) -> tuple[int, str]:
    """The rejected span count and error message of a protobuf ``ExportTraceServiceResponse`` (0 and
    '' for an empty or unreadable answer)."""
    if not answer:
        return 0, ""
    _, trace_service_pb2 = _modules()
    response = trace_service_pb2.ExportTraceServiceResponse()
    try:
        response.ParseFromString(answer)
    except Exception:  # a body that is not the response message (a proxy's page): nothing rejected
        return 0, ""
    partial = response.partial_success
    return int(partial.rejected_spans), str(partial.error_message)


def _list(value: object) -> list[Json]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
