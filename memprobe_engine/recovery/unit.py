"""One benchmark unit of protocol A: one simulated user × one memory system, end to end.

Rollout over the user's tasks (memory persisting across them), footprint, then per dimension and
access mode: slot-fill, judge, attribution. The whole unit is a ``unit`` span; a unit whose span
closed ``ok`` is complete and a resumed run skips it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memprobe_engine.events.recorder import Recorder
from memprobe_engine.memory.base import MemoryServices, SimClock, record_footprint
from memprobe_engine.memory.registry import create_system
from memprobe_engine.orchestration.units import unit_seed
from memprobe_engine.recovery.attribution import Stage0Cache, attribute
from memprobe_engine.recovery.fixed_dialogues import FixedDialogues, replay_episode
from memprobe_engine.recovery.inputs import DimensionPool, SimUser, Task
from memprobe_engine.recovery.rollout import Episode, RolloutSettings, run_episode
from memprobe_engine.recovery.config import Mode
from memprobe_engine.recovery.scoring import score_dimension

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.embeddings import TextEmbedder


@dataclass
class UnitContext:
    """Run-wide services shared by every unit."""

    chat: ChatClient
    embedder: TextEmbedder | None
    recorder: Recorder
    pool: DimensionPool
    settings: RolloutSettings
    modes: Sequence[Mode]
    reader_context_tokens: int
    stage0: Stage0Cache
    scoring_concurrency: int = 1
    #: Receives one line per finished episode and scoring phase (the runner prints them on long runs).
    progress: Callable[[str], None] | None = None
    #: A fixed-dialogue run's recorded dialogues, fed to memory instead of a live rollout.
    dialogues: FixedDialogues | None = None


def tasks_for(user: SimUser, dimensions: Sequence[str] | None) -> list[Task]:
    """The user's tasks in bank order, restricted to ``dimensions`` when given."""
    wanted = set(dimensions) if dimensions else None
    order = [e.dimension for e in user.bank.entries]
    tasks = [t for t in user.tasks.tasks if wanted is None or t.dimension in wanted]
    return sorted(tasks, key=lambda t: order.index(t.dimension))


def unit_inputs(user: SimUser, pool: DimensionPool, tasks: Sequence[Task]) -> dict[str, Any]:
    """What the unit ran on, stored once in the recording so a replay or re-score needs no sessions
    folder: the persona, the hidden bank, the tasks, and the pool entries of those dimensions."""
    return {"user_id": user.user_id, "profile": user.profile.model_dump(mode="json"),
            "bank": [e.model_dump(mode="json") for e in user.bank.entries],
            "tasks": [t.model_dump(mode="json") for t in tasks],
            "pool": {t.dimension: entry.model_dump(mode="json") for t in tasks
                     if (entry := pool.get(t.dimension)) is not None}}


async def run_unit(ctx: UnitContext, user: SimUser, system_name: str, dimensions: Sequence[str] | None) -> None:
    recorder = ctx.recorder
    tasks = tasks_for(user, dimensions)
    inputs_ref = recorder.put_payload(unit_inputs(user, ctx.pool, tasks))
    with recorder.span(f"{user.user_id} × {system_name}", "unit", user_id=user.user_id, system=system_name,
                       tasks=len(tasks), inputs_ref=inputs_ref):
        services = MemoryServices(recorder=recorder, clock=SimClock(), seed=unit_seed(ctx.settings.seed, user.user_id,
                                  system_name), chat=ctx.chat, embedder=ctx.embedder)
        system = create_system(system_name, services)
        await system.reset(user.user_id)
        episodes: dict[str, Episode] = {}
        with recorder.span("rollout", "rollout"):
            for index, task in enumerate(tasks):
                with recorder.span(f"task {index + 1}: {task.dimension}", "episode", dimension=task.dimension,
                                   task_id=task.task_id, category=task.category, task_index=index):
                    if ctx.dialogues is not None:
                        episodes[task.dimension] = await replay_episode(
                            recorder=recorder, system=system, task=task, task_index=index, clock=services.clock,
                            settings=ctx.settings, dialogue=ctx.dialogues.get(user.user_id, task.dimension))
                    else:
                        episodes[task.dimension] = await run_episode(
                            chat=ctx.chat, recorder=recorder, system=system, user=user, task=task,
                            task_index=index, clock=services.clock, settings=ctx.settings, embedder=ctx.embedder)
                if ctx.progress is not None:
                    episode = episodes[task.dimension]
                    ctx.progress(f"{user.user_id} × {system_name}: task {index + 1}/{len(tasks)} "
                                 f"{episode.end_reason} after {episode.turns} turn(s)")
            finish = getattr(system, "finish", None)
            if finish is not None:
                await finish()  # batch writers flush what is still queued
            record_footprint(recorder, system)
        # The store is final once the rollout ends, so dimensions are scored concurrently.
        gate = asyncio.Semaphore(max(1, ctx.scoring_concurrency))

        async def recover(task: Task) -> None:
            entry = user.bank.entry(task.dimension)
            assert entry is not None
            episode = episodes[task.dimension]
            async with gate:
                with recorder.span(f"recover {entry.dimension}", "dimension", dimension=entry.dimension,
                                   category=entry.category):
                    for mode in ctx.modes:
                        with recorder.span(f"{mode}", "mode", mode=mode):
                            result = await score_dimension(ctx.chat, recorder, system, entry,
                                                           ctx.pool.get(entry.dimension), mode,
                                                           context_tokens=ctx.reader_context_tokens,
                                                           max_tokens=ctx.settings.judge_max_tokens,
                                                           policy=ctx.settings.policy,
                                                           framing=ctx.settings.framing,
                                                           judge_kind=ctx.settings.recovery_judge)
                            await attribute(ctx.chat, recorder, user_id=user.user_id, entry=entry,
                                            task_text=task.task, history=episode.history, score=result.score,
                                            mode=mode, stage0=ctx.stage0, max_tokens=ctx.settings.judge_max_tokens,
                                            policy=ctx.settings.policy, framing=ctx.settings.framing)

        with recorder.span("recovery", "recovery"):
            if ctx.progress is not None:
                ctx.progress(f"{user.user_id} × {system_name}: scoring {len(tasks)} dimension(s) × "
                             f"{len(ctx.modes)} mode(s)")
            await asyncio.gather(*(recover(task) for task in tasks))
