"""The one chat interface every role uses: cache, retries, structured output, recording.

``ChatClient.chat(role, messages)`` resolves the role to a model spec and the spec to a backend
(one instance per distinct spec, paced by a semaphore of ``spec.concurrency``), then:

1. hashes the request (:mod:`memprobe_engine.llm.hashing`) and answers from the response cache
   when it can — no backend call, but still one recorded LLMCall with ``cache_hit=True``;
2. otherwise calls the backend, retrying :class:`TransientBackendError` with exponential backoff
   and jitter (``retry_after_s`` honoured) up to ``spec.max_retries`` times, each retry noted;
   when they run out, raises :class:`LLMError` naming the role, the spec and where it was set;
3. with a ``schema`` (pydantic model) or ``json_schema`` (raw dict): sends the JSON schema, parses
   and validates the reply, and on failure runs up to :data:`MAX_REPAIRS` repair rounds (bad reply
   and error appended, asked again). A reply still invalid after that comes back with ``excluded``
   set and ``parsed=None`` — callers must exclude the item, never score it as zero;
4. records one LLMCall per logical call. Its ``messages`` are the conversation of the last round
   sent (the original messages, then one bad reply and one repair prompt per repair round) and its
   ``request_hash`` is the key of the original request. Content over 200 characters and the schema
   go to the payload store. Failures are recorded too (``error``) before they are raised.

API keys never reach a recording, a log or an error text: every message is scrubbed of the values
of the key variables the configuration names, of keys learned while running (:meth:`ChatClient.add_secret`:
the keys clients send the recording proxy), and of anything shaped like a provider's key
(:mod:`memprobe_engine.llm.secrets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from memprobe_engine.errors import LLMError, MemProbeError
from memprobe_engine.events.llm import LLMCall, RecordedMessage, RetryNote, TokenUsage
from memprobe_engine.events.recorder import NULL_RECORDER, Recorder
from memprobe_engine.llm.call import ChatOutcome, ChatStream, LogicalCall
from memprobe_engine.llm.cache import ResponseStore, SharedStore, endpoint_of
from memprobe_engine.llm.call_progress import CallProgress, report
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.hashing import current_role, request_hash
from memprobe_engine.llm.secrets import SCRUB_MEMO_SIZE, KeyScrubber
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.stream_scrub import StreamScrubber
from memprobe_engine.llm.structured import (
    StructuredOutputError,
    parse_structured,
    parse_with_json_schema,
    repair_messages,
    response_schema,
)
from memprobe_engine.llm.types import (
    ChatBackend,
    ChatMessage,
    ChatRequest,
    ChatResult,
    SamplingParams,
    TransientBackendError,
    Usage,
)

#: Repair rounds after the first reply before structured output is declared excluded.
MAX_REPAIRS = 2
#: Message content longer than this is stored once in the payload store and referenced.
INLINE_LIMIT = 200
#: A server's Retry-After is honoured up to this many seconds.
RETRY_AFTER_CAP_S = 120.0
#: A refused connection: retried this many times (at most), after this many seconds.
REFUSED_RETRIES = 1
REFUSED_WAIT_S = 0.25

BackendFactory = Callable[[ModelSpec], ChatBackend]


@contextlib.asynccontextmanager
async def _closing(source: AsyncIterator[str]) -> AsyncGenerator[AsyncIterator[str], None]:
    """Close a backend's stream however we leave it, so its connection is released at once."""
    try:
        yield source
    finally:
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


