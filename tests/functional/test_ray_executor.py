"""``--executor ray`` on a local Ray instance (2 worker processes, one ray.init for the module) against a
loopback endpoint in its own process: the same scores, memory stores and report tables as the local
executor; a worker killed mid-unit and, separately, a killed driver cost no completed call and no event.

"No completed call sent again" is checked in the recording: a unit's call that was answered (by the
endpoint, then recorded) must never be sent again — a later call of the same request in that unit is
answered from what was recorded (``cache_hit``). At the endpoint, which counts how often each unit
asked each distinct request body, a killed process can add only the requests it had in flight (sent,
answer not yet in the recording: not completed), at most the unit's concurrency.

The endpoint's count is per unit because units share requests: the two systems' units ask some
requests alike (word for word), and a Ray task answers those from what the other unit had answered
only if that answer was at the relay when the task started. How often such a request is sent in a
run therefore depends on how the units overlapped in time, not on any kill: a count per request
body compared with a clean run's failed about one run in four (a resumed run whose two units
overlapped, after a clean run whose units ran one after the other).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.orchestration.ray_executor import RayOptions
from memprobe_engine.orchestration.relay import LOST_WORKER
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
from tests.loopback_endpoint import running_endpoint, unit_requests

ray = pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
USERS = ["sim_01"]
DIMS = ["reply_layout", "regional_geography_knowledge", "low_point_episode"]
SYSTEMS = ["nomem", "longctx_full"]
#: The endpoint's latency: long enough that a unit is still running when a test kills its worker.
LATENCY_S = 0.05


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """One local Ray instance for the module (2 CPUs: two units at once); yields its address."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with running_endpoint(LATENCY_S) as (url, _):
        yield url


def plan() -> RecoveryPlan:
    return RecoveryPlan(sessions_dir=ROOT / "sessions", users=USERS, dimensions=DIMS, systems=SYSTEMS,
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=2))


def config(url: str) -> LLMConfig:
    return LLMConfig(models={"default": parse_spec(f"openai:scripted@{url}")})


def per_unit(url: str) -> str:
    """``url`` named twice: a role with several endpoints sends each request's unit along
    (``X-MemProbe-Unit``), so the endpoint counts what each unit asked."""
    return f"{url},{url}"


def report_tables(record: Path, out: Path) -> dict[str, str]:
    result = CliRunner().invoke(app, ["report", str(record), "--csv", str(out)])
    assert result.exit_code == 0, result.output
    # The tables name the recording they came from; everything else must be equal.
    return {path.name: path.read_text().replace(str(record), "<recording>") for path in sorted(out.glob("*.csv"))}


def stores(record: Path) -> dict[tuple[str, str], list[tuple[str, Any]]]:
    """Every unit's memory operations in order (what the store went through)."""
    ops: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    with open_recording(record) as reader:
        for event in reader.iter_events(kinds=["memory_op"]):
            ops.setdefault((str(event.user_id), str(event.system)), []).append((event.op, event.patch))  # type: ignore[union-attr]
    return ops


def scores(record: Path) -> Counter[tuple[Any, ...]]:
    with open_recording(record) as reader:
        return Counter((e.user_id, e.system, e.dimension, e.mode, e.score)  # type: ignore[union-attr]
                       for e in reader.iter_events(kinds=["judge_score"]))


def repeated_completed_calls(record: Path) -> int:
    """Calls sent to the endpoint although the same unit had already recorded the same request answered."""
    answered: set[tuple[Any, ...]] = set()
    repeated = 0
    with open_recording(record) as reader:
        for call in reader.iter_events(kinds=["llm_call"]):
            key = (call.user_id, call.system, call.request_hash)  # type: ignore[union-attr]
            if not call.cache_hit and key in answered:  # type: ignore[union-attr]
                repeated += 1
            if call.error is None and call.response_text is not None:  # type: ignore[union-attr]
                answered.add(key)
    return repeated


def sent_again(before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]) -> int:
    """Requests a unit sent more than once in this run (the endpoint's answers per unit and body).
    A request two units ask alike is one request of each: see the module docstring."""
    return sum(count - 1 for count in (after - before).values() if count > 1)


