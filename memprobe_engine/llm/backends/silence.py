"""Telling a silent endpoint from a busy one while a call waits for its answer.

A server that accepts a connection and then never answers (hung, wedged behind a dead upstream)
looked, from the open request, exactly like a busy one: no byte until the reply is done, and a
model on a CPU can take minutes over a long prompt. So the request timeout had to stay long, and a
hung endpoint was reported after ``timeout_s`` × attempts (50 minutes by default) with nothing
printed meanwhile. Instead, while a call waits, the endpoint is asked a cheap question on a second
connection (``GET /models``): any HTTP answer means it is alive and busy, and the call waits on; no
answer within :data:`PROBE_TIMEOUT_S` means it is silent, and the call ends at once with one line
saying so — a retry would only wait on the same hung server again. While calls wait, one heartbeat
line per endpoint (and model) goes to the ``memprobe_engine.llm`` log (stderr, or a command's
progress display) at most every :data:`HEARTBEAT_S`, with how many calls wait and the oldest's wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from memprobe_engine.errors import LLMError

log = logging.getLogger(__name__)

#: The endpoint is first probed after this long without an answer, then again as often.
SILENCE_CHECK_S = 40.0
#: How long the probe waits for any answer: a silent endpoint is reported within 55 s by default.
PROBE_TIMEOUT_S = 15.0
#: A waiting call says so this often.
HEARTBEAT_S = 60.0

T = TypeVar("T")

#: The calls waiting now per (endpoint, model): when each started.
_waiting: dict[tuple[str, str], dict[int, float]] = {}
#: When each (endpoint, model)'s heartbeat line was last written.
_last_beat: dict[tuple[str, str], float] = {}


def _beat(key: tuple[str, str]) -> None:
    """One heartbeat line for the endpoint, unless another of its calls wrote one within HEARTBEAT_S."""
    now = time.monotonic()
    if now - _last_beat.get(key, float("-inf")) < HEARTBEAT_S * 0.99:
        return
    _last_beat[key] = now
    waiting = _waiting.get(key, {})
    oldest = now - min(waiting.values(), default=now)
    calls = f"{len(waiting)} calls wait, the oldest" if len(waiting) > 1 else "a call waits"
    log.warning("still waiting for %s (model %s): %s for %.0f s with no answer yet; it answers probes, so it is "
                "busy, not hung", key[0], key[1], calls, oldest)


class EndpointSilent(LLMError):
    """The endpoint took the request and then answered nothing, not even a probe on a new connection."""


async def answer_or_silence(pending: Awaitable[T], *, url: str, model: str,
                            answers: Callable[[], Awaitable[bool]]) -> T:
    """Await ``pending`` (one request to ``url``); probe with ``answers`` while it waits, and raise
    EndpointSilent when the probe finds the endpoint silent."""
    task = asyncio.ensure_future(pending)
    started = time.monotonic()
    next_probe, next_beat = SILENCE_CHECK_S, HEARTBEAT_S
    key = (url, model)
    _waiting.setdefault(key, {})[id(task)] = started
    try:
        while True:
            waited = time.monotonic() - started
            await asyncio.wait({task}, timeout=max(0.0, min(next_probe, next_beat) - waited))
            if task.done():
                return task.result()
            waited = time.monotonic() - started
            if waited >= next_beat:
                _beat(key)
                next_beat += HEARTBEAT_S
            if waited >= next_probe:
                alive = await answers()
                if task.done():
                    return task.result()
                if not alive:
                    raise EndpointSilent(
                        f"{url} took the request for model {model!r} but has sent nothing for "
                        f"{time.monotonic() - started:.0f} s, and did not answer GET {url}/models within "
                        f"{PROBE_TIMEOUT_S:.0f} s either: the server is hung or not reading. Restart it, or check "
                        f"that the URL in the model spec is the server you meant; more retries or a longer "
                        f"timeout_s will not help.")
                next_probe = time.monotonic() - started + SILENCE_CHECK_S
    finally:
        calls = _waiting.get(key, {})
        calls.pop(id(task), None)
        if not calls:
            _waiting.pop(key, None)
            _last_beat.pop(key, None)
        if task.done():
            if not task.cancelled():
                task.exception()  # seen: a request that failed as the run was ending (its client closed)
                # leaves no "Task exception was never retrieved" traceback after the run's one line
        else:
            task.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
