"""Fields every event carries: order, time, span tree position and what it concerns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

#: Version of the on-disk event schema. Bump it together with an upgrader in ``upgrade.py``.
#: 2: every line ends in a CRC-32 member (``events/checksum.py``).
#: 3: ``unit`` names the unit a line belongs to, whatever the protocol (protocol B stopped writing
#:    its episode id into ``user_id``).
SCHEMA_VERSION = 3


class EventBase(BaseModel):
    """Common envelope. ``seq`` and ``time`` are filled in by the writer when left at their defaults.

    ``span_id``/``parent_span_id`` place the event in the run → user → task/episode → turn → stage
    tree; ``unit``/``system`` say which unit of the run it belongs to, whatever the protocol (the
    unit's subject: a simulated user in protocol A, an episode in protocol B), and
    ``user_id``/``dimension`` which protocol-A cell it concerns, so a reader can filter without
    walking the span tree.
    """

    model_config = ConfigDict(extra="forbid", frozen=False)

    seq: int = -1
    time: float = 0.0
    span_id: str | None = None
    parent_span_id: str | None = None
    unit: str | None = None
    user_id: str | None = None
    system: str | None = None
    dimension: str | None = None
