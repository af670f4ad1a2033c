"""Fuzz the recording readers: ``python bench/fuzz_recordings.py N [--workers W] [--seed S]``.

Writes N mutated recordings (``tests/fuzzing.py``: bytes, lines, fields and types, spans, payloads,
headers, on schema-2, -1 and -0 bases), feeds each to every reader the product has under a 5 s
bound, and prints counts by outcome — intact, damaged (damage reported, intact events served),
refused (the project's own error, MemProbeError), foreign (any other exception: a bug), timeout —
by mutation family, the foreign exceptions grouped by where they were raised, and the time per
input (median, p99, max). Every 20th input also runs the replay backend and the report (frames and
tables), the slowest readers. Exit status 1 when any input was foreign or over the bound.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BOUND_S = 5.0
FULL_EVERY = 20


def _work(args: tuple[int, int, int, float, bool]) -> tuple[Counter[str], Counter[str], Counter[str], list[float], list[str]]:
    from tests.fuzzing import classify, make_bases, mutate, scratch_dir, warm_up, write_files

    worker, count, seed, budget_s, cpu_bound = args
    deadline = time.monotonic() + budget_s
    work = scratch_dir()
    bases = make_bases(work)
    warm_up(bases, work)
    rng = random.Random(seed * 1000 + worker)
    outcomes: Counter[str] = Counter()
    families: Counter[str] = Counter()
    foreign: Counter[str] = Counter()
    times: list[float] = []
    examples: list[str] = []
    for i in range(count):
        if time.monotonic() > deadline:
            break  # --seconds: stop early and report what was done
        base = rng.choice(bases)
        files, notes = mutate(base, rng, rng.choice((1, 1, 1, 2, 3)))
        write_files(work / "m", files)
        out = classify(work / "m", BOUND_S, tables=(i % FULL_EVERY == 0), cpu=cpu_bound)
        outcomes[out.kind] += 1
        families[f"{notes[0].split(':')[0]}/{out.kind}"] += 1
        times.append(out.seconds)
        if (i + 1) % 2000 == 0:
            print(f"worker {worker}: {i + 1:,}/{count:,} {dict(outcomes)}", file=sys.stderr, flush=True)
        if out.kind in ("foreign", "timeout"):
            key = out.detail or out.kind
            if not foreign[key]:
                examples.append(f"{out.kind}: {key} <- {base.name} {notes}")
            foreign[key] += 1
    shutil.rmtree(work, ignore_errors=True)
    return outcomes, families, foreign, times, examples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("n", type=int, help="how many mutated recordings")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=float("inf"),
                        help="stop each worker after this long and report the inputs done so far")
    parser.add_argument("--cpu-bound", action="store_true",
                        help="bound each input by 5 s of its process's CPU time instead of wall time "
                             "(on a machine shared with other jobs)")
    args = parser.parse_args()
    shares = [args.n // args.workers + (1 if w < args.n % args.workers else 0) for w in range(args.workers)]
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        results = pool.map(_work, [(w, shares[w], args.seed, args.seconds, args.cpu_bound)
                                   for w in range(args.workers)])
    wall = time.perf_counter() - started
    outcomes: Counter[str] = Counter()
    families: Counter[str] = Counter()
    foreign: Counter[str] = Counter()
    times: list[float] = []
    for o, f, x, t, examples in results:
        outcomes.update(o)
        families.update(f)
        foreign.update(x)
        times.extend(t)
        for line in examples:
            print(line)
    times.sort()
    print(f"inputs {len(times):,} of {args.n:,} in {wall:.0f} s with {args.workers} workers (seed {args.seed})"
          + (" — stopped by --seconds" if len(times) < args.n else ""))
    print("outcomes: " + ", ".join(f"{k} {outcomes[k]:,}" for k in ("intact", "damaged", "refused", "foreign",
                                                                    "timeout")))
    print(f"foreign exceptions (not MemProbeError): {outcomes['foreign']:,} from {len(foreign)} places")
    print(f"inputs over {BOUND_S:.0f} s: {outcomes['timeout']:,}")
    print(f"seconds per input: median {statistics.median(times):.3f}, p99 {times[int(len(times) * 0.99)]:.3f}, "
          f"max {times[-1]:.3f}")
    print("by mutation family / outcome:")
    for key, value in sorted(families.items()):
        print(f"  {key:<24} {value:>8,}")
    return 1 if outcomes["foreign"] or outcomes["timeout"] else 0


if __name__ == "__main__":
    sys.exit(main())
