"""A recording as OpenTelemetry traces in the OTLP/JSON encoding, by hand (no SDK needed).

Mapping (OpenTelemetry GenAI semantic conventions, development status):

* one trace per unit (protocol A's user × system, protocol B's episode × system) and one for the
  run's own span; each unit's root span links to its run span. Every recorded span (rollout,
  episode, turn, recovery, dimension, mode, stage, session, probe…) is an INTERNAL span named as
  recorded, with ``memprobe.*`` attributes (span kind, unit, system, user, dimension);
* ``llm_call`` → a CLIENT inference span ``chat {model}``: ``gen_ai.operation.name`` ``chat``,
  ``gen_ai.provider.name`` (the backend), ``gen_ai.request.model``, sampling parameters,
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` / ``cache_read.input_tokens``,
  ``gen_ai.response.finish_reasons``, ``error.type``; the model role as ``memprobe.role``;
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` only with ``content``;
* ``embedding`` → ``embeddings {model}`` with ``gen_ai.embeddings.dimension.count``;
* ``memory_op`` → a memory span named after its operation: ``reset`` is ``create_memory_store``;
  otherwise the JSON Patch decides — only adds ``create_memory``, only removes ``delete_memory``,
  adds with changes ``upsert_memory``, else ``update_memory`` (ops without a patch go by their
  name). ``gen_ai.memory.store.id`` is ``SYSTEM:UNIT`` (one store per unit), ``record.id`` when one
  record is touched, ``record.count``; ``gen_ai.memory.records`` (the written items) with ``content``;
* ``retrieval`` → ``search_memory`` with the store, ``record.count``, and with ``content`` the
  ``query.text`` and the returned records (id, score, content from the store at that point);
* judge scores, probe scores and attribution labels → ``gen_ai.evaluation.result`` span events
  (name, score value and label; the explanation with ``content``); other events (messages,
  slot fills, episode ends…) → span events ``memprobe.<kind>`` (texts only with ``content``).

Ids are derived, never random: a trace id is sha256(run id, the unit span's seq), a span id
sha256(run id, the seq of the event that opened it), so exporting a recording twice gives the same
bytes. Timestamps are the recorded wall clock (a model call starts ``latency_s`` before its event).
The recording holds no secret (keys are scrubbed when written), and nothing else is added here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.base import EventBase
from memprobe_engine.events.llm import EmbeddingBatch, LLMCall, RecordedMessage
from memprobe_engine.events.memory import MemoryOp, Retrieval
from memprobe_engine.events.reader import DamagedEvent, RecordingReader, open_recording
from memprobe_engine.events.run import SpanBegin, SpanEnd

Json = dict[str, object]
AttrValue = str | bool | int | float | list[str] | None

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_OK = 1
STATUS_ERROR = 2
#: Events that become the evaluation event of the GenAI conventions.
EVALUATION = "gen_ai.evaluation.result"
#: Fields of other events that hold recorded text: on span events only with ``content``.
TEXT_FIELDS = frozenset({"content", "reason", "label", "evidence", "question", "answer_text", "answer", "turns",
                         "task", "revised_task", "message", "note", "retrieved", "parsed"})


def _hex(*parts: object, length: int) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:length]


def _ns(seconds: float) -> str:
    return str(max(0, int(round(seconds * 1e9))))


def _value(value: AttrValue) -> Json:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [{"stringValue": str(v)} for v in value]}}
    return {"stringValue": str(value)}


def attributes(values: dict[str, AttrValue]) -> list[Json]:
    """OTLP key-values of ``values`` (None dropped), in the given order."""
    return [{"key": key, "value": _value(value)} for key, value in values.items() if value is not None]


def _json(value: object) -> str:
    return orjson.dumps(value, default=str).decode()


@dataclass
class _Span:
    trace_id: str
    span_id: str
    parent: str | None
    name: str
    kind: int
    start: float
    end: float | None = None
    #: The latest time of anything inside: the end of a span the recording never closed.
    last: float | None = None
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    events: list[Json] = field(default_factory=list)
    links: list[Json] = field(default_factory=list)
    status: Json = field(default_factory=dict)

    def to_json(self) -> Json:
        span: Json = {"traceId": self.trace_id, "spanId": self.span_id}
        if self.parent:
            span["parentSpanId"] = self.parent
        span.update({"name": self.name, "kind": self.kind, "startTimeUnixNano": _ns(self.start),
                     "endTimeUnixNano": _ns(self.end if self.end is not None else (self.last or self.start)),
                     "attributes": attributes(self.attrs)})
        if self.events:
            span["events"] = self.events
        if self.links:
            span["links"] = self.links
        if self.status:
            span["status"] = self.status
        return span


@dataclass(frozen=True)
class _Root:
    """The trace a recorded span belongs to: its root span's id, and whether that root is a unit."""

    trace_id: str
    root_span: str
    is_unit: bool


