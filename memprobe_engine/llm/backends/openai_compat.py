"""Any OpenAI-compatible chat endpoint (OpenAI, ``vllm serve``, llama.cpp servers) via ``openai``.

The SDK's own retries are off (``max_retries=0``): the chat client retries, so every attempt is
counted, paced and recorded in one place. This module only maps outcomes: 429, 5xx, timeouts,
dropped connections and unparseable bodies become :class:`TransientBackendError`; a rejected key,
an unknown model and other 4xx become :class:`LLMError` with a message naming the setting to fix.
The API key never appears in a message: it is scrubbed from everything the SDK reports.
"""

from __future__ import annotations

import errno
import ipaddress
import os
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

import httpx
import openai
from openai import AsyncOpenAI

from memprobe_engine.errors import ConfigError, ContextOverflow, LLMError
from memprobe_engine.llm.backends import silence
from memprobe_engine.llm.backends.silence import EndpointSilent, answer_or_silence
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.types import ChatRequest, ChatResult, TransientBackendError, Usage

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
LOOPBACK_DUMMY_KEY = "none"
_CONNECT_TIMEOUT_S = 10.0
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

    hint = ("Check the URL in --model / MEMPROBE_MODEL / MEMPROBE_MODEL_<ROLE> / the config file's "
            "[models] table, or start the server.")


class EndpointTimedOut(TransientBackendError):
    """A request's timeout ran out with no answer; ``hint`` says what helps (not more retries)."""

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
    """The URL the SDK will really use, so messages can name it."""
    return (base_url or env.get("OPENAI_BASE_URL", "").strip() or OPENAI_DEFAULT_URL).rstrip("/")


