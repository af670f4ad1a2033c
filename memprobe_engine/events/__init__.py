"""The recording format: small pydantic event models, a writer, a lazy reader and its index.

A recording is a directory holding ``header.json``, an append-only ``events.jsonl`` (one event per
line, orjson, flushed per event) and ``payloads.jsonl`` (large repeated payloads stored once by
content hash). See ``docs/recording-format.md``.
"""

from memprobe_engine.events.base import SCHEMA_VERSION, EventBase
from memprobe_engine.events.union import EVENT_KINDS, Event, parse_event

__all__ = ["SCHEMA_VERSION", "EventBase", "Event", "EVENT_KINDS", "parse_event"]
