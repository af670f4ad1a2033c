"""Structured output: a pydantic model's JSON schema out, validated objects back in.

A caller gives either a pydantic model (validated by pydantic) or a raw JSON schema (checked for
the common keywords by :func:`json_schema_problems`). Models — especially small local ones — wrap
JSON in ```json fences or put a sentence before it, so parsing extracts the first JSON object from
the text before validating. When that fails, the client appends :func:`repair_messages` (the bad
output and the exact error) and asks again; what is still invalid after the repair rounds is
reported as excluded, never replaced by a default.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from memprobe_engine.llm.types import ChatMessage

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_MAX_ERRORS_SHOWN = 5


class StructuredOutputError(ValueError):
    """The text holds no JSON object, or the object does not match the schema; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def response_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema to send for ``model``, tightened for strict constrained decoding.

    Strict modes (OpenAI ``strict: true``) require every object to list all its properties as
    required and to forbid unknown ones, and reject ``default``; llama.cpp and vLLM accept the same
    schema. Objects that deliberately allow extra keys (``dict[str, X]``) are left as they are.

    Built once per model class (pydantic's schema generation cost ~2 ms per call when it ran on
    every request); callers get the shared dict and must not change it.
    """
    return _response_schema(model)


@functools.lru_cache(maxsize=256)
def _response_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = copy.deepcopy(model.model_json_schema())
    _tighten(schema)
    return schema


def _tighten(node: object) -> None:
    if isinstance(node, dict):
        node.pop("default", None)
        if node.get("type") == "object" and isinstance(node.get("properties"), dict):
            node.setdefault("additionalProperties", False)
            node["required"] = list(node["properties"].keys())
        for value in node.values():
            _tighten(value)
    elif isinstance(node, list):
        for value in node:
            _tighten(value)


def extract_json(text: str) -> object:
    """The first JSON object in ``text``: inside a code fence if there is one, else the first ``{``
    from which a complete JSON object decodes. StructuredOutputError if there is none."""
    decoder = json.JSONDecoder()
    candidates = [match.group(1) for match in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        for start, char in enumerate(candidate):
            if char != "{":
                continue
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            return value
    snippet = text.strip()[:120]
    if not snippet:
        raise StructuredOutputError("the reply was empty")
    raise StructuredOutputError(f"no JSON object found in the reply (it begins {snippet!r})")


def parse_structured(text: str, model: type[BaseModel]) -> BaseModel:
    """Extract and validate; StructuredOutputError carries a short reason fit for a repair prompt."""
    value = extract_json(text)
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise StructuredOutputError(describe_validation_error(err)) from None


def parse_with_json_schema(text: str, schema: dict[str, Any]) -> object:
    """Extract the first JSON object and check it against a raw JSON schema (see
    :func:`json_schema_problems` for the keywords checked); returns the object itself."""
    value = extract_json(text)
    problems = json_schema_problems(value, schema)
    if problems:
        more = len(problems) - _MAX_ERRORS_SHOWN
        shown = "; ".join(problems[:_MAX_ERRORS_SHOWN])
        raise StructuredOutputError(shown + (f"; and {more} more" if more > 0 else ""))
    return value


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "null": (type(None),),
    "integer": (int,), "number": (int, float),
}


def json_schema_problems(value: object, schema: object, root: object = None, where: str = "") -> list[str]:
    """Problems of ``value`` against the common JSON Schema keywords: ``$ref`` (local), ``anyOf``,
    ``oneOf``, ``allOf``, ``type``, ``enum``, ``const``, ``properties``, ``required``,
    ``additionalProperties``, ``items``, min/max length, items and bounds. Other keywords are not
    checked here (servers with constrained decoding enforce the whole schema)."""
    root = schema if root is None else root
    if not isinstance(schema, dict):
        return []
    at = where or "(top level)"
    if "$ref" in schema:
        target: object = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return json_schema_problems(value, target, root, where)
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema and all(json_schema_problems(value, option, root, where)
                                     for option in schema[keyword]):
            return [f"{at}: matches none of the allowed forms"]
    problems = [p for sub in schema.get("allOf", []) for p in json_schema_problems(value, sub, root, where)]
    kinds = schema.get("type")
    if kinds is not None:
        names = kinds if isinstance(kinds, list) else [kinds]
        ok = any(isinstance(value, _JSON_TYPES.get(name, object)) and not
                 (isinstance(value, bool) and name in ("integer", "number")) for name in names)
        if not ok:
            return problems + [f"{at}: expected {' or '.join(map(str, names))}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{at}: must be one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{at}: must be {schema['const']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        problems += [f"{where + '.' if where else ''}{key}: field required" for key in schema.get("required", [])
                     if key not in value]
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if key in properties:
                problems += json_schema_problems(item, properties[key], root, path)
            elif extra is False:
                problems.append(f"{path}: unexpected field")
            elif isinstance(extra, dict):
                problems += json_schema_problems(item, extra, root, path)
    if isinstance(value, list):
        for index, item in enumerate(value):
            problems += json_schema_problems(item, schema.get("items"), root, f"{where}[{index}]")
    problems += _bounds(value, schema, at)
    return problems


def _bounds(value: object, schema: dict[str, Any], at: str) -> list[str]:
    checks: list[tuple[str, Any, Callable[[Any, Any], bool]]] = []
    if isinstance(value, (str, list)):
        size = len(value)
        checks = [("minLength" if isinstance(value, str) else "minItems", size, lambda v, b: v >= b),
                  ("maxLength" if isinstance(value, str) else "maxItems", size, lambda v, b: v <= b)]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        checks = [("minimum", value, lambda v, b: v >= b), ("maximum", value, lambda v, b: v <= b),
                  ("exclusiveMinimum", value, lambda v, b: v > b), ("exclusiveMaximum", value, lambda v, b: v < b)]
    return [f"{at}: {keyword} is {schema[keyword]}, got {measured}"
            for keyword, measured, holds in checks if keyword in schema and not holds(measured, schema[keyword])]


def describe_validation_error(err: ValidationError) -> str:
    """``field.path: message`` for the first few problems, on one line."""
    problems = []
    for item in err.errors()[:_MAX_ERRORS_SHOWN]:
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        problems.append(f"{where}: {item['msg']}")
    more = err.error_count() - len(problems)
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


def repair_messages(bad_text: str, reason: str) -> list[ChatMessage]:
    """The two turns appended for a repair round: the model's own output, then what was wrong."""
    return [
        ChatMessage(role="assistant", content=bad_text),
        ChatMessage(role="user", content=(
            f"Your previous reply could not be used: {reason}. Reply again with only the corrected "
            f"JSON object that matches the required schema — no prose, no code fences.")),
    ]
