"""Orchestration of benchmark runs: plan, bounded concurrency across units, resume, shards.

A run is a set of units (user × memory system). Units run concurrently up to ``concurrency``;
inside a unit everything is sequential, since memory persists across a user's tasks.

Resume: running the same command against an existing recording continues it. Units whose span
closed ``ok`` are skipped; every LLM response already in the recording is served back by request
hash (recorded as a cache hit), so an interrupted unit is replayed to where it stopped without
repeating a single model request, then goes on live.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.errors import ConfigError, RecordingError
from memprobe_engine.events.header import HEADER_FILE, new_header
from memprobe_engine.events.payloads import PayloadReader
from memprobe_engine.events.reader import open_recording
from memprobe_engine.lifecycle import recorded_run
from memprobe_engine.llm.backends.replay import recorded_answers
from memprobe_engine.llm.types import ChatResult, Usage
from memprobe_engine.recovery.attribution import Stage0Cache, Stage0Verdict
from memprobe_engine.recovery.inputs import SimUser, load_pool, load_users
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.scoring import Mode
from memprobe_engine.recovery.unit import UnitContext, run_unit


@dataclass
class RecoveryPlan:
    """Everything that determines a protocol-A run's results (its fingerprint goes in the header)."""

    sessions_dir: Path
    users: list[str] | None
    dimensions: list[str] | None
    systems: list[str]
    modes: list[Mode]
    settings: RolloutSettings
    shard: tuple[int, int] = (0, 1)
    embedding_spec: str = "st:minilm"

    def config(self, llm_resolved: dict[str, Any]) -> dict[str, Any]:
        return {
            "suite": "recovery", "sessions": str(self.sessions_dir), "users": self.users,
            "dimensions": self.dimensions, "systems": self.systems, "modes": list(self.modes),
            "max_turns": self.settings.max_turns, "k": 5, "agent_k": self.settings.agent_k,
            "seed": self.settings.seed, "agent_temperature": self.settings.agent_temperature,
            "simulator_temperature": self.settings.simulator_temperature, "policy": self.settings.policy,
            "agent_max_tokens": self.settings.agent_max_tokens,
            "simulator_max_tokens": self.settings.simulator_max_tokens,
            "judge_max_tokens": self.settings.judge_max_tokens, "preference_judge": self.settings.preference_judge,
            "shard": f"{self.shard[0]}/{self.shard[1]}", "embeddings": self.embedding_spec, "models": llm_resolved,
            # Only when set, so recordings made before this setting existed keep their fingerprint.
            **({"preference_judge_max_tokens": self.settings.preference_judge_max_tokens}
               if self.settings.preference_judge_max_tokens is not None else {}),
        }


