"""What a merged recording tells of its shards: the one declaration of how ``memprobe merge`` marks them.

A merged recording lists its inputs in the header (``config["merged_from"]``, in order) and keeps
each input's span ids behind that input's prefix: ``a/`` for the first, ``b/`` … ``z/``, then
``aa/``, ``ab/`` … (each shard numbered its spans on its own, so the prefix keeps them unique). The
span id of any event therefore names the shard that recorded it — and so which shards sent a model
request: an ``llm_call`` that is not a ``cache_hit`` and has no ``error`` was sent to the model.

Shards that share no response cache (separate cache folders, ``--no-cache``) each send what their
units have in common, such as protocol A's stage-0 verdict of a user whose systems fell into
different shards. :class:`AskedTwice` counts those requests; ``memprobe merge`` prints the count as
it writes the merged recording, ``memprobe report`` reads it back from the merged recording's events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PREFIX = re.compile(r"^([a-z]+)/")


def span_prefix(index: int) -> str:
    """The span-id prefix of input ``index`` (0-based) of a merge: ``a/``, ``b/`` … ``z/``, ``aa/`` …"""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters + "/"


def input_of_span(span_id: object) -> str | None:
    """The prefix (``a/``…) naming the merge input a span id of a merged recording came from; None for
    an id no merge wrote."""
    found = _PREFIX.match(span_id) if isinstance(span_id, str) else None
    return found.group(0) if found else None


@dataclass
class AskedTwice:
    """Model requests (by request hash) sent by more than one input of a merged recording."""

    #: Request hash → the inputs (span-id prefixes) that sent it.
    senders: dict[str, set[str]] = field(default_factory=dict)

    def add(self, event: Mapping[str, Any]) -> None:
        """Take in one event of a merged recording (as its dict; any kind: only sent ``llm_call`` s count)."""
        if event.get("kind") != "llm_call" or event.get("cache_hit") or event.get("error") is not None:
            return
        key, shard = event.get("request_hash"), input_of_span(event.get("span_id"))
        if isinstance(key, str) and shard is not None:
            self.senders.setdefault(key, set()).add(shard)

    @property
    def requests(self) -> int:
        """Distinct requests more than one shard sent."""
        return sum(1 for shards in self.senders.values() if len(shards) > 1)

    @property
    def sent_again(self) -> int:
        """Sends beyond the first of each request (equal to :attr:`requests` with two shards)."""
        return sum(len(shards) - 1 for shards in self.senders.values())

    def line(self) -> str:
        """The sentence ``merge`` and ``report`` print ("" when no request was sent twice)."""
        if not self.requests:
            return ""
        extra = f", {self.sent_again:,} sends beyond the first" if self.sent_again != self.requests else ""
        return (f"{self.requests:,} model request(s) were sent by more than one shard{extra}: shards that share no "
                f"response cache each ask what their units have in common (shards on one cache folder, or "
                f"--executor ray, ask each request once).")


def asked_twice(recording: Path) -> AskedTwice:
    """The requests more than one shard of merged ``recording`` sent (nothing for a recording that no
    merge wrote)."""
    from memprobe_engine.events.header import read_header
    from memprobe_engine.events.header_config import HeaderConfig
    from memprobe_engine.events.reader import open_recording

    counted = AskedTwice()
    if not HeaderConfig.of(read_header(recording)).merged_from:
        return counted
    with open_recording(recording) as reader:
        for _, event in reader.iter_dicts(kinds=["llm_call"]):  # damaged lines skipped (the report warns)
            counted.add(event)
    return counted


__all__ = ["AskedTwice", "asked_twice", "input_of_span", "span_prefix"]
