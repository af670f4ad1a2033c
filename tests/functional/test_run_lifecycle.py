"""The recorded-run lifecycle: run_end with the right status on success, failure, cancellation and
SIGTERM; leftover spans closed; one error from a failing unit; flags validated before a recording
exists; a SIGTERMed run resumes without repeating a request."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import ConfigError, LLMError
from memprobe_engine.events.header import new_header
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.types import ChatRequest, ChatResult
from memprobe_engine.orchestration.lifecycle import recorded_run
from memprobe_engine.recovery.runner import run_recovery
from tests.doubles import read_events
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.functional.test_recovery_run import config, dims, plan

ROOT = Path(__file__).resolve().parents[2]


def _ends(record: Path) -> list[tuple[str, str | None]]:
    with open_recording(record) as reader:
        return [(e.status, e.reason) for e in reader.iter_events(kinds=["run_end"])]  # type: ignore[union-attr]


def _intact(record: Path) -> bool:
    with open_recording(record) as reader:
        return check_recording(reader).clean


@pytest.mark.parametrize("outcome", ["ok", "error", "cancel"])
async def test_lifecycle_status_and_open_spans(tmp_path: Path, outcome: str) -> None:
    record = tmp_path / "rec"

    async def body() -> None:
        async with recorded_run(record, header=new_header("r", "t", {}), suite="t") as run:
            with run.recorder.span("outer", "run"):
                inner = run.recorder.span("left open", "stage")
                inner.__enter__()  # a span whose task never got to close it
                if outcome == "error":
                    raise LLMError("the endpoint said no")
                if outcome == "cancel":
                    raise asyncio.CancelledError()

    if outcome == "ok":
        await body()
    else:
        with pytest.raises((LLMError, asyncio.CancelledError)):
            await body()
    status = {"ok": "completed", "error": "failed", "cancel": "interrupted"}[outcome]
    assert [s for s, _ in _ends(record)] == [status]
    assert _intact(record), "a span was left open"
    assert not (record / "writer.lock").read_text() or open_recording(record)  # lock released: reopen works
    async with recorded_run(record, header=None, suite="t"):
        pass


class FailingFor(RecoveryOracle):
    """The oracle, except that every call made for one memory system fails for good."""

    def __init__(self, system: str) -> None:
        super().__init__(delay_s=0.01)
        self.system = system

    async def complete(self, request: ChatRequest) -> ChatResult:
        from memprobe_engine.events.recorder import _POSITION

        if _POSITION.get().system == self.system:
            raise LLMError(f"cannot reach http://127.0.0.1:9/v1 (scripted failure for {self.system})")
        return await super().complete(request)


def test_a_failing_unit_cancels_the_others_and_raises_one_error(tmp_path: Path) -> None:
    chosen = dims(2)
    plan_for(chosen)
    with pytest.raises(LLMError, match="scripted failure"):
        asyncio.run(run_recovery(plan(chosen, ["nomem", "examples.keyword_memory:KeywordMemory"]), tmp_path / "rec",
                                 llm_config=config(), backend_factory=lambda spec: FailingFor("nomem"),
                                 concurrency=2))
    assert [s for s, _ in _ends(tmp_path / "rec")] == ["failed"]
    assert _intact(tmp_path / "rec")
    with open_recording(tmp_path / "rec") as reader:
        ends = [e for e in reader.iter_events(kinds=["span_end"]) if e.system == "examples.keyword_memory:KeywordMemory"]
    assert ends and all(e.status == "cancelled" for e in ends)  # type: ignore[union-attr]


@pytest.mark.parametrize("flags,message", [
    (["--systems", ","], "names no memory system"),
    (["--systems", "longctx_full", "--embeddings", "bogus:x"], "Embedding spec 'bogus:x'"),
])
def test_bad_flags_fail_before_a_recording_exists(tmp_path: Path, flags: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["run", "--record", str(tmp_path / "rec"), "--users", "sim_01",
                                      "--dims", dims(1)[0], *flags])
    assert isinstance(result.exception, ConfigError) and message in str(result.exception)
    assert not (tmp_path / "rec").exists()


SIGTERM_SCRIPT = '''
import asyncio, sys
from pathlib import Path
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.functional.test_recovery_run import plan, config
from memprobe_engine.recovery.runner import run_recovery
record, dims, delay = Path(sys.argv[1]), sys.argv[2].split(","), float(sys.argv[3])
plan_for(dims)
oracle = RecoveryOracle(delay_s=delay)
try:
    asyncio.run(run_recovery(plan(dims, ["nomem", "examples.keyword_memory:KeywordMemory"]), record,
                             llm_config=config(), backend_factory=lambda spec: oracle, concurrency=2, signals=True))
except KeyboardInterrupt as err:
    sys.exit(128 + getattr(err, "signum", 2))
'''


def test_sigterm_ends_the_run_interrupted_and_the_rerun_repeats_no_request(tmp_path: Path) -> None:
    chosen = dims(3)
    script = tmp_path / "run.py"
    script.write_text(SIGTERM_SCRIPT)
    record = tmp_path / "rec"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(script), str(record), ",".join(chosen), "0.05"], env=env)
    deadline = time.time() + 90
    while time.time() < deadline:
        events = record / "events.jsonl"
        if events.exists() and events.read_bytes().count(b'"kind":"llm_call"') >= 20:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert _ends(record) == [("interrupted", "SIGTERM")]
    assert _intact(record), "SIGTERM left an open span or damage"

    subprocess.run([sys.executable, str(script), str(record), ",".join(chosen), "0"], env=env, check=True)
    assert [s for s, _ in _ends(record)] == ["interrupted", "completed"]
    with open_recording(record) as reader:
        live = Counter(e.request_hash for e in reader.iter_events(kinds=["llm_call"])  # type: ignore[union-attr]
                       if not e.cache_hit)  # type: ignore[union-attr]
    assert live and max(live.values()) == 1, "the resumed run repeated a request"
    assert _intact(record)


class SilentEndpoint:
    """A loopback OpenAI-compatible URL that takes every request and never answers (a call in flight)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests = 0
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                outer.requests += 1
                outer.release.wait(120)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


