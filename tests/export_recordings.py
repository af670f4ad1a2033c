"""Recordings the real runners write against scripted backends, for the export and CI-gate tests.

``churn_run``: protocol B, the built-in mem0 on one upstream episode with a scripted memory writer
that adds, updates and deletes (so a recording holds every kind of store write) and naive_rag.
``recovery_run``: protocol A on sim_01 with the recovery oracle (its PLAN decides the judge scores).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory import mem0
from memprobe_engine.paradigms.runner import ParadigmPlan, run_paradigms
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
from tests.doubles import BagOfWordsEmbedder
from tests.functional.recovery_oracle import RecoveryOracle
from tests.functional.test_paradigm_run import EPISODE, SAMPLE, ParadigmOracle

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions"


def _config() -> LLMConfig:
    return LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})


class ChurnOracle(ParadigmOracle):
    """mem0's update step answers in turn ADD, UPDATE of candidate 0, DELETE of candidate 0."""

    def __init__(self) -> None:
        super().__init__()
        self.plans = 0

    def answer(self, request: ChatRequest) -> tuple[str, str]:
        if request.messages[0].content == mem0.UPDATE_SYSTEM:
            facts = re.findall(r"^(\d+): (.*)$", request.messages[-1].content.split("NEW FACTS", 1)[-1], flags=re.M)
            self.plans += 1
            event = ("ADD", "UPDATE", "DELETE")[self.plans % 3]
            return "mem0_update", json.dumps({"events": [
                {"fact": int(n), "event": event if i == 0 else "ADD", "target": "0" if event != "ADD" and i == 0
                 else "", "text": f"Updated: {text}" if event == "UPDATE" and i == 0 else ""}
                for i, (n, text) in enumerate(facts)]})
        return super().answer(request)


def churn_run(record: Path) -> Path:
    plan = ParadigmPlan(sessions_dir=SAMPLE, systems=["mem0", "naive_rag"], episodes=[EPISODE], k=5)
    oracle = ChurnOracle()
    return asyncio.run(run_paradigms(plan, record, llm_config=_config(), backend_factory=lambda spec: oracle,
                                     embedder=BagOfWordsEmbedder(hashed=True)))


def recovery_run(record: Path, dimensions: list[str] | None, systems: list[str],
                 oracle: RecoveryOracle | None = None, users: tuple[str, ...] = ("sim_01",)) -> Path:
    plan = RecoveryPlan(sessions_dir=SESSIONS, users=list(users), dimensions=dimensions, systems=systems,
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=3))
    backend = oracle or RecoveryOracle()
    return asyncio.run(run_recovery(plan, record, llm_config=_config(), backend_factory=lambda spec: backend))