def _scope(event: EventBase) -> dict[str, AttrValue]:
    return {"memprobe.unit": event.unit, "memprobe.system": event.system, "memprobe.user_id": event.user_id,
            "memprobe.dimension": event.dimension, "memprobe.layer": event.layer}


def memory_operation(event: MemoryOp) -> str:
    """The GenAI memory operation of one recorded op (see the module docstring)."""
    if event.op == "reset":
        return "create_memory_store"
    kinds = set()
    for entry in event.patch:
        path = str(entry.get("path", ""))
        whole = path.count("/") == 2 and path.startswith("/items/")
        op = str(entry.get("op", ""))
        kinds.add("create" if whole and op == "add" else "delete" if whole and op == "remove" else "update")
    if kinds == {"create"}:
        return "create_memory"
    if kinds == {"delete"}:
        return "delete_memory"
    if "create" in kinds:
        return "upsert_memory"
    if kinds:
        return "update_memory"
    name = event.op.lower()
    if any(word in name for word in ("delete", "evict", "remove", "forget")):
        return "delete_memory"
    if any(word in name for word in ("add", "new", "create", "insert")):
        return "create_memory"
    return "update_memory"


def _written_records(event: MemoryOp) -> list[Json]:
    """The records an op wrote (whole items added or replaced; removed ones with null content)."""
    records: list[Json] = []
    for entry in event.patch:
        path = str(entry.get("path", ""))
        if not (path.startswith("/items/") and path.count("/") == 2):
            continue
        item_id = path.split("/", 2)[2].replace("~1", "/").replace("~0", "~")
        records.append({"id": item_id, "content": entry.get("value") if entry.get("op") != "remove" else None})
    if not records:  # a change inside items: name them, their new content is in the store
        records = [{"id": i, "content": None} for i in event.item_ids]
    return records


