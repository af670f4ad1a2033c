"""Word-level old → new differences of updated memory items, computed from the two stores the
memory view rebuilds from recorded patches — so every system, built-in or third-party, gets the
same diff whatever its item shape."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

Piece = tuple[Literal["same", "old", "new"], str]
#: A word with the whitespace after it (leading whitespace on its own), so runs of removed and added
#: words keep their spacing and read as text even without styling.
_TOKENS = re.compile(r"\S+\s*|\s+")


def word_diff(old: str, new: str) -> list[Piece]:
    """The two texts as runs of kept, removed (old) and added (new) words, whitespace kept."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    out: list[Piece] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.append(("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("old", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("new", "".join(b[j1:j2])))
    return out


@dataclass(frozen=True)
class FieldChange:
    """One native field of an item that differs between two stores (None: absent on that side)."""

    name: str
    old: object
    new: object

    def pieces(self) -> list[Piece]:
        return word_diff(_text(self.old), _text(self.new))


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def item_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[FieldChange]:
    """The fields that changed from ``old`` to ``new``, in the new item's field order."""
    before, after = old or {}, new or {}
    names = list(after) + [k for k in before if k not in after]
    return [FieldChange(name, before.get(name), after.get(name)) for name in names
            if before.get(name) != after.get(name)]
