"""SIGKILL + resume cycles of a ``memprobe run`` against the loopback endpoint, and the report of the
run beside a clean run's (tests and ``bench/resume_report.py``; never product code).

:func:`compare_reports` runs the job once cleanly, then again in another folder where each session
is killed with SIGKILL after a few answers it asked live (the count varies from cycle to cycle),
resumed with the same command until it completes, and returns both ``memprobe report`` outputs. Both
recordings are named ``rec`` and reported from their own folder, so the text may be compared byte for
byte (the report names its recording).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.loopback_endpoint import running_endpoint

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_B = ROOT / "sessions" / "paradigms" / "upstream-sample"

#: The job per protocol: a few units, each with several model calls.
JOBS = {
    "A": ["--sessions", str(ROOT / "sessions"), "--users", "sim_01,sim_02", "--dims", "reply_layout,regional_geography_knowledge",
          "--systems", "nomem,longctx_full", "--max-turns", "3", "--concurrency", "2"],
    "B": ["--suite", "paradigms", "--sessions", str(SAMPLE_B), "--episodes", "PILOT-01A", "--systems",
          "nomem,memt,full_context", "--concurrency", "2"],
}
#: A longer job per protocol, for ten kills (``bench/resume_report.py``).
LONG_JOBS = {
    "A": ["--sessions", str(ROOT / "sessions"), "--users", "sim_01,sim_02,sim_03", "--dims",
          "reply_layout,regional_geography_knowledge", "--systems", "nomem,longctx_full,examples.keyword_memory:KeywordMemory", "--max-turns", "4",
          "--concurrency", "2"],
    "B": JOBS["B"],
}
ORACLE = {"A": "recovery", "B": "paradigms"}
LIVE_CALL = b'"kind":"llm_call"'


@dataclass
class Cycles:
    """What the kills did: how many sessions were killed mid-run, the live answers each had recorded
    when it was killed, and the two reports."""

    clean: str
    resumed: str
    killed: int = 0
    live_at_kill: list[int] = field(default_factory=list)
    sessions: int = 0
    stderr: str = ""


def _memprobe(*args: str) -> list[str]:
    return [sys.executable, "-m", "memprobe_tui.main", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"}


def _live_calls(events: Path, since: int) -> int:
    """``llm_call`` lines after byte ``since`` that were asked of the endpoint (not answered from the
    recording)."""
    try:
        data = events.read_bytes()[since:]
    except FileNotFoundError:
        return 0
    return sum(1 for line in data.splitlines() if LIVE_CALL in line and b'"cache_hit":false' in line)


def _report(folder: Path) -> str:
    done = subprocess.run(_memprobe("report", "rec"), cwd=folder, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def compare_reports(protocol: str, kills: int, workdir: Path, delay_s: float = 0.03, long: bool = False) -> Cycles:
    """Run ``protocol``'s job (``long``: the longer one) cleanly and with ``kills`` SIGKILLs and
    resumes; both reports."""
    clean_dir, resumed_dir = workdir / "clean", workdir / "resumed"
    clean_dir.mkdir(parents=True)
    resumed_dir.mkdir(parents=True)
    with running_endpoint(delay_s, "--oracle", ORACLE[protocol]) as (url, _):
        command = ["run", "--record", "rec", *(LONG_JOBS if long else JOBS)[protocol], "--model", f"default=openai:scripted@{url}",
                   "--no-cache"]
        done = subprocess.run(_memprobe(*command), cwd=clean_dir, env=_env(), capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        cycles = Cycles(clean=_report(clean_dir), resumed="")
        events = resumed_dir / "rec" / "events.jsonl"
        for cycle in range(kills):
            since = events.stat().st_size if events.exists() else 0
            wanted = 2 + (cycle * 3) % 5  # 2..6 live answers, then the kill
            proc = subprocess.Popen(_memprobe(*command), cwd=resumed_dir, env=_env(), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            cycles.sessions += 1
            deadline = time.monotonic() + 300
            while proc.poll() is None and time.monotonic() < deadline and _live_calls(events, since) < wanted:
                time.sleep(0.01)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                cycles.killed += 1
                cycles.live_at_kill.append(_live_calls(events, since))
            proc.wait(timeout=60)
            if proc.returncode == 0:
                break  # the run completed before this cycle's kill
        final = subprocess.run(_memprobe(*command), cwd=resumed_dir, env=_env(), capture_output=True, text=True,
                               timeout=600)
        cycles.sessions += 1
        assert final.returncode == 0, final.stderr
    cycles.resumed = _report(resumed_dir)
    report = subprocess.run(_memprobe("report", "rec"), cwd=resumed_dir, env=_env(), capture_output=True, text=True,
                            timeout=300)
    cycles.stderr = report.stderr
    return cycles


__all__ = ["Cycles", "JOBS", "LONG_JOBS", "compare_reports"]
