"""Upgrade-on-read: events stored under an older schema version are rewritten to the current one.

Each upgrader takes an event dict of version ``v`` and returns it in version ``v + 1``; the reader
chains them. Recordings on disk are never rewritten.

Version history:
- 0: the development prototype's layout — ``type`` for the event kind, ``ts`` for wall time,
  ``span``/``parent`` for the span ids, and ``llm_call.prompt_tokens``/``completion_tokens`` at the
  top level instead of a ``usage`` object.
- 1: the current event layout (see ``docs/recording-format.md``), no per-line checksum.
- 2: the same events; every line the writer appends ends in a CRC-32 member ``"ck"``, which the
  reader checks and strips before the event is parsed (``checksum.py``). Event dicts are unchanged,
  so the 1 -> 2 upgrader is the identity; a version-1 recording is read without line checks.
- 3: ``unit`` names the unit a line belongs to (protocol A: the user; protocol B: the episode).
  Before, protocol B wrote its episode id into ``user_id``; the 2 -> 3 upgrader moves it to
  ``unit`` in a ``paradigms`` recording and copies ``user_id`` to ``unit`` in any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memprobe_engine.events.base import SCHEMA_VERSION

EventDict = dict[str, Any]


def _v0_to_v1(event: EventDict, suite: str) -> EventDict:
    renames = {"type": "kind", "ts": "time", "span": "span_id", "parent": "parent_span_id"}
    out = {renames.get(key, key): value for key, value in event.items()}
    if out.get("kind") == "llm_call" and ("prompt_tokens" in out or "completion_tokens" in out):
        out["usage"] = {"prompt_tokens": out.pop("prompt_tokens", 0),
                        "completion_tokens": out.pop("completion_tokens", 0)}
    return out


def _v1_to_v2(event: EventDict, suite: str) -> EventDict:
    return event


#: The header suite whose older events carry the episode id in ``user_id``.
_EPISODE_SUITE = "paradigms"


def _v2_to_v3(event: EventDict, suite: str) -> EventDict:
    # A line a newer MemProbe appended to a resumed version-2 recording already names its unit.
    if "unit" in event or event.get("user_id") is None:
        return event
    out = dict(event)
    out["unit"] = out.pop("user_id") if suite == _EPISODE_SUITE else out["user_id"]
    return out


UPGRADERS: dict[int, Callable[[EventDict, str], EventDict]] = {0: _v0_to_v1, 1: _v1_to_v2, 2: _v2_to_v3}
#: Versions this MemProbe can read: every one with an upgrader, and the current one.
READABLE_VERSIONS: frozenset[int] = frozenset(UPGRADERS) | {SCHEMA_VERSION}


def upgrade_event(event: EventDict, from_version: int, suite: str = "") -> EventDict:
    """Bring one stored event dict from ``from_version`` up to :data:`SCHEMA_VERSION`; ``suite`` is
    the recording header's (some upgrades depend on the protocol that wrote the line).

    ``from_version`` must be in :data:`READABLE_VERSIONS` (``read_header`` refuses any other).
    """
    for version in range(from_version, SCHEMA_VERSION):
        event = UPGRADERS[version](event, suite)
    return event
