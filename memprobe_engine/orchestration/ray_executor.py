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
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from memprobe_engine.errors import ConfigError, MemProbeError
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.writer import EventWriter
from memprobe_engine.orchestration.progress import ProgressHook
from memprobe_engine.orchestration.protocol import BenchmarkProtocol, RunServices
from memprobe_engine.orchestration.relay import EventFunnel, Item, RelayedResponses, RelayWriter
from memprobe_engine.orchestration.units import UnitTally

if TYPE_CHECKING:
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.types import ChatResult

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


class _RemoteMethod(Protocol):
    def remote(self, *args: object) -> object: ...


class RelayHandle(Protocol):
    """The relay actor's handle, as the tasks and the driver call it."""

    put: _RemoteMethod
    claim: _RemoteMethod
    responses: _RemoteMethod
    drain: _RemoteMethod


def _ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'memprobe[ray]' (or run without --executor ray).") \
            from None
    return ray


def connect(options: RayOptions) -> None:
    """Join the cluster at ``options.address``, or start a local instance; nothing when already connected."""
    ray = _ray()
    if ray.is_initialized():
        return
    # Ray's driver start-up installs its own SIGTERM handler (it dumps a stack and exits): the run's
    # lifecycle, which ends the run as interrupted and keeps what finished, must keep SIGTERM and Ctrl-C.
    main = threading.current_thread() is threading.main_thread()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)} if main else {}
    try:
        _init(ray, options)
    finally:
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)


def _init(ray: ModuleType, options: RayOptions) -> None:
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    try:
        if options.address is None:
            ray.init(num_cpus=options.workers, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}})
        else:
            ray.init(address=options.address, log_to_driver=False)
    except ConnectionError as err:
        raise ConfigError(f"--ray-address {options.address}: no Ray cluster answers there ({err}). Start one with "
                          f"`ray start --head`, or leave --ray-address out for a local instance.") from None


class _Relay:
    """The actor between the workers and the driver (wrapped by ``ray.remote`` on first use)."""

    def __init__(self, responses: dict[str, dict[str, Any]]) -> None:
        self._responses = responses
        self._batches: list[tuple[int, str, list[Item]]] = []

    def responses(self) -> dict[str, dict[str, Any]]:
        return self._responses

    def claim(self, key: str, result: dict[str, Any]) -> dict[str, Any]:
        """Keep a unit's fresh answer unless another unit's came first; the one kept."""
        return self._responses.setdefault(key, result)

    def put(self, unit: int, attempt: str, items: list[Item]) -> None:
        self._batches.append((unit, attempt, items))

    def drain(self) -> list[tuple[int, str, list[Item]]]:
        batches, self._batches = self._batches, []
        return batches


def run_unit_task(job: UnitJob, index: int, relay: RelayHandle) -> float:
    """One unit in a worker process; returns the seconds it took. Runs inside a Ray task."""
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

    responses = {key: ChatResult.model_validate(value) for key, value in ray.get(relay.responses.remote()).items()}
    writer = RelayWriter(job.record, job.header, send)
    recorder = Recorder(writer, span_prefix=f"u{index}.{attempt}-")
    chat = ChatClient(job.llm_config, recorder=recorder,
                      cache=RelayedResponses(responses, ResponseCache() if job.persistent_cache else None,
                                             lambda key, result: ray.get(relay.claim.remote(key, result))))

    async def unit() -> None:
        embedder = None
        try:
            if job.embedding_spec is not None:
                from memprobe_engine.llm.embeddings import Embedder

                embedder = Embedder.from_spec(job.embedding_spec, recorder=recorder)
            services = RunServices(recorder=recorder, chat=chat, embedder=embedder, llm_config=job.llm_config,
                                   concurrency=job.concurrency, progress=writer.progress)
            with recorder.inside(job.run_span):
                await job.protocol.run_unit(services, job.units[index])
        finally:
            await close_run_clients(chat, embedder)

    try:
        asyncio.run(unit())
    finally:
        writer.close()
    return time.monotonic() - started


async def run_units_on_ray(protocol: BenchmarkProtocol[Any], units: Sequence[Any], *, writer: EventWriter, run_span: str,
                           llm_config: LLMConfig, embedding_spec: str | None, concurrency: int,
                           responses: dict[str, ChatResult], persistent_cache: bool, options: RayOptions,
                           tally: UnitTally, progress: ProgressHook | None) -> None:
    """Run ``units`` as Ray tasks, writing their events into ``writer`` (the driver's) as they arrive."""
    ray = _ray()
    connect(options)
    relay_actor = ray.remote(num_cpus=0)(_Relay)
    task = ray.remote(max_retries=UNIT_RETRIES, retry_exceptions=False)(run_unit_task)
    relay = relay_actor.remote({key: result.model_dump(mode="json") for key, result in responses.items()})
    job = ray.put(UnitJob(protocol=protocol, units=list(units), llm_config=llm_config, embedding_spec=embedding_spec,
                          concurrency=concurrency, record=Path(writer.directory), header=writer.header,
                          run_span=run_span, persistent_cache=persistent_cache))
    funnel = EventFunnel(writer)
    labels = [protocol.unit_label(unit) for unit in units]
    pending: dict[Any, int] = {task.remote(job, index, relay): index for index in range(len(units))}

    def drain(batches: list[tuple[int, str, list[Item]]]) -> None:
        for unit, attempt, items in batches:
            for line in funnel.accept(unit, attempt, items):
                if progress is not None:
                    progress(line, tally.done, tally.total)

    finished = False
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


__all__ = ["RayOptions", "UnitJob", "connect", "run_unit_task", "run_units_on_ray"]
