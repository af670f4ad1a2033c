"""What an API key looks like: the one list of key shapes every scrubber uses.

A key MemProbe knows — the value of a configured key variable, or a key a client sent the
recording proxy — is removed wherever it appears, whatever its shape (the writer filters every
line and payload for it). The shapes below are the safety net for keys MemProbe was never told
about: prefixes that public providers put on their keys (OpenAI and Anthropic ``sk-``/``sk-ant-``,
Hugging Face ``hf_``, Groq ``gsk_``, Google ``AIza``, GitHub ``ghp_``/``github_pat_``…, xAI
``xai-``…) followed by a long run of key characters, and ``Bearer`` tokens. A bare 64-hex-digit
token is deliberately *not* a shape: request hashes and payload addresses have exactly that form,
so such a key is scrubbed only as a known value.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

import orjson

#: Key prefixes and the fewest key characters that must follow before a token counts as a key
#: (short enough for every real key of that kind, long enough that ``hf_hub`` or ``sk-learn`` in
#: ordinary text is left alone).
KEY_PREFIXES: tuple[tuple[str, int], ...] = (
    ("sk-", 8), ("hf_", 20), ("gsk_", 20), ("AIza", 30), ("ghp_", 20), ("gho_", 20), ("ghu_", 20), ("ghs_", 20),
    ("ghr_", 20), ("github_pat_", 20), ("xai-", 20), ("glpat-", 16), ("pplx-", 20), ("nvapi-", 20), ("r8_", 20),
    ("xoxb-", 10), ("xoxp-", 10), ("AKIA", 16),
)
_KEY_CHAR = r"[A-Za-z0-9_\-]"
KEY_CHAR = re.compile(_KEY_CHAR)
#: A key starts where no key character precedes it (``task-oriented`` holds no ``sk-`` key).
_START = rf"(?<!{_KEY_CHAR})"
#: A prefixed key, with the prefix as group ``prefix`` (it is kept: ``hf_***`` says what was removed).
KEY_SHAPE = re.compile(_START + "(?P<prefix>" + "|".join(
    rf"{re.escape(prefix)}(?={_KEY_CHAR}{{{size},}})" for prefix, size in KEY_PREFIXES) + rf"){_KEY_CHAR}+")
#: A bearer token (an Authorization header echoed back); ``Bearer`` is kept.
BEARER_SHAPE = re.compile(r"(?i)(?P<prefix>bearer\s+)\S+")

#: Ends of a text that may still grow into a key when more text follows (a streamed reply): a key
#: prefix running to the end, a proper beginning of a prefix, or ``Bearer`` and a token so far.
OPEN_SHAPES = (
    re.compile(_START + "(?:" + "|".join(
        sorted({re.escape(prefix[:size]) for prefix, _ in KEY_PREFIXES for size in range(1, len(prefix))} |
               {rf"{re.escape(prefix)}{_KEY_CHAR}*" for prefix, _ in KEY_PREFIXES}, key=len, reverse=True))
    + r")\Z"),
    re.compile(r"(?i)(?:bearer\s+\S*|bearer\s*|beare|bear|bea|be|b)\Z"),
)


#: Cheap tests that a text may hold a shape at all: the key-shape regex tries every position of a
#: text, which cost ~0.3 ms on a long prompt, while a plain substring search costs microseconds.
_PREFIXES = tuple(prefix for prefix, _ in KEY_PREFIXES)
_BEARER_WORD = re.compile(r"(?i)bearer")


def scrub_shapes(text: str) -> str:
    """``text`` with every key-shaped token replaced by its prefix and ``***``."""
    if any(prefix in text for prefix in _PREFIXES):
        text = KEY_SHAPE.sub(lambda found: found.group("prefix") + "***", text)
    if _BEARER_WORD.search(text) is not None:
        text = BEARER_SHAPE.sub(lambda found: found.group("prefix") + "***", text)
    return text


def key_label(key: str, salt: str) -> str:
    """A short name for a key that cannot be turned back into it: ``client-`` and 8 hex digits of
    the salted sha256 (the same key and salt always give the same name)."""
    return "client-" + hashlib.sha256(f"{salt}\0{key}".encode()).hexdigest()[:8]


#: How many distinct texts a :class:`KeyScrubber` remembers before it starts over.
SCRUB_MEMO_SIZE = 20_000


class KeyScrubber:
    """The keys one chat client knows — the values of its key variables, and keys learned while it
    runs — and the texts it has already cleaned of them. A conversation's messages are scrubbed again
    with every later call of it, and the key-shape regexes cost more than the rest of a record: hence
    the memo."""

    def __init__(self, variables: Iterable[str], env: Mapping[str, str]) -> None:
        self._variables = frozenset(variables)
        self._env = env
        self._learned: set[str] = set()
        self._values: list[str] | None = None  # worked out once per change
        self._done: dict[str, str] = {}

    def values(self) -> list[str]:
        """Every known key (at least 4 characters), longest first: a key inside another goes second."""
        if self._values is None:
            found = {self._env.get(name, "").strip() for name in self._variables} | self._learned
            self._values = sorted((v for v in found if len(v) >= 4), key=len, reverse=True)
        return self._values

    def learn(self, value: str) -> bool:
        """Know ``value`` as a key from now on; False when it was known already or is too short."""
        value = value.strip()
        if len(value) < 4 or value in self._learned:
            return False
        self._learned.add(value)
        self._values = None
        self._done.clear()
        return True

    def text(self, text: str) -> str:
        """``text`` without any known key (``***``) or key-shaped token."""
        done = self._done.get(text)
        if done is not None:
            return done
        clean = text
        for value in self.values():
            clean = clean.replace(value, "***")
        clean = scrub_shapes(clean)
        if len(self._done) >= SCRUB_MEMO_SIZE:
            self._done.clear()
        self._done[text] = clean
        return clean

    def bytes(self, blob: bytes) -> bytes:
        """A recording line or payload with every known key, raw or JSON-escaped, made ``***``."""
        for value in self.values():
            for form in {value.encode(), orjson.dumps(value)[1:-1]}:
                if form in blob:
                    blob = blob.replace(form, b"***")
        return blob
