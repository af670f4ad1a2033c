"""A small RFC 6902 JSON Patch: make a patch between two JSON documents and apply one.

Memory stores are recorded as patches against their previous state. Objects are diffed key by
key (so an updated memory item yields ``replace`` ops on just the fields that changed); arrays
are replaced whole, which keeps patches readable for the short lists memory items hold.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

JsonPatch = list[dict[str, Any]]
#: The document a patch applies to (a JSON value; a memory store is a dict).
DocT = TypeVar("DocT")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


_SCALARS = (str, int, float, bool, type(None))


def json_copy(value: DocT) -> DocT:
    """A deep copy of a JSON value (dicts, lists, scalars), as ``copy.deepcopy`` makes it but several
    times faster: memory systems copy every item they hand out or change, and deepcopy's memo and
    dispatch were most of that. Anything else inside (a tuple, an object) goes to deepcopy. Unlike
    deepcopy it does not keep two references to one list or dict shared in the copy; JSON has none."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}  # type: ignore[attr-defined,return-value]
    if kind is list:
        return [json_copy(item) for item in value]  # type: ignore[attr-defined,return-value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


def make_patch(before: object, after: object, path: str = "") -> JsonPatch:
    """Ops that turn ``before`` into ``after`` (``add``/``remove``/``replace`` only)."""
    if isinstance(before, dict) and isinstance(after, dict):
        ops: JsonPatch = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in after.items():
            child = f"{path}/{_escape(key)}"
            if key not in before:
                ops.append({"op": "add", "path": child, "value": json_copy(value)})
            elif before[key] != value:
                ops.extend(make_patch(before[key], value, child))
        return ops
    if before == after and type(before) is type(after):
        return []
    return [{"op": "replace", "path": path, "value": json_copy(after)}]


def unescape_token(token: str) -> str:
    """A JSON Pointer reference token as the key it names (``~1`` is ``/``, ``~0`` is ``~``)."""
    return _unescape(token)


def apply_patch(document: DocT, patch: JsonPatch, *, in_place: bool = False) -> DocT:
    """Apply ``patch``; returns the new document. Raises ValueError on a path that does not exist."""
    doc = document if in_place else copy.deepcopy(document)
    for op in patch:
        kind, path = op["op"], op["path"]
        if path == "":
            if kind in ("add", "replace"):
                doc = copy.deepcopy(op["value"])
                continue
            raise ValueError("cannot remove the document root")
        tokens = [_unescape(t) for t in path.split("/")[1:]]
        parent: object = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else _member(parent, token, path)
        last = tokens[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[index]
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            else:
                raise ValueError(f"unsupported JSON Patch op {kind!r}")
        elif isinstance(parent, dict):
            if kind in ("remove", "replace") and last not in parent:
                raise ValueError(f"JSON Patch path {path} does not exist")
            if kind == "remove":
                del parent[last]
            elif kind in ("add", "replace"):
                parent[last] = copy.deepcopy(op["value"])
            else:
                raise ValueError(f"unsupported JSON Patch op {kind!r}")
        else:
            raise TypeError(f"JSON Patch path {path} goes through a {type(parent).__name__}, not an object or array")
    return doc


def _member(parent: object, token: str, path: str) -> object:
    if not isinstance(parent, dict):
        raise TypeError(f"JSON Patch path {path} goes through a {type(parent).__name__}, not an object or array")
    return parent[token]
