"""Any OpenAI-compatible chat endpoint (OpenAI, ``vllm serve``, llama.cpp servers) over plain HTTP.

The request is the chat completions API's JSON, written with orjson and sent on a pooled aiohttp
session; the reply is read as JSON. The ``openai`` SDK built and validated a typed model of every
request and reply, which cost about 5 ms of CPU per call on this path (bench/engine.py measures
the whole request path, HTTP client included). Nothing is retried here: the chat client retries, so
every attempt is counted, paced and recorded in one place. This module only maps outcomes: 429,
5xx, timeouts, dropped connections and unparseable bodies become :class:`TransientBackendError`; a
rejected key, an unknown model, other 4xx and a request the HTTP client refuses to send become
:class:`LLMError` (not retried: the same request fails the same way) with a message naming the setting
to fix. The API key never appears in a message: it is scrubbed from everything reported.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

import aiohttp
import orjson

from memprobe_engine.errors import ConfigError, ContextOverflow, LLMError
from memprobe_engine.llm.backends import silence
from memprobe_engine.llm.backends.silence import EndpointSilent, answer_or_silence
from memprobe_engine.llm.call_progress import CallProgress, report
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.types import ChatRequest, ChatResult, TransientBackendError, Usage

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
LOOPBACK_DUMMY_KEY = "none"
_CONNECT_TIMEOUT_S = 10.0
#: Idle keep-alive connections are closed after this long.
_KEEPALIVE_S = 30.0
#: Model-name prefixes of OpenAI reasoning models, which reject ``max_tokens`` and take
#: ``max_completion_tokens`` instead (the recovery release's client makes the same distinction).
REASONING_PREFIXES = ("gpt-5", "o1", "o3", "o4")
TokenParam = Literal["auto", "max_tokens", "max_completion_tokens"]
T = TypeVar("T")


def token_parameter(model: str, setting: TokenParam = "auto") -> str:
    """The request field that carries the reply cap for ``model``: the spec's explicit choice, or
    for ``auto`` ``max_completion_tokens`` on gpt-5* / o-series models and ``max_tokens`` elsewhere
    (vLLM and llama.cpp servers accept ``max_tokens``)."""
    if setting != "auto":
        return setting
    name = model.lower().rsplit("/", 1)[-1]
    return "max_completion_tokens" if name.startswith(REASONING_PREFIXES) else "max_tokens"


class EndpointUnreachable(TransientBackendError):
    """The endpoint refused or dropped the connection; ``hint`` says which setting to check."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message, refused=refused, down=True)

    hint = ("Check the URL in --model / MEMPROBE_MODEL / MEMPROBE_MODEL_<ROLE> / the config file's "
            "[models] table, or start the server.")


class EndpointTimedOut(TransientBackendError):
    """A request's timeout ran out with no answer; ``hint`` says what helps (not more retries)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, down=True)

    hint = ("The endpoint stayed silent on every attempt: check that the server is running and not hung, or "
            "raise timeout_s in the role's [models.ROLE] table if it is only slow.")


def is_loopback(url: str) -> bool:
    """True for ``localhost`` and loopback IPs: servers we may talk to without a real key."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_base_url(base_url: str | None, env: Mapping[str, str]) -> str:
    """The URL requests really go to, so messages can name it. A URL with a key in it (``user:key@``)
    is refused, never quoted: the URL is shown in messages and written into recordings."""
    url = (base_url or env.get("OPENAI_BASE_URL", "").strip() or OPENAI_DEFAULT_URL).rstrip("/")
    if "@" in urlparse(url).netloc:
        where = "the base_url" if base_url else "OPENAI_BASE_URL"
        raise ConfigError(f"{where} holds credentials (user:key@ before the host), which would be written into "
                          f"messages and recordings: remove them from the URL and put the key in an environment "
                          f"variable named with api_key_env in the role's [models.ROLE] table (or OPENAI_API_KEY).")
    return url


def resolve_api_key(spec: ModelSpec, base_url: str, env: Mapping[str, str]) -> tuple[str, str]:
    """(key, name of the variable it came from). Keys go only where they are configured for:

    - a spec naming ``api_key_env`` sends that variable's key (to whatever URL the spec names);
    - otherwise ``OPENAI_API_KEY`` goes only to the OpenAI endpoint (or the one ``OPENAI_BASE_URL``
      names): a loopback server or another host gets a placeholder, never that key. A server that then
      answers 401 gets a message saying to name its key with ``api_key_env``;
    - ``api_key_env`` naming an unset variable is a ConfigError, on loopback too.
    """
    names = [spec.api_key_env] if spec.api_key_env else [DEFAULT_KEY_ENV]
    if spec.api_key_env and not env.get(spec.api_key_env, "").strip():
        # Named on purpose, so a placeholder (the loopback default) would hide a forgotten export.
        raise ConfigError(f"Model spec {spec.where()} names api_key_env = \"{spec.api_key_env}\", but "
                          f"{spec.api_key_env} is not set (or empty): export {spec.api_key_env}=<key>, or remove "
                          f"api_key_env from the [models.ROLE] table for a server that needs no key.")
    default_endpoint = resolve_base_url(None, env)
    if spec.api_key_env is None and base_url.rstrip("/") != default_endpoint:
        return LOOPBACK_DUMMY_KEY, names[0]
    for name in names:
        key = env.get(name, "").strip()
        if key:
            return key, name
    if is_loopback(base_url):
        return LOOPBACK_DUMMY_KEY, names[0]
    raise ConfigError(f"Model spec {spec.where()} needs an API key for {base_url}: set the environment "
                      f"variable {names[0]} (or name another variable with api_key_env in the "
                      f"[models.ROLE] table of the config file).")


