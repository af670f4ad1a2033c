"""A signal ends a command at once (issue 38, item 4): after the run finished its work it exits 0;
``doctor`` stopped by SIGTERM ends like ``run`` (exit 143, the one line, no traceback);
``bench/signal_exit.py`` times a run's exit under load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.functional.test_run_lifecycle import SilentEndpoint, sigint_as_at_a_terminal


class HangingEndpoint(SilentEndpoint):
    """SilentEndpoint that never answers a GET either (doctor's check asks ``GET …/models``)."""

    def __init__(self) -> None:
        super().__init__()
        handler = self.httpd.RequestHandlerClass
        handler.do_GET = handler.do_POST  # type: ignore[attr-defined]

ROOT = Path(__file__).resolve().parents[2]

AFTER_THE_RUN = r"""
import asyncio, os, signal, sys, time
from memprobe_engine import cli
from memprobe_engine.events.header import new_header
from memprobe_engine.orchestration.lifecycle import recorded_run
from memprobe_engine.orchestration.prompt_exit import run_interruptible

async def body():
    async with recorded_run(sys.argv[1], header=new_header("r", "t", {}), suite="t", signals=True):
        pass

def command():
    run_interruptible(body())
    os.kill(os.getpid(), int(sys.argv[2]))  # Ctrl-C or `kill` once the run has completed
    time.sleep(10)

cli.app = command
cli.main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_the_run_completed_exits_0(tmp_path: Path, signum: signal.Signals) -> None:
    done = subprocess.run([sys.executable, "-c", AFTER_THE_RUN, str(tmp_path / "rec"), str(int(signum))],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          start_new_session=True, preexec_fn=sigint_as_at_a_terminal)
    assert done.returncode == 0, done.stderr
    assert "interrupted" not in done.stderr and "Traceback" not in done.stderr


def test_doctor_stopped_by_sigterm_exits_143_with_the_one_line(tmp_path: Path) -> None:
    """Stopped a few seconds in, while its model check works in a thread (minutes on two busy cores)."""
    endpoint = HangingEndpoint()  # were it asked, its check would wait for an answer that never comes
    try:
        proc = subprocess.Popen([sys.executable, "-m", "memprobe_tui.main", "doctor", "--endpoint", endpoint.url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "HOME": str(tmp_path)},
                                start_new_session=True)
        time.sleep(6)
        assert proc.poll() is None, "doctor ended before the signal"
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        endpoint.close()
    assert proc.returncode == 143, err.decode()
    assert err.decode().strip().splitlines()[-1] == "interrupted; resume with the same command"
    assert "Traceback" not in err.decode() + out.decode() and "Task" not in err.decode()
    assert took < 30  # a hang check, not a speed target: bench/signal_exit.py times the exit


WHILE_A_SERVER_STARTS = r"""
import asyncio, sys, threading, time
from memprobe_engine import cli
from memprobe_engine.llm.backends import local
from memprobe_engine.orchestration.prompt_exit import run_interruptible

def starting_server():  # what a model load does for seconds to minutes: holds the registry lock
    with local._REGISTRY_LOCK:
        print("loading", flush=True)
        time.sleep(3600)

async def body():
    await asyncio.to_thread(starting_server)

cli.app = lambda: run_interruptible(body())
cli.main()
"""


def test_sigterm_while_an_embedded_server_starts_exits_without_waiting_for_it() -> None:
    """The exit handler that stops embedded servers must not wait for one still loading its model:
    here the load would last an hour, so only an exit that leaves it can end within the bound."""
    proc = subprocess.Popen([sys.executable, "-c", WHILE_A_SERVER_STARTS], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"loading\n"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err.decode()
    assert err.decode().strip().splitlines()[-1] == "interrupted; resume with the same command"
