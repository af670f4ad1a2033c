"""Protocol A's run: users × memory systems as units, on the shared orchestrator.

What is protocol A's own lives here: the plan (its fingerprinted configuration), its units and how
a recorded ``unit`` span names one, the stage-0 attribution verdicts carried across a resume, and
one unit's work (:func:`memprobe_engine.recovery.unit.run_unit`). How the run runs — resume,
shards, lifecycle, progress — is :mod:`memprobe_engine.orchestration`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprobe_engine.errors import ConfigError, RecordingError
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.memory.registry import system_needs
from memprobe_engine.orchestration.progress import ProgressHook
from memprobe_engine.orchestration.protocol import RunNeeds, RunServices
from memprobe_engine.orchestration.resume import UnitKey
from memprobe_engine.orchestration.run import run_protocol
from memprobe_engine.orchestration.units import system_cost
from memprobe_engine.recovery.attribution import Stage0Cache, Stage0Verdict
from memprobe_engine.recovery.config import Mode, RecoveryConfig
from memprobe_engine.recovery.dialogue_source import DialogueSource
from memprobe_engine.recovery.fixed_dialogues import FixedDialogues, load_dialogues
from memprobe_engine.recovery.inputs import DimensionPool, SimUser, load_pool, load_users
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.unit import UnitContext, run_unit, tasks_for
from memprobe_engine.recovery.provenance_inputs import PROMPT_MODULES, input_hashes

if TYPE_CHECKING:
    from memprobe_engine.llm.cache import ResponseStore
    from memprobe_engine.llm.client import BackendFactory
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.embeddings import TextEmbedder
    from memprobe_engine.orchestration.ray_executor import RayOptions


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
    #: A fixed-dialogue run's source (``memprobe run --dialogues``); None for a live rollout.
    dialogues: DialogueSource | None = None

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
            **({"dialogues": self.dialogues.config()} if self.dialogues is not None else {}),
            **({"framing": self.settings.framing} if self.settings.framing != "release" else {}),
            **({"recovery_judge": self.settings.recovery_judge} if self.settings.recovery_judge != "model" else {}),
        }


class RecoveryRun:
    """Protocol A as the orchestrator runs it (:class:`~memprobe_engine.orchestration.protocol.BenchmarkProtocol`).

    Constructing it validates the plan (system names, users, dimensions) before any recording exists."""

    suite = "recovery"
    resume_kinds: tuple[str, ...] = ("attribution_stage",)
    prompt_modules: tuple[str, ...] = PROMPT_MODULES

    def input_hashes(self, config: dict[str, Any]) -> dict[str, str]:
        return input_hashes(config)

    def __init__(self, plan: RecoveryPlan) -> None:
        for name in plan.systems:
            system_needs(name)  # fail before any model call on a bad system name
        self.plan = plan
        self.shard = plan.shard
        self.pool: DimensionPool = load_pool(plan.sessions_dir / "pool.json")
        self.users: list[SimUser] = load_users(plan.sessions_dir, plan.users)
        if plan.dimensions:
            unknown = [d for d in plan.dimensions if self.pool.get(d) is None]
            if unknown:
                raise ConfigError(f"--dims: {', '.join(unknown)} not in {plan.sessions_dir / 'pool.json'}. "
                                  f"Use dimension names from the pool (memprobe sessions validate lists problems).")
        #: A fixed-dialogue run's dialogues: every selected task must have one before anything is written.
        self.dialogues: FixedDialogues | None = None
        if plan.dialogues is not None:
            self.dialogues = load_dialogues(plan.dialogues)
            self.dialogues.check_covers((user.user_id, task.dimension) for user in self.users
                                        for task in tasks_for(user, plan.dimensions))
        #: Stage-0 verdicts are per (user, dimension), shared by every system: a resume keeps them.
        self.stage0 = Stage0Cache()
        self._context: UnitContext | None = None

    def config(self, llm_config: LLMConfig) -> dict[str, Any]:
        return self.plan.config(llm_config.resolved())

    def resume_config(self, record: Path, previous: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        before, now = RecoveryConfig.of(previous), RecoveryConfig.of(config)
        if before.framing == "embedded" and "recovery_judge" not in before.model_fields_set \
                and "recovery_judge" in now.model_fields_set:
            # Made when the embedded framing's default judge was the model: one run keeps one judge.
            raise RecordingError(f"{record} was judged by the recovery_judge model (made before the calibrated "
                                 f"judge became --framing embedded's default); resume it with the same flags plus "
                                 f"--recovery-judge model, or pass another --record folder.")
        return previous

    def needs(self) -> RunNeeds:
        # The embedded framing's live simulator names the bank entries closest to the moment (simulator_focus).
        focus = self.plan.settings.framing == "embedded" and self.plan.dialogues is None
        embeds = focus or any(system_needs(name).embedder for name in self.plan.systems)
        return RunNeeds(models=True, embedding_spec=self.plan.embedding_spec if embeds else None)

    def units(self) -> list[tuple[SimUser, str]]:
        return [(user, system) for user in self.users for system in self.plan.systems]

    def unit_cost(self, unit: tuple[SimUser, str]) -> float:
        """The plan's estimate of a unit's length, for ordering: its memory system's cost per turn it
        reads (:func:`system_cost`) times the turns — each fixed dialogue's opening and exchanges, or
        one per task in a live rollout, whose dialogues are not known before they are played."""
        user, system = unit
        tasks = tasks_for(user, self.plan.dimensions)
        if self.dialogues is not None:
            turns = sum(1 + len(self.dialogues.get(user.user_id, task.dimension).exchanges) for task in tasks)
        else:
            turns = len(tasks)
        return system_cost(system) * max(1, turns)

    def unit_key(self, unit: tuple[SimUser, str]) -> UnitKey:
        return unit[0].user_id, unit[1]

    def unit_label(self, unit: tuple[SimUser, str]) -> str:
        return f"{unit[0].user_id} × {unit[1]}"

    def unit_of_span(self, span: SpanBegin) -> UnitKey | None:
        if span.span_kind == "unit" and span.user_id is not None and span.system is not None:
            return span.user_id, span.system
        return None

    def resume_event(self, event: AnyEvent) -> None:
        if event.kind == "attribution_stage" and event.stage == 0 and event.verdict in ("can_invite",
                                                                                        "cannot_invite"):
            if event.user_id is not None and event.dimension is not None:
                self.stage0.put(event.user_id, event.dimension, Stage0Verdict(
                    can_invite=event.verdict == "can_invite", reason=event.reason or ""))

    def context(self, services: RunServices) -> UnitContext:
        """The run-wide context every unit shares (built once, on the first unit)."""
        if self._context is None:
            self.stage0.shared = services.shared
            reader_spec = services.llm_config.spec_for("slot_filler")
            self._context = UnitContext(
                chat=services.chat, embedder=services.embedder, recorder=services.recorder, pool=self.pool,
                settings=self.plan.settings, modes=self.plan.modes,
                reader_context_tokens=reader_spec.context_budget(), stage0=self.stage0,
                scoring_concurrency=services.concurrency, progress=services.progress, dialogues=self.dialogues)
        return self._context

    async def run_unit(self, services: RunServices, unit: tuple[SimUser, str]) -> None:
        user, system = unit
        await run_unit(self.context(services), user, system, self.plan.dimensions)


async def run_recovery(plan: RecoveryPlan, record: Path, *, llm_config: LLMConfig, concurrency: int = 1,
                       cache: ResponseStore | None = None, backend_factory: BackendFactory | None = None,
                       embedder: TextEmbedder | None = None, progress: ProgressHook | None = None,
                       signals: bool = False, ray: RayOptions | None = None) -> Path:
    """Run (or resume) a protocol-A benchmark into ``record``; returns the recording directory (see
    :func:`memprobe_engine.orchestration.run.run_protocol`)."""
    return await run_protocol(RecoveryRun(plan), record, llm_config=llm_config, concurrency=concurrency, cache=cache,
                              backend_factory=backend_factory, embedder=embedder, progress=progress,
                              signals=signals, ray=ray)


__all__ = ["RecoveryPlan", "RecoveryRun", "run_recovery"]
