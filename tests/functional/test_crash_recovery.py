"""A writer killed with SIGKILL mid-stream leaves a recording whose complete events all read back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.events.reader import open_recording

WRITER = r"""
import sys
from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.header import new_header
from memprobe_engine.events.writer import open_writer
w = open_writer(sys.argv[1], new_header("crash", "test", {}))
i = 0
while True:
    w.write(Message(role="user", content="x" * 2000 + str(i)))
    i += 1
    if i == 200:
        print("ready", flush=True)
"""


def test_sigkill_mid_write_keeps_every_complete_event(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(rec)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Simulate the kill landing inside a write: a torn last line.
    with open(rec / "events.jsonl", "ab") as handle:
        handle.write(b'{"seq":999999,"kind":"message","role":"us')

    reader = open_recording(rec)
    n = len(reader)
    assert n >= 200
    contents = [e.content for e in reader.iter_events()]
    assert len(contents) == n and all(c.endswith(str(i)) for i, c in enumerate(contents))
    assert reader.damage.tail_bytes > 0

    result = CliRunner().invoke(app, ["recording", "verify", str(rec)])
    assert result.exit_code == 1
    assert f"{n:,} complete events" in result.output and "damaged tail" in result.output
