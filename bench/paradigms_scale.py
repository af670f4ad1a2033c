"""Protocol B's whole run against a loopback endpoint (issue 35, item 7): wall, the run process's CPU
per recorded call (start-up included) and the job's critical path.

The job: ``memprobe run --suite paradigms --sessions sessions/paradigms/suite56-embedded`` (48
episodes) × protocol B's six built-in memory systems (``nomem, longctx_full, amem, mem0, memt,
memoryos``: the systems the incremental protocol ingests into; ``--systems`` to change),
``--concurrency 64`` and the model's spec concurrency 64 too (a config file; the ``openai`` backend's
default of 8 would pace the run to 8 calls in flight), the response cache off, against ``tests/loopback_endpoint.py --oracle
paradigms`` answering every call after ``--latency`` seconds (its CPU apart). ``amem``, ``mem0`` and
``memoryos`` embed with MiniLM (sentence-transformers): the memory systems' own work, whose cost
depends on the embedding cache, so each try runs twice — with an empty cache folder (``cold``: the
model loads and encodes every text) and then with the cache that run filled (``warm``: the engine's
cost).

The critical path is the same job on a virtual clock (bench/critical_path.py) with the in-process
scripted oracle at the same latency and MiniLM embedding inline from the warm cache (so embedding
costs no virtual time): the longest chain of dependent calls × the latency, with the engine's
scheduling. CPU is the ``memprobe run`` child's user + system time (``RUSAGE_CHILDREN``).

``--compare DIR`` alternates each warm run with one of the checkout at DIR (``git worktree add DIR
COMMIT``: the tree before a change), on the same cache and endpoint, so that both see the same load.

    PYTHONPATH=. python bench/paradigms_scale.py [--tries 3] [--latency 0.05] [--systems a,b,…] [--no-cold]
                                                 [--compare DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.critical_path import run_virtual  # noqa: E402
from memprobe_engine.events.reader import open_recording  # noqa: E402
from memprobe_engine.llm.embeddings import (  # noqa: E402
    CACHE_FILE,
    FloatMatrix,
    SentenceTransformerBackend,
    VectorCache,
    l2_normalize,
)
from tests.loopback_endpoint import running_endpoint  # noqa: E402

SUITE = ROOT / "sessions" / "paradigms" / "suite56-embedded"
SYSTEMS = "nomem,longctx_full,amem,mem0,memt,memoryos"
CONCURRENCY = 64


def job(systems: str) -> list[str]:
    return ["--suite", "paradigms", "--sessions", str(SUITE), "--systems", systems,
            "--concurrency", str(CONCURRENCY), "--no-cache"]


def one(url: str, systems: str, cache: Path, folder: Path, root: Path = ROOT) -> tuple[float, float, Counter[str]]:
    """CPU seconds of one ``memprobe run`` child (of the checkout at ``root``), its wall seconds and
    its recorded calls per system."""
    record = folder / f"rec-{time.monotonic_ns()}"
    config = folder / "models.toml"
    config.write_text(f'[models.default]\nspec = "openai:scripted@{url}"\nconcurrency = {CONCURRENCY}\n')
    env = {**os.environ, "PYTHONPATH": str(root), "MEMPROBE_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memprobe_tui.main", "run", "--record", str(record), *job(systems),
                           "--config", str(config)], env=env, capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {done.stderr[-800:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open_recording(record) as reader:
        calls = Counter(event.system or "" for event in reader.iter_events(kinds=["llm_call"]))
    shutil.rmtree(record, ignore_errors=True)
    return cpu, wall, calls


class InlineEmbedder:
    """MiniLM through the vector cache, on the event loop's own thread: on the virtual clock the
    embedding then takes no virtual time (a worker thread's would show as a jump of the clock)."""

    def __init__(self, cache: Path) -> None:
        self.backend = SentenceTransformerBackend()
        self.cache = VectorCache(cache / CACHE_FILE)

    async def embed(self, texts: list[str]) -> FloatMatrix:
        keys = [VectorCache.key(self.backend.model_id, text) for text in texts]
        known = self.cache.get_many(list(dict.fromkeys(keys)))
        missing = {key: text for key, text in zip(keys, texts) if key not in known}
        if missing:
            vectors = l2_normalize(self.backend._encode(list(missing.values())))
            fresh = dict(zip(missing, vectors))
            self.cache.put_many(list(fresh.items()))
            known.update(fresh)
        return np.stack([known[key] for key in keys]).astype(np.float32, copy=False)

    async def aclose(self) -> None:
        self.cache.close()


def critical_path(systems: str, latency: float, cache: Path, folder: Path) -> tuple[float, int]:
    """The job's virtual duration in seconds and its recorded calls."""
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.paradigms.runner import ParadigmPlan, run_paradigms
    from tests.functional.test_paradigm_run import ParadigmOracle

    oracle = ParadigmOracle(delay_s=latency)
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1").model_copy(
        update={"concurrency": CONCURRENCY})})
    record = folder / "virtual"
    _, seconds = run_virtual(run_paradigms(ParadigmPlan(sessions_dir=SUITE, systems=systems.split(",")), record,
                                           llm_config=config, concurrency=CONCURRENCY,
                                           backend_factory=lambda spec: oracle, embedder=InlineEmbedder(cache)))
    with open_recording(record) as reader:
        calls = sum(1 for _ in reader.iter_events(kinds=["llm_call"]))
    shutil.rmtree(record)
    return seconds, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--systems", default=SYSTEMS)
    parser.add_argument("--no-cold", action="store_true", help="one cold run (it fills the cache), then warm ones")
    parser.add_argument("--compare", type=Path, default=None,
                        help="another checkout (the commit before a change): its warm runs alternate with this one's")
    args = parser.parse_args()
    trees = {"warm": ROOT, **({f"warm {args.compare}": args.compare.resolve()} if args.compare else {})}
    results: dict[str, list[tuple[float, float, Counter[str]]]] = {"cold": [], **{name: [] for name in trees}}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="memprobe-bscale-") as work, \
            running_endpoint(args.latency, "--oracle", "paradigms") as (url, _):
        folder = Path(work)
        for attempt in range(args.tries):
            if attempt == 0 or not args.no_cold:
                cache = folder / f"cache-{attempt}"
                cache.mkdir()
                results["cold"].append(one(url, args.systems, cache, folder))
            # Both trees' warm runs share the cache and alternate, so the machine's load falls on both.
            for name, root in trees.items():
                results[name].append(one(url, args.systems, cache, folder, root))
            loads.append(os.getloadavg()[0])
        path, path_calls = critical_path(args.systems, args.latency, folder / "cache-0", folder)
    print(f"load average {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} CPUs; "
          f"{args.latency * 1000:.0f} ms endpoint; --concurrency {CONCURRENCY}; systems {args.systems}")
    print(f"critical path {path:.2f} s (virtual clock, {path_calls:,} calls)")
    for name, runs in results.items():
        per_call = [1000 * cpu / sum(calls.values()) for cpu, _, calls in runs]
        walls = [wall for _, wall, _ in runs]
        calls = runs[0][2]
        print(f"{name} embedding cache: CPU {statistics.median(per_call):.2f} ms/call median of {len(runs)} "
              f"({', '.join(f'{v:.2f}' for v in per_call)}); {sum(calls.values()):,} calls "
              f"({', '.join(f'{s} {n}' for s, n in sorted(calls.items()))}); wall {statistics.median(walls):.1f} s "
              f"({', '.join(f'{w:.1f}' for w in walls)}) = {statistics.median(walls) / path:.2f}× critical path")


if __name__ == "__main__":
    main()
