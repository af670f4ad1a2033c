"""Import benchmark: a full-size protocol-A release (50 users × 5 runs) must import in ≤ 2 minutes.

The public sample (``../shared/release-sample-A``, 2 users) is scaled up to the full release's size
by cloning its users in turn under new ids (user_001 … user_050): every file of the layout — banks,
tasks, transcripts, preference judgments, final stores, recon_judge and attribution files with their
retrieved memories, the stage-0 cache and the run reports — keeps the sample's exact shapes. The
synthetic release (~7,750 transcripts, ~350 MB of JSON) is written to a temp dir, imported with
``import_release_a``, and the wall time, peak RSS (this process and the worker processes) and
output sizes are printed.

    python bench/import_release.py [--users 50] [--workers N] [--keep]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.recovery.release import import_release_a  # noqa: E402
from memprobe_engine.recovery.release.files import BANK_FILE  # noqa: E402

SAMPLE = ROOT.parent / "shared" / "release-sample-A"
TARGET_S = 120.0


def _clone_id(index: int) -> str:
    return f"user_{index + 1:03d}"


def synthesize(sample: Path, dest: Path, n_users: int) -> int:
    """Write an ``n_users`` release into ``dest`` from the sample's users; returns bytes written."""
    sample_users = sorted(p.stem for p in (sample / "benchmark_data" / "CustomTasksPooledFinal").glob("*.json"))
    written = 0

    def put(rel: Path, data: bytes) -> None:
        nonlocal written
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written += len(data)

    for path in sample.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(sample)
        source = next((u for u in sample_users if u in rel.parts or rel.stem == u), None)
        if source is None:
            if rel.as_posix() == BANK_FILE or rel.suffix == ".json" and rel.parts[0] == "output":
                continue  # rebuilt below with one row per synthetic user
            put(rel, path.read_bytes())
            continue
        raw = path.read_bytes()
        for index in range(n_users):
            if sample_users[index % len(sample_users)] != source:
                continue
            clone = _clone_id(index)
            parts = [clone if part == source else part for part in rel.parts]
            if rel.stem == source:
                parts[-1] = f"{clone}{rel.suffix}"
            put(Path(*parts), raw.replace(source.encode(), clone.encode()))
    bank = orjson.loads((sample / BANK_FILE).read_bytes())
    by_id = {u["user_id"]: u for u in bank["users"]}
    bank["users"] = [{**by_id[sample_users[i % len(sample_users)]], "user_id": _clone_id(i)} for i in range(n_users)]
    bank["num_users"] = n_users
    put(Path(BANK_FILE), orjson.dumps(bank))
    for report in (sample / "output").glob("*/*.json"):
        data = orjson.loads(report.read_bytes())
        rows = {row["user_id"]: row for row in data.get("per_user") or []}
        if rows:
            data["per_user"] = [{**rows[sample_users[i % len(sample_users)]], "user_id": _clone_id(i)}
                                for i in range(n_users) if sample_users[i % len(sample_users)] in rows]
            data["num_users"] = len(data["per_user"])
        put(report.relative_to(sample), orjson.dumps(data))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and print its path")
    args = parser.parse_args()
    if not SAMPLE.is_dir():
        sys.exit(f"{SAMPLE} is missing: the benchmark scales up the public sample.")
    tmp = Path(tempfile.mkdtemp(prefix="memprobe-import-bench-"))
    try:
        started = time.monotonic()
        size = synthesize(SAMPLE, tmp / "release", args.users)
        transcripts = sum(1 for _ in (tmp / "release" / "history").rglob("episode_*.json"))
        print(f"synthesized {args.users} users: {transcripts:,} transcripts, {size / 1e6:,.0f} MB of JSON "
              f"in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        result = import_release_a(tmp / "release", tmp / "out", workers=args.workers)
        wall = time.monotonic() - started
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        events = sum(r.events for r in result.runs)
        out_bytes = sum(p.stat().st_size for p in (tmp / "out").rglob("*") if p.is_file())
        for run in result.runs:
            print(f"  {run.run:<24} {run.users:>3} users {run.episodes:>5} episodes {run.events:>8,} events "
                  f"{run.wall_s:6.1f} s")
        counts = result.report["problem_counts"]
        print(f"import: {wall:.1f} s wall (target ≤ {TARGET_S:.0f} s, workers {result.report['workers']}), "
              f"{events:,} events, {out_bytes / 1e6:,.0f} MB written; peak RSS {own:,.0f} MiB main, "
              f"{children:,.0f} MiB largest worker; problems {counts}")
        print("PASS" if wall <= TARGET_S else "FAIL: slower than the target")
        if args.keep:
            print(f"kept: {tmp}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
