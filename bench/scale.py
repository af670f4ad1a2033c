"""Scale benchmark: protocol A's 3 users × 31 dimensions × 2 systems (nomem, longctx_full) against
loopback endpoints with a set latency, run by the local executor and by Ray.

For each configuration it prints the wall time, the recorded calls and calls per second, the CPU
per recorded call (the driver's and every worker's, the endpoints' apart) and the ratio of the wall
time to the job's critical path. The critical path is the run's duration on a virtual clock with an
in-process backend of the same latency (bench/critical_path.py): what the job would take if the
engine cost nothing. Target (issue 23): the local executor at --concurrency 32 within 1.5× of it.

    python bench/scale.py [--latency 0.05] [--concurrency 32] [--runs 3] [--executors local,ray1,ray2,ray4]
                          [--endpoints 1]

The endpoints are tests/loopback_endpoint.py processes (one per --endpoints), answering with the
scripted protocol-A oracle of the functional tests. Embeddings are not involved (neither system
embeds).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.critical_path import run_virtual  # noqa: E402
from memprobe_engine.events.reader import open_recording  # noqa: E402
from memprobe_engine.llm.config import LLMConfig  # noqa: E402
from memprobe_engine.llm.spec import parse_spec  # noqa: E402
from memprobe_engine.recovery.rollout import RolloutSettings  # noqa: E402
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery  # noqa: E402
from tests.functional.recovery_oracle import RecoveryOracle  # noqa: E402
from tests.loopback_endpoint import running_endpoint  # noqa: E402

SYSTEMS = ["nomem", "longctx_full"]


def plan() -> RecoveryPlan:
    return RecoveryPlan(sessions_dir=ROOT / "sessions", users=None, dimensions=None, systems=SYSTEMS,
                        modes=["dump_all", "retrieve"], settings=RolloutSettings())


def spec_text(urls: list[str]) -> str:
    return "openai:scripted@" + ",".join(urls)


def llm_config(urls: list[str], concurrency: int) -> LLMConfig:
    spec = parse_spec(spec_text(urls)).model_copy(update={"concurrency": concurrency})
    return LLMConfig(models={"default": spec})


def critical_path(latency: float, concurrency: int, workdir: Path) -> float:
    oracle = RecoveryOracle(delay_s=latency)
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1").model_copy(
        update={"concurrency": concurrency})})
    _, seconds = run_virtual(run_recovery(plan(), workdir / "virtual", llm_config=config, concurrency=concurrency,
                                          backend_factory=lambda spec: oracle))
    shutil.rmtree(workdir / "virtual")
    return seconds


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its reaped children so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / ticks


@dataclass
class Measured:
    wall_s: float
    calls: int
    cpu_s: float
    endpoint_cpu_s: float


def tree_cpu_s(root: int, exclude: set[int]) -> float:
    """CPU seconds of ``root`` and every live process below it (a local Ray instance's GCS, raylet,
    workers and the relay actor), leaving out ``exclude`` (the endpoints)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(Path(entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    total = 0.0
    for pid in tree - exclude:
        try:
            total += process_cpu_s(pid) if pid != os.getpid() else time.process_time()
        except (OSError, ValueError, IndexError):
            continue
    return total


def one_run(executor: str, urls: list[str], endpoints: list[int], concurrency: int, record: Path) -> Measured:
    """One run in this process, timed around the run alone (start-up imports and Ray's start excluded).
    CPU: this process and, for Ray, every process of the local instance."""
    from memprobe_engine.orchestration.ray_executor import RayOptions

    before = sum(process_cpu_s(pid) for pid in endpoints)
    cpu_before = tree_cpu_s(os.getpid(), set(endpoints))
    started = time.perf_counter()
    ray = RayOptions(workers=int(executor[3:])) if executor.startswith("ray") else None
    asyncio.run(run_recovery(plan(), record, llm_config=llm_config(urls, concurrency), concurrency=concurrency,
                             ray=ray))
    wall = time.perf_counter() - started
    cpu = tree_cpu_s(os.getpid(), set(endpoints)) - cpu_before
    calls = sum(1 for _ in open_recording(record).iter_events(kinds=["llm_call"]))
    return Measured(wall, calls, cpu, sum(process_cpu_s(pid) for pid in endpoints) - before)


def start_ray(executor: str) -> None:
    if executor.startswith("ray"):
        from memprobe_engine.orchestration.ray_executor import RayOptions, connect

        connect(RayOptions(workers=int(executor[3:])))


def stop_ray(executor: str) -> None:
    if executor.startswith("ray"):
        import ray

        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--executors", default="local,ray1,ray2,ray4",
                        help="local, and rayN: Ray on a local instance of N worker processes")
    parser.add_argument("--endpoints", type=int, default=1)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="memprobe-scale-"))
    try:
        paths = [critical_path(args.latency, args.concurrency, workdir) for _ in range(args.runs)]
        path = statistics.median(paths)
        print(f"critical path {path:.2f} s (virtual clock, {args.latency * 1000:.0f} ms per call, "
              f"--concurrency {args.concurrency}; runs {', '.join(f'{p:.2f}' for p in paths)})")
        with ExitStack() as stack:
            started = [stack.enter_context(running_endpoint(args.latency)) for _ in range(args.endpoints)]
            urls = [url for url, _ in started]
            pids = [process.pid for _, process in started]
            for executor in args.executors.split(","):
                start_ray(executor)
                try:
                    runs = [one_run(executor, urls, pids, args.concurrency, workdir / f"{executor}-{attempt}")
                            for attempt in range(args.runs)]
                finally:
                    stop_ray(executor)
                wall = statistics.median(r.wall_s for r in runs)
                calls = runs[0].calls
                cpu_ms = statistics.median(1000 * r.cpu_s / r.calls for r in runs)
                endpoint_ms = statistics.median(1000 * r.endpoint_cpu_s / r.calls for r in runs)
                print(f"{executor:<6} {args.endpoints} endpoint(s): wall {wall:.1f} s median of {len(runs)} "
                      f"({', '.join(f'{r.wall_s:.1f}' for r in runs)}); {calls:,} calls, {calls / wall:.0f} calls/s; "
                      f"CPU {cpu_ms:.2f} ms/call (endpoints {endpoint_ms:.2f}); {wall / path:.2f}× critical path")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
