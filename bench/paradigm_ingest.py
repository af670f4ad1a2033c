"""Protocol-B ingestion overhead per session, with zero-latency models (bench item 11, third figure).

Each repetition ingests the two upstream-sample episodes (21 sessions, 90 turns each) into a real
recording on disk through :func:`memprobe_engine.paradigms.protocol.ingest_episode`, and reports the
median wall time per session over the repetitions:

Wall time counts waiting for a busy CPU; the process's CPU time beside it is the cost itself (the
two agree on an idle machine).

- ``nomem`` stores nothing, so its time is the protocol's own overhead: observations, the session
  span, the ``session_ingest`` event with its turns (long ones to the payload file). Target ≤ 1 ms.
- ``longctx_full`` adds one recorded ``memory_op`` (with its JSON Patch) per turn.
- ``amem`` adds two recorded model calls per user turn (note construction and evolution) answered
  at once by the scripted backend, plus hashing embeddings: the engine's cost around a real writer.

    python bench/paradigm_ingest.py [--repeats 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.events.header import new_header
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.writer import open_writer
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.memory.base import MemoryServices, SimClock
from memprobe_engine.memory.registry import create_system
from memprobe_engine.paradigms.protocol import ingest_episode
from memprobe_engine.paradigms.suite import Episode, load_suite
from tests.doubles import BagOfWordsEmbedder
from tests.functional.test_paradigm_run import ParadigmOracle

SYSTEMS = ("nomem", "longctx_full", "amem")


async def one_repeat(system_name: str, episodes: list[Episode], directory: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds spent ingesting every session of ``episodes`` once, and the number of sessions."""
    writer = open_writer(directory, new_header("bench", "paradigms", {}))
    recorder = Recorder(writer)
    oracle = ParadigmOracle()
    chat = ChatClient(LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")}),
                      recorder=recorder, backend_factory=lambda spec: oracle)
    embedder: Any = BagOfWordsEmbedder(hashed=True)
    sessions = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        for episode in episodes:
            services = MemoryServices(recorder=recorder, clock=SimClock(), chat=chat, embedder=embedder)
            system = create_system(system_name, services)
            with recorder.span(episode.episode_id, "episode", unit=episode.episode_id, system=system_name,
                               episode_id=episode.episode_id):
                await ingest_episode(system, episode, recorder=recorder, clock=services.clock)
            sessions += len(episode.sessions)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        await chat.aclose()
        writer.close()
    return elapsed, cpu, sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    episodes = load_suite(ROOT / "sessions" / "paradigms" / "upstream-sample").episodes
    turns = sum(len(s.dialogue) for e in episodes for s in e.sessions)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs")
    print(f"ingestion overhead: {len(episodes)} episodes, {sum(len(e.sessions) for e in episodes)} sessions, "
          f"{turns} turns per repeat; {args.repeats} repeats, zero-latency models, recorded to disk")
    for name in SYSTEMS:
        wall: list[float] = []
        cpu: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):
                elapsed, used, sessions = asyncio.run(one_repeat(name, episodes, Path(tmp) / f"r{i}"))
                wall.append(elapsed / sessions * 1000)
                cpu.append(used / sessions * 1000)
        verdict = ("  target ≤ 1 ms: " + ("met" if statistics.median(wall) <= 1.0 else "not met") + " on wall time, "
                   + ("met" if statistics.median(cpu) <= 1.0 else "not met") + " on CPU time")
        target = verdict if name == "nomem" else ""
        print(f"  {name:<13} wall median {statistics.median(wall):7.3f} ms/session (min {min(wall):.3f})   "
              f"CPU median {statistics.median(cpu):7.3f} ms/session{target}")


if __name__ == "__main__":
    main()
