"""Recording benchmark: write N synthetic events of realistic sizes, then index and read them back.

Prints write rate, index build time, median random fetch time and the reader's peak RSS relative
to the file size. Targets (2-core machine): write >= 100,000 events/s, index of 1M events <= 2 s,
random fetch <= 1 ms, reader RSS <= 25% of the file size.

    python bench/recording.py [--events 1000000] [--dir /tmp/bench-rec]

The reader is measured in a fresh subprocess so that the writer's memory does not count.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("memory user prefers concise answers budget garden retired nurse shift schedule recipe "
         "python spreadsheet mortgage hiking knee injury daughter college tuition overtime").split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write(directory: Path, count: int) -> float:
    from memprobe_engine.events.dialogue import Message
    from memprobe_engine.events.header import new_header
    from memprobe_engine.events.llm import LLMCall, RecordedMessage, TokenUsage
    from memprobe_engine.events.memory import MemoryOp, Retrieval
    from memprobe_engine.events.recorder import Recorder
    from memprobe_engine.events.writer import open_writer

    rng = random.Random(7)
    # Pre-build a pool of events so the timing measures recording, not text generation.
    pool = []
    for i in range(512):
        pool.append(Message(role="user" if i % 2 else "assistant", content=_sentence(rng, rng.randint(20, 120)),
                            task_index=i % 31, turn=i % 25))
        pool.append(LLMCall(role="agent", backend="local", model="qwen2.5-coder-1.5b", request_hash="sha256:" + "ab" * 32,
                            messages=[RecordedMessage(role="system", content_ref="sha256:" + "cd" * 32),
                                      RecordedMessage(role="user", content=_sentence(rng, 30))],
                            params={"temperature": 0.0, "max_tokens": 256}, response_text=_sentence(rng, 60),
                            usage=TokenUsage(prompt_tokens=900, completion_tokens=80), latency_s=1.2))
        pool.append(MemoryOp(op="add", item_ids=[f"m{i}"], patch=[{"op": "add", "path": f"/items/m{i}",
                             "value": {"content": _sentence(rng, 40), "timestamp": "2026-01-01T10:00"}}], store_size=i))
        pool.append(Retrieval(query=_sentence(rng, 12), k=5, item_ids=[f"m{j}" for j in range(5)],
                              scores=[0.9, 0.8, 0.7, 0.6, 0.5]))
    if directory.exists():
        shutil.rmtree(directory)
    writer = open_writer(directory, new_header("bench", "bench", {}))
    recorder = Recorder(writer)
    started = time.perf_counter()
    with recorder.scope(user_id="u001", system="longctx_full"):
        for i in range(count):
            event = pool[i % len(pool)].model_copy()
            recorder.emit(event)
    elapsed = time.perf_counter() - started
    writer.close()
    return elapsed


READER_PROBE = r"""
import json, os, random, resource, statistics, sys, time
from memprobe_engine.events.reader import open_recording
t0 = time.perf_counter()
reader = open_recording(sys.argv[1])
index_s = time.perf_counter() - t0
rng = random.Random(1)
lines = [rng.randrange(len(reader)) for _ in range(5000)]
times = []
for line in lines:
    reader._cache.clear()
    t = time.perf_counter(); reader.get(line); times.append(time.perf_counter() - t)
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"events": len(reader), "index_s": index_s, "fetch_median_ms": statistics.median(times) * 1e3,
                  "fetch_p99_ms": sorted(times)[int(len(times) * 0.99)] * 1e3, "peak_rss_bytes": peak_kb * 1024}))
"""

BASELINE_PROBE = r"""
import json, resource
import memprobe_engine.events.reader  # same imports as the probe, no recording opened
print(json.dumps({"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the recording afterwards")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="memprobe-bench-")) / "rec"

    elapsed = write(directory, args.events)
    size = (directory / "events.jsonl").stat().st_size
    probe = json.loads(subprocess.run([sys.executable, "-c", READER_PROBE, str(directory)],
                                      check=True, capture_output=True, text=True).stdout)
    base = json.loads(subprocess.run([sys.executable, "-c", BASELINE_PROBE],
                                     check=True, capture_output=True, text=True).stdout)
    reader_extra = probe["peak_rss_bytes"] - base["peak_rss_bytes"]
    rate = args.events / elapsed
    print(f"events written      {args.events:,} ({size / 1e6:,.1f} MB, {size / args.events:,.0f} B/event)")
    print(f"write rate          {rate:,.0f} events/s      (target >= 100,000)")
    print(f"index build         {probe['index_s']:.3f} s             (target <= 2 s for 1M)")
    print(f"random fetch        median {probe['fetch_median_ms']:.3f} ms, p99 {probe['fetch_p99_ms']:.3f} ms (target median <= 1 ms)")
    print(f"reader peak RSS     {probe['peak_rss_bytes'] / 1e6:,.1f} MB total, {reader_extra / 1e6:,.1f} MB above an "
          f"idle interpreter with the same imports = {100 * reader_extra / size:.1f}% of the file (target <= 25%)")
    if not args.keep:
        shutil.rmtree(directory.parent if args.dir is None else directory, ignore_errors=True)


if __name__ == "__main__":
    main()
