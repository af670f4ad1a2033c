"""``--executor ray``: each unit of a run is a Ray task; the driver stays the recording's one writer.

The driver (the ``memprobe run`` process) does everything :func:`~memprobe_engine.orchestration.run.run_protocol`
does — header, resume state, lifecycle, the ``run`` span — and then, instead of running the units
itself, submits one Ray task per unit. A task builds the unit's services in its worker process (a chat
client answering first from the responses the driver holds, the embedder) and records into a
:class:`~memprobe_engine.orchestration.relay.RelayWriter`, whose batches go to a small relay actor;
the driver drains the actor every few tens of milliseconds and writes the events through an
:class:`~memprobe_engine.orchestration.relay.EventFunnel`. So:

- a worker process that dies loses nothing it finished (each answered call reached the relay before
  the unit went on); Ray runs the task again (``max_retries``), the new attempt asks the relay for
  every answer it holds, and replays the unit to where it stopped without sending a completed call
  again; the lost attempt's open spans are closed ``interrupted``;
- a killed driver is resumed with the same command (its recording is an ordinary one);
- Ctrl-C / SIGTERM cancel the outstanding tasks, keep what reached the relay, and end the run
  ``interrupted``; the first unit to fail ends the run ``failed`` with that unit's one-line error.

Without ``--ray-address`` a local Ray instance is started with ``--ray-workers`` CPUs (one unit at a
time per CPU); with one, the driver joins that cluster (``ray start --head`` / ``ray job submit``).

Units run at most one per CPU the run was given (``--ray-workers``, or the cluster's CPUs), the costliest
first (:func:`~memprobe_engine.orchestration.units.costliest_first`): the driver submits the next unit when
one finishes, so Ray cannot start more units than CPUs while a task waits on the relay.

A worker needs nothing from the driver's disk but the inputs that ride with the task: the protocol
with its loaded inputs goes through the object store; a relative ``replay:`` folder is resolved
against the driver's folder; a user's own memory-system module beside the driver (``--systems
mysys:MyMem``) travels as a ``py_modules`` runtime environment; the driver's key variables (those
the model specs name with ``api_key_env``, ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) and every
``MEMPROBE_*`` variable ride as the task's argument — never in the runtime environment, whose
contents Ray's agents write into their logs — and are set in the worker's process for the task.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import sysconfig
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from memprobe_engine.errors import ConfigError, MemProbeError
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.writer import EventWriter
from memprobe_engine.orchestration.progress import ProgressHook
from memprobe_engine.orchestration.protocol import BenchmarkProtocol, RunServices, SharedValue
from memprobe_engine.orchestration.relay import (VALUE_PREFIX, EventFunnel, Item, RelayedResponses, RelayShare,
                                                 RelayWriter)
from memprobe_engine.orchestration.units import UnitTally, costliest_first

if TYPE_CHECKING:
    from memprobe_engine.llm.client import BackendFactory
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import ModelSpec
    from memprobe_engine.llm.types import ChatBackend, ChatResult

#: How often the driver collects the workers' events.
DRAIN_EVERY_S = 0.02
#: Times Ray runs a unit again after its worker process died (an error raised by the unit is not retried).
UNIT_RETRIES = 3


@dataclass
class RayOptions:
    """Where the units run: an existing cluster's address, or a local instance of ``workers`` CPUs."""

    address: str | None = None
    workers: int = 2


@dataclass
class UnitJob:
    """What every unit task needs, shipped to the cluster once."""

    protocol: BenchmarkProtocol[Any]
    units: Sequence[Any]
    llm_config: LLMConfig
    embedding_spec: str | None
    concurrency: int
    record: Path
    header: RecordingHeader
    run_span: str
    persistent_cache: bool
    #: The driver's working folder: relative ``replay:`` folders are resolved against it.
    base: Path = Path()


class _RemoteMethod(Protocol):
    def remote(self, *args: object) -> object: ...


class RelayHandle(Protocol):
    """The relay actor's handle, as the tasks and the driver call it."""

    begin: _RemoteMethod
    acquire: _RemoteMethod
    claim: _RemoteMethod
    release: _RemoteMethod
    put: _RemoteMethod
    drain: _RemoteMethod


def _ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'memprobe[ray]' (or run without --executor ray).") \
            from None
    return ray