MEMPROBE = str(Path(sys.executable).with_name("memprobe"))


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` for a child that a test sends SIGINT: its default disposition, as a command run at
    a terminal has it. A test suite started as a background job of a script (``nohup make test &``)
    inherits SIGINT *ignored* (POSIX shells ignore it for background jobs without job control), and
    every process it starts would inherit that too: the SIGINT would be lost and the run go on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_ctrl_c_on_memprobe_run_exit_143_and_130_with_the_resume_line(
        tmp_path: Path, signum: signal.Signals, status: int) -> None:
    endpoint = SilentEndpoint()
    record = tmp_path / "rec"
    try:
        proc = subprocess.Popen(
            [MEMPROBE, "run", "--record", str(record), "--users", "sim_01", "--dims", dims(1)[0], "--systems", "nomem",
             "--model", f"default=openai:m@{endpoint.url}", "--no-cache"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"},
            preexec_fn=sigint_as_at_a_terminal)
        deadline = time.time() + 120
        while endpoint.requests == 0 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert endpoint.requests, "the run never called the endpoint"
        proc.send_signal(signum)  # as `kill -TERM PID` (or Ctrl-C) does
        out, err = proc.communicate(timeout=60)
    finally:
        endpoint.close()
    lines = err.decode().strip().splitlines()
    assert proc.returncode == status, err.decode()
    assert lines[-1] == "interrupted; resume with the same command", err.decode()
    assert "Traceback" not in err.decode() + out.decode()
    [(ended, reason)] = _ends(record)
    assert ended == "interrupted" and (reason == "SIGTERM" or signum == signal.SIGINT)


@pytest.mark.parametrize("killed_after,count,delay", [(b'"kind":"llm_call"', 20, "0.05"),
                                                     (b'"kind":"span_begin"', 3, "30")])
def test_sigkill_then_resume_closes_the_killed_spans_as_interrupted_and_verify_and_report_see_no_damage(
        tmp_path: Path, killed_after: bytes, count: int, delay: str) -> None:
    """Killed after 20 answers, or before the first (every call waits 30 s): the resume still says
    ``resumed: true`` and closes what the killed session left open."""
    chosen = dims(3)
    script = tmp_path / "run.py"
    script.write_text(SIGTERM_SCRIPT)
    record = tmp_path / "rec"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(script), str(record), ",".join(chosen), delay], env=env)
    deadline = time.time() + 90
    while time.time() < deadline:
        events = record / "events.jsonl"
        if events.exists() and events.read_bytes().count(killed_after) >= count:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # no handler runs: spans stay open, no run_end
    proc.wait(timeout=60)
    with open_recording(record) as reader:
        left_open = check_recording(reader).unclosed_spans
    assert left_open, "the kill left no span open; nothing to test"

    subprocess.run([sys.executable, str(script), str(record), ",".join(chosen), "0"], env=env, check=True)
    run_starts = [e["resumed"] for e in read_events(record, "run_start")]
    assert run_starts == [False, True]
    closed = [e for e in read_events(record, "span_end") if e["status"] == "interrupted"]
    assert sorted(e["span_id"] for e in closed) == sorted(left_open)
    assert all(e["error"] == "interrupted by an earlier crash" for e in closed)

    cli = {**os.environ, "NO_COLOR": "1", "COLUMNS": "300"}
    verify = subprocess.run([MEMPROBE, "recording", "verify", str(record)], capture_output=True, text=True, env=cli)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"{len(left_open)} span(s) interrupted by an earlier crash, closed when the run resumed" in verify.stdout
    assert left_open[0] in verify.stdout
    report = subprocess.run([MEMPROBE, "report", str(record)], capture_output=True, text=True, env=cli)
    assert report.returncode == 0, report.stderr
    assert "damaged" not in report.stderr and "never closed" not in report.stderr, report.stderr
    assert "interrupted by an earlier crash" in report.stderr
