"""How long ``memprobe run`` takes to exit after SIGINT or SIGTERM, mid-run against the loopback endpoint,
optionally while other processes keep every core busy (issue 38, item 4).

    PYTHONPATH=. python bench/signal_exit.py [--busy 2] [--tries 3] [--protocol A|B]

Each try starts a three-system run, waits until it has recorded a few live answers (calls are in
flight then), sends the signal and times until the process has exited; it checks the exit status
(130 / 143), the last stderr line and the recording's ``run_end``. ``--busy N`` starts N
``while 1: pass`` processes for the measurements only.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.functional.resume_cycles import ROOT as REPO, SAMPLE_B  # noqa: E402
from tests.loopback_endpoint import running_endpoint  # noqa: E402

JOBS = {
    "A": ["--sessions", str(REPO / "sessions"), "--users", "sim_01,sim_02", "--dims",
          "reply_layout,regional_geography_knowledge", "--systems", "nomem,longctx_full,amem", "--max-turns", "4"],
    "B": ["--suite", "paradigms", "--sessions", str(SAMPLE_B), "--systems", "nomem,memt,amem"],
}


def one(url: str, protocol: str, signum: signal.Signals, folder: Path) -> tuple[float, int, str, bytes]:
    record = folder / f"rec-{signum.name}-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "memprobe_tui.main", "run", "--record", str(record),
                             *JOBS[protocol], "--model", f"default=openai:scripted@{url}", "--no-cache",
                             "--concurrency", "4"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as at a terminal
    events = record / "events.jsonl"
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if events.exists() and events.read_bytes().count(b'"kind":"llm_call"') >= 12:
            break
        time.sleep(0.02)
    sent = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    ends = [line for line in events.read_bytes().splitlines() if b'"kind":"run_end"' in line]
    return took, proc.returncode, err.decode().strip().splitlines()[-1] if err.strip() else "", ends[-1] if ends else b""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=int, default=0, help="busy-loop processes during the measurements")
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--protocol", default="A", choices=sorted(JOBS))
    parser.add_argument("--delay", type=float, default=0.3, help="the endpoint's seconds per answer")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="memprobe-signal-"))
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    times: dict[str, list[float]] = {}
    try:
        with running_endpoint(args.delay, "--oracle", "paradigms" if args.protocol == "B" else "recovery") as (url, _):
            for _ in range(args.tries):
                for signum in (signal.SIGINT, signal.SIGTERM):
                    took, status, last, end = one(url, args.protocol, signum, folder)
                    ok = status == 128 + signum and last == "interrupted; resume with the same command" \
                        and b'"status":"interrupted"' in end
                    times.setdefault(signum.name, []).append(took)
                    print(f"{signum.name}: exited in {took:.2f} s, status {status}, {'ok' if ok else 'WRONG'}"
                          f"{'' if ok else f' (last line {last!r}, run_end {end[:120]!r})'}", flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.2f} s, max {max(values):.2f} s over {len(values)} "
              f"(busy processes: {args.busy}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