class _Builder:
    """Walks a recording once, in file order, and collects its spans."""

    def __init__(self, reader: RecordingReader, content: bool, store_records: bool) -> None:
        self.reader = reader
        self.run_id = reader.header.run_id
        self.content = content
        self.store_records = store_records
        self.roots: dict[str, _Root] = {}
        self.spans: dict[str, _Span] = {}  # recorded span id → its OTLP span
        self.order: list[_Span] = []
        self._session: object | None = None

    def _span_id(self, seq: int) -> str:
        return _hex(self.run_id, "span", seq, length=16)

    def _root_of(self, event: EventBase) -> _Root | None:
        return self.roots.get(str(event.span_id)) if event.span_id is not None else None

    def begin(self, event: SpanBegin) -> None:
        parent = self.roots.get(str(event.parent_span_id)) if event.parent_span_id else None
        sid = self._span_id(event.seq)
        unit_root = event.unit is not None and (parent is None or not parent.is_unit)
        if unit_root or parent is None:
            root = _Root(_hex(self.run_id, "trace", event.seq, length=32), sid, event.unit is not None)
        else:
            root = parent
        self.roots[str(event.span_id)] = root
        parent_span = self.spans.get(str(event.parent_span_id)) if not unit_root else None
        span = _Span(root.trace_id, sid, parent_span.span_id if parent_span else None, event.name,
                     SPAN_KIND_INTERNAL, event.time,
                     attrs={"memprobe.span_kind": event.span_kind, **_scope(event), "memprobe.run_id": self.run_id})
        for key, value in event.attrs.items():
            if isinstance(value, (str, bool, int, float)) and not key.endswith("_ref"):
                span.attrs[f"memprobe.attr.{key}"] = value
        if unit_root and parent is not None:
            span.links.append({"traceId": parent.trace_id, "spanId": parent.root_span,
                               "attributes": attributes({"memprobe.link": "run"})})
        self.spans[str(event.span_id)] = span
        self.order.append(span)

    def end(self, event: SpanEnd) -> None:
        span = self.spans.get(str(event.span_id))
        if span is None:
            return
        span.end = event.time
        if event.status == "ok":
            span.status = {"code": STATUS_OK}
        else:
            span.status = {"code": STATUS_ERROR, "message": f"{event.status}: {event.error or ''}".rstrip(": ")}

    def _child(self, event: EventBase, name: str, kind: int, start: float, attrs: dict[str, AttrValue]) -> None:
        root = self._root_of(event)
        parent = self.spans.get(str(event.span_id)) if event.span_id is not None else None
        if root is None or parent is None:
            return  # an event outside every span (a damaged tree): nothing to hang it on
        span = _Span(root.trace_id, self._span_id(event.seq), parent.span_id, name, kind, start, event.time,
                     attrs={**attrs, **_scope(event), "memprobe.seq": event.seq})
        self.order.append(span)
        parent.last = max(parent.last or event.time, event.time)

    def _text(self, message: RecordedMessage) -> str:
        if message.content is not None:
            return message.content
        if message.content_ref:
            try:
                return str(self.reader.payload(message.content_ref))
            except KeyError:
                return f"(payload {message.content_ref} missing)"
        return ""

    def llm_call(self, event: LLMCall) -> None:
        params = event.params
        attrs: dict[str, AttrValue] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": event.backend,
            "gen_ai.request.model": event.model,
            "gen_ai.request.temperature": _number(params.get("temperature")),
            "gen_ai.request.top_p": _number(params.get("top_p")),
            "gen_ai.request.max_tokens": _integer(params.get("max_tokens")),
            "gen_ai.request.seed": _integer(params.get("seed")),
            "gen_ai.usage.input_tokens": event.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": event.usage.completion_tokens,
            "gen_ai.usage.cache_read.input_tokens": event.usage.cached_prompt_tokens or None,
            "gen_ai.response.finish_reasons": [event.finish_reason] if event.finish_reason else None,
            "error.type": "_OTHER" if event.error else None,
            "memprobe.role": event.role, "memprobe.cache_hit": event.cache_hit,
            "memprobe.request_hash": event.request_hash, "memprobe.retries": len(event.retries) or None,
            "memprobe.repairs": event.repairs or None, "memprobe.excluded": event.excluded,
            "memprobe.replica": event.replica or None}
        if self.content:
            attrs["gen_ai.input.messages"] = _json([
                {"role": m.role, "parts": [{"type": "text", "content": self._text(m)}]} for m in event.messages])
            if event.response_text is not None:
                attrs["gen_ai.output.messages"] = _json([
                    {"role": "assistant", "parts": [{"type": "text", "content": event.response_text}],
                     "finish_reason": event.finish_reason or ("error" if event.error else "stop")}])
        self._child(event, f"chat {event.model}", SPAN_KIND_CLIENT, event.time - event.latency_s, attrs)
        if event.error:
            self.order[-1].status = {"code": STATUS_ERROR, "message": event.error}

    def embedding(self, event: EmbeddingBatch) -> None:
        attrs: dict[str, AttrValue] = {
            "gen_ai.operation.name": "embeddings", "gen_ai.provider.name": event.backend,
            "gen_ai.request.model": event.model, "gen_ai.embeddings.dimension.count": event.dim,
            "error.type": "_OTHER" if event.error else None, "memprobe.n_texts": event.n_texts,
            "memprobe.cache_hits": event.cache_hits}
        self._child(event, f"embeddings {event.model}", SPAN_KIND_CLIENT, event.time - event.latency_s, attrs)

    def _store(self, event: EventBase) -> str:
        return f"{event.system or '?'}:{event.unit or event.user_id or '?'}"

    def memory_op(self, event: MemoryOp) -> None:
        operation = memory_operation(event)
        ids = list(event.item_ids)
        attrs: dict[str, AttrValue] = {
            "gen_ai.operation.name": operation, "gen_ai.memory.store.id": self._store(event),
            "gen_ai.memory.record.id": ids[0] if len(ids) == 1 else None,
            "gen_ai.memory.record.count": len(ids) if operation != "create_memory_store" else None,
            "memprobe.memory.op": event.op, "memprobe.memory.store_size": event.store_size,
            "memprobe.memory.record_ids": ids if len(ids) > 1 else None}
        if self.content:
            if operation != "create_memory_store":
                attrs["gen_ai.memory.records"] = _json(_written_records(event))
            attrs["memprobe.memory.note"] = event.note
        self._child(event, operation, SPAN_KIND_INTERNAL, event.time, attrs)

    def retrieval(self, event: Retrieval) -> None:
        attrs: dict[str, AttrValue] = {
            "gen_ai.operation.name": "search_memory", "gen_ai.memory.store.id": self._store(event),
            "gen_ai.memory.record.count": len(event.item_ids), "memprobe.k": event.k,
            "memprobe.purpose": event.purpose, "memprobe.memory.record_ids": list(event.item_ids)}
        if self.content:
            attrs["gen_ai.memory.query.text"] = event.query
            attrs["gen_ai.memory.records"] = _json(self._found(event))
        self._child(event, "search_memory", SPAN_KIND_INTERNAL, event.time, attrs)

    def _found(self, event: Retrieval) -> list[Json]:
        items: dict[str, object] = {}
        if self.store_records and event.system and (event.unit or event.user_id):
            from memprobe_engine.replay.session import ReplaySession

            if self._session is None:
                self._session = ReplaySession.open(self.reader.directory)
            session = self._session
            assert isinstance(session, ReplaySession)
            try:
                items = dict(session.store_at(str(event.unit or event.user_id), event.system, event.seq))
            except MemProbeError:  # a store that cannot be rebuilt (damage) leaves the content null
                items = {}
        scores = list(event.scores) + [None] * (len(event.item_ids) - len(event.scores))
        records: list[Json] = []
        for item_id, score in zip(event.item_ids, scores):
            record: Json = {"id": item_id, "content": items.get(item_id)}
            if score is not None:
                record["score"] = score
            records.append(record)
        return records

    def annotate(self, event: EventBase, data: dict[str, object]) -> None:
        """Any other event: a span event on the span it sits in."""
        span = self.spans.get(str(event.span_id)) if event.span_id is not None else None
        if span is None:
            return
        kind = str(data.get("kind"))
        values: dict[str, AttrValue] = {"memprobe.seq": event.seq}
        name = f"memprobe.{kind}"
        if kind in ("judge_score", "probe_score", "attribution_label"):
            name = EVALUATION
            values.update({"gen_ai.evaluation.name": {"judge_score": "memprobe.recovery_judge",
                                                       "probe_score": "memprobe.probe_scorer",
                                                       "attribution_label": "memprobe.attribution"}[kind],
                           "gen_ai.evaluation.score.value": _number(data.get("score")),
                           "gen_ai.evaluation.score.label": _label(kind, data)})
            if self.content:
                values["gen_ai.evaluation.explanation"] = _text_or_none(data.get("reason"))
        for key, value in data.items():
            if key in ("kind", "seq", "time", "span_id", "parent_span_id", "ck") or value is None:
                continue
            if key in TEXT_FIELDS and not self.content:
                continue
            values[f"memprobe.{key}"] = value if isinstance(value, (str, bool, int, float)) else _json(value)
        span.last = max(span.last or event.time, event.time)
        span.events.append({"timeUnixNano": _ns(event.time), "name": name, "attributes": attributes(values)})

    def close(self) -> None:
        from memprobe_engine.replay.session import ReplaySession

        if isinstance(self._session, ReplaySession):
            self._session.close()


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text_or_none(value: object) -> str | None:
    return str(value) if value is not None else None


