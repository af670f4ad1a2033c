"""Run lifecycle events: run start/end, span begin/end, errors and metrics."""

from __future__ import annotations

from typing import Any, Literal

from memprobe_engine.events.base import EventBase

#: The ``error`` of a span a resumed run closed: the session that opened it was killed (SIGKILL,
#: power loss) before it could close it. Such a span is a finished fact about the run, not damage.
INTERRUPTED_BY_CRASH = "interrupted by an earlier crash"


class RunStart(EventBase):
    """First event of a run (and of every resumed session of it)."""

    kind: Literal["run_start"] = "run_start"
    run_id: str
    suite: str
    resumed: bool = False
    note: str | None = None


class RunEnd(EventBase):
    """Last event of a run session; ``status`` says whether the run finished its work."""

    kind: Literal["run_end"] = "run_end"
    status: Literal["completed", "failed", "interrupted"]
    reason: str | None = None


class SpanBegin(EventBase):
    """Opens a span; its ``span_id`` is the new span, ``parent_span_id`` the enclosing one.

    ``span_kind`` is one of run, user, task, episode, turn, stage, call (free text so that later
    protocols can add their own levels without a schema bump).
    """

    kind: Literal["span_begin"] = "span_begin"
    name: str
    span_kind: str
    attrs: dict[str, Any] = {}


class SpanEnd(EventBase):
    """Closes the span named by ``span_id``. ``interrupted``: closed by a later session of the run
    because the one that opened it was killed first (``error`` is :data:`INTERRUPTED_BY_CRASH`)."""

    kind: Literal["span_end"] = "span_end"
    status: Literal["ok", "error", "cancelled", "interrupted"] = "ok"
    error: str | None = None


class ErrorEvent(EventBase):
    """Something failed; ``where`` names the component, ``message`` what happened and the fix."""

    kind: Literal["error"] = "error"
    where: str
    error_type: str
    message: str
    recoverable: bool = False


class Metric(EventBase):
    """A named number computed from earlier events (``scope`` says over what, e.g. mode or category)."""

    kind: Literal["metric"] = "metric"
    name: str
    value: float | None = None
    scope: dict[str, str] = {}
