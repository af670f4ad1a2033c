"""The model calls a run made, counted once however many sessions it took.

A resumed session replays an interrupted unit from its start, answering each call an earlier
session recorded from the recording (a cache hit in the resumed session), so the recording holds
those calls twice. Within a unit, each distinct request counts as often as the one session that
asked it most often did: a replayed call is the earlier session's call again, a call only the killed
session made (a verdict the resumed unit then read back instead of asking) still counts once, and a
request a clean run asks twice in one unit counts twice. Calls outside any unit are counted in every
session; a later judgment layer (``memprobe rescore --as``) is counted on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from memprobe_engine.events.llm import LLMCall

#: One request of one unit: (layer, unit, system, request hash).
RequestOf = tuple[str | None, str | None, str | None, str]


def run_calls(recording: Path) -> Iterator[LLMCall]:
    """The recording's ``llm_call`` events of the run as a clean run of the same job records them (see
    the module docstring), in recording order."""
    from memprobe_engine.events.reader import open_recording

    session = 0
    outside: list[LLMCall] = []
    asked: dict[RequestOf, dict[int, list[LLMCall]]] = {}
    with open_recording(recording) as reader:
        for event in reader.iter_events(kinds=["run_start", "llm_call"]):
            if event.kind == "run_start":
                session += 1
            elif isinstance(event, LLMCall):
                if event.unit is None:
                    outside.append(event)
                else:
                    key = (event.layer, event.unit, event.system, event.request_hash)
                    asked.setdefault(key, {}).setdefault(session, []).append(event)
    kept = list(outside)
    for sessions in asked.values():
        most: list[LLMCall] = max(sessions.values(), key=len)  # the first session that asked it most often
        kept += most
    yield from sorted(kept, key=lambda event: event.seq)


__all__ = ["run_calls"]
