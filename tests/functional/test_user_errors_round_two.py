"""Issue #38, items 2 and 3: inputs that were silently accepted (or hung, or leaked a key) now end in
one line and exit 2 — the scripted bad-input suite of ``test_user_errors_edges.py``, continued with
its helpers. Each case runs the real console entry point; none starts a model or sends a request.
Cases that could block for ever (a FIFO) run in a child process with a timeout.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.functional.test_user_errors_edges import SAMPLE_RECORDING, SESSIONS, Result, child, memprobe, one_line_error

__all__ = ["memprobe"]  # the fixture, shared with the first half of the suite

RUN = ("run", "--sessions", str(SESSIONS), "--users", "sim_01", "--systems", "nomem")
KEY = "SECRETKEY38"


def test_a_key_in_a_model_url_is_refused_and_quoted_nowhere(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    record = tmp_path / "rec"
    result = memprobe(*RUN, "--model", f"default=openai:m@http://user:{KEY}@127.0.0.1:9/v1", "--record", str(record))
    one_line_error(result, "credentials", "api_key_env")
    assert KEY not in result.stdout + result.stderr
    assert not record.exists(), "refused before the recording (and its header) was written"


def test_record_naming_nothing_is_refused(tmp_path: Path, memprobe: Callable[..., Result],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = memprobe(*RUN, "--record", "")
    one_line_error(result, "--record '.'", "names the current folder", "--record recordings/run1")
    assert list(tmp_path.iterdir()) == [], "no recording file landed in the current folder"


@pytest.mark.parametrize("flag", ["--users", "--dims", "--modes"])
@pytest.mark.parametrize("value", ["", " ", ","])
def test_an_empty_list_flag_is_refused_not_read_as_all(tmp_path: Path, memprobe: Callable[..., Result], flag: str,
                                                       value: str) -> None:
    args = [a for a in RUN if a not in ("--users", "sim_01")] if flag == "--users" else list(RUN)
    result = memprobe(*args, flag, value, "--record", str(tmp_path / "rec"))
    one_line_error(result, flag, "names nothing", f"{flag} all")
    assert not (tmp_path / "rec").exists()


@pytest.mark.parametrize(("spec", "needle"), [
    ("local:", "no tier follows 'local:'"),
    ("local:fast ", "ends in a space"),
    ("openai:m@http://127.0.0.1:9/v1,ftp://x", "'ftp://x' must start with http:// or https://"),
])
def test_a_malformed_model_spec_is_refused(tmp_path: Path, memprobe: Callable[..., Result], spec: str,
                                           needle: str) -> None:
    result = memprobe(*RUN, "--model", f"default={spec}", "--record", str(tmp_path / "rec"))
    one_line_error(result, needle)
    assert not (tmp_path / "rec").exists()


@pytest.mark.parametrize(("table", "needles"), [
    ('[models.default]\nspec = "openai:m@http://127.0.0.1:9/v1"\nconcurrency = 0\n',
     ("concurrency = 0", "1 or more")),
    ('[models.default]\nspec = "openai:m@http://127.0.0.1:9/v1"\napi_key_env = "MEMPROBE_TEST_UNSET_KEY"\n',
     ("MEMPROBE_TEST_UNSET_KEY is not set", "export MEMPROBE_TEST_UNSET_KEY")),
    ("[prices]\ndefault = 'cheap'\n", ("[prices] default", "IN/OUT")),
])
def test_a_config_setting_that_cannot_work_is_refused_before_the_run(
        tmp_path: Path, memprobe: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, table: str,
        needles: tuple[str, ...]) -> None:
    monkeypatch.delenv("MEMPROBE_TEST_UNSET_KEY", raising=False)
    config = tmp_path / "c.toml"
    config.write_text(table, encoding="utf-8")
    monkeypatch.delenv("MEMPROBE_MODEL")  # the file's [models.default] is the one in force
    result = memprobe(*RUN, "--config", str(config), "--record", str(tmp_path / "rec"))
    one_line_error(result, str(config), *needles)
    assert not (tmp_path / "rec").exists()


@pytest.mark.parametrize(("price", "needle"), [("agent=abc", "--price agent 'abc'"),
                                                ("agent=0.15/0.60", "read only with --dry-run")])
def test_a_price_without_dry_run_is_refused(tmp_path: Path, memprobe: Callable[..., Result], price: str,
                                            needle: str) -> None:
    result = memprobe(*RUN, "--price", price, "--record", str(tmp_path / "rec"))
    one_line_error(result, needle)
    assert not (tmp_path / "rec").exists()


def test_doctor_names_the_valid_tiers_at_once(memprobe: Callable[..., Result]) -> None:
    result = memprobe("doctor", "--tier", "huge")
    one_line_error(result, "--tier 'huge'", "1.5b", "fast")
    assert result.stdout == "", "no check ran"


def test_verify_of_an_empty_events_file_says_it_holds_no_run(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    record = tmp_path / "rec"
    record.mkdir()
    shutil.copy(SAMPLE_RECORDING / "header.json", record / "header.json")
    (record / "events.jsonl").write_bytes(b"")
    result = memprobe("recording", "verify", str(record))
    one_line_error(result, "holds no run", str(record / "events.jsonl"))
    assert "intact" not in result.stdout


def test_merge_of_one_whole_run_is_refused(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    result = memprobe("merge", str(tmp_path / "out"), str(SAMPLE_RECORDING))
    one_line_error(result, str(SAMPLE_RECORDING), "a whole run, not a shard")
    assert not (tmp_path / "out").exists()


def test_fifos_are_refused_before_they_are_opened(tmp_path: Path) -> None:
    """A FIFO blocks ``open`` until a writer comes: each of these hung for ever."""
    fifo_config = tmp_path / "config.toml"
    os.mkfifo(fifo_config)
    fifo_schema = tmp_path / "schema.json"
    os.mkfifo(fifo_schema)
    record = tmp_path / "fifo-rec"
    record.mkdir()
    shutil.copy(SAMPLE_RECORDING / "events.jsonl", record / "events.jsonl")
    os.mkfifo(record / "header.json")
    cases = [
        ((*RUN, "--config", str(fifo_config), "--record", str(tmp_path / "rec")), (str(fifo_config), "not a regular")),
        (("recording", "verify", str(record)), (str(record / "header.json"), "not a regular file")),
        (("report", str(record)), (str(record / "header.json"), "not a regular file")),
        (("llm", "ask", "hi", "--json-schema", str(fifo_schema)), ("--json-schema", "not a regular file")),
    ]
    for args, needles in cases:
        one_line_error(child(*args, timeout=60), *needles)


def test_a_bogus_embedding_spec_is_refused_when_no_chosen_system_embeds(tmp_path: Path,
                                                                       memprobe: Callable[..., Result]) -> None:
    result = memprobe(*RUN, "--embeddings", "bogus", "--record", str(tmp_path / "rec"))  # nomem embeds nothing
    one_line_error(result, "--embeddings", "'bogus'")
    assert not (tmp_path / "rec").exists()


def test_proxy_refuses_a_protocol_recording_and_the_current_folder(tmp_path: Path, memprobe: Callable[..., Result],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its calls appended to a finished protocol-A run read as damage there; ``--record ''`` wrote the
    proxy's files among the user's own."""
    finished = tmp_path / "finished"
    shutil.copytree(SAMPLE_RECORDING, finished)
    before = (finished / "events.jsonl").read_bytes()
    one_line_error(memprobe("proxy", "--record", str(finished)), str(finished), "a recovery recording",
                   "resumes only its own")
    assert (finished / "events.jsonl").read_bytes() == before
    monkeypatch.chdir(tmp_path)
    one_line_error(memprobe("proxy", "--record", ""), "--record '.'", "names the current folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["finished"]


def _torn_copy(tmp_path: Path) -> Path:
    """A copy of a shipped protocol-A recording cut in the middle of a line (a crash mid-write)."""
    torn = tmp_path / "torn"
    shutil.copytree(SAMPLE_RECORDING.parent / "sample-quick-fixed-user_001", torn)
    events = torn / "events.jsonl"
    raw = events.read_bytes()
    events.write_bytes(raw[: len(raw) // 2])
    return torn


DAMAGE = "damaged recording: a torn last line"


def test_every_reader_of_a_damaged_recording_warns_of_it(tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    """``recording events``, ``rescore`` and a run's ``--dialogues`` said nothing, where report, info,
    compare and merge warn: now each prints the same one warning line, and still does its work."""
    torn = _torn_copy(tmp_path)
    listed = memprobe("recording", "events", str(torn), "--limit", "3")
    assert listed.returncode == 0 and listed.stderr.count(DAMAGE) == 1, listed.stderr
    assert f"warning: {torn}: {DAMAGE}" in listed.stderr and "user_001" in listed.stdout

    planned = memprobe("run", "--record", str(tmp_path / "fixed"), "--sessions", str(SESSIONS / "release-a"),
                       "--dialogues", str(torn), "--users", "user_001", "--dims", "geographic_knowledge",
                       "--systems", "nomem", "--dry-run")
    assert planned.returncode == 0 and f"warning: --dialogues {torn}: {DAMAGE}" in planned.stderr, planned.stderr

    rescored = memprobe("rescore", str(torn), "--judge-only", "--recovery-judge", "calibrated", "--as", "again")
    assert rescored.returncode == 0, rescored.stderr
    assert f"warning: {torn}: {DAMAGE}" in rescored.stderr and "appended" in rescored.stdout


@pytest.mark.parametrize("recording,needles", [
    (SAMPLE_RECORDING, ("--scoring", "protocol B's scoring mode", "--layer NAME")),
    (SAMPLE_RECORDING.parent / "sample-paradigms-quick", ("--scoring weird", "upstream, corrected or both")),
])
def test_a_scoring_mode_a_recording_cannot_take_is_refused(memprobe: Callable[..., Result], recording: Path,
                                                          needles: tuple[str, ...]) -> None:
    """Protocol A printed its tables with exit 0 and no note for ``--scoring weird``."""
    one_line_error(memprobe("report", str(recording), "--scoring", "weird"), *needles)


@pytest.mark.parametrize("where", ["missing-folder", "folder"])
def test_judge_check_json_that_cannot_be_written_is_refused_before_judging(
        where: str, tmp_path: Path, memprobe: Callable[..., Result]) -> None:
    target = tmp_path / "no-such-folder" / "x.json" if where == "missing-folder" else tmp_path
    result = memprobe("judge", "check", str(SAMPLE_RECORDING), "--limit", "3", "--json", str(target))
    one_line_error(result, f"--json {target}", "name a file in an existing folder")
