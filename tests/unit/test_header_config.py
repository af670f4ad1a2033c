"""The header's config read as typed models (issue 34): every shipped recording validates into its
protocol's model, nothing is lost, older configs upgrade with their defaults in one module, and the
config on disk (and so its fingerprint) is never touched."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.header import new_header, read_header, write_header
from memprobe_engine.events.header_config import AskConfig, HeaderConfig, RealizeConfig
from memprobe_engine.orchestration.resume import fingerprint
from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.protocols import spec_for, typed_config
from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.config import framing_of
from memprobe_engine.recovery.judge_kind import judge_of
from memprobe_engine.recovery.config import policy_of

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.parent for p in [*(ROOT / "recordings").glob("**/header.json"),
                                    *(ROOT / "tests" / "fixtures").glob("**/header.json")])


@pytest.mark.parametrize("recording", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_header_reads_as_its_protocols_model_and_keeps_every_key(recording: Path) -> None:
    raw = orjson.loads((recording / "header.json").read_bytes())["config"]
    header = read_header(recording)
    config = typed_config(header)
    assert isinstance(config, {"recovery": RecoveryConfig, "paradigms": ParadigmConfig}[header.suite])
    assert header.config == raw  # the header keeps the config as written
    assert set(raw) <= set(config.model_dump())  # declared or extra: no key is dropped on read
    assert typed_config(header) is config  # read once per header


def test_unknown_keys_are_kept_and_the_config_on_disk_is_unchanged(tmp_path: Path) -> None:
    config: dict[str, object] = {"suite": "recovery", "systems": ["nomem"], "purpose": "a note",
                                 "models": {"models": {"agent": {"spec": "local:1.5b", "backend": "local",
                                                                 "model": "1.5b", "slots": 2}}}}
    config["fingerprint"] = fingerprint(config)
    header = new_header("r", "recovery", config)
    write_header(tmp_path, header)
    typed = RecoveryConfig.of(read_header(tmp_path))
    assert typed.extra() == {"purpose": "a note"}
    assert typed.models.models["agent"].model_extra == {"slots": 2}
    assert typed.models.specs() == {"agent": "local:1.5b"}
    on_disk = orjson.loads((tmp_path / "header.json").read_bytes())["config"]
    assert on_disk == config and fingerprint({k: v for k, v in on_disk.items() if k != "fingerprint"}) == \
        config["fingerprint"]


def test_older_configs_upgrade_with_the_defaults_the_runner_leaves_out() -> None:
    old = RecoveryConfig.of({"suite": "recovery"})
    assert (old.policy, old.framing, old.recovery_judge, old.modes, old.max_turns) == \
        ("audit", "release", "model", ["dump_all", "retrieve"], 25)
    assert RecoveryConfig.of({"source": "release-a"}).policy == "paper"  # an import: the release's own
    assert policy_of({}) == "audit" and framing_of({"framing": "embedded"}) == "embedded"
    assert judge_of({"recovery_judge": ""}) == "model"
    flat = HeaderConfig.of({"models": {"agent": {"spec": "local:1.5b"}, "judge": "local:0.5b"}})
    assert flat.models.specs() == {"agent": "local:1.5b"}  # nested; a bare string names no backend
    assert HeaderConfig.of({"shard": 1, "users": "sim_01"}).shard == "1"
    assert HeaderConfig.of({"users": "sim_01"}).users is None
    paradigm = ParadigmConfig.of({"suite": "paradigms", "input_protocols": None})
    assert (paradigm.k, paradigm.session_k, paradigm.ingest, paradigm.input_protocols) == (10, 5, "turns", {})


def test_recordings_no_protocol_writes_get_their_tools_model() -> None:
    assert isinstance(typed_config(new_header("a", "ask", {"models": {"models": {}}})), AskConfig)
    realize = typed_config(new_header("g", "generate", {"suite": "generate-episodes", "settings": {"seed": 1}}))
    assert isinstance(realize, RealizeConfig) and realize.settings == {"seed": 1}
    assert spec_for("recovery").config_model is RecoveryConfig and spec_for("paradigms").config_model is \
        ParadigmConfig


def test_a_config_of_the_wrong_shape_is_a_recording_error_naming_the_key() -> None:
    with pytest.raises(RecordingError, match="'max_turns'"):
        RecoveryConfig.of(new_header("r", "recovery", {"suite": "recovery", "max_turns": "many"}))


def test_only_the_upgrade_reads_a_header_config_by_raw_key() -> None:
    reads = [f"{path.relative_to(ROOT)}:{number}"
             for package in ("memprobe_engine", "memprobe_tui") for path in sorted((ROOT / package).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"config\.get\([\"']", line) and path.name != "header_upgrade.py"]
    assert reads == []