class OpenAICompatBackend:
    """One endpoint and model. ``name`` is what recordings show (``openai``, ``vllm``, ``local``).

    Requests go out on one pooled aiohttp session per event loop (keep-alive connections reused),
    bodies serialized with orjson and replies read as plain JSON: no per-call model building.
    The session is created on first use, in the loop the run uses."""

    def __init__(self, base_url: str | None, model: str, api_key: str | None, *, name: str = "openai",
                 timeout_s: float = 600.0, extra_body: dict[str, Any] | None = None,
                 api_key_env: str | None = None, token_param: TokenParam = "auto") -> None:
        self.name = name
        self.model = model
        self.token_field = token_parameter(model, token_param)
        self.base_url = resolve_base_url(base_url, os.environ)
        self.api_key_env = api_key_env or DEFAULT_KEY_ENV
        self._api_key = api_key or LOOPBACK_DUMMY_KEY
        self._extra_body = extra_body
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(_CONNECT_TIMEOUT_S, timeout_s))
        self._completions_url = f"{self.base_url.rstrip('/')}/chat/completions"
        self._headers = {"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json",
                         "Accept": "application/json"}
        # A server on this machine is reached directly: an HTTP(S)_PROXY set for the outside world
        # must not swallow loopback traffic (the embedded model's server, a local vLLM).
        self._trust_env = not is_loopback(self.base_url)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_spec(cls, spec: ModelSpec, env: Mapping[str, str] | None = None) -> "OpenAICompatBackend":
        """Build from an ``openai`` spec, resolving the URL and the key from ``env`` (os.environ)."""
        env = os.environ if env is None else env
        url = resolve_base_url(spec.base_url, env)
        key, key_env = resolve_api_key(spec, url, env)
        return cls(url, spec.model, key, name=spec.backend, timeout_s=spec.timeout_s,
                   extra_body=spec.extra_body, api_key_env=key_env, token_param=spec.token_param)

    def _body(self, request: ChatRequest, extra_body: dict[str, Any] | None = None, *,
              stream: bool = False) -> bytes:
        """The request body, as the chat completions API reads it (``extra_body`` merged at the top)."""
        params = request.params
        args: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": params.temperature,
        }
        if params.max_tokens is not None:
            args[self.token_field] = params.max_tokens
        if params.top_p is not None:
            args["top_p"] = params.top_p
        if params.seed is not None:
            args["seed"] = params.seed
        if params.stop:
            args["stop"] = list(params.stop)
        if request.response_schema is not None:
            args["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "response", "schema": request.response_schema, "strict": True}}
        if stream:
            args["stream"] = True
        if self._extra_body:
            args.update(self._extra_body)
        if extra_body:
            args.update(extra_body)
        return orjson.dumps(args)

    def _client(self) -> aiohttp.ClientSession:
        """The pooled session of the running loop (a new one if the loop changed since)."""
        session = self._session
        loop = asyncio.get_running_loop()
        if session is None or session.closed or getattr(session, "_loop", loop) is not loop:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=_KEEPALIVE_S)
            session = aiohttp.ClientSession(connector=connector, timeout=self._timeout, trust_env=self._trust_env,
                                            json_serialize=lambda value: orjson.dumps(value).decode(),
                                            skip_auto_headers=("User-Agent",))
            self._session = session
        return session

    async def complete(self, request: ChatRequest, *, extra_body: dict[str, Any] | None = None,
                       unit: str | None = None) -> ChatResult:
        """One attempt; see the module docstring for how failures are classified. ``extra_body`` adds
        server-specific request fields that are not part of the request's identity (a slot to use);
        ``unit`` goes out as the ``X-MemProbe-Unit`` header (a role with several endpoints sends it, so
        a server's log shows which unit each request belongs to)."""
        body = self._body(request, extra_body)
        try:
            status, headers, payload = await self._watched(self._post(body, unit))
        except (EndpointSilent, TransientBackendError, LLMError):
            raise
        except Exception as err:  # noqa: BLE001 — every transport failure is classified, none escapes raw
            raise self._classify(err) from None
        if status >= 400:
            raise self._status_error(status, headers, payload)
        return self._result(headers, payload)

    async def _post(self, body: bytes, unit: str | None = None) -> tuple[int, Mapping[str, str], bytes]:
        headers = self._headers if unit is None else {**self._headers, "X-MemProbe-Unit": unit}
        async with self._client().post(self._completions_url, data=body, headers=headers) as response:
            return response.status, response.headers, await response.read()

    def _result(self, headers: Mapping[str, str], payload: bytes) -> ChatResult:
        try:
            response = orjson.loads(payload)
        except orjson.JSONDecodeError:
            if "json" in headers.get("Content-Type", "").lower():
                raise TransientBackendError(f"{self.base_url} answered with a body that is not valid JSON "
                                            f"({self._scrub(payload[:120].decode('utf-8', 'replace'))!r})") from None
            response = payload.decode("utf-8", "replace")
        choices = response.get("choices") if isinstance(response, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise TransientBackendError(f"{self.base_url} answered with a body that is not a chat completion "
                                        f"({self._scrub(str(response))[:120]!r})")
        assert isinstance(response, dict)
        choice = choices[0]
        message = choice.get("message")
        text = (message.get("content") if isinstance(message, dict) else None) or ""
        usage: dict[str, Any] = response.get("usage") or {}
        usage = usage if isinstance(usage, dict) else {}
        details: dict[str, Any] = usage.get("prompt_tokens_details") or {}
        details = details if isinstance(details, dict) else {}
        return ChatResult(
            text=text,
            usage=Usage(prompt_tokens=usage.get("prompt_tokens") or 0,
                        completion_tokens=usage.get("completion_tokens") or 0,
                        cached_prompt_tokens=details.get("cached_tokens") or 0),
            model=response.get("model") or None,
            finish_reason=choice.get("finish_reason"))

    async def stream(self, request: ChatRequest, *,
                     extra_body: dict[str, Any] | None = None) -> AsyncIterator[str]:
        """Yield content deltas as the server produces them (server-sent events); a llama.cpp server's
        prompt progress in between goes to the call's progress listener (:mod:`..call_progress`)."""
        body = self._body(request, extra_body, stream=True)
        try:
            response = await self._watched(self._client().post(self._completions_url, data=body,
                                                               headers=self._headers))
        except (EndpointSilent, TransientBackendError, LLMError):
            raise
        except Exception as err:  # noqa: BLE001
            raise self._classify(err) from None
        try:
            if response.status >= 400:
                raise self._status_error(response.status, response.headers, await response.read())
            async for line in response.content:
                data = line.strip()
                if not data.startswith(b"data:"):
                    continue
                data = data[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = orjson.loads(data)
                if (progress := chunk.get("prompt_progress")) is not None:
                    _report_prompt(progress)
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        yield piece
        except (TransientBackendError, LLMError):
            raise
        except Exception as err:  # noqa: BLE001
            raise self._classify(err) from None
        finally:
            response.release()

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def _watched(self, pending: Awaitable[T]) -> T:
        """``pending`` (a request to this endpoint), ended early if the endpoint falls silent."""
        return await answer_or_silence(pending, url=self.base_url, model=self.model, answers=self._answers)

    async def _answers(self) -> bool:
        """Whether the endpoint answers anything (any HTTP status) to ``GET /models`` on a new
        connection within the probe timeout: alive, perhaps busy, rather than hung."""
        timeout = aiohttp.ClientTimeout(total=silence.PROBE_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout, trust_env=self._trust_env) as probe:
            try:
                async with probe.get(f"{self.base_url.rstrip('/')}/models",
                                     headers={"Authorization": f"Bearer {self._api_key}"}) as answer:
                    await answer.read()
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                return False
        return True

    def _scrub(self, text: str) -> str:
        if self._api_key and self._api_key != LOOPBACK_DUMMY_KEY:
            text = text.replace(self._api_key, "***")
        return text

    def _classify(self, err: Exception) -> Exception:
        """Map a transport failure (no HTTP answer) to TransientBackendError or LLMError."""
        url = self.base_url
        if isinstance(err, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
            return EndpointTimedOut(f"{url} did not answer in time ({self._scrub(_describe(err))})")
        if isinstance(err, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError)):
            refused = _refused(err)
            cause = self._scrub(_describe(err))
            return EndpointUnreachable(f"cannot reach {url} ({'connection refused' if refused else cause})",
                                       refused=refused)
        if isinstance(err, orjson.JSONDecodeError):  # a streamed event that is not JSON
            return TransientBackendError(f"{url} answered with a body that is not valid JSON "
                                         f"({self._scrub(_describe(err))})")
        if isinstance(err, (ValueError, TypeError)):  # aiohttp.InvalidURL is a ValueError too
            # Raised while building or sending the request, before any answer (a URL or header the HTTP
            # client refuses): the same request fails the same way, so it is not retried.
            return LLMError(f"the request to {url} could not be sent ({self._scrub(_describe(err))}): retrying "
                            f"cannot help; fix the endpoint URL or the [models.ROLE] settings")
        if isinstance(err, (LLMError, TransientBackendError)):
            return err
        return LLMError(f"request to {url} failed unexpectedly: {self._scrub(_describe(err))}")

    def _status_error(self, status: int, headers: Mapping[str, str], payload: bytes) -> Exception:
        """Map an HTTP error answer to TransientBackendError, ContextOverflow or LLMError."""
        url = self.base_url
        raw = payload.decode("utf-8", "replace")
        detail = self._scrub(_error_detail(raw))[:300]
        if status in (401, 403):
            if self._api_key == LOOPBACK_DUMMY_KEY:
                return LLMError(f"{url} requires an API key (HTTP {status}) but none is set: put the key in an "
                                f"environment variable and name it with api_key_env in the [models.ROLE] "
                                f"table of the config file, or set {DEFAULT_KEY_ENV}.")
            return LLMError(f"{url} rejected the API key from the environment variable {self.api_key_env} "
                            f"(HTTP {status}: {detail}). Set a valid key in {self.api_key_env}.")
        if status == 404:
            return LLMError(f"{url} does not serve the model {self.model!r} (HTTP 404: {detail}). List the "
                            f"models it serves with `curl {url}/models` and fix the model name in the spec "
                            f"(a URL usually ends in /v1).")
        if status == 429:
            return TransientBackendError(f"{url} is rate limiting (HTTP 429: {detail})",
                                         retry_after_s=_retry_after(headers))
        if status in (400, 413) and any(marker in raw.lower() for marker in CONTEXT_OVERFLOW_MARKERS):
            return ContextOverflow(f"{url} refused the request as longer than the model's context "
                                   f"(HTTP {status}: {detail}).")
        if status >= 500 or status in (408, 409):
            return TransientBackendError(f"{url} failed with HTTP {status} ({detail})",
                                         retry_after_s=_retry_after(headers), down=status >= 500)
        return LLMError(f"{url} refused the request for model {self.model!r} (HTTP {status}: {detail}).")


#: How servers say a request is longer than the context: llama.cpp (``exceed_context_size_error``,
#: "exceeds the available context size"), OpenAI (``context_length_exceeded``), vLLM ("maximum
#: context length").
CONTEXT_OVERFLOW_MARKERS = ("exceed_context_size", "exceeds the available context", "context_length_exceeded",
                            "maximum context length")


def _refused(err: BaseException) -> bool:
    """Whether the connection was refused (ECONNREFUSED on the error or somewhere in its cause chain:
    aiohttp's ClientConnectorError carries the socket's errno)."""
    seen: BaseException | None = err
    for _ in range(10):  # a bounded walk: chains are short, and may loop
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or (isinstance(seen, OSError) and
                                                        seen.errno == errno.ECONNREFUSED):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _report_prompt(progress: object) -> None:
    """Pass on a llama.cpp server's ``prompt_progress`` (sent while it evaluates the prompt of a
    streamed request that asked for ``return_progress``): ``processed`` counts the cached tokens too."""
    if not isinstance(progress, dict):
        return
    try:
        total, done, cached = (int(progress.get(name) or 0) for name in ("total", "processed", "cache"))
    except (TypeError, ValueError):
        return  # a server's own extension in another shape: not worth failing the reply for
    report(CallProgress("evaluating the prompt", done=done, total=total, cached=cached))


def _describe(err: BaseException) -> str:
    message = str(err) or type(err).__name__
    return message[:300]


def _error_detail(raw: str) -> str:
    """What an error body says: its ``error.message`` (and type) when it is the usual JSON shape."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.strip() or "empty body"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        kind = error.get("type") or error.get("code")
        return f"{error['message']}" + (f" [{kind}]" if kind else "")
    if isinstance(error, str):
        return error
    return raw.strip()


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` headers (an HTTP date is ignored)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None


class ServerBackend:
    """Base for backends that start a server on first use (llama.cpp, ``vllm serve``) and then talk
    to it through an :class:`OpenAICompatBackend`; subclasses implement :meth:`start`."""

    async def start(self) -> OpenAICompatBackend:
        raise NotImplementedError  # abstract: each subclass starts its own kind of server

    async def complete(self, request: ChatRequest) -> ChatResult:
        """One attempt through the started server's OpenAI endpoint."""
        return await (await self.start()).complete(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        """The response text in pieces as the server generates it."""
        inner = await self.start()
        async for piece in inner.stream(request):
            yield piece
