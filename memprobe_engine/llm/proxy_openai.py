"""Translation between the OpenAI wire format and the engine's chat client, for the recording proxy.

The engine's :class:`~memprobe_engine.llm.client.ChatClient` knows plain messages, sampling
parameters and an optional JSON schema. OpenAI requests carry more: multi-part content, assistant
tool calls, tool results, ``tools`` / ``tool_choice`` and ``response_format``. They are mapped so
that every backend (llama.cpp, vLLM, a replay) can answer them the same way:

- content parts are joined as text; ``developer`` becomes ``system``; an assistant's tool calls are
  written into its text, and a tool result becomes a user message naming the tool — no backend has
  to understand tool-call ids, and the request hash covers everything the model was shown;
- ``tools`` become structured output: the system prompt lists the functions and the reply must
  match a JSON schema, either ``{"tool_calls": [{"name": …, "arguments": {…}}]}`` (one option per
  tool, its parameters as the arguments' schema) or ``{"content": "…"}`` when a plain answer is
  allowed (``tool_choice`` ``auto``); ``required`` or a named function leaves only the tool form;
- ``response_format`` ``json_object`` / ``json_schema`` become the JSON schema to enforce.

Tool-call ids are derived from the request hash and the call's position, so a replayed or cached
answer carries the same ids as the recorded one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from memprobe_engine.llm.types import ChatMessage, SamplingParams


class BadRequest(ValueError):
    """The request is not one the proxy can serve; the text says which field and why."""


@dataclass(frozen=True)
class ToolMode:
    """How a request with ``tools`` is answered: the schema to enforce and whether prose is allowed."""

    schema: dict[str, Any]
    names: tuple[str, ...]
    allow_content: bool


@dataclass(frozen=True)
class ChatPlan:
    """A request translated for the chat client."""

    messages: list[ChatMessage]
    params: SamplingParams
    json_schema: dict[str, Any] | None
    tools: ToolMode | None
    stream: bool
    include_usage: bool
    model: str


def _text_of(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text") and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise BadRequest(f"{where}: content part of type {kind!r} is not supported (text only)")
        return "\n".join(parts)
    raise BadRequest(f"{where}: content must be a string or a list of text parts")


def _tool_calls_text(calls: object) -> str:
    lines = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        lines.append(f"[called {function.get('name', '?')} with {function.get('arguments', '{}')}]")
    return "\n".join(lines)


def convert_messages(raw: object) -> list[ChatMessage]:
    """OpenAI messages → engine messages (see the module docstring for the mapping)."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages: a non-empty list is required")
    out: list[ChatMessage] = []
    names: dict[str, str] = {}  # tool_call_id -> function name, to label tool results
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise BadRequest(f"{where}: must be an object")
        role = message.get("role")
        text = _text_of(message.get("content"), where)
        if role in ("system", "developer"):
            out.append(ChatMessage(role="system", content=text))
        elif role == "user":
            out.append(ChatMessage(role="user", content=text))
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            for call in calls if isinstance(calls, list) else []:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    names[call["id"]] = str(call.get("function", {}).get("name", "tool"))
            joined = "\n".join(piece for piece in (text, _tool_calls_text(calls)) if piece)
            out.append(ChatMessage(role="assistant", content=joined))
        elif role in ("tool", "function"):
            name = message.get("name") or names.get(str(message.get("tool_call_id")), "tool")
            out.append(ChatMessage(role="user", content=f"Result of {name}:\n{text}"))
        else:
            raise BadRequest(f"{where}: unknown role {role!r}")
    return out


def _tool_schema(tools: object, choice: object) -> ToolMode | None:
    if not tools or choice == "none":
        return None
    if not isinstance(tools, list):
        raise BadRequest("tools: must be a list")
    options: list[dict[str, Any]] = []
    names: list[str] = []
    wanted: str | None = None
    if isinstance(choice, dict):
        wanted = str((choice.get("function") or {}).get("name") or "") or None
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequest(f"tools[{index}]: expected {{\"type\": \"function\", \"function\": {{\"name\": …}}}}")
        if wanted is not None and function["name"] != wanted:
            continue
        names.append(function["name"])
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        options.append({"type": "object", "properties": {"name": {"const": function["name"]}, "arguments": parameters},
                        "required": ["name", "arguments"], "additionalProperties": False})
    if not options:
        raise BadRequest(f"tool_choice names {wanted!r}, which is not among the tools")
    call_form: dict[str, Any] = {
        "type": "object", "required": ["tool_calls"], "additionalProperties": False,
        "properties": {"tool_calls": {"type": "array", "minItems": 1,
                                      "items": options[0] if len(options) == 1 else {"anyOf": options}}}}
    allow_content = wanted is None and choice != "required"
    if allow_content:
        content_form = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"],
                        "additionalProperties": False}
        schema: dict[str, Any] = {"anyOf": [call_form, content_form]}
    else:
        schema = call_form
    # Definitions referenced by tool parameters (pydantic's "$defs") must sit at the root to resolve.
    defs: dict[str, Any] = {}
    for tool in tools:
        defs.update(((tool.get("function") or {}).get("parameters") or {}).get("$defs", {}))
    if defs:
        schema["$defs"] = defs
    return ToolMode(schema=schema, names=tuple(names), allow_content=allow_content)


