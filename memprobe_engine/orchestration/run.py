"""How any run runs: the one skeleton every protocol's run goes through.

fingerprint → shard folder → header check and resume state (the recording opened once) → embedder
spec check → header → :func:`~memprobe_engine.orchestration.lifecycle.recorded_run` → chat client
over recorded responses → the shard's units not finished yet → ``run`` span → :func:`run_units` →
clients closed. Every flag is validated before the recording is created.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.header import HEADER_FILE, new_header
from memprobe_engine.orchestration.lifecycle import close_run_clients, recorded_run
from memprobe_engine.orchestration.progress import ProgressHook
from memprobe_engine.orchestration.protocol import BenchmarkProtocol, RunServices
from memprobe_engine.orchestration.resume import (
    RecordedResponses,
    can_resume,
    different_settings_message,
    fingerprint,
    read_resume,
)
from memprobe_engine.orchestration.units import (UnitTally, costliest_first, run_units, select_units,
                                                 shard_record_dir)
from memprobe_engine.provenance import collect_provenance

if TYPE_CHECKING:
    from memprobe_engine.llm.cache import ResponseStore
    from memprobe_engine.llm.client import BackendFactory
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.embeddings import TextEmbedder
    from memprobe_engine.orchestration.ray_executor import RayOptions

UnitT = TypeVar("UnitT")


def run_config(protocol: BenchmarkProtocol[Any], llm_config: LLMConfig) -> dict[str, Any]:
    """The protocol's configuration with its fingerprint, as the header stores it."""
    config = protocol.config(llm_config)
    config["fingerprint"] = fingerprint(config)
    return config


def resume_checker(protocol: BenchmarkProtocol[Any], record: Path,
                   config: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """Refuses a recording made with other settings: the protocol's own reason first, then the fingerprint."""
    def check(header_config: dict[str, Any]) -> None:
        previous = protocol.resume_config(record, header_config, config)
        if not can_resume(previous, config):
            raise RecordingError(different_settings_message(record, previous, config))
    return check


async def run_protocol(protocol: BenchmarkProtocol[UnitT], record: Path, *, llm_config: LLMConfig,
                       concurrency: int = 1, cache: ResponseStore | None = None,
                       backend_factory: BackendFactory | None = None, embedder: TextEmbedder | None = None,
                       progress: ProgressHook | None = None, signals: bool = False,
                       ray: RayOptions | None = None) -> Path:
    """Run (or resume) ``protocol`` into ``record`` (its shard's folder); returns the recording directory.

    The recording's lifecycle (run_start / run_end with its status, spans left open closed as
    cancelled, lock released) is :func:`recorded_run`'s; ``signals=True`` (the CLI) makes SIGTERM
    end the run as ``interrupted``. ``embedder`` (tests) replaces the one the run would create.
    ``ray`` runs each unit as a Ray task (:mod:`memprobe_engine.orchestration.ray_executor`); the
    recording keeps this process as its one writer."""
    from memprobe_engine.llm.client import ChatClient

    config = run_config(protocol, llm_config)
    record = shard_record_dir(record, protocol.shard)
    state = read_resume(record, unit_of=protocol.unit_of_span, check=resume_checker(protocol, record, config),
                        extra_kinds=protocol.resume_kinds, on_event=protocol.resume_event)
    spec = protocol.needs().embedding_spec if embedder is None else None
    if spec is not None:
        from memprobe_engine.llm.embeddings import parse_embedding_spec

        parse_embedding_spec(spec, origin="--embeddings")  # before any recording exists
    units = [unit for unit in select_units(protocol.units(), protocol.shard)
             if protocol.unit_key(unit) not in state.completed_units]
    run_id = f"{protocol.suite}-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    header = None if (record / HEADER_FILE).exists() else new_header(
        run_id, protocol.suite, config,
        collect_provenance(config, inputs=protocol.input_hashes(config), prompt_modules=protocol.prompt_modules))
    async with recorded_run(record, header=header, suite=protocol.suite, signals=signals) as run:
        chat = ChatClient(llm_config, recorder=run.recorder, cache=RecordedResponses(state.responses, cache),
                          backend_factory=backend_factory)
        run.scrub = chat.scrub
        tally = UnitTally(len(units))
        try:
            if ray is not None:
                from memprobe_engine.orchestration.ray_executor import run_units_on_ray

                with run.recorder.span("run", "run") as run_span:
                    await run_units_on_ray(
                        protocol, units, writer=run.writer, run_span=run_span, llm_config=llm_config,
                        embedding_spec=spec, concurrency=concurrency, responses=state.responses,
                        persistent_cache=cache is not None, options=ray, tally=tally, progress=progress)
                return record
            if spec is not None:
                from memprobe_engine.llm.embeddings import Embedder

                embedder = Embedder.from_spec(spec, recorder=run.recorder)
            services = RunServices(
                recorder=run.recorder, chat=chat, embedder=embedder, llm_config=llm_config, concurrency=concurrency,
                progress=(lambda line: progress(line, tally.done, tally.total)) if progress is not None else None)
            # The costliest units first, so that none of them starts last once --concurrency is full.
            ordered = [units[i] for i in costliest_first(protocol, units)]
            work: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                (protocol.unit_label(unit), partial(protocol.run_unit, services, unit)) for unit in ordered]
            with run.recorder.span("run", "run"):
                await run_units(work, concurrency=concurrency, tally=tally, progress=progress)
        finally:
            await close_run_clients(chat, embedder)
    return record


__all__ = ["resume_checker", "run_config", "run_protocol"]