def connect(options: RayOptions, systems: Sequence[str] = ()) -> None:
    """Join the cluster at ``options.address``, or start a local instance; nothing when already connected.
    ``systems``: the run's memory systems (a user's own module among them travels to the workers)."""
    ray = _ray()
    if ray.is_initialized():
        return
    # Ray's driver start-up installs its own SIGTERM handler (it dumps a stack and exits): the run's
    # lifecycle, which ends the run as interrupted and keeps what finished, must keep SIGTERM and Ctrl-C.
    main = threading.current_thread() is threading.main_thread()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)} if main else {}
    try:
        _init(ray, options, systems)
    finally:
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)


def _init(ray: ModuleType, options: RayOptions, systems: Sequence[str]) -> None:
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    try:
        if options.address is None:
            ray.init(num_cpus=options.workers, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}})
        else:
            modules = plugin_modules(systems)
            ray.init(address=options.address, log_to_driver=False,
                     **({"runtime_env": {"py_modules": modules}} if modules else {}))
    except ConnectionError as err:
        raise ConfigError(f"--ray-address {options.address}: no Ray cluster answers there ({err}). Start one with "
                          f"`ray start --head`, or leave --ray-address out for a local instance.") from None


def _installed(path: Path) -> bool:
    """Whether ``path`` lies in an installed location every node's environment has (site-packages, the
    standard library) or in MemProbe itself."""
    roots = {sysconfig.get_paths()[name] for name in ("purelib", "platlib", "stdlib", "platstdlib")}
    roots.add(str(Path(__file__).resolve().parents[2] / "memprobe_engine"))
    return any(path.is_relative_to(Path(root).resolve()) for root in roots)


def plugin_modules(systems: Sequence[str]) -> list[str]:
    """The local files or folders of the user's own memory-system modules (``--systems mod:Class`` whose
    module is not installed), to ship to the cluster's workers as ``py_modules``. Under ``ray job submit``
    a module inside the job's ``--working-dir`` (the driver's folder) is there already."""
    submitted = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR", "null") or "null")
    working_dir = Path.cwd().resolve() if isinstance(submitted, dict) and \
        (submitted.get("runtime_env") or {}).get("working_dir") else None
    shipped: list[str] = []
    for system in systems:
        if ":" not in system:
            continue
        top = system.split(":", 1)[0].split(".", 1)[0]
        spec = importlib.util.find_spec(top)
        if spec is None:
            continue  # load_system_class has said so already
        places = list(spec.submodule_search_locations or [])
        if len(places) > 1 or (not places and not spec.origin):
            raise ConfigError(f"--systems {system}: the module {top!r} spans several folders (a namespace package), "
                              f"which Ray cannot ship to the cluster's workers; install it on every node "
                              f"(pip install) or make it one package.")
        path = Path(places[0] if places else str(spec.origin)).resolve()
        if _installed(path) or (working_dir is not None and path.is_relative_to(working_dir)):
            continue
        shipped.append(str(path))
    return list(dict.fromkeys(shipped))


