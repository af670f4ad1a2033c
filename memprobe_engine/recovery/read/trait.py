"""The proper names a hidden target states (``Ponte Vedra Beach``): a turn or a memory item that
repeats one of them carries the trait, whatever else it says. Shared by the evidence turns of a
dimension's detail and the why-chain's relevant items. :func:`proper_names` finds them in any text
(the evidence turns also look for the names said beside the target's: the places near it)."""

from __future__ import annotations

import re
from typing import Protocol

class TargetText(Protocol):
    @property
    def short(self) -> str: ...
    @property
    def explanation(self) -> str: ...


_NAME = re.compile(r"\b(?:[A-Z][\w’'-]*\s+)+[A-Z][\w’'-]*")


def trait_names(target: TargetText | None) -> list[str]:
    """Proper names of two words or more in the target's short form and explanation."""
    if target is None:
        return []
    return proper_names(f"{target.short}. {target.explanation}")


def proper_names(text: str) -> list[str]:
    """Proper names of two words or more in ``text`` (``Ponte Vedra Beach``, ``Mickler’s Landing``), a
    sentence's capitalized first word left out, in first-seen order."""
    found = []
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        start = match.start()
        if start == 0 or text[:start].rstrip().endswith((".", "!", "?")):
            words = words[1:]  # a sentence's first word is capitalized anyway
        if len(words) >= 2:
            found.append(" ".join(words))
    return list(dict.fromkeys(found))


def names_in(text: str, names: list[str]) -> bool:
    """Whether ``text`` repeats two consecutive words of any of ``names`` (case and apostrophes aside)."""
    low = " ".join(text.lower().replace("’", "'").split())
    for name in names:
        words = name.lower().replace("’", "'").split()
        if any(" ".join(words[i:i + 2]) in low for i in range(len(words) - 1)):
            return True
    return False