@pytest.fixture(scope="module")
def clean_runs(cluster: str, endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The job run once by each executor (the Ray run's requests counted per unit: none sent twice)."""
    base = tmp_path_factory.mktemp("clean")
    asyncio.run(run_recovery(plan(), base / "local", llm_config=config(endpoint), concurrency=4))
    before = unit_requests(endpoint)
    asyncio.run(run_recovery(plan(), base / "ray", llm_config=config(per_unit(endpoint)), concurrency=4,
                             ray=RayOptions()))
    after = unit_requests(endpoint)
    return {"local": base / "local", "ray": base / "ray", "sent_again": sent_again(before, after),
            "tables": report_tables(base / "ray", base / "ray-csv")}


def test_ray_records_what_the_local_executor_records(clean_runs: dict[str, Any], tmp_path: Path) -> None:
    local, distributed = clean_runs["local"], clean_runs["ray"]
    assert repeated_completed_calls(distributed) == 0 and repeated_completed_calls(local) == 0
    assert clean_runs["sent_again"] == 0
    assert scores(distributed) == scores(local) and sum(scores(local).values()) == len(DIMS) * 2 * len(SYSTEMS)
    assert {s for (_, system, *_), n in scores(local).items() for s in [system]} == set(SYSTEMS)
    assert stores(distributed) == stores(local) and stores(local)[("sim_01", "longctx_full")]
    assert clean_runs["tables"] == report_tables(local, tmp_path / "local-csv")
    with open_recording(distributed) as reader:
        assert check_recording(reader).clean
        calls = list(reader.iter_events(kinds=["llm_call"]))
        units = {e.span_id for e in reader.iter_events(kinds=["span_begin"]) if e.span_kind == "unit"}  # type: ignore[union-attr]
    assert calls and len(units) == len(USERS) * len(SYSTEMS)
    # A slot-fill's call_seq points at the slot-filler's llm_call in the driver's numbering.
    assert pointed_roles(distributed) == pointed_roles(local) and "slot_filler" in pointed_roles(local)


def pointed_roles(record: Path) -> Counter[str]:
    """The role of the llm_call each slot_fill / judge_score / attribution_stage points at."""
    with open_recording(record) as reader:
        roles = {e.seq: e.role for e in reader.iter_events(kinds=["llm_call"])}  # type: ignore[union-attr]
        return Counter(roles[e.call_seq] for e in reader.iter_events(  # type: ignore[union-attr]
            kinds=["slot_fill", "judge_score", "attribution_stage"]) if e.call_seq is not None)  # type: ignore[union-attr]


def _unit_worker_pids() -> list[int]:
    """Ray worker processes running a unit now (Ray titles a busy worker after its task)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"ray::run_unit_task"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _calls_in(record: Path) -> int:
    events = record / "events.jsonl"
    return events.read_bytes().count(b'"kind":"llm_call"') if events.exists() else 0


async def test_a_worker_killed_mid_unit_repeats_no_completed_call(clean_runs: dict[str, Any], endpoint: str,
                                                                  tmp_path: Path) -> None:
    record = tmp_path / "rec"
    killed: list[int] = []

    def kill_one_worker() -> None:
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            pids = _unit_worker_pids()
            if pids and _calls_in(record) >= 6:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            time.sleep(0.01)

    before = unit_requests(endpoint)
    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    await run_recovery(plan(), record, llm_config=config(per_unit(endpoint)), concurrency=4, ray=RayOptions())
    killer.join()
    after = unit_requests(endpoint)
    assert killed, "no unit worker was found to kill"
    assert repeated_completed_calls(record) == 0
    assert sent_again(before, after) <= 4  # at most what the worker had in flight
    with open_recording(record) as reader:
        assert check_recording(reader).clean
        lost = [e for e in reader.iter_events(kinds=["span_end"]) if e.status == "interrupted"]  # type: ignore[union-attr]
    assert lost and all(e.error == LOST_WORKER for e in lost)  # type: ignore[union-attr]
    assert scores(record) == scores(clean_runs["ray"])
    assert report_tables(record, tmp_path / "csv") == clean_runs["tables"]


def test_a_killed_driver_resumes_with_the_same_command(clean_runs: dict[str, Any], cluster: str, endpoint: str,
                                                        tmp_path: Path) -> None:
    record = tmp_path / "rec"
    command = [sys.executable, "-m", "memprobe_tui.main", "run", "--record", str(record), "--users", ",".join(USERS),
               "--dims", ",".join(DIMS), "--systems", ",".join(SYSTEMS), "--max-turns", "2", "--no-cache",
               "--model", f"default=openai:scripted@{per_unit(endpoint)}", "--executor", "ray", "--ray-address",
               cluster]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = unit_requests(endpoint)
    driver = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and _calls_in(record) < 8 and driver.poll() is None:
        time.sleep(0.01)
    driver.kill()
    driver.wait()
    written = _calls_in(record)
    assert written >= 8, "the driver was not killed mid-run"
    time.sleep(1.0)  # Ray ends the dead driver's tasks
    resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    after = unit_requests(endpoint)
    assert repeated_completed_calls(record) == 0
    # In flight in the two killed units: a unit has at most 4 calls out at once (--concurrency 4
    # dimensions scored side by side, each dimension's calls one after another; the rollout's
    # simulator and preference judge side by side before that). A dead driver's worker may still
    # start its next call in the moment before Ray ends it (seen up to 12 ms after the kill, never
    # later: nothing was sent in the 1 s before the resume); 1 to 3 were sent again in 15 runs.
    assert sent_again(before, after) <= 2 * 4
    with open_recording(record) as reader:
        assert check_recording(reader).clean
        calls = list(reader.iter_events(kinds=["llm_call"]))
    assert len(calls) >= written  # nothing the first driver wrote was lost
    assert scores(record) == scores(clean_runs["ray"])
    assert report_tables(record, tmp_path / "csv") == clean_runs["tables"]


@pytest.mark.parametrize("flags,message", [
    (["--executor", "threads"], "--executor 'threads'"),
    (["--ray-address", "auto"], "--ray-address is read only with --executor ray"),
    (["--executor", "ray", "--ray-workers", "0"], "--ray-workers 0"),
])
def test_bad_executor_flags_fail_before_a_recording_exists(tmp_path: Path, flags: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["run", "--record", str(tmp_path / "rec"), "--users", "sim_01",
                                      "--dims", DIMS[0], *flags])
    assert message in str(result.exception) and not (tmp_path / "rec").exists()


async def test_a_failing_unit_ends_the_run_with_its_one_line(cluster: str, tmp_path: Path) -> None:
    import socket

    from memprobe_engine.errors import LLMError

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    with pytest.raises(LLMError) as caught:
        await run_recovery(plan(), tmp_path / "rec", llm_config=config(dead), concurrency=4, ray=RayOptions())
    assert f"cannot reach {dead}" in str(caught.value) and "\n" not in str(caught.value)
    with open_recording(tmp_path / "rec") as reader:
        assert check_recording(reader).clean
        assert [e.status for e in reader.iter_events(kinds=["run_end"])] == ["failed"]  # type: ignore[union-attr]


def test_sigterm_ends_a_ray_run_interrupted(cluster: str, endpoint: str, tmp_path: Path) -> None:
    record = tmp_path / "rec"
    command = [sys.executable, "-m", "memprobe_tui.main", "run", "--record", str(record), "--users", ",".join(USERS),
               "--dims", ",".join(DIMS), "--systems", ",".join(SYSTEMS), "--max-turns", "2", "--no-cache",
               "--model", f"default=openai:scripted@{endpoint}", "--executor", "ray", "--ray-address", cluster]
    driver = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and _calls_in(record) < 5 and driver.poll() is None:
        time.sleep(0.01)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 143, err[-2000:]
    with open_recording(record) as reader:
        assert check_recording(reader).clean  # every span closed
        assert [e.status for e in reader.iter_events(kinds=["run_end"])] == ["interrupted"]  # type: ignore[union-attr]
