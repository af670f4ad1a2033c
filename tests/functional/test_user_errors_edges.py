"""Issue #22, items 6, 7 and 10: user errors at the edges end in one line and exit 2, never a traceback.

Each case runs the real console entry point in a child process (as a user would), so the test sees
exactly what reaches the terminal: the exit status and stderr. None of them starts a model.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: A command's progress lines on a non-terminal stderr ("[10:20:20] run: 0 units · …"), printed
#: before the work starts; the error line is what follows them.
PROGRESS = re.compile(r"^\[\d\d:\d\d:\d\d\] ")
ROOT = Path(__file__).resolve().parents[2]
SAMPLE_RECORDING = ROOT / "recordings" / "sample-quick-sim_01"
SESSIONS = ROOT / "sessions"


@pytest.fixture
def memprobe(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Runs the console entry point in this process (as the ``memprobe`` script does) and returns its
    exit status and output. A traceback would surface as the exception itself and fail the test."""
    from memprobe_engine.cli import main

    monkeypatch.setenv("MEMPROBE_MODEL", "openai:unused@http://127.0.0.1:9/v1")
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["memprobe", *args])
        code: int | str | None = 0
        try:
            main()
        except SystemExit as stop:
            code = stop.code
        out, err = capsys.readouterr()
        return Result(code if isinstance(code, int) else 1, out, err)
    return run


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def child(*args: str, timeout: float = 60) -> Result:
    """The same in a child process, for cases that could hang or need a signal."""
    env = {**os.environ, "MEMPROBE_MODEL": "openai:unused@http://127.0.0.1:9/v1", "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", "from memprobe_engine.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    return Result(done.returncode, done.stdout, done.stderr)


def one_line_error(result: Result, *needles: str) -> str:
    """The single error line of a refused command; asserts exit 2, no traceback, and ``needles``."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip() and not PROGRESS.match(line)]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# --- item 6: a misspelled config table -------------------------------------------------------

def test_misspelled_config_table_is_refused_listing_the_known_tables(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    config = tmp_path / "models.toml"
    config.write_text('[modles]\ndefault = "openai:gpt-4o-mini"\n', encoding="utf-8")
    record = tmp_path / "rec"
    result = memprobe("run", "--config", str(config), "--sessions", str(SESSIONS), "--record", str(record))
    one_line_error(result, str(config), "[modles]", "[models]", "[protocol]")
    assert not record.exists(), "refused before anything was created"


def test_misspelled_config_table_is_refused_by_rescore_too(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    config = tmp_path / "models.toml"
    config.write_text('[protocl]\nmax_turns = 3\n', encoding="utf-8")
    record = tmp_path / "rec"
    shutil.copytree(SAMPLE_RECORDING, record)  # a copy: without the check, rescore would append to it
    result = memprobe("rescore", str(record), "--config", str(config))
    one_line_error(result, "[protocl]", "did you mean [protocol]")


# --- item 7: file-system errors ---------------------------------------------------------------

def test_non_utf8_config_is_one_line_naming_the_file(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    config = tmp_path / "latin1.toml"
    config.write_bytes('[models]\ndefault = "openai:caf\xe9"\n'.encode("latin-1"))
    result = memprobe("run", "--config", str(config), "--sessions", str(SESSIONS), "--record", str(tmp_path / "r"))
    one_line_error(result, str(config), "UTF-8")


def test_record_naming_a_file_is_one_line(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    target = tmp_path / "results.txt"
    target.write_text("not a recording\n", encoding="utf-8")
    result = memprobe("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem",
                      "--record", str(target))
    one_line_error(result, str(target), "is a file, not a recording folder")
    assert target.read_text(encoding="utf-8") == "not a recording\n"


def _failing_os(module: types.ModuleType, name: str, code: int, *, after: int = 0) -> types.SimpleNamespace:
    """``module``'s ``os`` with ``name`` failing with ``code`` from its ``after``-th call on: a
    read-only or full disk where the test cannot mount one (CI does not run as root)."""
    calls = [0]
    real = getattr(os, name)

    def failing(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] > after:
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)
    return types.SimpleNamespace(**{**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")}, name: failing})


def test_read_only_recording_is_one_line_in_rescore(tmp_path: Path, memprobe: Callable[..., Result],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.events import writer

    record = tmp_path / "rec"
    shutil.copytree(SAMPLE_RECORDING, record)
    before = (record / "events.jsonl").read_bytes()
    monkeypatch.setattr(writer, "os", _failing_os(writer, "open", errno.EROFS))
    result = memprobe("rescore", str(record), "--dims", "reply_layout")
    one_line_error(result, str(record), "read-only", "copy the recording to a writable folder")
    assert (record / "events.jsonl").read_bytes() == before


def test_read_only_parent_folder_is_one_line_in_run(tmp_path: Path, memprobe: Callable[..., Result],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import pathlib

    real_mkdir = pathlib.Path.mkdir

    def read_only_mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.name == "rec":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        real_mkdir(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "mkdir", read_only_mkdir)
    result = memprobe("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem",
                      "--record", str(tmp_path / "rec"))
    one_line_error(result, str(tmp_path / "rec"), "read-only")


class _Oracle:
    """A loopback OpenAI-compatible server answering every role from the protocol-A oracle."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from memprobe_engine.llm.types import ChatMessage, ChatRequest
        from tests.functional.recovery_oracle import RecoveryOracle

        oracle = RecoveryOracle()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 — http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = ChatRequest(model="m", messages=tuple(ChatMessage(role=m["role"], content=m["content"])
                                                                for m in body["messages"]))
                reply = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                        "role": "assistant", "content": oracle.answer(request)[1]}}],
                                    "usage": {"prompt_tokens": 5, "completion_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_full_disk_ends_the_run_in_one_line_and_the_resume_loses_nothing(
        tmp_path: Path, memprobe: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.events import writer
    from memprobe_engine.events.reader import open_recording

    server = _Oracle()
    monkeypatch.setenv("MEMPROBE_MODEL", f"openai:m@{server.url}")
    record = tmp_path / "rec"
    command = ("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem", "--dims",
               "reply_layout", "--max-turns", "2", "--no-preference-judge", "--no-cache", "--record", str(record))
    try:
        with monkeypatch.context() as disk:
            disk.setattr(writer, "os", _failing_os(writer, "write", errno.ENOSPC, after=12))
            full = memprobe(*command)
        one_line_error(full, "events.jsonl", "the disk is full", "run the same command again to resume")
        kept = (record / "events.jsonl").read_bytes()
        assert kept.count(b"\n") == 12
        resumed = memprobe(*command)
    finally:
        server.close()
    assert resumed.returncode == 0, resumed.stderr
    assert (record / "events.jsonl").read_bytes().startswith(kept), "every event written before the disk filled"
    with open_recording(record) as reader:
        assert [e.kind for e in reader.iter_events(kinds=["judge_score"])], "the resumed run finished the unit"


def test_unreadable_events_file_in_report_is_one_line(tmp_path: Path, memprobe: Callable[..., Result],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.events import reader

    record = tmp_path / "rec"
    shutil.copytree(SAMPLE_RECORDING, record)
    monkeypatch.setattr(reader, "os", _failing_os(reader, "open", errno.EACCES))
    result = memprobe("report", str(record))
    one_line_error(result, str(record / "events.jsonl"), "Permission denied", "chmod u+r")


def test_csv_folder_that_cannot_be_created_is_one_line(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    result = memprobe("report", str(SAMPLE_RECORDING), "--csv", str(blocker / "csv"))
    one_line_error(result, str(blocker / "csv"), "cannot be created")


# --- item 10: the smaller ones -----------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-3"])
def test_concurrency_below_one_is_refused(tmp_path: Path, memprobe: Callable[..., Result], value: str) -> None:
    result = memprobe("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem",
                      "--concurrency", value, "--record", str(tmp_path / "rec"))
    one_line_error(result, f"--concurrency {value}", "1 or more")
    assert not (tmp_path / "rec").exists()


def test_a_system_named_twice_is_refused(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    result = memprobe("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem,nomem",
                      "--record", str(tmp_path / "rec"))
    one_line_error(result, "--systems names nomem more than once", "--systems nomem")
    assert not (tmp_path / "rec").exists()


SUITE = ROOT / "sessions" / "paradigms" / "upstream-sample"


def test_duplicate_episode_ids_fail_sessions_validate_and_a_run(tmp_path: Path,
                                                                memprobe: Callable[..., Result]) -> None:
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.paradigms.suite import load_suite

    first = next(line for line in (SUITE / "episodes.jsonl").read_bytes().splitlines() if line.strip())
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "episodes.jsonl").write_bytes(first + b"\n" + first + b"\n")
    result = memprobe("sessions", "validate", str(suite))
    assert result.returncode == 1 and "repeats the id of line 1" in result.stdout, result.stdout
    with pytest.raises(ConfigError, match="more than once"):
        load_suite(suite)


def test_an_empty_suite_is_invalid(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "episodes.jsonl").write_bytes(b"")
    result = memprobe("sessions", "validate", str(suite))
    assert result.returncode == 1 and "holds no episode" in result.stdout, result.stdout


def test_sessions_validate_on_a_fifo_does_not_hang(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    os.mkfifo(suite / "episodes.jsonl")
    sessions = tmp_path / "sessions"
    shutil.copytree(SESSIONS, sessions, ignore=shutil.ignore_patterns("paradigms"))
    bank = next(sessions.glob("users/*/bank.json"))
    bank.unlink()
    os.mkfifo(bank)
    for folder in (suite, sessions):
        result = child("sessions", "validate", str(folder), timeout=60)
        assert result.returncode == 1 and "not a regular file" in result.stdout, result.stdout


def test_import_release_b_on_a_wrong_folder_exits_2(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    result = memprobe("import", "release-b", str(tmp_path), "--out", str(tmp_path / "out"))
    one_line_error(result, "not a checkout of the protocol-B repository", "data/suite56/")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("port", ["99999", "http", "0"])
def test_an_invalid_port_is_refused_by_the_spec_parser(tmp_path: Path, memprobe: Callable[..., Result],
                                                      port: str) -> None:
    result = memprobe("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem",
                      "--model", f"agent=openai:m@http://127.0.0.1:{port}/v1", "--record", str(tmp_path / "rec"))
    one_line_error(result, "port", "1 to 65535")
    assert not (tmp_path / "rec").exists()


def test_a_spec_error_does_not_pin_the_recording(tmp_path: Path, memprobe: Callable[..., Result],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken spec is refused before the recording exists, so the corrected command runs there."""
    server = _Oracle()
    monkeypatch.setenv("MEMPROBE_MODEL", f"openai:m@{server.url}")
    record = tmp_path / "rec"
    command = ("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem", "--dims",
               "reply_layout", "--max-turns", "2", "--no-preference-judge", "--no-cache", "--record", str(record))
    try:
        broken = memprobe(*command, "--model", f"agent=replay:{tmp_path / 'no-such-recording'}")
        one_line_error(broken, "no-such-recording")
        assert not record.exists()
        fixed = memprobe(*command)
    finally:
        server.close()
    assert fixed.returncode == 0, fixed.stderr


# --- item 9 at the command line -----------------------------------------------------------------

def test_rescore_of_the_imported_mem0_user_on_the_embedded_model_records_overflows(
        tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    """The command of the issue: rescore a user of the imported protocol-A release (mem0, dump_all)
    on the embedded model. Its stores (~14,300 estimated tokens) do not fit a slot of 8,192, so each
    case is recorded as an overflow under the recording's policy (paper) and the command completes;
    no request is sent, so the model is never started."""
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.recovery.release import import_release_a
    from memprobe_engine.llm.backends.local import running_servers

    sample = ROOT / "tests" / "fixtures" / "release-sample-A"
    record = import_release_a(sample, tmp_path / "imported", workers=1).recordings["mem0_pooled_50"]
    result = memprobe("rescore", str(record), "--users", "user_001", "--dims", "mathematics_skill,writing_skill",
                      "--mode", "dump_all", "--model", "default=local:1.5b", "--no-attribution")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2 case(s) overflowed the reader's context of 8,192 tokens" in result.stdout
    assert not running_servers()
    with open_recording(record) as reader:
        fills = list(reader.iter_events(kinds=["slot_fill"]))[-2:]
        scores = list(reader.iter_events(kinds=["judge_score"]))[-2:]
    assert all(f.overflow and f.label == "unknown" and "8,192" in (f.reason or "") for f in fills)
    assert [s.score for s in scores] == [0.0, 0.0] and all(s.rescore_of is not None for s in scores)
