"""One recording, one writer, units recorded in other processes: the two ends of the event relay.

A distributed run (``--executor ray``) records each unit in a worker process, and the recording
still has one writer, the driver's. The worker's recorder writes into a :class:`RelayWriter`: it
numbers the unit's events on its own, stores nothing, and hands them on in order as batches of
:data:`Item` to whatever carries them to the driver (a Ray actor). A batch that ends with a model
call or a closed span is handed on and *waited for* before the unit goes on, so a worker that dies
has lost nothing it finished: every answered call is at the driver, and the unit's retry is answered
from it (no completed call is sent again).

The driver's :class:`EventFunnel` writes the batches into the recording: it gives each event its
place in the file (``seq``) and rewrites the event's pointers to other events (the fields declared
``SeqRef``, as ``memprobe merge`` does) from the worker's numbering to the file's. Span ids need no
rewriting: each attempt at a unit names its spans with its own prefix. When an attempt is followed
by another attempt at the same unit (its worker died and the unit was run again), the spans the first
left open are closed as ``interrupted`` — as a resumed run closes those of a killed session.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.payloads import ScrubBytes, payload_hash
from memprobe_engine.events.union import POINTERS_OF_KIND
from memprobe_engine.events.writer import E, EventWriter
from memprobe_engine.llm.cache import ResponseStore
from memprobe_engine.llm.types import ChatResult
from memprobe_engine.orchestration.protocol import SharedValue
from memprobe_engine.orchestration.resume import RecordedResponses

#: One thing a worker hands the driver: ``("event", line)`` (the event's JSON, scrubbed),
#: ``("payload", data)`` or ``("progress", text)``.
Item = tuple[Any, ...]
#: Carries a batch to the driver; ``wait`` True returns only once the driver's side holds it.
Send = Callable[[list[Item], bool], None]
#: Hands the driver a fresh answer (request hash, result JSON) and returns the answer the run goes on
#: from: the first any unit handed it for that request.
Claim = Callable[[str, SharedValue], SharedValue]
#: Asks the driver for a key before working it out: the value held there (waiting while another unit
#: works it out), or None — the asker works it out, then claims or releases it.
Acquire = Callable[[str], Awaitable[SharedValue]]
#: Hands a key back that the asker acquired but could not work out (its call failed).
Release = Callable[[str], None]
#: Keys of values other than model answers (a protocol's shared memo) start with this.
VALUE_PREFIX = "value:"

#: Event kinds that finish something: the batch ending with one is handed on and waited for.
FINISHING_KINDS = frozenset({"llm_call", "span_end", "embedding"})
#: A batch is handed on (without waiting) once it holds this many items.
BATCH_ITEMS = 64
#: Why the spans of an attempt whose worker was lost are closed.
LOST_WORKER = "the worker process running this unit was lost; the unit was run again"


class RelayWriter(EventWriter):
    """The writer a worker's recorder writes into: events numbered per attempt, handed on in order."""

    def __init__(self, directory: Path, header: RecordingHeader, send: Send) -> None:  # noqa: D107
        # Deliberately not EventWriter.__init__: nothing is opened or locked in a worker.
        self.directory = directory
        self.header = header
        self._next_seq = 0
        self._scrubs: list[ScrubBytes] = []
        self._send = send
        self._batch: list[Item] = []
        self._payloads: set[str] = set()
        self.closed = False
        self.failed = None

    def add_scrub(self, scrub: ScrubBytes) -> None:
        if scrub not in self._scrubs:
            self._scrubs.append(scrub)

    def write(self, event: E) -> E:
        fields = event.__dict__
        fields["seq"] = self._next_seq
        if not event.time:
            fields["time"] = time.time()
        self._next_seq += 1
        self._batch.append(("event", self._scrub(orjson.dumps(event.model_dump(exclude_none=True)))))
        self._hand_on(finished=fields.get("kind") in FINISHING_KINDS)
        return event

    def write_dict(self, data: dict[str, Any]) -> int:
        raise NotImplementedError("a worker records events, it does not copy recordings")

    def put_payload(self, data: object) -> str:
        blob = orjson.dumps(data)
        clean = self._scrub(blob)
        stored = orjson.loads(clean) if clean != blob else data
        ref = payload_hash(stored)
        if ref not in self._payloads:
            self._payloads.add(ref)
            self._batch.append(("payload", stored))
        return ref

    def progress(self, text: str) -> None:
        self._batch.append(("progress", text))
        self._hand_on(finished=False)

    def flush(self) -> None:
        """Hand on what is left and wait until the driver's side holds it."""
        self._hand_on(finished=True)

    def _hand_on(self, *, finished: bool) -> None:
        if self._batch and (finished or len(self._batch) >= BATCH_ITEMS):
            batch, self._batch = self._batch, []
            self._send(batch, finished)

    def close(self) -> None:
        self.flush()
        self.closed = True


