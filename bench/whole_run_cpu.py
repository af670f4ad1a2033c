"""Whole-run CPU per recorded call of ``memprobe run`` as a user starts it (issue 35, item 8): the
command's own process, start-up imports included, user + system time over the calls it recorded.

Protocol A's 3 sample users × 31 dimensions × nomem, longctx_full, both modes, ``--concurrency 32``,
against a loopback endpoint answering after ``--latency`` seconds (tests/loopback_endpoint.py, its
CPU apart). ``longctx_full`` embeds its store with MiniLM for the retrieve mode: that is the memory
system's own work, and its cost depends on the embedding cache, so each try runs twice — with an empty
cache folder (``cold``: the model loads and encodes every text) and then with the cache that run filled
(``warm``: the engine's cost) — and both are printed.

    PYTHONPATH=. python bench/whole_run_cpu.py [--tries 3] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.events.reader import open_recording  # noqa: E402
from tests.loopback_endpoint import running_endpoint  # noqa: E402

JOB = ["--sessions", str(ROOT / "sessions"), "--systems", "nomem,longctx_full", "--concurrency", "32", "--no-cache"]


def one(url: str, cache: Path, folder: Path) -> tuple[float, float, int]:
    """CPU seconds of one ``memprobe run`` child, its wall seconds and the calls it recorded."""
    record = folder / f"rec-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMPROBE_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memprobe_tui.main", "run", "--record", str(record), *JOB,
                           "--model", f"default=openai:scripted@{url}"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {done.stderr[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open_recording(record) as reader:
        calls = sum(1 for _ in reader.iter_events(kinds=["llm_call"]))
    return cpu, wall, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, int]]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="memprobe-cpu-") as work, running_endpoint(args.latency) as (url, _):
        for attempt in range(args.tries):
            cache = Path(work) / f"cache-{attempt}"
            cache.mkdir()
            results["cold"].append(one(url, cache, Path(work)))
            results["warm"].append(one(url, cache, Path(work)))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.latency * 1000:.0f} ms endpoint")
    for name, runs in results.items():
        per_call = [1000 * cpu / calls for cpu, _, calls in runs]
        print(f"{name:<5} embedding cache: CPU {statistics.median(per_call):.2f} ms/call median of {len(runs)} "
              f"({', '.join(f'{v:.2f}' for v in per_call)}); {runs[0][2]:,} calls; "
              f"wall {statistics.median(w for _, w, _ in runs):.1f} s")


if __name__ == "__main__":
    main()
