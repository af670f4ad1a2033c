"""The loopback recording proxy: an OpenAI-compatible server whose every answer comes from the engine.

A third-party memory library makes its own LLM and embedding calls. Pointed at this proxy
(``base_url`` = :attr:`RecordingProxy.base_url`, ``api_key`` = a token from
:meth:`RecordingProxy.register`), each of its requests goes through the engine's
:class:`~memprobe_engine.llm.client.ChatClient` (role ``memory_writer`` unless the request's
``model`` names another role) or :class:`~memprobe_engine.llm.embeddings.Embedder`, so it is
recorded as an ``llm_call`` / ``embedding`` event, answered from the response cache by request
hash, served by ``replay:DIR`` specs, and never asked again when a run resumes.

Attribution: the token in the API key names the binding (system, role). With open keys (the
standalone ``memprobe proxy``) a client names itself: the ``X-MemProbe-Client`` header, or an API key
``mp-NAME``, records its calls as system ``NAME``; any other key is never written anywhere — its
calls go under ``client-`` and a short salted hash of it, and the key joins the values the chat
client scrubs from replies, errors and the recording. The events of a call land
in the span that was current where the adapter called :meth:`RecordingProxy.attach` — the library
runs in another thread or task, so the adapter hands the proxy its recording position explicitly
(a copy of its ``contextvars`` context) instead of relying on the library to carry it.

Served routes: ``POST /v1/chat/completions`` (streaming, tools, ``response_format``),
``POST /v1/embeddings`` (float or base64 vectors), ``GET /v1/models``. The HTTP layer is
:mod:`~memprobe_engine.llm.proxy_http`; the format mapping is :mod:`~memprobe_engine.llm.proxy_openai`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

import numpy as np

from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import DEFAULT_ROLE, ROLES, normalize_role
from memprobe_engine.llm.proxy_http import HTTPRequest, HTTPResponse, LoopbackHTTPServer
from memprobe_engine.llm.proxy_openai import (
    BadRequest,
    ChatPlan,
    answer_message,
    chunk_body,
    completion_body,
    embedding_inputs,
    plan_chat,
    usage_chunk,
)
from memprobe_engine.llm.secrets import key_label

if TYPE_CHECKING:
    from memprobe_engine.llm.embeddings import TextEmbedder

T = TypeVar("T")
#: Tokens handed to libraries start with this, so a stray real key is never taken for one.
TOKEN_PREFIX = "mp-"
_SYSTEM_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
#: The header a client may send to name itself (its calls are recorded under that system name).
CLIENT_HEADER = "x-memprobe-client"
_NO_RETRY = {"x-should-retry": "false"}  # the openai SDK would otherwise retry a 5xx we already retried


@dataclass
class Binding:
    """Who a token's calls belong to: the system's name, its default role, where they are recorded."""

    token: str
    system: str
    role: str
    context: contextvars.Context


class RecordingProxy:
    """One loopback server for one run (one ChatClient, one Embedder, one event loop).

    ``embedder`` may be a zero-argument factory, called on the first embeddings request (loading a
    sentence-transformers model takes seconds a chat-only client should not pay). ``open_keys``
    accepts any API key and names the system after it (the standalone ``memprobe proxy``);
    otherwise only registered tokens are served; ``on_new_key`` then gives each new client's calls
    the context (recording position) they are recorded in. ``key_salt`` salts the hash that names a
    client that did not name itself (the recording's run id: stable across resumes, different
    between recordings).
    """

    def __init__(self, chat: ChatClient, embedder: TextEmbedder | Callable[[], TextEmbedder] | None = None, *,
                 open_keys: bool = False,
                 default_role: str = "memory_writer", port: int = 0,
                 on_new_key: Callable[[str], contextvars.Context] | None = None, key_salt: str = "") -> None:
        self._key_salt = key_salt
        self.chat = chat
        self._embedder = embedder
        self._open_keys = open_keys
        self._default_role = default_role
        self._on_new_key = on_new_key
        self._bindings: dict[str, Binding] = {}
        self._counter = itertools.count(1)
        self._server = LoopbackHTTPServer(self._handle, port=port)
        self._started = False

    @property
    def recorder(self) -> Recorder:
        return self.chat.recorder

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — what an OpenAI client takes as ``base_url``."""
        return f"http://{self._server.host}:{self._server.port}/v1"

    async def start(self) -> str:
        if not self._started:
            await self._server.start()
            self._started = True
        return self.base_url

    async def aclose(self) -> None:
        if self._started:
            await self._server.aclose()
            self._started = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- bindings --------------------------------------------------------------------------------

    def register(self, system: str, *, role: str = "memory_writer") -> str:
        """A new API key for ``system``; its calls use ``role`` and are recorded where the caller is
        now, until :meth:`attach` moves them."""
        token = f"{TOKEN_PREFIX}{re.sub(r'[^A-Za-z0-9_.-]', '_', system)}-{next(self._counter)}"
        self._bindings[token] = Binding(token=token, system=system, role=normalize_role(role),
                                        context=contextvars.copy_context())
        return token

    @contextlib.contextmanager
    def attach(self, token: str) -> Iterator[None]:
        """Record the token's calls at the caller's current position (span, user, system) while
        inside; on exit they go back to where they were recorded before."""
        binding = self._bindings[token]
        previous = binding.context
        binding.context = contextvars.copy_context()
        try:
            yield
        finally:
            binding.context = previous

    def _binding_for(self, request: HTTPRequest) -> Binding | None:
        key = request.headers.get("authorization", "")
        key = key[7:].strip() if key.lower().startswith("bearer ") else key.strip()
        key = key or request.headers.get("api-key", "") or request.headers.get("x-api-key", "")
        binding = self._bindings.get(key)
        if binding is None and self._open_keys:
            system = self._client_name(key, request.headers.get(CLIENT_HEADER, "").strip())
            binding = self._bindings.get(f"open:{system}")
            if binding is None:
                context = self._on_new_key(system) if self._on_new_key else contextvars.copy_context()
                binding = Binding(token=f"open:{system}", system=system, role=self._default_role, context=context)
                self._bindings[binding.token] = binding
        return binding

    def _client_name(self, key: str, label: str) -> str:
        """The system an open-keys client is recorded as: the label it chose (header, or an ``mp-NAME``
        key), else a salted hash of its key; a key that is not a label is scrubbed from now on."""
        if not label and key.startswith(TOKEN_PREFIX):
            label = key[len(TOKEN_PREFIX):]
        elif key:
            self.chat.add_secret(key)
        if label and _SYSTEM_NAME.match(label):
            return label
        return key_label(key, self._key_salt) if key else "client"

    async def _in_context(self, binding: Binding, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` at the binding's recording position, as its system."""
        async def scoped() -> T:
            with self.recorder.scope(system=binding.system):
                return await work
        return await asyncio.create_task(scoped(), context=binding.context.copy())

    def _role(self, plan: ChatPlan, binding: Binding) -> str:
        asked = normalize_role(plan.model) if plan.model else ""
        return asked if asked in ROLES or asked == DEFAULT_ROLE else binding.role

    # -- routes ----------------------------------------------------------------------------------

    async def _handle(self, request: HTTPRequest) -> HTTPResponse:
        path = request.path.rstrip("/")
        if path.endswith("/models") and request.method == "GET":
            return self._models()
        routes: dict[str, Callable[[HTTPRequest, Binding], Awaitable[HTTPResponse]]] = {
            "/chat/completions": self._chat_completions, "/embeddings": self._embeddings}
        route = next((handler for suffix, handler in routes.items() if path.endswith(suffix)), None)
        if route is None or request.method != "POST":
            return _error(404, f"{request.method} {request.path} is not served here (POST /v1/chat/completions, "
                               f"POST /v1/embeddings, GET /v1/models)", "not_found")
        binding = self._binding_for(request)
        if binding is None:
            return _error(401, "unknown API key: use a token from RecordingProxy.register()", "invalid_api_key")
        try:
            request.json()
        except ValueError as err:
            return _error(400, f"the request body is not JSON ({err})", "invalid_request_error")
        try:
            return await route(request, binding)
        except BadRequest as err:
            return _error(400, str(err), "invalid_request_error")
        except MemProbeError as err:
            return _error(502, self.chat.scrub(str(err)), "upstream_error")

    def _models(self) -> HTTPResponse:
        names = [DEFAULT_ROLE, *ROLES]
        data = [{"id": name, "object": "model", "created": 0, "owned_by": f"memprobe:{self.chat.spec_for(name).backend}"}
                for name in names]
        return HTTPResponse.json(200, {"object": "list", "data": data})

    async def _chat_completions(self, request: HTTPRequest, binding: Binding) -> HTTPResponse:
        plan = plan_chat(request.json())
        role = self._role(plan, binding)
        if plan.stream and plan.tools is None:
            return HTTPResponse(status=200, content_type="text/event-stream", stream=self._stream(plan, role, binding))
        outcome = await self._in_context(binding, self.chat.chat(role, plan.messages, params=plan.params,
                                                                 json_schema=plan.json_schema))
        message, finish = answer_message(plan, outcome.text, outcome.parsed, outcome.request_hash)
        usage = (outcome.usage.prompt_tokens, outcome.usage.completion_tokens)
        if plan.stream:
            return HTTPResponse(status=200, content_type="text/event-stream",
                                stream=_one_shot_stream(plan, outcome.request_hash, message, finish, usage))
        return HTTPResponse.json(200, completion_body(plan, message, finish, outcome.request_hash, usage))

    async def _stream(self, plan: ChatPlan, role: str, binding: Binding) -> AsyncIterator[bytes]:
        """Pieces of the reply as server-sent events; the chat call runs at the binding's position."""
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        async def produce() -> None:
            stream = self.chat.stream(role, plan.messages, params=plan.params, json_schema=plan.json_schema)
            try:
                async for piece in stream:
                    await queue.put(("piece", piece))
                await queue.put(("done", stream.outcome))
            except Exception as err:  # noqa: BLE001 - any failure is reported to the client in-stream
                await queue.put(("error", err))

        producer = asyncio.ensure_future(self._in_context(binding, produce()))
        request_hash = ""
        first = True
        try:
            while True:
                kind, value = await queue.get()
                if kind == "piece":
                    delta = {"role": "assistant", "content": value} if first else {"content": value}
                    first = False
                    yield chunk_body(plan, request_hash or "stream", delta, None)
                elif kind == "done":
                    request_hash = value.request_hash if value is not None else "stream"
                    yield chunk_body(plan, request_hash, {}, "stop")
                    if plan.include_usage and value is not None:
                        yield usage_chunk(plan, request_hash, (value.usage.prompt_tokens, value.usage.completion_tokens))
                    break
                else:
                    message = self.chat.scrub(str(value))
                    yield b"data: " + _error_bytes(message, "upstream_error") + b"\n\n"
                    break
            yield b"data: [DONE]\n\n"
        finally:
            await producer

    async def _embeddings(self, request: HTTPRequest, binding: Binding) -> HTTPResponse:
        body = request.json()
        texts = embedding_inputs(body)
        embedder = self._get_embedder()
        vectors = await self._in_context(binding, embedder.embed(texts))
        assert isinstance(body, dict)
        wanted = body.get("dimensions")
        if wanted is not None and int(wanted) != vectors.shape[1]:
            raise BadRequest(f"dimensions: {wanted} asked, but the embedding model gives {vectors.shape[1]}; "
                             f"configure the library for {vectors.shape[1]}-dimensional vectors")
        as_base64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": index,
                 "embedding": base64.b64encode(np.asarray(row, dtype="<f4").tobytes()).decode("ascii")
                 if as_base64 else [float(x) for x in row]}
                for index, row in enumerate(vectors)]
        n_tokens = sum(len(text.split()) for text in texts)
        return HTTPResponse.json(200, {"object": "list", "data": data, "model": str(body.get("model") or ""),
                                       "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}})

    def _get_embedder(self) -> TextEmbedder:
        """The embedder, created on first use when the proxy was given a factory (``memprobe proxy``
        starts no embedding model for a harness that never embeds)."""
        if self._embedder is None:
            raise BadRequest("this proxy was started without an embedder; embeddings are not served")
        if callable(self._embedder) and not hasattr(self._embedder, "embed"):
            self._embedder = self._embedder()
        return cast("TextEmbedder", self._embedder)


async def _one_shot_stream(plan: ChatPlan, request_hash: str, message: dict[str, Any], finish: str,
                           usage: tuple[int, int]) -> AsyncIterator[bytes]:
    """A finished answer (a tool call) sent as a stream: role, content or tool calls, finish."""
    yield chunk_body(plan, request_hash, {"role": "assistant", "content": message.get("content")}, None)
    if message.get("tool_calls"):
        calls = [{"index": index, **call} for index, call in enumerate(message["tool_calls"])]
        yield chunk_body(plan, request_hash, {"tool_calls": calls}, None)
    yield chunk_body(plan, request_hash, {}, finish)
    if plan.include_usage:
        yield usage_chunk(plan, request_hash, usage)
    yield b"data: [DONE]\n\n"


def _error_bytes(message: str, kind: str) -> bytes:
    import orjson

    return orjson.dumps({"error": {"message": message, "type": kind}})


def _error(status: int, message: str, kind: str) -> HTTPResponse:
    return HTTPResponse(status=status, body=_error_bytes(message, kind), headers=dict(_NO_RETRY))


# -- one proxy per run, shared by the adapters of that run -----------------------------------------

_SHARED: dict[tuple[int, int, int], RecordingProxy] = {}


async def shared_proxy(chat: ChatClient, embedder: TextEmbedder) -> RecordingProxy:
    """The started proxy for this (chat client, embedder) on the running loop: adapters of one run
    share one server. :func:`close_shared_proxies` stops them when the run ends."""
    loop = asyncio.get_running_loop()
    key = (id(loop), id(chat), id(embedder))
    proxy = _SHARED.get(key)
    if proxy is None:
        proxy = RecordingProxy(chat, embedder)
        _SHARED[key] = proxy
        await proxy.start()
    return proxy


async def close_shared_proxies() -> None:
    """Stop every shared proxy started on the running loop (the runner calls this at run end)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [key for key in _SHARED if key[0] == loop_id]:
        await _SHARED.pop(key).aclose()
