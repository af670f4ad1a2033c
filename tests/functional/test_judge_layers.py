"""`memprobe rescore --as NAME` keeps a re-judgment as a named layer beside the run's own, and
`--layer NAME` reads it in every command (an unknown layer is refused by each, for both protocols).

On the shipped imported recording of the paper's amem run: the layered re-score is appended with
``layer`` on every event it wrote, the report still reads the release's own scores, and a fold of the
layer reads the new ones.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import ConfigError
from memprobe_engine.events.base import check_layer_name
from memprobe_engine.events.reader import open_recording
from memprobe_engine.recovery.read.compare_layers import compare_layers
from memprobe_engine.recovery.read.frames import load_frames

SHIPPED = Path(__file__).resolve().parents[2] / "recordings" / "release-a-user_001-amem"


def test_a_layered_rescore_leaves_the_run_own_scores_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.recovery.rescore import Case, rescore
    from tests.functional import recovery_oracle
    from tests.functional.recovery_oracle import RecoveryOracle

    record = tmp_path / "amem"
    shutil.copytree(SHIPPED, record, ignore=shutil.ignore_patterns("writer.lock"))
    dimension = "mathematics_skill"
    monkeypatch.setitem(recovery_oracle.PLAN, dimension, (1.0, True, True, "agent_elicitation_failure"))
    cases = [Case("user_001", "amem", dimension, "dump_all")]
    before = load_frames([record]).scores
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    results = asyncio.run(rescore(record, cases, context_tokens=1_000_000, layer="oracle-judge",
                                  chat_factory=lambda recorder: ChatClient(
                                      config, recorder, backend_factory=lambda spec: RecoveryOracle())))
    assert [r.score for r in results] == [1.0]
    with open_recording(record) as reader:
        appended = [e for e in reader.iter_events() if e.seq >= len(reader) - len(results[0].events) - 2]
        layered = [e for e in reader.iter_events() if e.layer is not None]
    assert {e.layer for e in layered} == {"oracle-judge"}
    assert {"judge_score", "slot_fill", "llm_call"} <= {e.kind for e in layered}
    assert appended and all(e.layer == "oracle-judge" for e in appended if e.kind in ("judge_score", "slot_fill"))
    after = load_frames([record]).scores
    assert after.score.tolist() == before.score.tolist(), "a named layer must not replace the run's own scores"
    layer = load_frames([record], layer="oracle-judge").scores
    assert layer[["dimension", "mode", "score"]].values.tolist() == [[dimension, "dump_all", 1.0]]
    # compare --layers: the release's 0.5 against the layer's 1.0 on the one case both scored
    compared = compare_layers([record])
    row = compared.agreement.iloc[0]
    assert (row["layer"], row["cases"], row["exact"], row["within_one_level"]) == ("oracle-judge", 1, 0.0, 0.0)
    assert compared.systems[["system", "run_mean", "layer_mean"]].values.tolist() == [["amem", 0.5, 1.0]]
    result = CliRunner().invoke(app, ["compare", "--layers", str(record)])
    assert result.exit_code == 0, result.output
    assert "oracle-judge" in result.output and "- (one system)" in result.output
    missing = CliRunner().invoke(app, ["compare", "--layers", str(SHIPPED)])
    assert missing.exit_code != 0 and "no judgment layer" in str(missing.exception)
    # --layer reads the layer everywhere: the report's tables and a compare of two runs under it.
    report = CliRunner().invoke(app, ["report", str(record), "--layer", "oracle-judge"])
    assert report.exit_code == 0, report.output  # its cost table too: the import's header names no model
    assert "Judgments: layer oracle-judge" in report.output and "Table 2" in report.output
    both = CliRunner().invoke(app, ["compare", str(record), str(record), "--layer", "oracle-judge"])
    assert both.exit_code == 0, both.output
    assert "0 improved, 0 regressed" in both.output


PARADIGMS = SHIPPED.parent / "sample-paradigms-quick"


@pytest.mark.parametrize("args", [
    ["report", str(SHIPPED), "--layer", "nope"],
    ["report", str(PARADIGMS), "--layer", "nope"],
    ["compare", str(SHIPPED), str(SHIPPED), "--layer", "nope"],
    ["compare", str(PARADIGMS), str(PARADIGMS), "--layer", "nope"],
    ["judge", "check", str(SHIPPED), "--layer", "nope"],
])
def test_an_unknown_layer_is_refused_by_every_command(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.output
    assert str(result.exception).startswith("--layer nope: ") and "(they hold: main" in str(result.exception) \
        or "(it holds: main" in str(result.exception)


def test_rescore_writes_a_layer_with_as_and_refuses_layer(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["rescore", str(SHIPPED), "--layer", "mine"])
    assert isinstance(result.exception, ConfigError)
    assert "pass --as mine" in str(result.exception)


@pytest.mark.parametrize("name", ["", "has space", "-lead", "x" * 65])
def test_a_bad_layer_name_is_one_clear_error(name: str) -> None:
    with pytest.raises(ConfigError, match="--layer"):
        check_layer_name(name, where="--layer")


def test_a_judge_only_layer_judges_the_recorded_fill_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec
    from memprobe_engine.recovery.rescore import Case, rescore
    from tests.functional import recovery_oracle
    from tests.functional.recovery_oracle import RecoveryOracle

    record = tmp_path / "amem"
    shutil.copytree(SHIPPED, record, ignore=shutil.ignore_patterns("writer.lock"))
    dims = ["mathematics_skill", "writing_skill"]
    for dimension in dims:
        monkeypatch.setitem(recovery_oracle.PLAN, dimension, (0.75, True, True, "agent_elicitation_failure"))
    oracle = RecoveryOracle()
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    with open_recording(record) as reader:
        fills = {e.dimension: e.label for e in reader.iter_events(kinds=["slot_fill"])
                 if e.dimension in dims and e.mode == "retrieve"}
    results = asyncio.run(rescore(record, [Case("user_001", "amem", d, "retrieve") for d in dims],
                                  context_tokens=1_000_000, layer="judge-b", judge_only=True,
                                  chat_factory=lambda recorder: ChatClient(
                                      config, recorder, backend_factory=lambda spec: oracle)))
    assert oracle.by_role["slot_filler"] == 0 and oracle.by_role["recovery_judge"] <= 2
    assert [r.label for r in results] == [fills[d] for d in dims]  # the recorded fills, judged again
    with open_recording(record) as reader:
        layered = [e for e in reader.iter_events() if e.layer == "judge-b"]
    assert "slot_fill" not in {e.kind for e in layered} and "attribution_label" not in {e.kind for e in layered}
    layer = load_frames([record], layer="judge-b").scores
    assert sorted(layer["dimension"]) == dims
