"""Acceptance runs of the third-party memory libraries on the embedded model, resumable in chunks.

For one adapter and one protocol, runs the same ``memprobe run`` command as
``tests/functional/test_library_adapters.py`` into a folder that survives between invocations, and
prints what the issue asks to be recorded per adapter: whether it finished, wall time, the number
of calls made inside the library (``llm_call`` events with the system's name and role
``memory_writer``; embeddings beside them), store changes (``memory_op`` events) per session, and —
for protocol A — the SIGKILL + resume check: the first run is killed with SIGKILL as soon as the
library's first own call is recorded, and every later invocation resumes it; a request the killed
run had answered that is sent to the model again counts as repeated.

Why a script and not only the test: on two shared CPU cores one library run takes longer than a
model-lock chunk (about 15 minutes). Wrapped in ``timeout 900`` it is stopped cleanly (SIGTERM is
forwarded, the run ends ``interrupted``) and the next invocation carries on where it stopped::

    flock /work/coord/model.lock timeout 900 .venv/bin/python bench/library_acceptance.py \
        --system langmem --protocol a --out /tmp/acceptance/langmem-a

State (kill done, hashes answered before it, wall time so far) is kept in ``OUT/acceptance.json``;
the figures are printed and written to ``OUT/summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MEMPROBE = str(Path(sys.executable).with_name("memprobe"))
CONFIG = ROOT / "tests" / "fixtures" / "extras.toml"
_child: subprocess.Popen[bytes] | None = None


def command(system: str, protocol: str, record: Path, config: Path = CONFIG) -> list[str]:
    """The test's commands: a protocol-A mini session (1 task, 2 turns) or PILOT-01A of the upstream sample."""
    if protocol == "a":
        return [MEMPROBE, "run", "--record", str(record), "--config", str(config), "--users", "sim_01",
                "--dims", "reply_layout", "--systems", system, "--max-turns", "2", "--modes", "retrieve",
                "--agent-max-tokens", "60", "--simulator-max-tokens", "60", "--judge-max-tokens", "80",
                "--no-preference-judge"]
    return [MEMPROBE, "run", "--suite", "paradigms", "--sessions", str(ROOT / "sessions/paradigms/upstream-sample"),
            "--episodes", "PILOT-01A", "--systems", system, "--ingest", "session", "--record", str(record),
            "--config", str(config), "--reader-max-tokens", "120"]