def fingerprint(config: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(config, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


#: Model-spec fields that change how fast or how patiently a model is asked, never what it is asked
#: (pacing, retries, the embedded server's slots, prompt cache and draft): a resume may change them.
PACING_FIELDS = frozenset({"concurrency", "max_retries", "timeout_s", "startup_timeout_s", "slots", "prompt_cache",
                           "draft", "origin"})


def protocol_view(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without its fingerprint and without the pacing fields of its model specs."""
    view = {key: value for key, value in config.items() if key != "fingerprint"}
    models = view.get("models")
    roles = models.get("models") if isinstance(models, dict) else None
    if isinstance(models, dict) and isinstance(roles, dict):
        view["models"] = {**models, "models": {
            role: {k: v for k, v in spec.items() if k not in PACING_FIELDS} if isinstance(spec, dict) else spec
            for role, spec in roles.items()}}
    return view


def can_resume(previous: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether a run recorded with header config ``previous`` may be continued with ``config``: the
    same fingerprint, or the same settings up to pacing (a faster server, more concurrency)."""
    return previous.get("fingerprint") == config.get("fingerprint") or protocol_view(previous) == protocol_view(config)


def shard_record_dir(record: Path, shard: tuple[int, int]) -> Path:
    return record if shard[1] == 1 else record.with_name(f"{record.name}.shard-{shard[0]}-of-{shard[1]}")


class RecordedResponses:
    """A cache layer that answers from the recording being resumed, then from the persistent cache."""

    def __init__(self, recorded: dict[str, ChatResult], fallback: Any | None) -> None:
        self._recorded = recorded
        self._fallback = fallback

    def get(self, key: str) -> ChatResult | None:
        hit = self._recorded.get(key)
        if hit is not None:
            return hit
        return self._fallback.get(key) if self._fallback is not None else None

    def put(self, key: str, result: ChatResult) -> None:
        self._recorded[key] = result
        if self._fallback is not None:
            self._fallback.put(key, result)


@dataclass
class ResumeState:
    completed_units: set[tuple[str, str]] = field(default_factory=set)
    responses: dict[str, ChatResult] = field(default_factory=dict)
    stage0: Stage0Cache = field(default_factory=Stage0Cache)


def load_resume_state(record: Path) -> ResumeState:
    """Read what an earlier session of this run finished: units, model responses, stage-0 verdicts."""
    state = ResumeState()
    payloads = PayloadReader(record)
    with open_recording(record) as reader:
        open_units: dict[str, tuple[str, str]] = {}
        for event in reader.iter_events(kinds=["span_begin", "span_end", "llm_call", "attribution_stage"]):
            if event.kind == "span_begin" and event.span_kind == "unit":
                if event.span_id is not None and event.user_id is not None and event.system is not None:
                    open_units[event.span_id] = (event.user_id, event.system)
            elif event.kind == "span_end" and event.span_id is not None and event.span_id in open_units \
                    and event.status == "ok":
                state.completed_units.add(open_units[event.span_id])
            elif event.kind == "llm_call" and event.error is None and event.response_text is not None:
                # Every round of a repaired (or excluded) call, so a resumed call repairs exactly as
                # the recorded one did instead of asking its repair rounds again.
                for key, text in recorded_answers(event.model_dump(mode="json"), payloads).items():
                    usage = event.usage if key == event.request_hash else None
                    state.responses.setdefault(key, ChatResult(text=text, model=event.model, usage=Usage(
                        prompt_tokens=usage.prompt_tokens if usage else 0,
                        completion_tokens=usage.completion_tokens if usage else 0)))
            elif event.kind == "attribution_stage" and event.stage == 0 and event.verdict in ("can_invite",
                                                                                              "cannot_invite"):
                if event.user_id is not None and event.dimension is not None:
                    state.stage0.put(event.user_id, event.dimension, Stage0Verdict(
                        can_invite=event.verdict == "can_invite", reason=event.reason or ""))
    return state


def select_units(users: Sequence[SimUser], systems: Sequence[str], shard: tuple[int, int]) -> list[tuple[SimUser, str]]:
    units = [(user, system) for user in users for system in systems]
    return [unit for i, unit in enumerate(units) if i % shard[1] == shard[0]]


ProgressHook = Callable[[str, int, int], None]


async def run_recovery(plan: RecoveryPlan, record: Path, *, llm_config: Any, concurrency: int = 1,
                       cache: Any | None = None, backend_factory: Any | None = None, embedder: Any | None = None,
                       progress: ProgressHook | None = None, signals: bool = False) -> Path:
    """Run (or resume) a protocol-A benchmark into ``record``; returns the recording directory.

    The recording's lifecycle (run_start/run_end with status, leftover spans closed, lock released)
    is :func:`memprobe_engine.lifecycle.recorded_run`'s; ``signals=True`` (the CLI) makes SIGTERM
    end the run as ``interrupted``. Every flag is validated before the recording is created."""
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.memory.registry import load_system_class

    for name in plan.systems:
        load_system_class(name)  # fail before any model call on a bad system name
    pool = load_pool(plan.sessions_dir / "pool.json")
    users = load_users(plan.sessions_dir, plan.users)
    if plan.dimensions:
        unknown = [d for d in plan.dimensions if pool.get(d) is None]
        if unknown:
            raise ConfigError(f"--dims: {', '.join(unknown)} not in {plan.sessions_dir / 'pool.json'}. "
                              f"Use dimension names from the pool (memprobe sessions validate lists problems).")
    config = plan.config(llm_config.resolved())
    config["fingerprint"] = fingerprint(config)
    record = shard_record_dir(record, plan.shard)
    state = ResumeState()
    if (record / HEADER_FILE).exists():
        with open_recording(record) as reader:
            previous_config = reader.header.config
            previous = previous_config.get("fingerprint")
        if not can_resume(previous_config, config):
            raise RecordingError(f"{record} holds a run with different settings (fingerprint {previous} ≠ "
                                 f"{config['fingerprint']}). Resume it with the same command and flags, or pass "
                                 f"another --record folder.")
        state = load_resume_state(record)
    needs_embedder = embedder is None and any(s != "nomem" for s in plan.systems)
    if needs_embedder:
        from memprobe_engine.llm.embeddings import parse_embedding_spec

        parse_embedding_spec(plan.embedding_spec, origin="--embeddings")  # before any recording exists
    run_id = "recovery-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    header = None if (record / HEADER_FILE).exists() else new_header(run_id, "recovery", config)
    async with recorded_run(record, header=header, suite="recovery", signals=signals,
                            resumed=bool(state.completed_units or state.responses)) as run:
        recorder = run.recorder
        chat = ChatClient(llm_config, recorder=recorder, cache=RecordedResponses(state.responses, cache),
                          backend_factory=backend_factory)
        run.scrub = getattr(chat, "scrub", None)
        reader_spec = llm_config.spec_for("slot_filler")
        units = [u for u in select_units(users, plan.systems, plan.shard)
                 if (u[0].user_id, u[1]) not in state.completed_units]
        tally = UnitTally(len(units))
        ctx = UnitContext(chat=chat, embedder=None, recorder=recorder, pool=pool, settings=plan.settings,
                          modes=plan.modes, reader_context_tokens=reader_spec.context_tokens or 128_000,
                          stage0=state.stage0, scoring_concurrency=concurrency,
                          progress=(lambda line: progress(line, tally.done, tally.total)) if progress is not None else None)
        try:
            if needs_embedder:
                from memprobe_engine.llm.embeddings import Embedder

                embedder = Embedder.from_spec(plan.embedding_spec, recorder=recorder)
            ctx.embedder = embedder
            with recorder.span("run", "run"):
                await run_units(
                    [(f"{user.user_id} × {system}", partial(run_unit, ctx, user, system, plan.dimensions))
                     for user, system in units],
                    concurrency=concurrency, tally=tally, progress=progress)
        finally:
            await close_run_clients(chat, embedder)
    return record


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


async def close_run_clients(chat: Any, embedder: Any) -> None:
    """Close what a run opened: the library adapters' recording proxy (if any ran), the chat client, the
    embedder."""
    from memprobe_engine.llm.proxy import close_shared_proxies

    await close_shared_proxies()
    await chat.aclose()
    if embedder is not None and hasattr(embedder, "aclose"):
        await embedder.aclose()


def stderr_progress(message: str, done: int, total: int) -> None:
    """Plain progress lines (works over SSH and in logs); the CLI may use a richer display."""
    stamp = dt.datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp}] {done}/{total} units · {message}", file=sys.stderr, flush=True)


__all__ = ["RecoveryPlan", "run_recovery", "load_resume_state", "shard_record_dir", "stderr_progress"]
