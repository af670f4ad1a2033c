"""The one run skeleton (orchestration/) under both protocols and a third, toy one.

- a toy protocol written in this file (about forty lines) runs, resumes repeating no request, and
  shards, with nothing added to the engine: the measure of what a third protocol costs;
- the shipped sample recordings of both protocols resume with nothing to do (their fingerprints
  and unit spans read as before), and protocol B's, made before episode contents were
  fingerprinted, is still refused when one of its episodes changed since;
- SIGTERM ends a protocol-B run ``interrupted`` and the rerun repeats no request (protocol A's
  twin is in test_run_lifecycle.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import RecordingError
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.run import Metric, SpanBegin
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatMessage
from memprobe_engine.orchestration.protocol import RunNeeds, RunServices
from memprobe_engine.orchestration.resume import UnitKey
from memprobe_engine.orchestration.run import run_protocol
from tests.doubles import ScriptedBackend, read_events

ROOT = Path(__file__).resolve().parents[2]


class EchoProtocol:
    """A toy third protocol: each (word, system) unit asks the model to echo the word and records
    the reply's length as a metric. Everything else comes from orchestration/."""

    suite = "echo"
    resume_kinds: tuple[str, ...] = ()
    prompt_modules: tuple[str, ...] = ()

    def input_hashes(self, config: dict[str, Any]) -> dict[str, str]:
        return {}

    def __init__(self, words: list[str], systems: list[str], shard: tuple[int, int] = (0, 1)) -> None:
        self.words, self.systems, self.shard = words, systems, shard

    def config(self, llm_config: LLMConfig) -> dict[str, Any]:
        return {"suite": "echo", "words": self.words, "systems": self.systems,
                "shard": f"{self.shard[0]}/{self.shard[1]}", "models": llm_config.resolved()}

    def resume_config(self, record: Path, previous: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        return previous

    def needs(self) -> RunNeeds:
        return RunNeeds(models=True, embedding_spec=None)

    def units(self) -> list[tuple[str, str]]:
        return [(word, system) for word in self.words for system in self.systems]

    def unit_key(self, unit: tuple[str, str]) -> UnitKey:
        return unit

    def unit_label(self, unit: tuple[str, str]) -> str:
        return f"{unit[0]} × {unit[1]}"

    def unit_of_span(self, span: SpanBegin) -> UnitKey | None:
        return (span.user_id, span.system) if span.span_kind == "echo" and span.user_id and span.system else None

    def resume_event(self, event: AnyEvent) -> None:
        return None

    async def run_unit(self, services: RunServices, unit: tuple[str, str]) -> None:
        word, system = unit
        with services.recorder.span(f"{word} × {system}", "echo", user_id=word, system=system):
            reply = await services.chat.chat("default", [ChatMessage(role="user", content=f"{system}: {word}")])
            services.recorder.emit(Metric(name="echo_length", value=float(len(reply.text)), scope={"word": word}))


def _echo_config() -> LLMConfig:
    return LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})


def _echo(request: Any) -> str:
    system, _, word = request.messages[-1].content.partition(": ")
    return word.upper() if system == "upper" else word.lower()


def _run_echo(protocol: EchoProtocol, record: Path, backend: ScriptedBackend) -> Path:
    return asyncio.run(run_protocol(protocol, record, llm_config=_echo_config(), backend_factory=lambda spec: backend))


def test_a_toy_third_protocol_runs_resumes_and_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    words, systems = ["alpha", "Beta", "gamma"], ["upper", "lower"]
    first = ScriptedBackend(_echo)
    record = _run_echo(EchoProtocol(words, systems), tmp_path / "rec", first)
    assert len(first.requests) == 6
    assert sorted(m["value"] for m in read_events(record, "metric")) == [4.0] * 2 + [5.0] * 4
    again = ScriptedBackend(_echo)
    _run_echo(EchoProtocol(words, systems), record, again)
    assert again.requests == [], "a resume repeated a finished unit"
    assert [e["resumed"] for e in read_events(record, "run_start")] == [False, True]

    shards = [_run_echo(EchoProtocol(words, systems, (i, 2)), tmp_path / "sharded", ScriptedBackend(_echo))
              for i in range(2)]
    assert [s.name for s in shards] == ["sharded.shard-0-of-2", "sharded.shard-1-of-2"]
    units = [(e["user_id"], e["system"]) for s in shards for e in read_events(s, "span_begin")
             if e["span_kind"] == "echo"]
    assert sorted(units) == sorted((w, s) for w in words for s in systems)
    with pytest.raises(RecordingError, match="different settings"):
        _run_echo(EchoProtocol(words[:2], systems), record, ScriptedBackend(_echo))