def forwarded_environment(llm_config: LLMConfig, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The driver's variables a unit needs where it runs: the keys the model specs name (``api_key_env``,
    fallbacks included), ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``, and every ``MEMPROBE_*`` variable
    (the cache folder, model overrides, library adapters' keys). They ride as the task's argument."""
    env = os.environ if env is None else env
    names = llm_config.key_variables() | {"OPENAI_BASE_URL"}
    names |= {name for name in env if name.startswith("MEMPROBE_")}
    return {name: env[name] for name in sorted(names) if name in env}


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment for the block, the previous values put back after."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _Relay:
    """The actor between the workers and the driver (wrapped by ``ray.remote`` on first use; its methods
    are coroutines, so a unit waiting for another unit's answer holds no thread).

    It holds every answer of the run (the recording being resumed, then each fresh one claimed) and the
    keys some unit is working out now: :meth:`acquire` gives the answer held, waits while another unit
    asks, or makes the asker the one that sends. Keys an attempt held when its worker died are given
    back when the unit's next attempt :meth:`begin` s."""

    def __init__(self, responses: dict[str, dict[str, Any]]) -> None:
        self._held: dict[str, SharedValue] = dict(responses)
        self._pending: dict[str, tuple[str, asyncio.Future[None]]] = {}
        self._attempts: dict[int, str] = {}
        self._batches: list[tuple[int, str, list[Item]]] = []

    async def begin(self, unit: int, attempt: str) -> dict[str, dict[str, Any]]:
        """An attempt at ``unit`` starts: what an earlier attempt was asking goes back; the answers held."""
        earlier = self._attempts.get(unit)
        self._attempts[unit] = attempt
        if earlier is not None:
            for key in [key for key, (owner, _) in self._pending.items() if owner == earlier]:
                self._settle(key)
        return await self.responses()

    async def responses(self) -> dict[str, dict[str, Any]]:
        """The model answers held (request hash → result JSON), without the shared values."""
        return {key: value for key, value in self._held.items()
                if not key.startswith(VALUE_PREFIX) and isinstance(value, dict)}

    async def acquire(self, key: str, attempt: str) -> SharedValue:
        """The value held for ``key`` (waiting while another attempt works it out), or None: ``attempt``
        works it out now and claims or releases it."""
        while True:
            if key in self._held:
                return self._held[key]
            pending = self._pending.get(key)
            if pending is None:
                self._pending[key] = (attempt, asyncio.get_running_loop().create_future())
                return None
            await pending[1]

    async def claim(self, key: str, result: SharedValue) -> SharedValue:
        """Keep a unit's fresh answer unless another unit's came first; the one kept."""
        kept = self._held.setdefault(key, result)
        self._settle(key)
        return kept

    async def release(self, key: str) -> None:
        self._settle(key)

    def _settle(self, key: str) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None and not pending[1].done():
            pending[1].set_result(None)

    async def put(self, unit: int, attempt: str, items: list[Item]) -> None:
        self._batches.append((unit, attempt, items))

    async def drain(self) -> list[tuple[int, str, list[Item]]]:
        batches, self._batches = self._batches, []
        return batches


def run_unit_task(job: UnitJob, index: int, relay: RelayHandle, env: dict[str, str]) -> float:
    """One unit in a worker process; returns the seconds it took. Runs inside a Ray task with the
    driver's forwarded variables (``env``) set for its duration."""
    with _environment(env):
        return _run_unit(job, index, relay)


def _run_unit(job: UnitJob, index: int, relay: RelayHandle) -> float:
    ray = _ray()
    from memprobe_engine.events.recorder import Recorder
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.types import ChatResult
    from memprobe_engine.orchestration.lifecycle import close_run_clients

    started = time.monotonic()
    attempt = uuid.uuid4().hex[:8]

    def send(items: list[Item], wait: bool) -> None:
        sent = relay.put.remote(index, attempt, items)
        if wait:
            ray.get(sent)

    owned: set[str] = set()  # keys this attempt acquired and works out now

    async def acquire(key: str) -> SharedValue:
        held: SharedValue = await relay.acquire.remote(key, attempt)  # type: ignore[misc]  # an ObjectRef is awaitable
        if held is None:
            owned.add(key)
        return held

    def claim(key: str, value: SharedValue) -> SharedValue:
        if key in owned:
            # No other attempt can have answered a key this one holds, so the relay keeps this value:
            # the unit need not wait for it. The claim is sent before the batch with the call's event,
            # which the unit does wait for; only a worker lost between the two could leave an answer
            # recorded nowhere (its unit's next attempt then asks it again, as before the claim).
            owned.discard(key)
            relay.claim.remote(key, value)
            return value
        kept: SharedValue = ray.get(relay.claim.remote(key, value))
        return kept

    def release(key: str) -> None:
        owned.discard(key)
        relay.release.remote(key)

    held = ray.get(relay.begin.remote(index, attempt))
    responses = {key: ChatResult.model_validate(value) for key, value in held.items()}
    writer = RelayWriter(job.record, job.header, send)
    recorder = Recorder(writer, span_prefix=f"u{index}.{attempt}-")
    chat = ChatClient(job.llm_config, recorder=recorder, backend_factory=_backends_from(job.base),
                      cache=RelayedResponses(responses, ResponseCache() if job.persistent_cache else None,
                                             claim, acquire, release))

    async def unit() -> None:
        embedder = None
        try:
            if job.embedding_spec is not None:
                from memprobe_engine.llm.embeddings import Embedder

                embedder = Embedder.from_spec(job.embedding_spec, recorder=recorder)
            services = RunServices(recorder=recorder, chat=chat, embedder=embedder, llm_config=job.llm_config,
                                   concurrency=job.concurrency, progress=writer.progress,
                                   shared=RelayShare(acquire, claim, release))
            with recorder.inside(job.run_span):
                await job.protocol.run_unit(services, job.units[index])
        finally:
            await close_run_clients(chat, embedder)

    try:
        asyncio.run(unit())
    finally:
        writer.close()
    return time.monotonic() - started


def _backends_from(base: Path) -> BackendFactory:
    """The worker's backend factory: a relative ``replay:`` folder is the driver's, resolved against
    ``base`` (the driver's folder); one this node cannot see is refused in one line."""
    from memprobe_engine.llm.backends import make_backend

    def make(spec: ModelSpec) -> ChatBackend:
        if spec.backend == "replay":
            folder = Path(spec.model).expanduser()
            folder = folder if folder.is_absolute() else base / folder
            if not folder.is_dir():
                raise ConfigError(f"replay:{spec.model}: {folder} is not on this Ray node ({os.uname().nodename}); "
                                  f"a replay recording must be in a folder every node sees (a shared file system), "
                                  f"or run without --ray-address.")
            spec = spec.model_copy(update={"model": str(folder)})
        return make_backend(spec)
    return make


async def run_units_on_ray(protocol: BenchmarkProtocol[Any], units: Sequence[Any], *, writer: EventWriter, run_span: str,
                           llm_config: LLMConfig, embedding_spec: str | None, concurrency: int,
                           responses: dict[str, ChatResult], persistent_cache: bool, options: RayOptions,
                           tally: UnitTally, progress: ProgressHook | None) -> None:
    """Run ``units`` as Ray tasks, writing their events into ``writer`` (the driver's) as they arrive."""
    ray = _ray()
    systems = list(dict.fromkeys(protocol.unit_key(unit)[1] for unit in units))
    connect(options, systems)
    relay_actor = ray.remote(num_cpus=0)(_Relay)
    task = ray.remote(max_retries=UNIT_RETRIES, retry_exceptions=False)(run_unit_task)
    relay = relay_actor.remote({key: result.model_dump(mode="json") for key, result in responses.items()})
    job = ray.put(UnitJob(protocol=protocol, units=list(units), llm_config=llm_config, embedding_spec=embedding_spec,
                          concurrency=concurrency, record=Path(writer.directory), header=writer.header,
                          run_span=run_span, persistent_cache=persistent_cache, base=Path.cwd()))
    env = forwarded_environment(llm_config)
    funnel = EventFunnel(writer)
    labels = [protocol.unit_label(unit) for unit in units]
    order = costliest_first(protocol, units)
    slots = unit_slots(options)
    pending: dict[Any, int] = {}

    def submit() -> None:
        while order and len(pending) < slots:
            index = order.pop(0)
            pending[task.remote(job, index, relay, env)] = index

    def drain(batches: list[tuple[int, str, list[Item]]]) -> None:
        for unit, attempt, items in batches:
            for line in funnel.accept(unit, attempt, items):
                if progress is not None:
                    progress(line, tally.done, tally.total)

    finished = False
    submit()
    try:
        while pending:
            drain(await relay.drain.remote())
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
            for ref in ready:
                index = pending.pop(ref)
                drain(await relay.drain.remote())  # the unit's last events before its result
                try:
                    seconds = await ref
                except Exception as err:  # noqa: BLE001 - the unit's own error, unwrapped below
                    raise _unit_error(err, labels[index]) from None
                tally.done += 1
                if progress is not None:
                    progress(f"{labels[index]} done in {seconds:.0f} s", tally.done, tally.total)
            submit()
            if pending and not ready:
                await asyncio.sleep(DRAIN_EVERY_S)
        finished = True
    finally:
        if not finished:
            for ref in pending:
                ray.cancel(ref, force=True)
            drain(ray.get(relay.drain.remote()))  # keep every event that reached the relay
            funnel.close_all("cancelled", "the run ended before this unit finished")
        ray.kill(relay)


def unit_slots(options: RayOptions) -> int:
    """Units at once: ``--ray-workers`` on a local instance, the cluster's CPUs when joining one."""
    if options.address is None:
        return max(1, options.workers)
    return max(1, int(_ray().cluster_resources().get("CPU", 1)))


def _unit_error(err: BaseException, label: str) -> BaseException:
    """The error to report for a failed unit task: the unit's own exception when it raised one (a clear
    MemProbeError line), else one line saying the unit's worker kept dying."""
    cause: BaseException | None = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        return cause
    if isinstance(err, MemProbeError):
        return err
    return MemProbeError(f"unit {label}: its Ray worker was lost {UNIT_RETRIES + 1} times ({type(err).__name__}); "
                         f"check the cluster's memory and logs, then run the same command again to resume.")


__all__ = ["RayOptions", "UnitJob", "connect", "forwarded_environment", "plugin_modules", "run_unit_task",
           "run_units_on_ray", "unit_slots"]
