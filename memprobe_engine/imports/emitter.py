"""A dict-level twin of :class:`~memprobe_engine.events.recorder.Recorder` for bulk imports.

An import writes hundreds of thousands of events whose values are already plain JSON; building and
dumping a pydantic model per event would cost more than reading the release. :class:`DictEmitter`
keeps the recorder's contract — span ids ``s<first seq>-<n>``, ``span_begin``/``span_end`` pairs,
the enclosing span and its (unit, user, system, dimension) scope on every event, ``None`` fields left
out as ``model_dump(exclude_none=True)`` does — and hands each dict to ``EventWriter.write_dict``.
Every dict starts with ``seq`` then ``time``, the byte layout readers that peek at ``{"seq":`` rely on.
The functional tests parse every imported event with the real models, so a field this module gets
wrong fails there rather than in a reader later.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator

from memprobe_engine.events.recorder import SpanPosition, unit_of
from memprobe_engine.events.writer import EventWriter


class DictEmitter:
    """Writes event dicts with the span tree and scope of the code that emits them."""

    def __init__(self, writer: EventWriter) -> None:
        self.writer = writer
        self._ids = itertools.count(1)
        self._prefix = f"s{writer.next_seq}-"
        self._position = SpanPosition()
        self.events = 0

    def put_payload(self, data: object) -> str:
        """Store ``data`` once by content hash; returns the ``sha256:`` reference."""
        return self.writer.put_payload(data)

    def emit(self, kind: str, **fields: object) -> int:
        """Write one event of ``kind`` in the current position; returns its ``seq``."""
        pos = self._position
        data: dict[str, object] = {"seq": 0, "time": time.time()}
        for key, value in (("span_id", pos.span_id), ("parent_span_id", pos.parent_span_id), ("unit", pos.unit),
                           ("user_id", pos.user_id), ("system", pos.system), ("dimension", pos.dimension)):
            if value is not None:
                data[key] = value
        data["kind"] = kind
        for key, given in fields.items():
            if given is not None:
                data[key] = given
        self.events += 1
        return self.writer.write_dict(data)

    @contextlib.contextmanager
    def span(self, name: str, span_kind: str, *, unit: str | None = None, user_id: str | None = None,
             system: str | None = None, dimension: str | None = None, **attrs: object) -> Iterator[str]:
        """Open a span: ``span_begin`` now, ``span_end`` (ok, or error with the exception) on exit."""
        outer = self._position
        span_id = self._prefix + str(next(self._ids))
        self._position = SpanPosition(
            span_id=span_id, parent_span_id=outer.span_id, unit=unit_of(unit, user_id, outer),
            user_id=user_id if user_id is not None else outer.user_id,
            system=system if system is not None else outer.system,
            dimension=dimension if dimension is not None else outer.dimension)
        self.emit("span_begin", name=name, span_kind=span_kind, attrs=attrs)
        try:
            yield span_id
        except BaseException as err:
            self.emit("span_end", status="error", error=f"{type(err).__name__}: {err}"[:500])
            raise
        else:
            self.emit("span_end", status="ok")
        finally:
            self._position = outer
