"""`memprobe compare` on what the product really produces: the shipped recordings, recordings the
real runner writes here, the imported protocol-A release (Table 3's per-category differences) and
the shipped protocol-B run. Provenance in the header of a runner-written recording is checked too.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.events.header import read_header
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.recovery.inputs import load_user
from memprobe_engine.recovery.read.compare import compare_recovery
from memprobe_engine.recovery.read.frames import load_frames
from memprobe_engine.recovery.read.tables import table3
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
from memprobe_engine.report.compare_inputs import Selection, parse_selection
from tests.functional import recovery_oracle
from tests.functional.recovery_oracle import RecoveryOracle, plan_for

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "recordings"
SAMPLE = ROOT / "tests" / "fixtures" / "release-sample-A"
SESSIONS = ROOT / "sessions"


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_the_shipped_release_runs_compare_case_by_case(tmp_path: Path) -> None:
    base, other = SHIPPED / "release-a-user_001-amem", SHIPPED / "release-a-user_001-mem0"
    out = cli("compare", str(base), str(other), "--csv", str(tmp_path / "csv"), "--parquet", str(tmp_path / "pq"),
              "--plots", str(tmp_path / "png"))
    assert {p.name for p in (tmp_path / "png").iterdir()} == {"compare_delta.png", "compare_scatter.png"}
    assert all(p.stat().st_size > 5_000 for p in (tmp_path / "png").iterdir())
    # The warning comes before any number: these imports predate provenance (and still open).
    assert out.index("warning:") < out.index("Cases of amem → mem0") and "provenance not recorded" in out
    assert "provenance: not recorded" in cli("recording", "info", str(base))
    cases = pd.read_csv(tmp_path / "csv" / "compare_cases.csv")
    assert len(cases) == 62 and set(cases["mode"]) == {"dump_all", "retrieve"}  # 31 dimensions × 2 modes
    assert cases["change"].value_counts().to_dict() == {"unchanged": 29, "regressed": 18, "improved": 15}
    # every case is listed with its change, marked in text (not only in colour)
    listed = [line for line in out.splitlines() if line.startswith(" user_001")]
    assert len(listed) == 62 and sum("▼ regressed" in line for line in listed) == 18
    assert sum("▲ improved" in line for line in listed) == 15 and sum("= same" in line for line in listed) == 29
    categories = pd.read_parquet(tmp_path / "pq" / "compare_categories.parquet")
    full_b = categories[(categories["mode"] == "dump_all") & (categories["category"] == "B")].iloc[0]
    # the release's own per-user B of user_001 (output/*/…_merged.json): amem 0.49, mem0 0.5614…
    assert full_b["base_B"] == pytest.approx(0.49) and full_b["other_B"] == pytest.approx(0.5614285714285714)
    assert (full_b["lost"], full_b["gained"]) == (4, 6)
    assert full_b["mcnemar_p"] == pytest.approx(2 * 386 / 1024)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from memprobe_engine.recovery.release import import_release_a

    return dict(import_release_a(SAMPLE, tmp_path_factory.mktemp("import") / "out", workers=2).recordings)


def test_compare_of_two_released_runs_reproduces_table3_differences(imported: dict[str, Path]) -> None:
    """Table 3 per category and mode: ΔB = amem − mem0 equals the difference of the two runs' Table 3
    cells to the bit, and the difference of the release's own per-user rows (its report files).
    The sample holds 2 of the paper's 50 users, so these are the 2-user cells, not the paper's."""
    amem, mem0 = imported["amem_pooled_50"], imported["mem0_pooled_50"]
    result = compare_recovery(Selection(amem), Selection(mem0))
    t3 = table3(load_frames([amem, mem0])).set_index(["system", "mode"])
    release: dict[tuple[str, str], dict[str, list[float]]] = {}
    for run, system in (("amem_pooled_50", "amem"), ("mem0_pooled_50", "mem0")):
        for folder, mode in ((run, "dump_all"), (f"{run}_retrieve", "retrieve")):
            report = next((SAMPLE / "output" / folder).glob("*_merged.json"))
            for row in json.loads(report.read_text())["per_user"]:
                for category, value in row["reconstruction"].items():
                    release.setdefault((system, mode), {}).setdefault(category, []).append(value)
    checked = 0
    for row in result.categories.itertuples():
        if row.category == "B":
            continue
        assert row.users == 2
        expected = t3.loc[("mem0", row.mode), f"{row.category}_mean"] - t3.loc[("amem", row.mode), f"{row.category}_mean"]
        assert row.delta_B == expected  # exactly, not approximately
        own = release[("mem0", row.mode)][row.category], release[("amem", row.mode)][row.category]
        assert row.delta_B == pytest.approx(sum(own[0]) / 2 - sum(own[1]) / 2, abs=1e-15)
        assert row.ci_low <= row.delta_B <= row.ci_high
        checked += 1
    assert checked == 10  # 5 categories × 2 modes


def _run(record: Path, dimensions: list[str], systems: list[str], max_turns: int = 3) -> Path:
    plan = RecoveryPlan(sessions_dir=SESSIONS, users=["sim_01"], dimensions=dimensions, systems=systems,
                        modes=["dump_all", "retrieve"], settings=RolloutSettings(max_turns=max_turns))
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    oracle = RecoveryOracle()
    return asyncio.run(run_recovery(plan, record, llm_config=config, backend_factory=lambda spec: oracle))


def test_runner_written_recordings_compare_and_name_what_differs(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    dims = [e.dimension for e in load_user(SESSIONS / "users" / "sim_01").bank.entries][:3]
    plan_for(dims)
    first = _run(tmp_path / "first", dims, ["nomem", "longctx_full"])
    header = read_header(first)
    assert header.provenance is not None
    assert {"pool", "banks", "tasks"} <= set(header.provenance.inputs)
    assert "recovery.prompts.JUDGE_SYSTEM" in header.provenance.prompts
    assert header.provenance.models["recovery_judge"]["backend"] == "openai"
    assert header.provenance.memprobe["version"]
    assert "provenance: memprobe" in cli("recording", "info", str(first))
    # Two systems of one recording: same header, no warning; nomem (remembers nothing) → longctx_full.
    out = cli("compare", f"{first}:nomem", f"{first}:longctx_full")
    assert "warning:" not in out
    within = compare_recovery(parse_selection(f"{first}:nomem"), parse_selection(f"{first}:longctx_full"))
    assert len(within.cases) == 6 and within.pairs == [("nomem", "longctx_full")]
    assert set(within.cases["change"]) <= {"improved", "unchanged"}
    # A re-run with one judge verdict changed and another turn cap: the warning names the turn cap.
    monkeypatch.setitem(recovery_oracle.PLAN, dims[0], (0.25, True, True, "agent_elicitation_failure"))
    second = _run(tmp_path / "second", dims, ["longctx_full"], max_turns=4)
    out = cli("compare", str(first), str(second))
    assert "warning:" in out and "max_turns: 3 vs 4" in out
    assert out.index("max_turns") < out.index("Cases of longctx_full → longctx_full")
    across = compare_recovery(parse_selection(str(first)), parse_selection(str(second)))
    regressed = across.cases[across.cases["change"] == "regressed"]
    assert regressed["dimension"].tolist() == [dims[0], dims[0]]  # both modes of the changed dimension
    assert (regressed["base_score"] == 1.0).all() and (regressed["other_score"] == 0.25).all()


def test_a_missing_selection_is_one_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["compare", str(SHIPPED / "release-a-user_001-amem"), str(tmp_path / "nope")])
    assert result.exit_code != 0 and "no such recording" in str(result.exception)
    result = CliRunner().invoke(app, ["compare", f"{SHIPPED / 'release-a-user_001-amem'}:mem0",
                                      str(SHIPPED / "release-a-user_001-mem0")])
    assert "holds no scores of system 'mem0'" in str(result.exception)


def test_the_shipped_protocol_b_run_compares_probe_by_probe(tmp_path: Path) -> None:
    rec = SHIPPED / "sample-paradigms-quick"
    out = cli("compare", f"{rec}:naive_rag", f"{rec}:amem", "--csv", str(tmp_path))
    probes = pd.read_csv(tmp_path / "compare_probes.csv")
    metrics = pd.read_csv(tmp_path / "compare_metrics.csv").set_index("metric")
    assert len(probes) == 8 and "Protocol B" in out
    # Δaccuracy by hand from the probe table: correct at score 1, other − base
    by_hand = (probes["other_score"] >= 1).mean() - (probes["base_score"] >= 1).mean()
    assert metrics.loc["accuracy", "delta"] == pytest.approx(by_hand)
    assert metrics.loc["accuracy", "ci_low"] <= metrics.loc["accuracy", "delta"] <= metrics.loc["accuracy", "ci_high"]