SHIPPED = {
    "sample-quick-sim_01": [
        "--config", "sessions/quick.toml", "--users", "sim_01", "--dims",
        "reply_layout,regional_geography_knowledge,low_point_episode", "--systems", "nomem,longctx_full",
        "--max-turns", "3", "--agent-max-tokens", "150", "--simulator-max-tokens", "120", "--judge-max-tokens", "150",
        "--preference-judge-max-tokens", "400"],
    "sample-quick-fixed-user_001": [  # make demo's fixed-dialogue job
        "--config", "sessions/quick.toml", "--sessions", "sessions/release-a", "--dialogues",
        "sessions/release-a/dialogues", "--users", "user_001", "--dims",
        "geographic_knowledge,directness_preference,writing_skill", "--systems", "nomem,longctx_full",
        "--framing", "embedded", "--judge-max-tokens", "150",
        "--recovery-judge", "model"],  # made when the model judge was the embedded framing's default
    "sample-paradigms-mem0": [  # a store with updates, for the replay (issue 36)
        "--suite", "paradigms", "--sessions", "sessions/paradigms/suite56-embedded", "--episodes",
        "PILOT-12A,PILOT-10A", "--systems", "mem0", "--config", "sessions/quick-paradigms.toml", "--model",
        "memory_writer=local:1.5b", "--ingest", "session", "--reader-max-tokens", "200", "--k", "5",
        "--session-k", "3"],
    "sample-paradigms-quick": [
        "--suite", "paradigms", "--sessions", "sessions/paradigms/suite56-embedded", "--limit", "2",
        "--systems", "amem,full_context,naive_rag", "--config", "sessions/quick-paradigms.toml", "--concurrency", "4",
        "--ingest", "session", "--reader-max-tokens", "200", "--k", "5", "--session-k", "3"],
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_recordings_resume_with_nothing_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          name: str) -> None:
    monkeypatch.chdir(ROOT)  # the recorded sessions paths are relative to the repository
    record = tmp_path / name
    shutil.copytree(ROOT / "recordings" / name, record)
    before = (record / "events.jsonl").read_bytes()
    done = CliRunner().invoke(app, ["run", "--record", str(record), *SHIPPED[name]])
    assert done.exit_code == 0, done.output
    assert (record / "events.jsonl").read_bytes().startswith(before), "a resume rewrote recorded events"
    added = [json.loads(line) for line in (record / "events.jsonl").read_bytes()[len(before):].splitlines()]
    assert [e["kind"] for e in added] == ["run_start", "span_begin", "span_end", "run_end"]
    assert added[0]["resumed"] is True and added[-1]["status"] == "completed"


def test_an_old_paradigm_recording_over_an_edited_episode_is_still_refused(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "sessions" / "paradigms" / "suite56-embedded", suite)
    episodes = suite / "episodes.jsonl"
    rows = [json.loads(line) for line in episodes.read_text().splitlines() if line.strip()]
    edited = next(row for row in rows if row["episode_id"] == "PILOT-01A")
    edited["probes"][0]["question"] += " (edited)"
    episodes.write_text("".join(json.dumps(row) + "\n" for row in rows))
    record = tmp_path / "rec"
    shutil.copytree(ROOT / "recordings" / "sample-paradigms-quick", record)
    args = [a if a != "sessions/paradigms/suite56-embedded" else str(suite) for a in SHIPPED["sample-paradigms-quick"]]
    done = CliRunner().invoke(app, ["run", "--record", str(record), *args])
    assert isinstance(done.exception, RecordingError), done.output  # the entry point makes it one line, exit 2
    assert "PILOT-01A" in str(done.exception) and "changed since this recording was made" in str(done.exception)


SIGTERM_SCRIPT = '''
import asyncio, sys
from pathlib import Path
from tests.doubles import BagOfWordsEmbedder
from tests.functional.test_paradigm_run import SAMPLE, ParadigmOracle, _config
from memprobe_engine.paradigms.runner import ParadigmPlan, run_paradigms
record, delay = Path(sys.argv[1]), float(sys.argv[2])
oracle = ParadigmOracle(delay_s=delay)
plan = ParadigmPlan(sessions_dir=SAMPLE, systems=["amem", "full_context"], episodes=["PILOT-01A", "PILOT-01B"])
try:
    asyncio.run(run_paradigms(plan, record, llm_config=_config(), backend_factory=lambda spec: oracle,
                              embedder=BagOfWordsEmbedder(hashed=True), concurrency=2, signals=True))
except KeyboardInterrupt as err:
    sys.exit(128 + getattr(err, "signum", 2))
'''


def test_sigterm_ends_a_paradigm_run_interrupted_and_the_rerun_repeats_no_request(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(SIGTERM_SCRIPT)
    record = tmp_path / "rec"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMPROBE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, str(script), str(record), "0.05"], env=env, cwd=ROOT)
    deadline = time.time() + 90
    while time.time() < deadline:
        events = record / "events.jsonl"
        if events.exists() and events.read_bytes().count(b'"kind":"llm_call"') >= 6:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert [(e["status"], e.get("reason")) for e in read_events(record, "run_end")] == [("interrupted", "SIGTERM")]

    subprocess.run([sys.executable, str(script), str(record), "0"], env=env, cwd=ROOT, check=True)
    assert [e["status"] for e in read_events(record, "run_end")] == ["interrupted", "completed"]
    with open_recording(record) as reader:
        assert check_recording(reader).clean
        live = Counter(e.request_hash for e in reader.iter_events(kinds=["llm_call"])  # type: ignore[union-attr]
                       if not e.cache_hit)  # type: ignore[union-attr]
    assert live and max(live.values()) == 1, "the resumed run repeated a request"


def test_an_embedded_recording_judged_by_the_model_names_the_flag_that_resumes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    name = "sample-quick-fixed-user_001"
    record = tmp_path / name
    shutil.copytree(ROOT / "recordings" / name, record)
    flags = [f for f in SHIPPED[name] if f not in ("--recovery-judge", "model")]
    done = CliRunner().invoke(app, ["run", "--record", str(record), *flags])
    assert done.exit_code != 0 and "--recovery-judge model" in str(done.exception or done.output)