def resolve_api_key(spec: ModelSpec, base_url: str, env: Mapping[str, str]) -> tuple[str, str]:
    """(key, name of the variable it came from). Keys go only where they are configured for:

    - a spec naming ``api_key_env`` sends that variable's key (to whatever URL the spec names);
    - otherwise ``OPENAI_API_KEY`` goes only to the OpenAI endpoint (or the one ``OPENAI_BASE_URL``
      names): a loopback server or another host gets a placeholder, never that key. A server that then
      answers 401 gets a message saying to name its key with ``api_key_env``.
    """
    names = [spec.api_key_env] if spec.api_key_env else [DEFAULT_KEY_ENV]
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
    """One endpoint and model. ``name`` is what recordings show (``openai``, ``vllm``, ``local``)."""

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
        timeout = openai.Timeout(timeout_s, connect=min(_CONNECT_TIMEOUT_S, timeout_s))
        # A server on this machine is reached directly: an HTTP(S)_PROXY set for the outside world
        # must not swallow loopback traffic (the embedded model's server, a local vLLM).
        http_client = openai.DefaultAsyncHttpxClient(trust_env=False, timeout=timeout) \
            if self.base_url and is_loopback(self.base_url) else None
        self._client = AsyncOpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0, timeout=timeout,
                                   http_client=http_client)

    @classmethod
    def from_spec(cls, spec: ModelSpec, env: Mapping[str, str] | None = None) -> "OpenAICompatBackend":
        """Build from an ``openai`` spec, resolving the URL and the key from ``env`` (os.environ)."""
        env = os.environ if env is None else env
        url = resolve_base_url(spec.base_url, env)
        key, key_env = resolve_api_key(spec, url, env)
        return cls(url, spec.model, key, name=spec.backend, timeout_s=spec.timeout_s,
                   extra_body=spec.extra_body, api_key_env=key_env, token_param=spec.token_param)

    def _arguments(self, request: ChatRequest, extra_body: dict[str, Any] | None = None) -> dict[str, Any]:
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
        if self._extra_body or extra_body:
            args["extra_body"] = {**(self._extra_body or {}), **(extra_body or {})}
        return args

    async def complete(self, request: ChatRequest, *, extra_body: dict[str, Any] | None = None) -> ChatResult:
        """One attempt; see the module docstring for how failures are classified. ``extra_body`` adds
        server-specific request fields that are not part of the request's identity (a slot to use)."""
        try:
            response: Any = await self._watched(self._client.chat.completions.create(
                **self._arguments(request, extra_body)))
        except EndpointSilent:
            raise
        except Exception as err:  # noqa: BLE001 — every SDK failure is classified, none escapes raw
            raise self._classify(err) from None
        choices = getattr(response, "choices", None)
        if isinstance(response, str) or not choices:
            raise TransientBackendError(f"{self.base_url} answered with a body that is not a chat completion "
                                        f"({self._scrub(str(response))[:120]!r})")
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        usage = getattr(response, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None)
        return ChatResult(
            text=text,
            usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                        cached_prompt_tokens=getattr(details, "cached_tokens", 0) or 0),
            model=getattr(response, "model", None) or None,
            finish_reason=getattr(choice, "finish_reason", None))

    async def stream(self, request: ChatRequest, *,
                     extra_body: dict[str, Any] | None = None) -> AsyncIterator[str]:
        """Yield content deltas as the server produces them."""
        try:
            chunks: Any = await self._watched(self._client.chat.completions.create(
                **self._arguments(request, extra_body), stream=True))
        except EndpointSilent:
            raise
        except Exception as err:  # noqa: BLE001
            raise self._classify(err) from None
        try:
            async for chunk in chunks:
                for choice in getattr(chunk, "choices", None) or []:
                    piece = getattr(getattr(choice, "delta", None), "content", None)
                    if piece:
                        yield piece
        except Exception as err:  # noqa: BLE001
            raise self._classify(err) from None
        finally:
            await chunks.close()

    async def aclose(self) -> None:
        await self._client.close()

    async def _watched(self, pending: Awaitable[T]) -> T:
        """``pending`` (a request to this endpoint), ended early if the endpoint falls silent."""
        return await answer_or_silence(pending, url=self.base_url, model=self.model, answers=self._answers)

    async def _answers(self) -> bool:
        """Whether the endpoint answers anything (any HTTP status) to ``GET /models`` on a new
        connection within the probe timeout: alive, perhaps busy, rather than hung."""
        loopback = is_loopback(self.base_url)
        async with httpx.AsyncClient(trust_env=not loopback, timeout=silence.PROBE_TIMEOUT_S) as probe:
            try:
                await probe.get(f"{self.base_url.rstrip('/')}/models",
                                headers={"Authorization": f"Bearer {self._api_key}"})
            except httpx.HTTPError:
                return False
        return True

    def _scrub(self, text: str) -> str:
        if self._api_key and self._api_key != LOOPBACK_DUMMY_KEY:
            text = text.replace(self._api_key, "***")
        return text

    def _classify(self, err: Exception) -> Exception:
        """Map an SDK (or transport) failure to TransientBackendError or LLMError."""
        url = self.base_url
        detail = self._scrub(_describe(err))
        if isinstance(err, openai.APITimeoutError):
            return EndpointTimedOut(f"{url} did not answer in time ({detail})")
        if isinstance(err, openai.APIConnectionError):
            cause = self._scrub(str(err.__cause__ or err))
            refused = _refused(err)
            return EndpointUnreachable(f"cannot reach {url} ({'connection refused' if refused else cause})",
                                       refused=refused)
        if isinstance(err, openai.AuthenticationError) or isinstance(err, openai.PermissionDeniedError):
            status = getattr(err, "status_code", 401)
            if self._api_key == LOOPBACK_DUMMY_KEY:
                return LLMError(f"{url} requires an API key (HTTP {status}) but none is set: put the key in an "
                                f"environment variable and name it with api_key_env in the [models.ROLE] "
                                f"table of the config file, or set {DEFAULT_KEY_ENV}.")
            return LLMError(f"{url} rejected the API key from the environment variable {self.api_key_env} "
                            f"(HTTP {status}: {detail}). Set a valid key in {self.api_key_env}.")
        if isinstance(err, openai.NotFoundError):
            return LLMError(f"{url} does not serve the model {self.model!r} (HTTP 404: {detail}). List the "
                            f"models it serves with `curl {url}/models` and fix the model name in the spec "
                            f"(a URL usually ends in /v1).")
        if isinstance(err, openai.RateLimitError):
            return TransientBackendError(f"{url} is rate limiting (HTTP 429: {detail})",
                                         retry_after_s=_retry_after(err))
        if isinstance(err, openai.APIResponseValidationError):
            return TransientBackendError(f"{url} answered with an invalid body ({detail})")
        if isinstance(err, openai.APIStatusError):
            status = err.status_code
            if status in (400, 413) and any(marker in detail.lower() for marker in CONTEXT_OVERFLOW_MARKERS):
                return ContextOverflow(f"{url} refused the request as longer than the model's context "
                                       f"(HTTP {status}: {detail}).")
            if status >= 500 or status in (408, 409):
                return TransientBackendError(f"{url} failed with HTTP {status} ({detail})",
                                             retry_after_s=_retry_after(err))
            return LLMError(f"{url} refused the request for model {self.model!r} (HTTP {status}: {detail}).")
        if isinstance(err, ValueError):  # the body was not JSON (json.JSONDecodeError and kin)
            return TransientBackendError(f"{url} answered with a body that is not valid JSON ({detail})")
        if isinstance(err, (LLMError, TransientBackendError)):
            return err
        return LLMError(f"request to {url} failed unexpectedly: {detail}")


#: How servers say a request is longer than the context: llama.cpp (``exceed_context_size_error``,
#: "exceeds the available context size"), OpenAI (``context_length_exceeded``), vLLM ("maximum
#: context length").
CONTEXT_OVERFLOW_MARKERS = ("exceed_context_size", "exceeds the available context", "context_length_exceeded",
                            "maximum context length")


def _refused(err: BaseException) -> bool:
    """Whether the connection was refused (ECONNREFUSED somewhere in the cause chain: the SDK wraps
    httpx's ConnectError, which wraps the socket's ConnectionRefusedError)."""
    seen: BaseException | None = err
    for _ in range(10):  # a bounded walk: chains are short, and may loop
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or (isinstance(seen, OSError) and
                                                        seen.errno == errno.ECONNREFUSED):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _describe(err: Exception) -> str:
    message = getattr(err, "message", None) or str(err) or type(err).__name__
    return str(message)[:300]


def _retry_after(err: Exception) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` headers (an HTTP date is ignored)."""
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
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
