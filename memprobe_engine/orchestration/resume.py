"""Resume: the same command against an existing recording continues it.

A run's header holds the fingerprint of everything that decides its results; a resume with other
settings is refused (pacing aside: a faster server or more concurrency may change). Units whose
span closed ``ok`` are skipped; every model response already in the recording is served back by
request hash (recorded as a cache hit), so an interrupted unit is replayed to where it stopped
without repeating a single model request, then goes on live.

:func:`read_resume` opens the recording once: the header check and the pass over its events.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.events.header import HEADER_FILE
from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.events.payloads import PayloadReader
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.llm.backends.replay import recorded_answers
from memprobe_engine.llm.cache import ResponseStore, SharedStore
from memprobe_engine.llm.types import ChatResult, Usage

#: A unit as its span names it: (the user or episode id, the system).
UnitKey = tuple[str, str]


def fingerprint(config: dict[str, Any]) -> str:
    """The run's identity in its header. Byte for byte what every shipped recording was made with:
    changing it would refuse every existing recording's resume."""
    return hashlib.sha256(orjson.dumps(config, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


#: Model-spec fields that change how fast or how patiently a model is asked, never what it is asked
#: (pacing, retries, the embedded server's slots, prompt cache and draft): a resume may change them.
PACING_FIELDS = frozenset({"concurrency", "max_retries", "timeout_s", "startup_timeout_s", "slots", "prompt_cache",
                           "draft", "origin"})


def protocol_view(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without its fingerprint and without the pacing fields of its model specs."""
    view = {key: value for key, value in config.items() if key != "fingerprint"}
    models = view.get("models")
    roles = models.get("models") if isinstance(models, dict) else None
    if isinstance(models, dict) and isinstance(roles, dict):
        view["models"] = {**models, "models": {
            role: {k: v for k, v in spec.items() if k not in PACING_FIELDS} if isinstance(spec, dict) else spec
            for role, spec in roles.items()}}
    return view


def can_resume(previous: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether a run recorded with header config ``previous`` may be continued with ``config``: the
    same fingerprint, or the same settings up to pacing (a faster server, more concurrency)."""
    return HeaderConfig.of(previous).fingerprint == HeaderConfig.of(config).fingerprint \
        or protocol_view(previous) == protocol_view(config)


def different_settings_message(record: Path, previous: dict[str, Any], config: dict[str, Any]) -> str:
    return (f"{record} holds a run with different settings (fingerprint {HeaderConfig.of(previous).fingerprint} ≠ "
            f"{HeaderConfig.of(config).fingerprint}). Resume it with the same command and flags, or pass another --record "
            f"folder.")


class RecordedResponses:
    """A cache layer that answers from the recording being resumed, then from the persistent cache.
    The recording's answers are keyed by request hash alone: a resume asks the endpoints it was
    recorded with (its header pins them), and a recording made before the endpoint was part of the
    cache key must still be served."""

    def __init__(self, recorded: dict[str, ChatResult], fallback: ResponseStore | None) -> None:
        self._recorded = recorded
        self._fallback = fallback

    def get(self, key: str, endpoint: str = "") -> ChatResult | None:
        hit = self._recorded.get(key)
        if hit is not None:
            return hit
        return self._fallback.get(key, endpoint) if self._fallback is not None else None

    def put(self, key: str, result: ChatResult, endpoint: str = "") -> ChatResult:
        if self._fallback is not None:
            result = self._fallback.put(key, result, endpoint)
        return self._recorded.setdefault(key, result)

    async def acquire(self, key: str, endpoint: str = "") -> ChatResult | None:
        """Claim ``key`` before it is sent, where the persistent cache is shared with other processes
        (shards of the run on one file system): the answer one of them stored or is asking for, or
        None — send it. Without a cache (``--no-cache``) nothing is shared: always None."""
        if isinstance(self._fallback, SharedStore):
            return await self._fallback.acquire(key, endpoint)
        return None

    def release(self, key: str, endpoint: str = "") -> None:
        if isinstance(self._fallback, SharedStore):
            self._fallback.release(key, endpoint)


@dataclass
class ResumeState:
    """What an earlier session of a run finished, read from its recording."""

    #: The header's configuration (None for a recording that does not exist yet).
    config: dict[str, Any] | None = None
    completed_units: set[UnitKey] = field(default_factory=set)
    responses: dict[str, ChatResult] = field(default_factory=dict)


def _add_responses(state: ResumeState, event: AnyEvent, payloads: PayloadReader) -> None:
    """Every round of a repaired (or excluded) call, so a resumed call repairs exactly as the
    recorded one did instead of asking its repair rounds again."""
    if event.kind != "llm_call" or event.error is not None or event.response_text is None:
        return
    for key, text in recorded_answers(event.model_dump(mode="json"), payloads).items():
        usage = event.usage if key == event.request_hash else None
        state.responses.setdefault(key, ChatResult(text=text, model=event.model, usage=Usage(
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0)))


def read_resume(record: Path, *, unit_of: Callable[[SpanBegin], UnitKey | None] | None = None,
                check: Callable[[dict[str, Any]], None] | None = None, extra_kinds: Iterable[str] = (),
                on_event: Callable[[AnyEvent], None] | None = None) -> ResumeState:
    """Read ``record`` once: its header config (``check`` may refuse it by raising, before any event
    is read), the units whose span ``unit_of`` names and that closed ``ok``, the recorded model
    responses, and the ``extra_kinds`` events handed to ``on_event`` (protocol-specific state).

    A folder without a recording gives an empty state."""
    state = ResumeState()
    if not (record / HEADER_FILE).exists():
        return state
    payloads = PayloadReader(record)
    open_units: dict[str, UnitKey] = {}
    extra = frozenset(extra_kinds)
    with open_recording(record) as reader:
        state.config = dict(reader.header.config)
        if check is not None:
            check(state.config)
        for event in reader.iter_events(kinds=["span_begin", "span_end", "llm_call", *extra]):
            if event.kind == "span_begin":
                key = unit_of(event) if unit_of is not None else None
                if key is not None and event.span_id is not None:
                    open_units[event.span_id] = key
            elif event.kind == "span_end":
                if event.span_id is not None and event.span_id in open_units and event.status == "ok":
                    state.completed_units.add(open_units[event.span_id])
            elif event.kind == "llm_call":
                _add_responses(state, event, payloads)
            if event.kind in extra and on_event is not None:
                on_event(event)
    return state


__all__ = ["PACING_FIELDS", "RecordedResponses", "ResumeState", "UnitKey", "can_resume", "fingerprint",
           "protocol_view", "read_resume"]