def _tools_prompt(tools: list[dict[str, Any]], mode: ToolMode) -> str:
    lines = ["You can call these functions:"]
    for tool in tools:
        function = tool.get("function", {})
        if function.get("name") not in mode.names:
            continue
        parameters = orjson.dumps(function.get("parameters") or {}).decode()
        lines.append(f"- {function['name']}: {function.get('description', '').strip()}\n  parameters: {parameters}")
    lines.append('To call functions, reply with JSON only: {"tool_calls": [{"name": "<function>", '
                 '"arguments": {<parameters>}}]}.')
    if mode.allow_content:
        lines.append('To answer without calling a function, reply with JSON only: {"content": "<your answer>"}.')
    return "\n".join(lines)


def _with_system_addition(messages: list[ChatMessage], addition: str) -> list[ChatMessage]:
    """Append to the first system message (or add one first): several system messages break some
    chat templates."""
    if messages and messages[0].role == "system":
        return [ChatMessage(role="system", content=f"{messages[0].content}\n\n{addition}"), *messages[1:]]
    return [ChatMessage(role="system", content=addition), *messages]


def _response_schema(response_format: object) -> dict[str, Any] | None:
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise BadRequest("response_format: must be an object")
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise BadRequest("response_format.json_schema.schema: a JSON schema object is required")
        return schema
    raise BadRequest(f"response_format.type {kind!r} is not supported (text, json_object, json_schema)")


def _number(body: dict[str, Any], key: str, kind: type[int] | type[float]) -> int | float | None:
    """``body[key]`` as ``kind`` (None when absent); BadRequest naming the field otherwise, so a
    client's typo is answered 400, not a proxy error 500."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise BadRequest(f"{key}: must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    return kind(value)


def plan_chat(body: object) -> ChatPlan:
    """Translate an OpenAI ``/v1/chat/completions`` body; BadRequest names the offending field."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if _number(body, "n", int) not in (None, 1):
        raise BadRequest("n: only 1 completion per request is supported")
    messages = convert_messages(body.get("messages"))
    tools = _tool_schema(body.get("tools"), body.get("tool_choice", "auto"))
    schema = _response_schema(body.get("response_format"))
    if tools is not None:
        messages = _with_system_addition(messages, _tools_prompt(body["tools"], tools))
        schema = tools.schema
    stop = body.get("stop")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if stop is not None and not isinstance(stop, (str, list)):
        raise BadRequest("stop: must be a string or a list of strings")
    temperature = _number(body, "temperature", float) or 0.0
    if temperature < 0:
        raise BadRequest(f"temperature: must be 0 or more, got {temperature!r}")
    try:
        params = SamplingParams(
            temperature=temperature,
            max_tokens=_number({"max_tokens": max_tokens}, "max_tokens", int),
            top_p=_number(body, "top_p", float), seed=_number(body, "seed", int),
            stop=(stop,) if isinstance(stop, str) else tuple(stop) if stop else None)
    except ValidationError as err:
        first = err.errors()[0]
        raise BadRequest(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    options = body.get("stream_options") or {}
    return ChatPlan(messages=messages, params=params, json_schema=schema, tools=tools,
                    stream=bool(body.get("stream")), include_usage=bool(options.get("include_usage")),
                    model=str(body.get("model") or ""))


def answer_message(plan: ChatPlan, text: str, parsed: object, request_hash: str) -> tuple[dict[str, Any], str]:
    """The assistant message and finish reason for the reply ``text`` (``parsed`` when it matched the
    schema). A tool-call reply becomes ``tool_calls`` with arguments re-serialized as JSON text."""
    if plan.tools is not None and isinstance(parsed, dict):
        if isinstance(parsed.get("tool_calls"), list):
            calls = [{"id": f"call_{request_hash[:16]}_{index}", "type": "function",
                      "function": {"name": str(call.get("name")),
                                   "arguments": orjson.dumps(call.get("arguments", {})).decode()}}
                     for index, call in enumerate(parsed["tool_calls"])]
            return {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
        if isinstance(parsed.get("content"), str):
            return {"role": "assistant", "content": parsed["content"]}, "stop"
    return {"role": "assistant", "content": text}, "stop"


def completion_body(plan: ChatPlan, message: dict[str, Any], finish: str, request_hash: str,
                    usage: tuple[int, int]) -> dict[str, Any]:
    return {"id": f"chatcmpl-{request_hash[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": plan.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def chunk_body(plan: ChatPlan, request_hash: str, delta: dict[str, Any], finish: str | None) -> bytes:
    """One server-sent event of a streamed completion."""
    chunk = {"id": f"chatcmpl-{request_hash[:24]}", "object": "chat.completion.chunk", "created": int(time.time()),
             "model": plan.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def usage_chunk(plan: ChatPlan, request_hash: str, usage: tuple[int, int]) -> bytes:
    chunk = {"id": f"chatcmpl-{request_hash[:24]}", "object": "chat.completion.chunk", "created": int(time.time()),
             "model": plan.model, "choices": [],
             "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def embedding_inputs(body: object) -> list[str]:
    """The texts of an ``/v1/embeddings`` body; token-id inputs are refused (we embed text)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    raw = body.get("input")
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(item, str) for item in raw):
        return list(raw)
    if isinstance(raw, list) and not raw:
        raise BadRequest("input: an empty list has nothing to embed")
    raise BadRequest("input: a string or a list of strings is required (token ids are not supported)")
