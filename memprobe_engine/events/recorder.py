"""The recorder: what engine code holds to emit events with the right span and scope.

Span and scope (unit, user, system, dimension) live in context variables, so concurrent asyncio tasks
each carry their own position in the span tree and nested code never passes ids around.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from memprobe_engine.events.base import EventBase
from memprobe_engine.events.run import INTERRUPTED_BY_CRASH, SpanBegin, SpanEnd
from memprobe_engine.events.writer import EventWriter

E = TypeVar("E", bound=EventBase)


@dataclass(frozen=True)
class SpanPosition:
    """Where an event sits: its span, the enclosing span, its unit, and the cell (user, system, dimension)."""

    span_id: str | None = None
    parent_span_id: str | None = None
    unit: str | None = None
    user_id: str | None = None
    system: str | None = None
    dimension: str | None = None


_POSITION: contextvars.ContextVar[SpanPosition] = contextvars.ContextVar("memprobe_position", default=SpanPosition())


def current_unit() -> str | None:
    """The unit (and its system) the running code records into, e.g. ``sim_01/nomem``; None outside one."""
    pos = _POSITION.get()
    if pos.unit is None:
        return None
    return pos.unit if pos.system is None else f"{pos.unit}/{pos.system}"


class Recorder:
    """Fills in span and scope, then hands the event to the writer. ``writer=None`` records nothing
    (for library use where the caller explicitly asked for no recording). ``layer`` marks every
    event it emits as part of that judgment layer (``EventBase.layer``)."""

    def __init__(self, writer: EventWriter | None, layer: str | None = None, *,
                 span_prefix: str | None = None) -> None:
        self.writer = writer
        self.layer = layer
        # Span ids only need to be unique within a recording; the prefix keeps resumed sessions apart
        # (and the units a distributed run records from several processes: ``span_prefix``).
        start = writer.next_seq if writer is not None else 0
        self._ids = itertools.count(1)
        self._prefix = span_prefix if span_prefix is not None else f"s{start}-"
        #: Spans begun and not yet ended, in opening order (the run lifecycle closes leftovers).
        self._open: dict[str, SpanPosition] = {}

    @property
    def enabled(self) -> bool:
        return self.writer is not None

    def emit(self, event: E) -> E:
        pos = _POSITION.get()
        # Straight into the model's field dict: the envelope fields are plain optional strings, and
        # pydantic's __setattr__ (no validation is configured) cost a fifth of emit's time.
        fields = event.__dict__
        if fields["span_id"] is None:
            fields["span_id"] = pos.span_id
            fields["parent_span_id"] = pos.parent_span_id
        if fields["unit"] is None:
            fields["unit"] = pos.unit
        if fields["user_id"] is None:
            fields["user_id"] = pos.user_id
        if fields["system"] is None:
            fields["system"] = pos.system
        if fields["dimension"] is None:
            fields["dimension"] = pos.dimension
        if fields["layer"] is None:
            fields["layer"] = self.layer
        if self.writer is not None:
            self.writer.write(event)
        return event

    def put_payload(self, data: object) -> str | None:
        """Store ``data`` once by hash; returns the reference (None when not recording)."""
        return self.writer.put_payload(data) if self.writer is not None else None

    @contextlib.contextmanager
    def inside(self, span_id: str) -> Iterator[None]:
        """Place the enclosed events in ``span_id``, a span another recorder opened (the run span a
        distributed run's driver holds open while its workers record the units)."""
        token = _POSITION.set(SpanPosition(span_id=span_id))
        try:
            yield
        finally:
            _POSITION.reset(token)

    @contextlib.contextmanager
    def scope(self, *, unit: str | None = None, user_id: str | None = None, system: str | None = None,
              dimension: str | None = None) -> Iterator[None]:
        """Set what the enclosed events concern, without opening a span (see :meth:`span` for ``unit``)."""
        pos = _POSITION.get()
        token = _POSITION.set(SpanPosition(
            span_id=pos.span_id, parent_span_id=pos.parent_span_id, unit=unit_of(unit, user_id, pos),
            user_id=user_id if user_id is not None else pos.user_id,
            system=system if system is not None else pos.system,
            dimension=dimension if dimension is not None else pos.dimension))
        try:
            yield
        finally:
            _POSITION.reset(token)

    @contextlib.contextmanager
    def span(self, name: str, span_kind: str, *, unit: str | None = None, user_id: str | None = None,
             system: str | None = None, dimension: str | None = None, **attrs: object) -> Iterator[str]:
        """Open a span (begin event now, end event on exit, with error status if it raised).

        ``unit`` names the unit the enclosed events belong to (a protocol-B episode id); a span that
        names a user and no unit belongs to that user's unit (protocol A's unit is its user)."""
        outer = _POSITION.get()
        span_id = self._prefix + str(next(self._ids))
        inner = SpanPosition(
            span_id=span_id, parent_span_id=outer.span_id, unit=unit_of(unit, user_id, outer),
            user_id=user_id if user_id is not None else outer.user_id,
            system=system if system is not None else outer.system,
            dimension=dimension if dimension is not None else outer.dimension)
        token = _POSITION.set(inner)
        self.emit(SpanBegin(name=name, span_kind=span_kind, attrs=attrs))
        self._open[span_id] = inner
        try:
            yield span_id
        except BaseException as err:
            status: Literal["error", "cancelled"] = "cancelled" if isinstance(
                err, (KeyboardInterrupt, GeneratorExit)) or type(err).__name__ == "CancelledError" else "error"
            if self._open.pop(span_id, None) is not None:
                self.emit(self._end(inner, status=status, error=f"{type(err).__name__}: {err}"[:500]))
            raise
        else:
            if self._open.pop(span_id, None) is not None:
                self.emit(self._end(inner))
        finally:
            _POSITION.reset(token)

    @staticmethod
    def _end(pos: SpanPosition, status: Literal["ok", "error", "cancelled"] = "ok",
             error: str | None = None) -> SpanEnd:
        # The span's own ids, spelled out: the context may point elsewhere when an inner span was
        # never exited (its task was cancelled first), and the end must close *this* span.
        return SpanEnd(status=status, error=error, span_id=pos.span_id, parent_span_id=pos.parent_span_id,
                       unit=pos.unit, user_id=pos.user_id, system=pos.system, dimension=pos.dimension)

    def close_spans_of_a_crash(self) -> list[str]:
        """End every span an earlier session of this recording opened and never closed (it was
        killed) as ``interrupted``, innermost first; returns their ids. The run lifecycle calls it
        when it continues a recording, before its ``run_start``, so a resumed recording is intact."""
        from memprobe_engine.events.reader import open_recording
        from memprobe_engine.events.spans import SpanTree

        if self.writer is None or self.writer.next_seq == 0:
            return []
        tree, begins = SpanTree(), dict[str, dict[str, Any]]()
        with open_recording(self.writer.directory) as reader:
            for line, data in reader.iter_dicts(["span_begin", "span_end"]):
                span_id, parent = data.get("span_id"), data.get("parent_span_id")
                if not isinstance(span_id, str):
                    continue
                if data["kind"] == "span_begin":
                    tree.begin(span_id, parent if isinstance(parent, str) else None, line)
                    begins.setdefault(span_id, data)
                else:
                    tree.end(span_id)
        left_open = tree.unclosed()
        for span_id in reversed(left_open):
            begun = begins[span_id]

            def text(name: str) -> str | None:
                value = begun.get(name)
                return value if isinstance(value, str) else None

            self.writer.write(SpanEnd(status="interrupted", error=INTERRUPTED_BY_CRASH, span_id=span_id,
                                      parent_span_id=text("parent_span_id"), unit=text("unit"), user_id=text("user_id"),
                                      system=text("system"), dimension=text("dimension")))
        return left_open

    def close_open_spans(self, reason: str = "the run ended before this span closed") -> int:
        """End every span still open as ``cancelled``, innermost first; returns how many. Used by the
        run lifecycle, so a recording never ends with open spans whatever stopped it."""
        closed = 0
        for span_id, pos in reversed(list(self._open.items())):
            del self._open[span_id]
            if self.writer is not None and not self.writer.closed:
                self.writer.write(self._end(pos, status="cancelled", error=reason))
                closed += 1
        return closed


def unit_of(unit: str | None, user_id: str | None, outer: SpanPosition) -> str | None:
    """The unit of a span or scope: the one it names, else the user it names (protocol A's unit is
    its user), else the enclosing one's."""
    if unit is not None:
        return unit
    return user_id if user_id is not None else outer.unit


NULL_RECORDER = Recorder(None)