def events(record: Path) -> list[dict[str, Any]]:
    """Every intact event line (a torn last line after SIGKILL is skipped)."""
    path = record / "events.jsonl"
    found: list[dict[str, Any]] = []
    if not path.exists():
        return found
    for line in path.read_bytes().splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def library_calls(evs: list[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    return [e for e in evs if e.get("kind") == "llm_call" and e.get("system") == system
            and e.get("role") == "memory_writer" and not e.get("error")]


def _forward(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM/SIGINT from ``timeout`` or Ctrl-C: stop the run cleanly so it can be resumed."""
    if _child is not None and _child.poll() is None:
        _child.send_signal(signal.SIGTERM)
        try:
            _child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _child.kill()
    raise SystemExit(128 + signum)


def main() -> int:
    global _child
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", required=True)
    parser.add_argument("--protocol", choices=("a", "b"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", type=Path, default=CONFIG,
                        help="model roles (default tests/fixtures/extras.toml: every role on local:fast)")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    record = out / "recording"
    state_path = out / "acceptance.json"
    state: dict[str, Any] = json.loads(state_path.read_text()) if state_path.exists() else {
        "killed": args.protocol != "a", "answered": [], "events_at_kill": 0, "wall_s": 0.0, "invocations": 0}
    state["invocations"] += 1
    env = {**os.environ, "MEMPROBE_CACHE_DIR": str(out / "cache"), "NO_COLOR": "1"}
    cmd = command(args.system, args.protocol, record, args.config)
    signal.signal(signal.SIGTERM, _forward)
    signal.signal(signal.SIGINT, _forward)
    log = (out / "stderr.log").open("ab")
    started = time.monotonic()
    try:
        if not state["killed"]:
            _child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
            while not library_calls(events(record), args.system):
                if _child.poll() is not None:
                    print(f"the run ended (exit {_child.returncode}) before a library call; see {out}/stderr.log")
                    return 1
                time.sleep(2)
            _child.send_signal(signal.SIGKILL)
            _child.wait()
            killed = events(record)
            state.update(killed=True, events_at_kill=len(killed),
                         answered=sorted({e["request_hash"] for e in killed
                                          if e.get("kind") == "llm_call" and not e.get("error")}))
            print(f"SIGKILLed after the first library call ({len(killed)} events, "
                  f"{len(state['answered'])} answered calls)")
        _child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
        # Polled, not wait()ed: a blocking wait holds Popen's waitpid lock, so the SIGTERM handler's own
        # wait could not reap the child and sat out its whole 60-s timeout (seen 2026-12-01).
        while (polled := _child.poll()) is None:
            time.sleep(1)
        rc = polled
    finally:
        state["wall_s"] += time.monotonic() - started
        state_path.write_text(json.dumps(state))
    summary = summarize(events(record), args.system, state, rc)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0 if rc == 0 else rc


def summarize(evs: list[dict[str, Any]], system: str, state: dict[str, Any], rc: int) -> dict[str, Any]:
    """The figures the issue asks for, from the recording alone."""
    lib = library_calls(evs, system)
    sessions = {e["span_id"] for e in evs if e.get("kind") == "span_begin" and e.get("span_kind") == "session"}
    ops = [e for e in evs if e.get("kind") == "memory_op" and e.get("system") == system]
    per_session: dict[str, int] = {}
    for e in ops:
        if e.get("span_id") in sessions:
            per_session[e["span_id"]] = per_session.get(e["span_id"], 0) + 1
    after = evs[state["events_at_kill"]:] if state["events_at_kill"] else []
    answered = set(state["answered"])
    resumed = [e for e in after if e.get("kind") == "llm_call"]
    ends = [e.get("status") for e in evs if e.get("kind") == "run_end"]
    sent = [e for e in lib if not e.get("cache_hit")]
    # Model time of the library's own calls, per session where there are sessions (protocol B): what
    # a full episode costs is estimated from it (docs/memory-systems.md).
    seconds = [float(e.get("latency_s") or 0.0) for e in sent]
    session_seconds: dict[str, float] = {}
    for e in sent:
        if e.get("span_id") in sessions:
            session_seconds[e["span_id"]] = session_seconds.get(e["span_id"], 0.0) + float(e.get("latency_s") or 0.0)
    return {
        "system": system, "exit": rc, "run_end": ends[-1] if ends else None, "wall_s": round(state["wall_s"], 1),
        "invocations": state["invocations"],
        "library_llm_calls": len(lib), "library_llm_calls_sent": len(sent),
        "library_llm_seconds": round(sum(seconds), 1), "library_llm_longest_s": round(max(seconds, default=0.0), 1),
        "library_seconds_per_session": [round(v, 1) for v in session_seconds.values()],
        "library_prompt_tokens": sum(int((e.get("usage") or {}).get("prompt_tokens") or 0) for e in lib),
        "library_completion_tokens": sum(int((e.get("usage") or {}).get("completion_tokens") or 0) for e in lib),
        "library_cached_prompt_tokens": sum(int((e.get("usage") or {}).get("cached_prompt_tokens") or 0) for e in lib),
        "library_embeddings": sum(1 for e in evs if e.get("kind") == "embedding" and e.get("system") == system),
        "all_llm_calls": sum(1 for e in evs if e.get("kind") == "llm_call"),
        "memory_ops": len(ops), "sessions": len(sessions), "sessions_with_store_changes": len(per_session),
        "probe_scores": sum(1 for e in evs if e.get("kind") == "probe_score"),
        "errors": [str(e.get("message"))[:300] for e in evs if e.get("kind") == "error"][:5],
        "resume": None if not state["events_at_kill"] else {
            "answered_before_kill": len(answered),
            "served_again_from_recording": sum(1 for e in resumed if e["request_hash"] in answered and e.get("cache_hit")),
            "repeated": sum(1 for e in resumed if e["request_hash"] in answered and not e.get("cache_hit")),
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