class ChatClient:
    """Role-based chat over configured backends. Create one per run and event loop (backends hold
    connections bound to the loop they were first used on); ``aclose`` when done."""

    def __init__(self, config: LLMConfig, recorder: Recorder = NULL_RECORDER, cache: ResponseStore | None = None,
                 backend_factory: BackendFactory | None = None, *, backoff_base_s: float = 1.0,
                 backoff_max_s: float = 30.0, env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.recorder = recorder
        self.cache = cache
        #: The cache, when it is shared with other processes and asked before each request is sent.
        self._shared = cache if isinstance(cache, SharedStore) else None
        self._factory = backend_factory
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._env = os.environ if env is None else env
        self._backends: dict[str, tuple[ChatBackend, asyncio.Semaphore]] = {}
        self._in_flight: dict[str, asyncio.Future[ChatResult]] = {}
        self._keys = KeyScrubber(config.key_variables(), self._env)
        self._endpoints: dict[str, str] = {}
        self._identities: dict[int, tuple[ModelSpec, str]] = {}
        self._recorded_forms: dict[tuple[str, str], RecordedMessage] = {}
        if self.secret_values():
            self._scrub_writes()

    def _scrub_writes(self) -> None:
        """Filter every line and payload the recording gets from now on through :meth:`scrub_bytes`."""
        if self.recorder.writer is not None:
            self.recorder.writer.add_scrub(self.scrub_bytes)

    def add_secret(self, value: str) -> None:
        """Treat ``value`` as a key from now on: scrubbed from replies, errors and everything written
        (the recording proxy adds each key a client sends it)."""
        if self._keys.learn(value):
            self._recorded_forms.clear()
            self._scrub_writes()

    def spec_for(self, role: str) -> ModelSpec:
        return self.config.spec_for(role)

    async def __aenter__(self) -> "ChatClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def chat(self, role: str, messages: Sequence[ChatMessage], *, params: SamplingParams | None = None,
                   schema: type[BaseModel] | None = None, json_schema: dict[str, Any] | None = None,
                   replica: int = 0) -> ChatOutcome:
        """One logical call (see the module docstring). Raises LLMError (or ReplayMiss) when it fails.

        ``schema`` (a pydantic model) or ``json_schema`` (a raw JSON schema, e.g. from a file) asks
        for structured output; ``outcome.parsed`` is then the model instance or the checked JSON."""
        call = self._start(role, messages, params, schema, json_schema, replica)
        try:
            text = await self._round(call)
            return await self._conclude(call, text)
        except Exception as err:
            safe = self._record_failure(call, err)
            if safe is err:
                raise
            raise safe from None

    def stream(self, role: str, messages: Sequence[ChatMessage], *, params: SamplingParams | None = None,
               schema: type[BaseModel] | None = None, json_schema: dict[str, Any] | None = None,
               replica: int = 0) -> ChatStream:
        """Like :meth:`chat`, yielding the first reply's text as it is generated (a cache hit comes in
        one piece). Only the first reply streams: repair rounds, if needed, run before the end.
        Token usage of a streamed reply is not reported by the stream and is recorded as 0."""
        sink = ChatStream()
        sink._source = self._stream_pieces(sink, self._start(role, messages, params, schema, json_schema, replica))
        return sink

    async def aclose(self) -> None:
        """Close every backend (stopping servers the backends started)."""
        backends, self._backends = list(self._backends.values()), {}
        for backend, _ in backends:
            await backend.aclose()

    # -- one call ------------------------------------------------------------------------------

    def _start(self, role: str, messages: Sequence[ChatMessage], params: SamplingParams | None,
               schema: type[BaseModel] | None, json_schema: dict[str, Any] | None, replica: int) -> LogicalCall:
        if schema is not None and json_schema is not None:
            raise TypeError("pass either schema (a pydantic model) or json_schema (a dict), not both")
        spec = self.spec_for(role)
        backend, semaphore = self._backend_for(spec)
        parse: Callable[[str], Any] | None = None
        sent: dict[str, Any] | None = None
        name = ""
        if schema is not None:
            parse, sent = functools.partial(parse_structured, model=schema), response_schema(schema)
            name = schema.__name__
        elif json_schema is not None:
            parse, sent, name = functools.partial(parse_with_json_schema, schema=json_schema), json_schema, "JSON"
        call = LogicalCall(role=role, spec=spec, backend=backend, semaphore=semaphore, conversation=list(messages),
                     params=params or SamplingParams(), schema=sent, parse=parse, schema_name=name,
                     replica=replica, request_hash="")
        call.request_hash = request_hash(call.request(), backend=spec.backend)
        return call

    def _identity(self, spec: ModelSpec) -> str:
        """``spec.identity_key()``, worked out once per spec object (it serializes the whole spec)."""
        known = self._identities.get(id(spec))
        if known is None or known[0] is not spec:
            known = self._identities[id(spec)] = (spec, spec.identity_key())
        return known[1]

    def _backend_for(self, spec: ModelSpec) -> tuple[ChatBackend, asyncio.Semaphore]:
        key = self._identity(spec)
        entry = self._backends.get(key)
        if entry is None:
            if self._factory is not None:
                backend = self._factory(spec)
            else:
                from memprobe_engine.llm.backends import make_backend
                backend = make_backend(spec, self._env)
            entry = (backend, asyncio.Semaphore(spec.concurrency))
            self._backends[key] = entry
        return entry

    def _cached(self, call: LogicalCall, key: str) -> ChatResult | None:
        """Count a request and answer it from the cache if possible (never for replay specs)."""
        call.requests += 1
        if self.cache is None or call.spec.backend == "replay":
            return None
        hit = self.cache.get(key, self._endpoint(call.spec))
        if hit is not None:
            hit = self._scrubbed(hit)  # an entry cached before its key was configured
            call.cache_hits += 1
            call.add_usage(hit.usage)
        return hit

    def _store(self, call: LogicalCall, key: str, result: ChatResult) -> ChatResult:
        """Cache a fresh answer and return the one to go on from: the cache's, when another unit (in
        another process) stored an answer to the same request first. The usage stays this call's own."""
        call.add_usage(result.usage)
        if self.cache is None or call.spec.backend == "replay":
            return result
        return self._scrubbed(self.cache.put(key, result, self._endpoint(call.spec)))

    async def _round(self, call: LogicalCall) -> str:
        """Send the current conversation once (cache, then backend with retries); return the text."""
        request = call.request()
        # The first round sends the conversation _start hashed; only a repair round changed it.
        key = call.request_hash if call.repairs == 0 else request_hash(request, backend=call.spec.backend)
        result = self._cached(call, key)
        sending = f"{key}@{self._endpoint(call.spec)}"  # the same request to the same server
        if result is None and self.cache is not None and call.spec.backend != "replay" and sending in self._in_flight:
            # The same request is already on its way (another unit, concurrently): share its answer
            # exactly as a cache hit would, instead of sending it twice.
            result = await asyncio.shield(self._in_flight[sending])
            call.cache_hits += 1
            call.add_usage(result.usage)
        elif result is None:
            result = await self._send_once(call, request, key, sending)
        call.text = result.text
        call.finish_reason = result.finish_reason
        return result.text

    async def _send_once(self, call: LogicalCall, request: ChatRequest, key: str, sending: str) -> ChatResult:
        """Call the backend and cache the answer (``key``: the request hash), publishing the pending
        answer so identical concurrent requests to the same server (``sending``: hash and endpoint)
        wait for it and go on from the same answer."""
        pending: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        pending.add_done_callback(lambda done: done.cancelled() or done.exception())  # no "never retrieved"
        self._in_flight[sending] = pending
        try:
            share = self._shared is not None and call.spec.backend != "replay"
            shared = await self._shared.acquire(key, self._endpoint(call.spec)) \
                if share and self._shared is not None else None
            if shared is not None:  # another process's unit answered it, or was asking it: as a cache hit
                result = self._scrubbed(shared)
                call.cache_hits += 1
                call.add_usage(result.usage)
            else:
                result = await self._sent(call, request, key, share)
        except BaseException as err:
            pending.set_exception(err)
            raise
        finally:
            self._in_flight.pop(sending, None)
        pending.set_result(result)
        return result

    async def _sent(self, call: LogicalCall, request: ChatRequest, key: str, acquired: bool) -> ChatResult:
        """Send the request and store its answer; a request ``acquired`` from the shared store is
        handed back when the call fails (the next unit that waits for it sends it)."""
        try:
            answer = await self._attempts(call, request)
            if answer.endpoint is not None:  # which of the role's endpoints answered: the call's, not the cache's
                call.endpoint = answer.endpoint
                answer = answer.model_copy(update={"endpoint": None})
            return self._store(call, key, answer)
        except BaseException:
            if acquired and self._shared is not None:
                self._shared.release(key, self._endpoint(call.spec))
            raise

    async def _attempts(self, call: LogicalCall, request: ChatRequest) -> ChatResult:
        attempt = 0
        async with call.semaphore:
            while True:
                token = current_role.set(call.role)
                try:
                    return self._scrubbed(await call.backend.complete(request))
                except TransientBackendError as err:
                    attempt = await self._retry_or_give_up(call, err, attempt)
                finally:
                    current_role.reset(token)

    async def _retry_or_give_up(self, call: LogicalCall, err: TransientBackendError, attempt: int) -> int:
        """Note the failure and sleep before the next attempt, or raise LLMError when out of retries."""
        # A refused connection is retried once, quickly; timeouts and 5xx answers get the backoff.
        limit = min(call.spec.max_retries, REFUSED_RETRIES) if err.refused else call.spec.max_retries
        if attempt >= limit:
            hint = getattr(err, "hint", None) or ("The endpoint kept failing: try again later, or raise "
                                                  "max_retries in the role's [models.ROLE] table.")
            raise LLMError(f"{self.scrub(str(err))}. Model spec for role {call.role!r}: {call.spec.where()}; "
                           f"gave up after {attempt + 1} attempts. {hint}")
        if err.refused:
            wait = REFUSED_WAIT_S
        elif err.retry_after_s is not None:
            wait = min(err.retry_after_s, RETRY_AFTER_CAP_S)
        else:
            wait = min(self._backoff_max_s, self._backoff_base_s * 2 ** attempt) * random.uniform(0.5, 1.0)
        call.retries.append(RetryNote(attempt=attempt + 1, error=self.scrub(str(err))[:300], wait_s=round(wait, 3)))
        await asyncio.sleep(wait)
        return attempt + 1

    async def _conclude(self, call: LogicalCall, text: str) -> ChatOutcome:
        """Parse (with repair rounds) when a schema was asked for, then record the call."""
        if call.parse is None:
            return self._record(call)
        while True:
            try:
                parsed = call.parse(text)
            except StructuredOutputError as err:
                reason = err.reason
            else:
                return self._record(call, parsed=parsed)
            if call.repairs >= MAX_REPAIRS:
                break
            call.conversation.extend(repair_messages(text, reason))
            call.repairs += 1
            # A repair round is not streamed: without this a viewer (the re-run panel) kept saying the
            # first reply streams while the model was asked again, for as long as a prompt takes.
            said = " ".join(reason.split())
            said = said if len(said) <= 60 else said[:59] + "…"
            report(CallProgress(f"repair round {call.repairs}/{MAX_REPAIRS}: the reply failed validation ({said}), "
                                "asking again", role=call.role))
            text = await self._round(call)
        excluded = (f"{call.schema_name} output still invalid after {call.repairs} repair round(s): {reason}")
        return self._record(call, excluded=excluded)

    # -- streaming -----------------------------------------------------------------------------

    async def _stream_pieces(self, sink: ChatStream, call: LogicalCall) -> AsyncGenerator[str, None]:
        call.started = time.perf_counter()  # latency counts from the first read, not from stream()
        try:
            cached = self._cached(call, call.request_hash)
            if cached is not None:
                text = cached.text
                yield text
            else:
                pieces: list[str] = []
                async with contextlib.aclosing(self._stream_attempts(call, pieces)) as source:
                    async for piece in source:
                        yield piece
                text = "".join(pieces)
                self._store(call, call.request_hash, ChatResult(text=text))  # what was streamed stands
            call.text = text
            sink.outcome = await self._conclude(call, text)
        except GeneratorExit:
            self._record(call, error="the consumer stopped reading the stream before it ended")
            raise
        except Exception as err:
            safe = self._record_failure(call, err)
            if safe is err:
                raise
            raise safe from None

    async def _stream_attempts(self, call: LogicalCall, pieces: list[str]) -> AsyncGenerator[str, None]:
        """Stream one reply; retry transient failures that happen before the first piece."""
        request = call.request()
        attempt = 0
        async with call.semaphore:
            while True:
                # A key the server echoes may be split between pieces: the scrubber holds back an
                # end that could still be the start of one and scrubs it with the next piece.
                scrubber = StreamScrubber(self.scrub, self.secret_values())
                # Said before anything else is known: a viewer shows it until the backend says more.
                again = f" (attempt {attempt + 1})" if attempt else ""
                report(CallProgress(f"asking {call.spec.spec_string()}{again}", role=call.role))
                try:
                    async with _closing(call.backend.stream(request)) as source:
                        while True:
                            token = current_role.set(call.role)
                            ended = False
                            try:
                                piece = await anext(source)
                            except StopAsyncIteration:
                                ended = True
                            finally:
                                current_role.reset(token)
                            piece = scrubber.flush() if ended else scrubber.feed(piece)
                            if piece:
                                pieces.append(piece)
                                yield piece
                            if ended:
                                return
                except TransientBackendError as err:
                    if pieces:
                        raise LLMError(f"{self.scrub(str(err))}: the stream broke after {len(pieces)} pieces "
                                       f"(model spec for role {call.role!r}: {call.spec.where()}).") from None
                    attempt = await self._retry_or_give_up(call, err, attempt)

    # -- recording -----------------------------------------------------------------------------

    def secret_values(self) -> list[str]:
        """The values of every configured key variable (OPENAI_API_KEY and each spec's api_key_env)
        and of the keys learned since (:meth:`add_secret`)."""
        return self._keys.values()

    def scrub(self, text: str) -> str:
        """Remove API keys: values of the configured key variables and learned keys, and anything
        key-shaped."""
        return self._keys.text(text)

    def _endpoint(self, spec: ModelSpec) -> str:
        """:func:`endpoint_of` ``spec``, worked out once per spec."""
        key = self._identity(spec)
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            endpoint = self._endpoints[key] = endpoint_of(spec, self._env)
        return endpoint

    def scrub_bytes(self, blob: bytes) -> bytes:
        """The writer's line filter: configured key values (raw and JSON-escaped) become ``***``."""
        return self._keys.bytes(blob)

    def _scrubbed(self, result: ChatResult) -> ChatResult:
        """A reply with any configured key removed: a server that echoes the key must not get it into
        the recording, the cache, a memory store or the terminal."""
        clean = self.scrub(result.text)
        return result if clean == result.text else result.model_copy(update={"text": clean})

    def _record_failure(self, call: LogicalCall, err: Exception) -> Exception:
        """Record the failed call; return the exception to raise (a scrubbed copy if needed)."""
        message = self.scrub(str(err))
        if isinstance(err, MemProbeError):
            self._record(call, error=message)
            return err if message == str(err) else type(err)(message)
        self._record(call, error=f"{type(err).__name__}: {message}"[:1000])
        return err

    def _recorded_messages(self, messages: list[ChatMessage]) -> list[RecordedMessage]:
        recorded = []
        known = self._recorded_forms
        for message in messages:
            # A conversation is recorded again with every later call of it: each message's recorded
            # form is built once (scrubbed, stored), then reused as it is (events never change it).
            form = known.get((message.role, message.content))
            if form is None:
                content = self.scrub(message.content)  # a prompt may quote a key (the writer knows only known ones)
                ref = self.recorder.put_payload(content) if len(content) > INLINE_LIMIT else None
                form = (RecordedMessage(role=message.role, content_ref=ref) if ref is not None
                        else RecordedMessage(role=message.role, content=content))
                if len(known) >= SCRUB_MEMO_SIZE:
                    known.clear()
                known[(message.role, message.content)] = form
            recorded.append(form)
        return recorded

    def _record(self, call: LogicalCall, *, parsed: object = None, excluded: str | None = None,
                error: str | None = None) -> ChatOutcome:
        latency = time.perf_counter() - call.started
        usage = Usage(prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                      cached_prompt_tokens=call.cached_prompt_tokens)
        cache_hit = call.requests > 0 and call.cache_hits == call.requests
        seq: int | None = None
        if self.recorder.enabled:
            event = self.recorder.emit(LLMCall(
                role=call.role, backend=call.spec.backend, model=call.spec.model,
                request_hash=call.request_hash, messages=self._recorded_messages(call.conversation),
                params=call.params.model_dump(mode="json", exclude_none=True),
                response_schema_ref=self.recorder.put_payload(call.schema) if call.schema is not None else None,
                response_text=call.text,
                parsed=parsed.model_dump(mode="json") if isinstance(parsed, BaseModel) else parsed,
                usage=TokenUsage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                                 cached_prompt_tokens=usage.cached_prompt_tokens),
                latency_s=round(latency, 4), cache_hit=cache_hit, retries=list(call.retries),
                repairs=call.repairs, error=error, excluded=excluded, replica=call.replica,
                finish_reason=call.finish_reason, endpoint=call.endpoint))
            seq = event.seq
        return ChatOutcome(
            text=call.text or "", parsed=parsed, excluded=excluded, call_seq=seq, cache_hit=cache_hit,
            usage=usage, latency_s=latency, backend=call.spec.backend, model=call.spec.model,
            request_hash=call.request_hash, role=call.role, repairs=call.repairs, retries=len(call.retries))