def _label(kind: str, data: dict[str, object]) -> str | None:
    if kind == "attribution_label":
        return _text_or_none(data.get("label"))
    if data.get("excluded"):
        return "excluded"
    score = _number(data.get("score"))
    if score is None:
        return None
    return "correct" if kind == "probe_score" and score >= 1 else "recovered" if score >= 1 else \
        ("partial" if score > 0 else "wrong" if kind == "probe_score" else "not_recovered")


def _spans(reader: RecordingReader, content: bool) -> tuple[list[_Span], int]:
    builder = _Builder(reader, content, store_records=content)
    skipped = 0
    try:
        for line in range(len(reader)):
            try:
                data = reader.get_dict(line)
                event = reader.parse(line, data)
            except DamagedEvent:  # skipped, as every reader skips it (recording verify names it)
                skipped += 1
                continue
            if isinstance(event, SpanBegin):
                builder.begin(event)
            elif isinstance(event, SpanEnd):
                builder.end(event)
            elif isinstance(event, LLMCall):
                builder.llm_call(event)
            elif isinstance(event, EmbeddingBatch):
                builder.embedding(event)
            elif isinstance(event, MemoryOp):
                builder.memory_op(event)
            elif isinstance(event, Retrieval):
                builder.retrieval(event)
            else:
                builder.annotate(event, dict(data))
    finally:
        builder.close()
    return builder.order, skipped


