"""Engine benchmark for protocol A, with scripted backends so only the engine is measured.

1. Overhead per LLM call: a zero-latency backend, 3 users × 31 dimensions × 2 systems (nomem,
   longctx_full), recorded to disk. Embeddings use a hashing embedder here, because the sentence
   model's compute belongs to the system under test, not to engine overhead. Target ≤ 2 ms/call.
2. Overhead per LLM call with the HTTP client included: the same job through the real
   OpenAI-compatible backend against a loopback endpoint in its own process that answers at once
   (tests/loopback_endpoint.py); CPU of this process per recorded call (the endpoint's apart).
   Target ≤ 1 ms/call (issue 23).
3. Concurrency: a backend that sleeps 100 ms per call; wall time at --concurrency 1 vs 16 on a
   workload of 16 units (8 users — the 3 sample users plus renamed copies — × 2 systems, 4
   dimensions each). Target speed-up ≥ 12×.

    python bench/engine.py [--skip-concurrency] [--skip-http]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.events.reader import open_recording  # noqa: E402
from memprobe_engine.llm.config import LLMConfig  # noqa: E402
from memprobe_engine.llm.spec import parse_spec  # noqa: E402
from memprobe_engine.recovery.rollout import RolloutSettings  # noqa: E402
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery  # noqa: E402
from tests.functional.recovery_oracle import RecoveryOracle  # noqa: E402


class HashingEmbedder:
    """Deterministic bag-of-words vectors: cheap enough that the engine dominates the timing."""

    async def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, int(hashlib.blake2b(word.encode(), digest_size=2).hexdigest(), 16) % 256] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def llm_config(concurrency: int) -> LLMConfig:
    spec = parse_spec("openai:scripted@http://127.0.0.1:9/v1").model_copy(update={"concurrency": concurrency})
    return LLMConfig(models={"default": spec})


def sessions_with_copies(target: Path, copies: int) -> Path:
    """The sample sessions plus ``copies`` renamed duplicates of the sample users."""
    shutil.copytree(ROOT / "sessions", target)
    originals = sorted(p.name for p in (target / "users").iterdir())
    for n in range(copies):
        source = originals[n % len(originals)]
        clone = f"{source}_copy{n}"
        shutil.copytree(target / "users" / source, target / "users" / clone)
        for name in ("profile.json", "bank.json", "tasks.json"):
            path = target / "users" / clone / name
            path.write_text(path.read_text().replace(f'"{source}', f'"{clone}'))
        # Distinct task wording per copy, so no request repeats another user's and the in-run
        # response cache cannot shortcut the concurrency measurement.
        tasks_path = target / "users" / clone / "tasks.json"
        tasks = json.loads(tasks_path.read_text())
        for task in tasks["tasks"]:
            task["task"] = f"Hi, it's me again ({n + 2}). " + task["task"]
        tasks_path.write_text(json.dumps(tasks))
    return target


async def timed_run(plan: RecoveryPlan, record: Path, oracle: RecoveryOracle, concurrency: int) -> float:
    started = time.perf_counter()
    await run_recovery(plan, record, llm_config=llm_config(max(concurrency, 1)), concurrency=concurrency,
                       backend_factory=lambda spec: oracle, embedder=HashingEmbedder())
    return time.perf_counter() - started


def overhead(workdir: Path) -> None:
    plan = RecoveryPlan(sessions_dir=ROOT / "sessions", users=None, dimensions=None, systems=["nomem", "longctx_full"],
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=3))
    runs = []
    for attempt in range(3):
        oracle = RecoveryOracle()
        record = workdir / f"overhead-{attempt}"
        elapsed = asyncio.run(timed_run(plan, record, oracle, concurrency=1))
        calls = sum(1 for _ in open_recording(record).iter_events(kinds=["llm_call"]))
        runs.append((elapsed, calls, len(oracle.requests)))
    per_call = [1000 * elapsed / calls for elapsed, calls, _ in runs]
    elapsed, calls, sent = runs[0]
    print(f"overhead   3 users × 31 dims × 2 systems: {calls:,} recorded LLM calls ({sent:,} reached the backend)")
    print(f"           wall {statistics.median(r[0] for r in runs):.2f} s median of 3; "
          f"{statistics.median(per_call):.3f} ms per call median (runs: "
          f"{', '.join(f'{x:.3f}' for x in per_call)})   target <= 2 ms")


def http_overhead(workdir: Path) -> None:
    from tests.loopback_endpoint import running_endpoint

    plan = RecoveryPlan(sessions_dir=ROOT / "sessions", users=None, dimensions=None, systems=["nomem", "longctx_full"],
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=3))
    runs = []
    with running_endpoint(0.0) as (url, _):
        config = LLMConfig(models={"default": parse_spec(f"openai:scripted@{url}")})
        for attempt in range(3):
            record = workdir / f"http-{attempt}"
            cpu_started, started = time.process_time(), time.perf_counter()
            asyncio.run(run_recovery(plan, record, llm_config=config, concurrency=1, embedder=HashingEmbedder()))
            cpu, elapsed = time.process_time() - cpu_started, time.perf_counter() - started
            calls = sum(1 for _ in open_recording(record).iter_events(kinds=["llm_call"]))
            sent = sum(1 for e in open_recording(record).iter_events(kinds=["llm_call"]) if not e.cache_hit)
            runs.append((cpu, elapsed, calls, sent))
    per_call = [1000 * cpu / calls for cpu, _, calls, _ in runs]
    _, _, calls, sent = runs[0]
    print(f"http       the same job over HTTP to a loopback endpoint: {calls:,} recorded calls ({sent:,} sent)")
    print(f"           wall {statistics.median(r[1] for r in runs):.2f} s median of 3; CPU "
          f"{statistics.median(per_call):.3f} ms per call median (runs: {', '.join(f'{x:.3f}' for x in per_call)})"
          f"   target <= 1 ms")


def concurrency(workdir: Path) -> None:
    sessions = sessions_with_copies(workdir / "sessions", copies=5)
    users = sorted(p.name for p in (sessions / "users").iterdir())
    plan = RecoveryPlan(sessions_dir=sessions, users=users, dimensions=None, systems=["nomem", "longctx_full"],
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=3))
    from memprobe_engine.recovery.inputs import load_users

    all_users = load_users(sessions, users)
    common = set.intersection(*({e.dimension for e in u.bank.entries} for u in all_users))
    pick = sorted(common)[:4] or None
    plan.dimensions = pick
    timings = {}
    for level in (1, 16):
        oracle = RecoveryOracle(delay_s=0.1)
        timings[level] = asyncio.run(timed_run(plan, workdir / f"conc-{level}", oracle, concurrency=level))
        print(f"concurrency {level:>2}: {timings[level]:.1f} s for {len(oracle.requests):,} backend calls "
              f"({len(all_users)} users × 2 systems, dims {pick})")
    print(f"speed-up   16 over 1: {timings[1] / timings[16]:.1f}×   target >= 12×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-concurrency", action="store_true")
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="memprobe-engine-bench-"))
    try:
        overhead(workdir)
        if not args.skip_http:
            http_overhead(workdir)
        if not args.skip_concurrency:
            concurrency(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