class RelayedResponses(RecordedResponses):
    """The worker's response layer: answers from what the driver sent it (the recording being resumed,
    earlier attempts at the unit), then the persistent cache, then the driver's relay, asked before
    any request is sent (:meth:`acquire`): a request another unit has answered, or is asking right
    now, in any worker, is not sent again but waited for — as in one process, where the chat client
    shares in-flight requests. Every new answer is handed to the driver before the unit goes on (a key
    this unit acquired without waiting for the reply: the relay takes it before the batch holding the
    call's event, which the unit waits for), so a resume serves each unit the answer it used."""

    def __init__(self, recorded: dict[str, ChatResult], fallback: ResponseStore | None, claim: Claim,
                 acquire: Acquire | None = None, release: Release | None = None) -> None:
        super().__init__(recorded, fallback)
        self._claim = claim
        self._acquire = acquire
        self._release = release

    async def acquire(self, key: str, endpoint: str = "") -> ChatResult | None:
        """The answer the driver holds or awaits for ``key``; None: this unit sends it. (The relay
        keys answers by request hash alone: one run asks each role's endpoints its header pins.)"""
        if self._acquire is None:
            return None
        held = await self._acquire(key)
        if held is None:
            return None
        result = ChatResult.model_validate(held)
        self._recorded[key] = result
        return result

    def release(self, key: str, endpoint: str = "") -> None:
        if self._release is not None:
            self._release(key)

    def put(self, key: str, result: ChatResult, endpoint: str = "") -> ChatResult:
        held = ChatResult.model_validate(self._claim(key, result.model_dump(mode="json")))
        # Not RecordedResponses.put: the driver's answer is the run's, even where this node's cache
        # holds another one from an earlier run.
        if self._fallback is not None:
            self._fallback.put(key, held, endpoint)
        self._recorded[key] = held
        return held


class RelayShare:
    """:class:`~memprobe_engine.orchestration.protocol.SharedValues` through the driver's relay (keys
    prefixed so they never meet a request hash)."""

    def __init__(self, acquire: Acquire, claim: Claim, release: Release) -> None:
        self._acquire, self._claim, self._release = acquire, claim, release

    async def acquire(self, key: str) -> SharedValue:
        return await self._acquire(_value_key(key))

    def put(self, key: str, value: SharedValue) -> SharedValue:
        return self._claim(_value_key(key), value)

    def release(self, key: str) -> None:
        self._release(_value_key(key))


def _value_key(key: str) -> str:
    return key if key.startswith(VALUE_PREFIX) else VALUE_PREFIX + key


@dataclass
class _Attempt:
    unit: int
    #: The worker's seq → the file's.
    seqs: dict[int, int] = field(default_factory=dict)
    #: Spans it opened and has not closed: id → the begin event's envelope.
    open_spans: dict[str, dict[str, Any]] = field(default_factory=dict)


class EventFunnel:
    """The driver's end: writes the batches of every attempt at every unit into one recording."""

    def __init__(self, writer: EventWriter) -> None:
        self.writer = writer
        self._attempts: dict[str, _Attempt] = {}
        self._current: dict[int, str] = {}
        #: Events written for each unit (tests and the bench count them).
        self.written = 0

    def accept(self, unit: int, attempt: str, items: list[Item]) -> list[str]:
        """Write one batch of ``attempt`` at ``unit``; returns its progress lines."""
        state = self._attempts.get(attempt)
        if state is None:
            earlier = self._current.get(unit)
            if earlier is not None:
                self.close_attempt(earlier, "interrupted", LOST_WORKER)
            state = self._attempts[attempt] = _Attempt(unit)
            self._current[unit] = attempt
        lines: list[str] = []
        for item in items:
            if item[0] == "event":
                self._write_event(state, orjson.loads(item[1]))
            elif item[0] == "payload":
                self.writer.put_payload(item[1])
            elif item[0] == "progress":
                lines.append(str(item[1]))
        return lines

    def _write_event(self, state: _Attempt, data: dict[str, Any]) -> None:
        kind = str(data.get("kind"))
        for key, target in POINTERS_OF_KIND.get(kind, {}).items():
            if target == "seq" and isinstance(data.get(key), int):
                data[key] = state.seqs.get(data[key])
        local = data.get("seq")
        seq = self.writer.write_dict(data)
        self.written += 1
        if isinstance(local, int):
            state.seqs[local] = seq
        span_id = data.get("span_id")
        if kind == "span_begin" and isinstance(span_id, str):
            state.open_spans[span_id] = {k: data.get(k) for k in ("parent_span_id", "unit", "user_id", "system",
                                                                  "dimension", "layer")}
        elif kind == "span_end" and isinstance(span_id, str):
            state.open_spans.pop(span_id, None)

    def close_attempt(self, attempt: str, status: str, error: str) -> int:
        """Close the spans ``attempt`` left open, innermost first; returns how many."""
        state = self._attempts.get(attempt)
        if state is None:
            return 0
        closed = 0
        for span_id, envelope in reversed(list(state.open_spans.items())):
            self.writer.write_dict({"kind": "span_end", "span_id": span_id, "status": status, "error": error,
                                    **{k: v for k, v in envelope.items() if v is not None}})
            closed += 1
        state.open_spans.clear()
        return closed

    def close_all(self, status: str, error: str) -> int:
        """Close every attempt's open spans (the run ends: failed, interrupted)."""
        return sum(self.close_attempt(attempt, status, error) for attempt in list(self._attempts))


__all__ = ["BATCH_ITEMS", "Acquire", "EventFunnel", "Item", "LOST_WORKER", "RelayShare", "RelayWriter", "RelayedResponses",
           "Release", "Send", "VALUE_PREFIX"]
