"""Protocol-B benchmarks: rule-scorer throughput and the episode bootstrap.

1. Scorer throughput: the the real upstream answers of tests/fixtures/release-b-real (structured JSON
   text and free text, all six probe types but previous-value-less ones) scored again and again with
   ``score_probe``; median probes/s over repeats. Target ≥ 50,000 probes/s.
2. Bootstrap: 56 episodes × 10 systems × 4 probes, 2,000 episode resamples for every system's 95 % CI
   plus the paired bootstrap of all 45 system pairs — on overall accuracy, and on every metric the
   report pairs (plasticity, stability, SP-Balance, fidelities, split, per probe type). Target ≤ 1 s.

Wall-clock figures depend on what else runs on the machine; CPU-time figures are printed beside them.

    python bench/paradigms.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.paradigms import metrics as M  # noqa: E402
from memprobe_engine.paradigms.intervals import metric_intervals  # noqa: E402
from memprobe_engine.paradigms.scoring import score_probe  # noqa: E402
from memprobe_engine.paradigms.suite import Probe, load_specs  # noqa: E402

REAL = ROOT / "tests" / "fixtures" / "release-b-real"


def scorer_workload() -> list[tuple[Probe, str]]:
    specs = {s.episode_id: s for s in load_specs(REAL / "data" / "suite56" / "latent_specs.json")}
    pairs: list[tuple[Probe, str]] = []
    for report in sorted((REAL / "results" / "suite56" / "reports").glob("*.json")):
        for episodes in orjson.loads(report.read_bytes()).values():
            for episode_id, entry in episodes.items():
                for answer in entry["answers"]:
                    probe = Probe(probe_type=answer["probe_type"], question="?", gold_answer=answer["gold"])
                    probe.attach_spec(specs[episode_id])
                    pairs.append((probe, answer["predicted"]))
    return pairs


def bench_scorer(repeats: int, rounds: int = 400) -> dict[str, Any]:
    pairs = scorer_workload()
    for probe, answer in pairs:  # warm the normalization cache as a long run would
        score_probe(probe, answer)
    structured = [(p, orjson.loads(a)) for p, a in pairs if a.lstrip().startswith("{")]
    out: dict[str, Any] = {"answers": len(pairs), "structured": len(structured)}
    for name, work in (("text", pairs), ("dict", structured)):
        wall, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(rounds):
                for probe, answer in work:
                    score_probe(probe, answer)
            wall.append(rounds * len(work) / (time.perf_counter() - start))
            cpu.append(rounds * len(work) / max(time.process_time() - start_cpu, 1e-9))
        out[f"{name}_wall"], out[f"{name}_cpu"] = statistics.median(wall), statistics.median(cpu)
    return out


def synthetic_frame(n_episodes: int = 56, n_systems: int = 10, probes: int = 4, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_systems):
        skill = 0.4 + 0.05 * s
        for e in range(n_episodes):
            for p in range(probes):
                rows.append({"system": f"sys{s:02d}", "episode_id": f"E{e:02d}", "paradigm": M.PARADIGM_ORDER[e % 4],
                             "condition": "c", "expected_behavior": "should_update" if e % 2 else "should_preserve",
                             "split": e % 5 == 0, "probe_index": p, "probe_type": M.PROBE_ORDER[p],
                             "score": float(rng.random() < skill), "excluded": False})
    return pd.DataFrame(rows)


def bench_bootstrap(repeats: int) -> dict[str, Any]:
    frame = synthetic_frame()
    out: dict[str, Any] = {"episodes": 56, "systems": 10, "resamples": M.N_RESAMPLES}
    for name, every_metric in (("overall", False), ("all", True)):
        wall, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            counts = M.episode_counts(frame)
            weights = M.draws(len(counts.episodes))
            ci = M.bootstrap_ci(counts, weights)
            paired = M.paired_bootstrap(counts, weights, frame=frame if every_metric else None)
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        out[name] = {"ci": len(ci), "pairs": len(paired), "wall": statistics.median(wall),
                     "cpu": statistics.median(cpu)}
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        intervals = metric_intervals(frame, M.draws(56))
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    out["intervals"] = {"rows": len(intervals), "wall": statistics.median(wall), "cpu": statistics.median(cpu)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    scorer = bench_scorer(args.repeats)
    # Wall-clock rates fall with other processes on the machine; the CPU-time rate is what one
    # uncontended core scores. Both are printed, with the load average they were taken under.
    print(f"scorer: {scorer['answers']} real upstream answers (JSON text / free text): median "
          f"{scorer['text_cpu']:,.0f} probes/s per CPU-second, {scorer['text_wall']:,.0f} probes/s wall "
          f"(target >= 50,000)")
    print(f"scorer: {scorer['structured']} of them as parsed dicts: {scorer['dict_cpu']:,.0f} probes/s per "
          f"CPU-second, {scorer['dict_wall']:,.0f} probes/s wall  [1-min load average {load:.1f}, "
          f"{os.cpu_count()} CPUs]")
    boot = bench_bootstrap(args.repeats)
    for name, label in (("overall", "overall accuracy"), ("all", "every metric")):
        b = boot[name]
        print(f"bootstrap: {boot['episodes']} episodes x {boot['systems']} systems, {boot['resamples']:,} resamples: "
              f"{b['ci']} CIs + {b['pairs']} paired comparisons ({label}): median {b['wall']:.3f} s wall, "
              f"{b['cpu']:.3f} s CPU (target <= 1 s)")
    b = boot["intervals"]
    print(f"intervals: every metric of Tables 2-7 per system, same draws: {b['rows']} intervals, median "
          f"{b['wall']:.3f} s wall, {b['cpu']:.3f} s CPU")

if __name__ == "__main__":
    main()
