"""The 95 % episode-bootstrap intervals of Tables 2–7 against hand-computed values and direct loops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from memprobe_engine.paradigms import metrics as M
from memprobe_engine.paradigms.intervals import metric_intervals
from memprobe_engine.paradigms.read.frames import load_paradigm_frames
from tests.paradigm_recordings import Ep, P, write_paradigm_recording
from tests.unit.test_paradigm_metrics import fc_episodes, rag_episodes

TABLE_METRICS = ("plasticity", "stability", "sp_balance", "preserve_err", "update_err", "historical",
                 "source_fidelity", "source_probe", "conflict_status", "temporal", "split", "non_split", "split_cv",
                 "split_cd", "delta_split")


@pytest.fixture()
def probes(tmp_path: Path) -> pd.DataFrame:
    path = write_paradigm_recording(tmp_path / "rec", {"full_context": fc_episodes(), "naive_rag": rag_episodes()})
    return load_paradigm_frames([path]).probes


def _by_key(intervals: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float, float]]:
    return {(r.system, r.metric): (r.value, r.ci_low, r.ci_high) for r in intervals.itertuples(index=False)}


def test_values_are_the_tables_and_overall_is_table_1s_interval(probes: pd.DataFrame) -> None:
    weights = M.draws(4)
    got = _by_key(metric_intervals(probes, weights))
    metrics = M.system_metrics(probes).set_index("system")
    for system in ("full_context", "naive_rag"):
        for name in TABLE_METRICS:
            expected = metrics.loc[system, name]
            if expected is None or pd.isna(expected):
                assert (system, name) not in got
            else:
                assert got[(system, name)][0] == pytest.approx(expected), (system, name)
    gap = M.retrieval_gap(M.system_metrics(probes)).set_index("system").loc["naive_rag"]
    assert got[("naive_rag", "delta_fc")][0] == pytest.approx(gap.delta_fc)
    assert got[("naive_rag", "rag_norm")][0] == pytest.approx(gap.rag_norm)
    table1 = M.bootstrap_ci(M.episode_counts(probes), weights)
    assert got[("full_context", "overall")][1:] == pytest.approx(table1["full_context"])
    assert got[("full_context", "paradigm:interference")][0] == pytest.approx(6 / 8)


def test_plasticity_and_pooled_source_fidelity_match_a_direct_loop(probes: pd.DataFrame) -> None:
    weights = M.draws(4)
    got = _by_key(metric_intervals(probes, weights))
    fc = probes[(probes.system == "full_context") & ~probes.excluded.astype(bool) & probes.score.notna()]
    episodes = sorted(probes.episode_id.unique())

    def direct(rows: pd.DataFrame, good: pd.Series) -> tuple[float, float]:
        correct = np.array([good[rows.episode_id == e].sum() for e in episodes], dtype=float)
        total = np.array([(rows.episode_id == e).sum() for e in episodes], dtype=float)
        values = [(w * correct).sum() / (w * total).sum() for w in weights if (w * total).sum() > 0]
        return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))

    update = fc[fc.expected_behavior == "should_update"]
    assert got[("full_context", "plasticity")][1:] == pytest.approx(direct(update, update.score >= 1.0))
    # Source fidelity pools the source probes (score) with conflict probes' status sub-score.
    pooled = fc[fc.probe_type.isin(["source", "conflict_value"])]
    good = np.where(pooled.probe_type == "conflict_value", pooled.sub_status >= 1.0, pooled.score >= 1.0)
    assert got[("full_context", "source_fidelity")][1:] == pytest.approx(direct(pooled, pd.Series(good,
                                                                                                index=pooled.index)))
    low, high = got[("full_context", "update_err")][1:]
    p_low, p_high = got[("full_context", "plasticity")][1:]
    assert (low, high) == pytest.approx((1 - p_high, 1 - p_low))


def test_hand_computed_interval_on_explicit_draws(tmp_path: Path) -> None:
    episodes = [Ep("A", "interference", "authoritative_update", "should_update", False, [P("current_value", 1.0)]),
                Ep("B", "interference", "authoritative_update", "should_update", False, [P("current_value", 0.0)])]
    path = write_paradigm_recording(tmp_path / "rec", {"full_context": episodes})
    frame = load_paradigm_frames([path]).probes
    # Draws: A twice (1.0), B twice (0.0), each once (0.5); percentiles of {0, 0.5, 1} by linear interpolation.
    weights = np.array([[2, 0], [0, 2], [1, 1]])
    got = _by_key(metric_intervals(frame, weights))
    assert got[("full_context", "plasticity")] == pytest.approx((0.5, 0.025, 0.975))
    assert ("full_context", "stability") not in got    # no should_preserve episode: no value, no interval


def test_report_prints_intervals_under_values_and_exports_them(tmp_path: Path) -> None:
    from memprobe_engine.cli import app

    path = write_paradigm_recording(tmp_path / "rec", {"full_context": fc_episodes(), "naive_rag": rag_episodes()})
    result = CliRunner().invoke(app, ["report", str(path), "--csv", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    table2 = result.output.split("Table 2")[1].split("Table 3")[0]
    assert "[95% CI]" in table2.splitlines()[0]
    lines = table2.splitlines()
    value_line = next(i for i, line in enumerate(lines) if line.startswith("full_context"))
    assert "83.3" in lines[value_line] and lines[value_line + 1].strip().startswith("[")   # 5/6 plasticity
    written = pd.read_csv(tmp_path / "out" / "intervals.csv")
    assert {"system", "metric", "value", "ci_low", "ci_high"} <= set(written.columns)
    assert (written.ci_low <= written.value + 1e-12).all() and (written.value <= written.ci_high + 1e-12).all()
    bare = CliRunner().invoke(app, ["report", str(path), "--tables", "1,2"])
    assert bare.exit_code == 0 and "[95% CI]" not in bare.output.split("Table 2")[1]
