"""keyrecall as the orchestrator runs it: one unit per memory system."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.run import Metric, SpanBegin
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.memory.base import MemoryServices, Observation, SimClock
from memprobe_engine.memory.registry import create_system, system_needs
from memprobe_engine.orchestration.protocol import RunNeeds, RunServices
from memprobe_engine.orchestration.resume import UnitKey

SUITE = "keyrecall"
#: Set to a system's name to make its unit fail once (the resume test's crash).
CRASH_ENV = "KEYRECALL_CRASH"


def codes(facts: int, seed: int) -> list[tuple[int, str]]:
    """(box, code) pairs, the same for every system of a run."""
    return [(box, f"{(seed * 7919 + box * 104729) % 10000:04d}") for box in range(1, facts + 1)]


class KeyRecallRun:
    """A :class:`~memprobe_engine.orchestration.protocol.BenchmarkProtocol` of keyrecall."""

    suite = SUITE
    resume_kinds: tuple[str, ...] = ()
    prompt_modules: tuple[str, ...] = ()

    def __init__(self, systems: list[str], facts: int, k: int, seed: int, embeddings: str) -> None:
        self.systems, self.facts, self.k, self.seed, self.embeddings = systems, facts, k, seed, embeddings
        self.shard = (0, 1)

    def input_hashes(self, config: dict[str, Any]) -> dict[str, str]:
        return {}

    def config(self, llm_config: LLMConfig) -> dict[str, Any]:
        return {"suite": SUITE, "systems": self.systems, "facts": self.facts, "k": self.k, "seed": self.seed}

    def resume_config(self, record: Path, previous: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        if previous.get("suite") != SUITE:
            raise RecordingError(f"{record} is not a keyrecall recording.")
        return previous

    def needs(self) -> RunNeeds:
        embeds = any(system_needs(s).embedder for s in self.systems)
        return RunNeeds(models=False, embedding_spec=self.embeddings if embeds else None)

    def units(self) -> list[str]:
        return list(self.systems)

    def unit_key(self, unit: str) -> UnitKey:
        return "recall", unit

    def unit_label(self, unit: str) -> str:
        return f"recall × {unit}"

    def unit_of_span(self, span: SpanBegin) -> UnitKey | None:
        return ("recall", str(span.system)) if span.span_kind == "unit" else None

    def resume_event(self, event: AnyEvent) -> None:
        return None

    async def run_unit(self, services: RunServices, unit: str) -> None:
        with services.recorder.span(f"recall × {unit}", "unit", unit="recall", system=unit):
            if os.environ.get(CRASH_ENV) == unit:
                raise RuntimeError(f"{CRASH_ENV}={unit}: the unit fails on purpose")
            clock = SimClock()
            memory = create_system(unit, MemoryServices(recorder=services.recorder, clock=clock, seed=self.seed,
                                                        embedder=services.embedder))
            await memory.reset("recall")
            pairs = codes(self.facts, self.seed)
            for box, code in pairs:
                clock.advance(days=1)
                await memory.observe(Observation(kind="user", text=f"The code of locker {box} is {code}.",
                                                 task_index=box, timestamp=clock.iso()))
            found = 0
            for box, code in pairs:
                hits = await memory.search(f"What is the code of locker {box}?", self.k)
                found += any(code in str(hit.item) for hit in hits)
            services.recorder.emit(Metric(name="recall_at_k", value=found / len(pairs),
                                          scope={"system": unit, "k": str(self.k)}))
