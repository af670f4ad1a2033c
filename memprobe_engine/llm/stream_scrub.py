"""Scrubbing a streamed reply: a key split across two pieces must not reach the terminal either.

:meth:`ChatClient.scrub` removes configured key values and key-shaped tokens from a whole text. A
stream arrives in pieces, and a server that echoes a key may cut it anywhere: ``"...sk-ab"`` then
``"cdef123..."``. Scrubbing each piece alone lets both halves through. :class:`StreamScrubber` holds
back the end of what it has seen while that end could still be the start of a key — a prefix of a
configured value, an ``sk-`` token running to the end, a ``Bearer`` token — and scrubs the held text
together with the next piece, so what it emits is exactly what scrubbing the whole reply would emit
up to that point. At the end of the stream :meth:`flush` emits the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

#: Ends of text that may continue into a key-shaped token (see ``_KEY_SHAPES`` in ``client.py``):
#: ``s``/``sk``/``sk-…`` and ``Bearer …`` (case-insensitive) still open at the end of the text.
_OPEN_SHAPES = (re.compile(r"(?:sk-[A-Za-z0-9_\-]*|sk|s)\Z"),
                re.compile(r"(?i)(?:bearer\s+\S*|bearer\s*|beare|bear|bea|be|b)\Z"))


class StreamScrubber:
    """Feed it the pieces of one reply in order; it returns the part that is safe to show now."""

    def __init__(self, scrub: Callable[[str], str], secrets: Sequence[str]) -> None:
        self._scrub = scrub
        self._secrets = [s for s in secrets if s]
        self._held = ""

    def feed(self, piece: str) -> str:
        """The scrubbed text that can be emitted after ``piece`` (may be empty: all held back)."""
        text = self._held + piece
        cut = self._hold_from(text)
        self._held = text[cut:]
        return self._scrub(text[:cut]) if cut else ""

    def flush(self) -> str:
        """Everything still held, scrubbed: call once the stream has ended."""
        text, self._held = self._held, ""
        return self._scrub(text) if text else ""

    def _hold_from(self, text: str) -> int:
        """Where the held-back tail starts: the earliest position from which the rest of ``text``
        could still grow into a key (``len(text)`` when nothing needs holding)."""
        cut = len(text)
        for secret in self._secrets:
            # The longest proper prefix of the secret that ends the text.
            for size in range(min(len(secret) - 1, len(text)), 0, -1):
                if text.endswith(secret[:size]):
                    cut = min(cut, len(text) - size)
                    break
        for shape in _OPEN_SHAPES:
            found = shape.search(text)
            if found is not None:
                cut = min(cut, found.start())
        # Never cut inside a configured value that the text holds whole: scrub sees all of it.
        for secret in self._secrets:
            start = text.find(secret, max(0, cut - len(secret) + 1))
            if start != -1 and start < cut < start + len(secret):
                cut = start
        return cut
