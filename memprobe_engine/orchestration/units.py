"""Units and shards: what a run is made of and how its units are scheduled.

A run is a list of independent units (user × system in protocol A, episode × system in protocol B).
Units run concurrently up to ``concurrency``; inside a unit everything is sequential, since memory
persists across a user's tasks or an episode's sessions. A shard ``i/n`` takes every n-th unit of
the full list starting at i, and records into its own folder (merged later by ``memprobe merge``).
Inside a Slurm job array, the shard defaults to the array task's (:func:`shard_from_env`).
"""

from __future__ import annotations

import asyncio
import functools
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from memprobe_engine.errors import ConfigError
from memprobe_engine.orchestration.progress import ProgressHook

if TYPE_CHECKING:
    from memprobe_engine.orchestration.protocol import BenchmarkProtocol

T = TypeVar("T")


def select_units(units: Sequence[T], shard: tuple[int, int]) -> list[T]:
    """The units of shard ``shard`` (index, count), in the run's order."""
    return [unit for i, unit in enumerate(units) if i % shard[1] == shard[0]]


#: The Slurm job-array variables a shard is read from when ``--shard`` is not given.
SLURM_ARRAY_VARIABLES = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                         "SLURM_ARRAY_TASK_STEP")


def shard_from_env(env: Mapping[str, str]) -> tuple[int, int] | None:
    """The shard of a Slurm job-array task (``sbatch --array=0-7``): index (ID − MIN) / STEP of COUNT;
    None outside an array. An array whose task ids are not one evenly stepped range (``--array=1,5,6``)
    cannot be mapped onto shards: a ConfigError says to pass --shard."""
    task_id = env.get("SLURM_ARRAY_TASK_ID", "").strip()
    if not task_id:
        return None
    try:
        ident, count = int(task_id), int(env.get("SLURM_ARRAY_TASK_COUNT", ""))
        first, step = int(env.get("SLURM_ARRAY_TASK_MIN", "0") or 0), int(env.get("SLURM_ARRAY_TASK_STEP", "1") or 1)
    except ValueError:
        raise ConfigError(f"SLURM_ARRAY_TASK_ID is {task_id!r} but SLURM_ARRAY_TASK_COUNT / _MIN / _STEP are not all "
                          f"whole numbers ({', '.join(f'{n}={env.get(n)!r}' for n in SLURM_ARRAY_VARIABLES)}). Pass "
                          f"--shard I/N explicitly.") from None
    index, rest = divmod(ident - first, max(step, 1))
    if rest or not 0 <= index < count:
        raise ConfigError(f"Slurm array task {ident} (ids from {first} in steps of {step}, {count} tasks) is not one "
                          f"of {count} evenly stepped shards. Use --array=0-{count - 1}, or pass --shard I/N.")
    return index, count


def shard_record_dir(record: Path, shard: tuple[int, int]) -> Path:
    """Where shard ``shard`` records: ``record`` itself for an unsharded run, else a sibling folder."""
    return record if shard[1] == 1 else record.with_name(f"{record.name}.shard-{shard[0]}-of-{shard[1]}")


def unit_seed(run_seed: int, subject_id: str, system: str) -> int:
    """A per-unit seed that does not depend on scheduling order (``subject_id``: the user or episode)."""
    return zlib.crc32(f"{run_seed}:{subject_id}:{system}".encode())


@functools.lru_cache(maxsize=256)
def system_cost(system: str) -> float:
    """A unit's relative cost by its memory system, for ordering: 1 for a system that calls no model and
    embeds nothing (``nomem``, ``longctx_full``), +2 for one that writes its memories with model calls
    (``amem``, ``mem0``, ``memt``: a call or more per observation), +0.5 for one that embeds. A name the
    registry does not know (protocol B's heuristics) costs 1."""
    from memprobe_engine.errors import MemProbeError
    from memprobe_engine.memory.registry import system_needs

    try:
        needs = system_needs(system)
    except (MemProbeError, ImportError):
        return 1.0
    return 1.0 + (2.0 if "memory_writer" in needs.model_roles else 0.0) + (0.5 if needs.embedder else 0.0)


def unit_cost(protocol: BenchmarkProtocol[T], unit: T) -> float:
    """A unit's relative cost, for ordering: the protocol's own estimate when it offers one (an optional
    ``unit_cost(unit)`` method: protocol A weighs the turns each memory system will read), else its
    memory system's (:func:`system_cost`)."""
    own = getattr(protocol, "unit_cost", None)
    return float(own(unit)) if callable(own) else system_cost(protocol.unit_key(unit)[1])


def costliest_first(protocol: BenchmarkProtocol[T], units: Sequence[T]) -> list[int]:
    """The indexes of ``units`` in the order a run starts them (:func:`unit_cost`, :func:`longest_first`)."""
    return longest_first(units, lambda unit: unit_cost(protocol, unit))


def longest_first(units: Sequence[T], cost: Callable[[T], float]) -> list[int]:
    """The indexes of ``units``, costliest first (ties keep the run's order): started in this order,
    the longest units do not start last and stretch the run past its critical path."""
    costs = [cost(unit) for unit in units]
    return sorted(range(len(units)), key=lambda i: -costs[i])


class UnitTally:
    """How many of a run's units have finished, for the progress lines units print while they run."""

    def __init__(self, total: int) -> None:
        self.done, self.total = 0, total


async def run_units(units: Sequence[tuple[str, Callable[[], Awaitable[None]]]], *, concurrency: int,
                    tally: UnitTally, progress: ProgressHook | None) -> None:
    """Run ``(label, work)`` units at most ``concurrency`` at a time, in one task group: the first unit
    to fail cancels the others (their spans end cancelled) and the lifecycle reports that one error."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(label: str, work: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            started = time.monotonic()
            await work()
            tally.done += 1
            if progress is not None:
                progress(f"{label} done in {time.monotonic() - started:.0f} s", tally.done, tally.total)

    async with asyncio.TaskGroup() as group:
        for label, work in units:
            group.create_task(one(label, work))


__all__ = ["UnitTally", "longest_first", "run_units", "select_units", "shard_from_env", "shard_record_dir", "system_cost",
           "costliest_first", "unit_cost", "unit_seed"]
