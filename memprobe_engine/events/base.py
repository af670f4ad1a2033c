"""Fields every event carries: order, time, span tree position and what it concerns."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict

from memprobe_engine.errors import ConfigError

#: Version of the on-disk event schema. Bump it together with an upgrader in ``upgrade.py``.
#: 2: every line ends in a CRC-32 member (``events/checksum.py``).
#: 3: ``unit`` names the unit a line belongs to, whatever the protocol (protocol B stopped writing
#:    its episode id into ``user_id``).
SCHEMA_VERSION = 3


class PointsAt:
    """Field metadata: the field refers to another part of the same recording — ``"seq"`` (another
    event's sequence number) or ``"span"`` (a span id). Declared here, on the models, so a tool that
    renumbers or re-prefixes a recording (``memprobe merge``) reads the declaration instead of
    keeping a list of its own."""

    def __init__(self, target: Literal["seq", "span"]) -> None:
        self.target = target

    def __repr__(self) -> str:
        return f"PointsAt({self.target!r})"


#: The ``seq`` of another event of the same recording.
SeqRef = Annotated[int | None, PointsAt("seq")]
#: A span id of the same recording.
SpanRef = Annotated[str | None, PointsAt("span")]


def pointer_fields(model: type[BaseModel]) -> dict[str, Literal["seq", "span"]]:
    """The fields of ``model`` that point at other events or spans, with what they point at."""
    return {name: meta.target for name, info in model.model_fields.items()
            for meta in info.metadata if isinstance(meta, PointsAt)}


#: A judgment layer's name: letters, digits and ``_.:-`` (it is shown in tables and typed on command lines).
LAYER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


def check_layer_name(name: str, *, where: str) -> str:
    """``name`` if it can name a judgment layer; ConfigError naming ``where`` otherwise."""
    if not LAYER_NAME.match(name):
        raise ConfigError(f"{where} {name!r}: a layer name is 1–64 letters, digits or _.:- (starting with a "
                          f"letter or digit), e.g. judge-1.5b.")
    return name


class EventBase(BaseModel):
    """Common envelope. ``seq`` and ``time`` are filled in by the writer when left at their defaults.

    ``span_id``/``parent_span_id`` place the event in the run → user → task/episode → turn → stage
    tree; ``unit``/``system`` say which unit of the run it belongs to, whatever the protocol (the
    unit's subject: a simulated user in protocol A, an episode in protocol B), and
    ``user_id``/``dimension`` which protocol-A cell it concerns, so a reader can filter without
    walking the span tree.

    ``layer`` names the judgment layer an event belongs to: null for the run's own judgments, a
    name for a later re-judgment kept beside them (``memprobe rescore --as``, a protocol-B reader
    re-run). Readers of outcomes fold each layer separately, so a named layer never replaces the
    run's own scores; ``memprobe compare --layers`` sets the layers side by side.
    """

    model_config = ConfigDict(extra="forbid", frozen=False)

    seq: int = -1
    time: float = 0.0
    span_id: SpanRef = None
    parent_span_id: SpanRef = None
    unit: str | None = None
    user_id: str | None = None
    system: str | None = None
    dimension: str | None = None
    layer: str | None = None
