"""Cluster benchmark: issue 35's fixed-dialogue job — the paper's two released users × 31 dimensions ×
``nomem,longctx_full,amem`` against a loopback endpoint with a set latency — by the local executor, on
a real two-node Ray cluster (``tests/ray_cluster.py``: ``ray start`` twice, one CPU each) and as a
3-shard array (three ``--shard`` processes at once, then ``memprobe merge``).

For each it prints the wall time, the calls recorded (and those sent, not served from an answer the
run held), the requests the endpoint answered and how many of them it had answered before in the same
run (sent twice), and the wall time over the job's critical path: the local run's duration on a
virtual clock with an in-process backend of the same latency (``bench/critical_path.py``).

    python bench/cluster.py [--latency 0.05] [--concurrency 8] [--runs 1] [--only local,ray,shards]

Run it where new network and process namespaces can be made (``unshare -n -p -f --mount-proc``, as
root) so the cluster's ports meet no other Ray instance's; it refuses to start a cluster otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.critical_path import run_virtual  # noqa: E402
from memprobe_engine.cli.merge_cmd import merge_recordings  # noqa: E402
from memprobe_engine.events.reader import open_recording  # noqa: E402
from memprobe_engine.llm.config import LLMConfig  # noqa: E402
from memprobe_engine.llm.spec import parse_spec  # noqa: E402
from memprobe_engine.orchestration.relay import LOST_WORKER  # noqa: E402
from memprobe_engine.recovery.run_options import RecoveryOptions, recovery_plan  # noqa: E402
from memprobe_engine.recovery.runner import run_recovery  # noqa: E402
from tests.functional.recovery_oracle import RecoveryOracle  # noqa: E402
from tests.loopback_endpoint import raw_stats, running_endpoint  # noqa: E402
from tests.ray_cluster import two_nodes  # noqa: E402

USERS = "user_001,user_002"
SYSTEMS = "nomem,longctx_full,amem"
SHARDS = 3


def job_args(record: Path, url: str, concurrency: int) -> list[str]:
    return ["run", "--record", str(record), "--sessions", "sessions/release-a", "--dialogues",
            "sessions/release-a/dialogues", "--users", USERS, "--dims", "all", "--systems", SYSTEMS,
            "--model", f"default=openai:scripted@{url}", "--no-cache", "--concurrency", str(concurrency)]


def critical_path(latency: float, concurrency: int, work: Path) -> float:
    plan = recovery_plan(RecoveryOptions(  # what `memprobe run` makes of job_args' flags
        sessions=ROOT / "sessions/release-a", systems=SYSTEMS.split(","), config=None, shard=(0, 1), seed=0,
        users=USERS.split(","), dims=None, dialogues=str(ROOT / "sessions/release-a/dialogues")))
    oracle = RecoveryOracle(delay_s=latency)
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    _, seconds = run_virtual(run_recovery(plan, work / "virtual", llm_config=config, concurrency=concurrency,
                                          backend_factory=lambda spec: oracle))
    return seconds


def counted(record: Path) -> tuple[int, int, int]:
    """(calls recorded, calls sent, unit attempts lost with their worker)."""
    with open_recording(record) as reader:
        calls = list(reader.iter_events(kinds=["llm_call"]))
        lost = len({(e.user_id, e.system) for e in reader.iter_events(kinds=["span_end"])
                    if e.error == LOST_WORKER})  # type: ignore[union-attr]
    return len(calls), sum(1 for c in calls if not c.cache_hit and c.error is None), lost  # type: ignore[union-attr]


def run(args: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "memprobe_tui.main", *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - started


def twice(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(max(0, count - before.get(body, 0) - 1) for body, count in after.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--only", default="local,ray,shards")
    args = parser.parse_args()
    which = args.only.split(",")
    work = Path(tempfile.mkdtemp(prefix="mp-bench-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMPROBE_CACHE_DIR": str(work / "cache"),
           "RAY_AUTH_MODE": "disabled"}
    rows: list[dict[str, Any]] = []
    try:
        path = critical_path(args.latency, args.concurrency, work)
        print(f"critical path: {path:.1f} s (latency {args.latency * 1000:.0f} ms, --concurrency {args.concurrency})")
        with running_endpoint(args.latency) as (url, _):
            def measure(name: str, go: Any, records: list[Path]) -> None:
                before = raw_stats(url)
                seconds = go()
                after = raw_stats(url)
                record = records[0]
                if len(records) > 1:
                    merged = merge_recordings(work / f"{name}-merged", records)
                    record = merged.out
                calls, sent, lost = counted(record)
                rows.append({"run": name, "wall_s": seconds, "calls": calls, "sent": sent, "lost": lost,
                             "endpoint": after["answered"] - before["answered"],
                             "twice": twice(before["bodies"], after["bodies"]), "ratio": seconds / path})

            if "local" in which:
                measure("local", lambda: run(job_args(work / "local", url, args.concurrency), env), [work / "local"])
            if "ray" in which:
                with two_nodes(work / "c") as (address, _):
                    cmd = [*job_args(work / "ray", url, args.concurrency), "--executor", "ray", "--ray-address", address]
                    measure("ray (2 nodes × 1 CPU)", lambda: run(cmd, env), [work / "ray"])
            if "shards" in which:
                def shards() -> float:
                    started = time.monotonic()
                    procs = [subprocess.Popen([sys.executable, "-m", "memprobe_tui.main",
                                               *job_args(work / "sh", url, args.concurrency), "--shard", f"{i}/{SHARDS}"],
                                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                             for i in range(SHARDS)]
                    assert all(p.wait() == 0 for p in procs)
                    return time.monotonic() - started
                measure(f"{SHARDS} shards at once", shards,
                        [work / f"sh.shard-{i}-of-{SHARDS}" for i in range(SHARDS)])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| run | wall | calls recorded | sent | endpoint answered | sent twice | units lost with a worker | "
          "wall ÷ critical path |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['run']} | {row['wall_s']:.1f} s | {row['calls']:,} | {row['sent']:,} | {row['endpoint']:,} | "
              f"{row['twice']} | {row['lost']} | {row['ratio']:.2f}× |")


if __name__ == "__main__":
    main()
