"""Scrubbing a streamed reply: a key split across two pieces must not reach the terminal either.

:meth:`ChatClient.scrub` removes configured key values and key-shaped tokens from a whole text. A
stream arrives in pieces, and a server that echoes a key may cut it anywhere: ``"...sk-ab"`` then
``"cdef123..."``. Scrubbing each piece alone lets both halves through. :class:`StreamScrubber` holds
back the end of what it has seen while that end could still be the start of a key — a prefix of a
configured value, a key prefix (``sk-``, ``hf_``…) running to the end, a ``Bearer`` token — and
scrubs the held text together with the next piece, so what it emits is exactly what scrubbing the whole reply would emit
up to that point. At the end of the stream :meth:`flush` emits the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memprobe_engine.llm.secrets import KEY_CHAR, OPEN_SHAPES

_BEARER_BEFORE = re.compile(r"(?i)bearer\s+\Z")


class StreamScrubber:
    """Feed it the pieces of one reply in order; it returns the part that is safe to show now."""

    def __init__(self, scrub: Callable[[str], str], secrets: Sequence[str]) -> None:
        self._scrub = scrub
        self._secrets = [s for s in secrets if s]
        self._held = ""
        #: Stands for the text already emitted: a key starts only where no key character precedes
        #: it, so the held text is judged and scrubbed after this one character — ``_`` (a key
        #: character no key prefix starts with) when the text emitted last ends in a key character.
        self._before = ""

    def feed(self, piece: str) -> str:
        """The scrubbed text that can be emitted after ``piece`` (may be empty: all held back)."""
        text = self._held + piece
        cut = max(0, self._hold_from(self._before + text) - len(self._before))
        self._held = text[cut:]
        return self._emit(text[:cut])

    def flush(self) -> str:
        """Everything still held, scrubbed: call once the stream has ended."""
        text, self._held = self._held, ""
        return self._emit(text)

    def _emit(self, part: str) -> str:
        if not part:
            return ""
        shown = self._scrub(self._before + part)[len(self._before):]
        if shown:  # what scrub made of the text, as the next text is judged after it
            self._before = "_" if KEY_CHAR.fullmatch(shown[-1]) else shown[-1]
        return shown

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
        # Key shapes are found after configured values are replaced (as scrub does): mask them with
        # a character that is no key character, so what follows a value starts a new word.
        masked = text
        for secret in self._secrets:
            masked = masked.replace(secret, "*" * len(secret))
        for shape in OPEN_SHAPES:
            found = shape.search(masked)
            if found is not None:
                cut = min(cut, found.start())
        # Never cut inside a run of key characters (it may be one key, seen whole only by scrub), nor
        # between ``Bearer`` and its token...
        moved = True
        while moved:
            moved = False
            while 0 < cut < len(masked) and KEY_CHAR.match(masked, cut - 1) and KEY_CHAR.match(masked, cut):
                cut, moved = cut - 1, True
            bearer = _BEARER_BEFORE.search(masked, 0, cut)
            if bearer is not None:
                cut, moved = bearer.start(), True
        # ... nor inside a configured value that the text holds whole.
        for secret in self._secrets:
            start = text.find(secret, max(0, cut - len(secret) + 1))
            if start != -1 and start < cut < start + len(secret):
                cut = start
        return cut
