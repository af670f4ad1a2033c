"""Which of the embedded server's slots a request goes to, so a shared prompt prefix is evaluated once.

llama.cpp keeps, per slot, the KV state of the last prompt it processed and reuses the longest common
prefix with the next prompt on that slot. Left to itself the server only looks at *idle* slots: when
the slot that holds a long prefix is busy, a request sharing that prefix lands on an empty slot and
evaluates the whole prefix again — on a CPU the dearest thing a request can do (prompt evaluation runs
at a few dozen tokens per second here, and it competes for the same cores as the busy slot).

:class:`SlotRouter` therefore picks the slot itself and names it in the request (``id_slot``):

- the slot whose last prompt shares the longest prefix with this one, if it is idle;
- that slot even while it is busy (the server queues the request on it) when waiting is cheaper than
  recomputing — when it shares at least ``wait_chars`` more characters than the best idle slot;
- else (no idle slot shares more than a few hundred characters) the least recently used idle slot,
  whose state is then overwritten (llama.cpp's host-memory cache, which could keep it, stays off:
  see :data:`~memprobe_engine.llm.backends.local_params.HOST_PROMPT_CACHE_MIB`).

:class:`RequestGate` lets a request run alone when its answer must not depend on what else the server
computes (the embedded server's deterministic requests).

Prefixes are compared on the messages as text (role tag + content in order), which is what the chat
template lays out token by token: a longer common text prefix means a longer common token prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from os.path import commonprefix
from typing import Sequence

from memprobe_engine.llm.types import ChatMessage

#: Shared characters (about 3.5 per token) above which a request waits for the busy slot that holds
#: them: ~220 tokens, six seconds of prompt evaluation for the 1.5B model on two cores. On a CPU the
#: cores are saturated whenever several requests are in flight, so evaluating a shared prefix twice
#: in parallel is pure loss while waiting costs only this request's latency. (At 2048, the three
#: concurrent dump_all slot-fills of the quick run, sharing 1,961 characters of store, each
#: evaluated it.)
DEFAULT_WAIT_CHARS = 768
#: A common prefix shorter than this (a role tag, the start of a system prompt) is not worth keeping a
#: slot for: such a request goes to the least recently used idle slot instead.
MIN_AFFINITY_CHARS = 256


def prompt_text(messages: Sequence[ChatMessage]) -> str:
    """The messages as one string in prompt order, for prefix comparison only."""
    return "".join(f"\x1e{m.role}\x1f{m.content}" for m in messages)


@dataclass
class Slot:
    """What the router knows about one server slot."""

    index: int
    prompt: str = ""       # the last prompt sent to this slot (its KV state starts with it)
    in_flight: int = 0     # requests sent to this slot and not yet answered
    last_used: int = 0     # router clock of the last assignment, for least-recently-used choice
    #: The prompt tokens of the last request on this slot when it was served exactly (its whole steps
    #: hold what a whole-prompt evaluation computes: :mod:`.aligned_reuse`); None when unknown.
    exact_tokens: tuple[int, ...] | None = None


class SlotRouter:
    """Assigns each request a slot by prefix affinity; one router per running server.

    Not thread-safe: every caller runs on the event loop of the run (the chat client's backends)."""

    def __init__(self, n_slots: int, *, wait_chars: int = DEFAULT_WAIT_CHARS) -> None:
        if n_slots < 1:
            raise ValueError(f"a server has at least one slot, not {n_slots}")
        self.slots = [Slot(index) for index in range(n_slots)]
        self.wait_chars = wait_chars
        self._clock = 0

    def acquire(self, text: str) -> Slot:
        """Choose the slot for a prompt and mark it in use; pair with :meth:`release`."""
        slot = self.choose(text)
        self._clock += 1
        slot.prompt, slot.last_used = text, self._clock
        slot.in_flight += 1
        return slot

    def release(self, slot: Slot) -> None:
        slot.in_flight = max(0, slot.in_flight - 1)

    def choose(self, text: str) -> Slot:
        """The slot for ``text`` (see the module docstring); does not change any state."""
        shared = {slot.index: len(commonprefix((slot.prompt, text))) for slot in self.slots}
        idle = [slot for slot in self.slots if slot.in_flight == 0]
        best = max(self.slots, key=lambda slot: (shared[slot.index], -slot.in_flight))
        if not idle:
            return best
        best_idle = max(idle, key=lambda slot: (shared[slot.index], -slot.last_used))
        if best.in_flight and shared[best.index] - shared[best_idle.index] >= self.wait_chars:
            return best
        if shared[best_idle.index] >= MIN_AFFINITY_CHARS:
            return best_idle
        return min(idle, key=lambda slot: slot.last_used)


class RequestGate:
    """Shared requests run together; an exclusive request runs with nothing else in flight.

    An exclusive request waits for the shared ones in flight to finish, and a shared request that
    arrives while an exclusive one waits or runs waits behind it, so exclusive requests are not
    starved. Bound to one event loop (``EmbeddedServer.gate`` keeps one per loop)."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextlib.asynccontextmanager
    async def hold(self, *, exclusive: bool) -> AsyncIterator[None]:
        async with self._changed:
            if exclusive:
                self._waiting += 1
                try:
                    await self._changed.wait_for(lambda: not self._exclusive and self._shared == 0)
                finally:
                    self._waiting -= 1
                self._exclusive = True
            else:
                await self._changed.wait_for(lambda: not self._exclusive and self._waiting == 0)
                self._shared += 1
        try:
            yield
        finally:
            async with self._changed:
                if exclusive:
                    self._exclusive = False
                else:
                    self._shared -= 1
                self._changed.notify_all()
