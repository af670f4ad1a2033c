"""Cluster benchmark: issue 35's fixed-dialogue job — the paper's two released users × 31 dimensions ×
``nomem,longctx_full,amem`` against a loopback endpoint with a set latency — by the local executor, on
a real two-node Ray cluster (``tests/ray_cluster.py``: ``ray start`` twice, one CPU each) and as a
3-shard array (three ``--shard`` processes at once, then ``memprobe merge``).

For each it prints the wall time, the calls recorded (and those sent, not served from an answer the
run held), the requests the endpoint answered and how many of them it had answered before in the same
run (sent twice), and the wall time over the job's critical path: the local run's duration on a
virtual clock with an in-process backend of the same latency (``bench/critical_path.py``), and the
texts each run embedded (not found in the embedding cache).

Every run starts from the same embedding cache: by default a copy of the one the critical-path run
filled (warm: MiniLM encodes nothing), with ``--cold`` an empty one (MiniLM loads and encodes every
store and note: about 30–40 s of CPU on this job, which the critical path does not count). Before
2026-12-05 all runs shared one cache folder, so the local run (first) paid for the encoding and Ray
and the shards (after it) found it warm.

    python bench/cluster.py [--latency 0.05] [--concurrency 8] [--cold] [--only local,ray,shards] [--tries N]

With ``--tries N`` the runs alternate N times (local, Ray, shards, local, …: a load that changes
meets each alike) and a last table gives each one's median wall time and ratio.

Run it where new network and process namespaces can be made (``unshare -n -p -f --mount-proc``, as
root) so the cluster's ports meet no other Ray instance's; it refuses to start a cluster otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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
from memprobe_engine.llm.model_assets import CACHE_ENV  # noqa: E402
from memprobe_engine.llm.spec import parse_spec  # noqa: E402
from memprobe_engine.orchestration.relay import LOST_WORKER  # noqa: E402
from memprobe_engine.protocol_spec import RunCommon  # noqa: E402
from memprobe_engine.recovery.options import RecoveryOptions  # noqa: E402
from memprobe_engine.recovery.run_options import recovery_plan  # noqa: E402
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
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    common = RunCommon(  # what `memprobe run` makes of job_args' flags
        record=work / "virtual", sessions=ROOT / "sessions/release-a", systems=SYSTEMS, config=None, shard=(0, 1),
        seed=0, concurrency=concurrency, embeddings=None, llm_config=config, cache=None, ray=None)
    plan = recovery_plan(common, RecoveryOptions(users=USERS, dialogues=str(ROOT / "sessions/release-a/dialogues")))
    oracle = RecoveryOracle(delay_s=latency)
    _, seconds = run_virtual(run_recovery(plan, work / "virtual", llm_config=config, concurrency=concurrency,
                                          backend_factory=lambda spec: oracle))
    return seconds


def counted(record: Path) -> tuple[int, int, int, int]:
    """(calls recorded, calls sent, unit attempts lost with their worker, texts embedded not from the cache)."""
    with open_recording(record) as reader:
        calls = list(reader.iter_events(kinds=["llm_call"]))
        lost = len({(e.user_id, e.system) for e in reader.iter_events(kinds=["span_end"])
                    if e.error == LOST_WORKER})  # type: ignore[union-attr]
        embedded = sum(e.n_texts - e.cache_hits for e in reader.iter_events(kinds=["embedding"]))  # type: ignore[union-attr]
    sent = sum(1 for c in calls if not c.cache_hit and c.error is None)  # type: ignore[union-attr]
    return len(calls), sent, lost, embedded


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
    parser.add_argument("--cold", action="store_true", help="start every run from an empty embedding cache")
    parser.add_argument("--only", default="local,ray,shards")
    parser.add_argument("--tries", type=int, default=1, help="alternate the runs this many times; medians at the end")
    args = parser.parse_args()
    which = args.only.split(",")
    work = Path(tempfile.mkdtemp(prefix="mp-bench-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled"}
    rows: list[dict[str, Any]] = []

    def fresh_cache(name: str) -> None:
        """Give the next run its own embedding cache: a copy of the warm one, or an empty one."""
        folder = work / f"cache-{name}"
        shutil.rmtree(folder, ignore_errors=True)  # an earlier try's
        if args.cold:
            folder.mkdir()
        else:
            shutil.copytree(work / "cache", folder)
        env[CACHE_ENV] = str(folder)

    try:
        os.environ[CACHE_ENV] = str(work / "cache")  # the critical-path run fills the warm cache
        path = critical_path(args.latency, args.concurrency, work)
        print(f"critical path: {path:.1f} s (latency {args.latency * 1000:.0f} ms, --concurrency {args.concurrency})")
        with running_endpoint(args.latency) as (url, _):
            def measure(name: str, go: Any, records: list[Path]) -> None:
                fresh_cache(name.split()[0])
                before = raw_stats(url)
                seconds = go()
                after = raw_stats(url)
                record = records[0]
                if len(records) > 1:
                    merged = merge_recordings(work / f"{name}-merged", records)
                    record = merged.out
                calls, sent, lost, embedded = counted(record)
                rows.append({"run": name, "wall_s": seconds, "calls": calls, "sent": sent, "lost": lost,
                             "embedded": embedded,
                             "endpoint": after["answered"] - before["answered"],
                             "twice": twice(before["bodies"], after["bodies"]), "ratio": seconds / path})

            for attempt in range(args.tries):
                tag = f"-{attempt}" if args.tries > 1 else ""
                if "local" in which:
                    local = work / f"local{tag}"
                    measure("local", lambda: run(job_args(local, url, args.concurrency), env), [local])
                if "ray" in which:
                    with two_nodes(work / f"c{tag}") as (address, _):
                        cmd = [*job_args(work / f"ray{tag}", url, args.concurrency), "--executor", "ray",
                               "--ray-address", address]
                        measure("ray (2 nodes × 1 CPU)", lambda: run(cmd, env), [work / f"ray{tag}"])
                if "shards" in which:
                    def shards() -> float:
                        started = time.monotonic()
                        procs = [subprocess.Popen([sys.executable, "-m", "memprobe_tui.main",
                                                   *job_args(work / f"sh{tag}", url, args.concurrency),
                                                   "--shard", f"{i}/{SHARDS}"],
                                                  cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                                 for i in range(SHARDS)]
                        assert all(p.wait() == 0 for p in procs)
                        return time.monotonic() - started
                    measure(f"{SHARDS} shards at once", shards,
                            [work / f"sh{tag}.shard-{i}-of-{SHARDS}" for i in range(SHARDS)])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| run | wall | calls recorded | sent | endpoint answered | sent twice | units lost with a worker | "
          "texts embedded | wall ÷ critical path |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['run']} | {row['wall_s']:.1f} s | {row['calls']:,} | {row['sent']:,} | {row['endpoint']:,} | "
              f"{row['twice']} | {row['lost']} | {row['embedded']:,} | {row['ratio']:.2f}× |")
    if args.tries > 1:
        print("\n| run | tries | median wall | median ÷ critical path | range |")
        print("| --- | --- | --- | --- | --- |")
        for name in dict.fromkeys(row["run"] for row in rows):
            ratios = sorted(row["ratio"] for row in rows if row["run"] == name)
            walls = [row["wall_s"] for row in rows if row["run"] == name]
            print(f"| {name} | {len(ratios)} | {statistics.median(walls):.1f} s | {statistics.median(ratios):.2f}× | "
                  f"{ratios[0]:.2f}–{ratios[-1]:.2f}× |")


if __name__ == "__main__":
    main()