@dataclass(frozen=True)
class Traces:
    """A recording's spans as OTLP/JSON, grouped by trace, and how many lines were skipped as damaged."""

    resource: Json
    scope: Json
    spans: list[Json]
    traces: int
    skipped_lines: int

    @property
    def document(self) -> Json:
        """The whole export as one ``ExportTraceServiceRequest``."""
        return _document(self.resource, self.scope, self.spans)

    def batches(self, max_spans: int = 2000) -> Iterator[tuple[Json, int]]:
        """The document cut into requests of whole traces, about ``max_spans`` spans each (a
        collector limits the size of one request), each with its number of spans."""
        batch: list[Json] = []
        current: object = None
        for span in self.spans:
            if len(batch) >= max_spans and span["traceId"] != current:
                yield _document(self.resource, self.scope, batch), len(batch)
                batch = []
            batch.append(span)
            current = span["traceId"]
        if batch:
            yield _document(self.resource, self.scope, batch), len(batch)


def _document(resource: Json, scope: Json, spans: list[Json]) -> Json:
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}]}


def recording_traces(directory: Path, content: bool = False, extra_resource: Mapping[str, str] | None = None) -> Traces:
    """The recording at ``directory`` as one OTLP/JSON ``ExportTraceServiceRequest``; spans are grouped
    by trace, traces in the order their root spans were opened. ``extra_resource``: more resource
    attributes (``OTEL_RESOURCE_ATTRIBUTES``: Phoenix's ``openinference.project.name``); the recording's
    own win over them."""
    from memprobe_engine import __version__

    with open_recording(directory) as reader:
        header = reader.header
        spans, skipped = _spans(reader, content)
    by_trace: dict[str, list[Json]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span.to_json())
    own: dict[str, AttrValue] = {
        "service.name": "memprobe", "service.version": __version__, "memprobe.run_id": header.run_id,
        "memprobe.suite": header.suite, "memprobe.schema_version": header.schema_version}
    extra = {key: value for key, value in (extra_resource or {}).items() if key not in own}
    resource: Json = {"attributes": attributes({**own, **extra})}
    scope: Json = {"name": "memprobe.exports.otlp", "version": __version__}
    flat = [span for group in by_trace.values() for span in group]
    return Traces(resource, scope, flat, len(by_trace), skipped)


def trace_bytes(traces: Traces) -> bytes:
    """The document as the bytes the file holds (and a POST sends): compact JSON and a newline."""
    return orjson.dumps(traces.document) + b"\n"


def span_names(document: Json) -> Iterable[str]:
    """Every span name of an OTLP/JSON document (for tests and summaries)."""
    for resource in _list(document.get("resourceSpans")):
        for scope in _list(resource.get("scopeSpans")):
            for span in _list(scope.get("spans")):
                yield str(span.get("name"))


def _list(value: object) -> list[Json]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
