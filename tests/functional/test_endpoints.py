"""Two loopback endpoints for one role: a unit's calls stay on one endpoint; one endpoint going down
mid-run is taken out of rotation with one line and costs no lost or repeated completed call."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path

import orjson

import pytest

from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.backends.endpoints import MultiEndpointBackend
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
from tests.functional.test_ray_executor import repeated_completed_calls, report_tables, scores
from tests.loopback_endpoint import exit_after, raw_stats, running_endpoint

ROOT = Path(__file__).resolve().parents[2]


def plan() -> RecoveryPlan:
    return RecoveryPlan(sessions_dir=ROOT / "sessions", users=["sim_01", "sim_02", "sim_03"],
                        dimensions=["reply_layout", "regional_geography_knowledge"], systems=["nomem", "longctx_full"],
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=2))


def config(*urls: str) -> LLMConfig:
    return LLMConfig(models={"default": parse_spec("openai:scripted@" + ",".join(urls))})


def raw_stats_or_none(url: str) -> dict[str, object] | None:
    try:
        return raw_stats(url)
    except OSError:
        return None


def first_choice(unit: str, *urls: str) -> str:
    backend = MultiEndpointBackend.from_spec(config(*urls).models["default"], {})
    return backend.order_for(unit)[0].base_url


def test_units_keep_to_one_endpoint_and_a_failing_one_leaves_the_rotation(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with running_endpoint(0.005) as (a, _), running_endpoint(0.005) as (b, _):
        asyncio.run(run_recovery(plan(), tmp_path / "clean", llm_config=config(a, b), concurrency=6))
        at_a, at_b = set(raw_stats(a)["units"]), set(raw_stats(b)["units"])
    assert at_a and at_b, "both endpoints should get units"
    assert not at_a & at_b, f"units split between endpoints: {at_a & at_b}"
    assert len(at_a | at_b) == 6
    assert at_a == {unit for unit in at_a | at_b if first_choice(unit, a, b) == a}
    units = at_a | at_b
    clean_tables = report_tables(tmp_path / "clean", tmp_path / "clean-csv")

    # The endpoint that is the first choice of more units answers 10 more requests, then drops the next
    # connection and exits.
    logs = [tmp_path / "one.json", tmp_path / "two.json"]
    with running_endpoint(0.005, "--log", str(logs[0])) as (one, _), \
            running_endpoint(0.005, "--log", str(logs[1])) as (two, _):
        firsts = [first_choice(unit, one, two) for unit in units]
        a, b = (two, one) if firsts.count(one) >= firsts.count(two) else (one, two)
        exit_after(b, 10)
        with caplog.at_level(logging.WARNING, logger="memprobe_engine.llm"):
            asyncio.run(run_recovery(plan(), tmp_path / "rec", llm_config=config(one, two), concurrency=6))
        moved = set(raw_stats(a)["units"])
        died = raw_stats_or_none(b) is None
    lines = [r.getMessage() for r in caplog.records if "taken out of rotation" in r.getMessage()]
    assert len(lines) == 1 and b in lines[0] and "1 of 2 endpoints left" in lines[0]
    assert died, "the failing endpoint should have exited"
    on_a = {unit for unit in units if first_choice(unit, one, two) == a}
    assert on_a <= moved and moved - on_a  # the first endpoint's units stayed; some of the second's moved over
    assert repeated_completed_calls(tmp_path / "rec") == 0
    assert scores(tmp_path / "rec") == scores(tmp_path / "clean")
    assert report_tables(tmp_path / "rec", tmp_path / "csv") == clean_tables

    # Each call sent records the endpoint that answered it (its index in the spec's list): per unit,
    # what each endpoint's own log says it delivered.
    recorded: list[Counter[str]] = [Counter(), Counter()]
    with open_recording(tmp_path / "rec") as reader:
        for call in reader.iter_events(kinds=["llm_call"]):
            if not call.cache_hit and call.error is None:  # type: ignore[union-attr]
                assert call.endpoint in (0, 1), call  # type: ignore[union-attr]
                recorded[call.endpoint][f"{call.unit}/{call.system}"] += 1  # type: ignore[union-attr,index]
    delivered = [Counter(orjson.loads(log.read_bytes())["units"]) for log in logs]
    assert recorded == delivered and all(recorded)
