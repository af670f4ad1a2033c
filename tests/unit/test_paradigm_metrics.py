"""Protocol-B metrics and report against hand-computed values, on a recording the engine's writer made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from memprobe_engine.errors import ConfigError
from memprobe_engine.paradigms import metrics as M
from memprobe_engine.paradigms.read.frames import load_paradigm_frames
from memprobe_engine.paradigms.read.tables import build_paradigm_tables
from tests.paradigm_recordings import Ep, P, write_paradigm_recording

ST = {"status": 1.0, "value": 1.0}   # conflict sub-scores: status right
SW = {"status": 0.0, "value": 1.0}   # status wrong
VW = {"value": 0.0, "status": 0.0}   # value wrong


def fc_episodes() -> list[Ep]:
    return [
        Ep("E1", "interference", "authoritative_update", "should_update", False,
           [P("current_value", 1.0), P("previous_value", 1.0), P("change_detection", 1.0), P("temporal", 0.5)]),
        Ep("E2", "interference", "decoy_no_update", "should_preserve", False,
           [P("current_value", 1.0), P("conflict_value", 1.0, ST), P("change_detection", 1.0), P("source", 0.0)]),
        Ep("E3", "misinformation", "user_explicit", "should_update", True,
           [P("current_value", 1.0), P("change_detection", 1.0), P("source", None)]),
        Ep("E4", "consolidation", "high_weak_challenge", "should_preserve", False,
           [P("current_value", 0.0), P("conflict_value", 0.5, SW), P("change_detection", 1.0)]),
    ]


def rag_episodes() -> list[Ep]:
    out = []
    for ep in fc_episodes():
        probes = [P(p.probe_type, 0.0, VW if p.probe_type == "conflict_value" else {}) for p in ep.probes]
        out.append(Ep(ep.episode_id, ep.paradigm, ep.condition, ep.expected_behavior, ep.split, probes))
    out[0].probes[0] = P("current_value", 1.0)
    return out


@pytest.fixture()
def recording(tmp_path: Path) -> Path:
    return write_paradigm_recording(tmp_path / "rec", {"full_context": fc_episodes(), "naive_rag": rag_episodes()})


def test_probe_frame_reads_spans_and_scores(recording: Path) -> None:
    frames = load_paradigm_frames([recording])
    probes = frames.probes
    assert frames.systems == ["full_context", "naive_rag"] and len(probes) == 28
    e3 = probes[(probes.system == "full_context") & (probes.episode_id == "E3")]
    assert e3["split"].all() and e3["paradigm"].eq("misinformation").all()
    assert int(e3["excluded"].sum()) == 1 and e3[e3.excluded]["score"].isna().all()


def test_metrics_match_hand_computed_values(recording: Path) -> None:
    probes = load_paradigm_frames([recording]).probes
    m = M.system_metrics(probes).set_index("system")
    fc, rag = m.loc["full_context"], m.loc["naive_rag"]
    assert (fc.correct, fc.scored, fc.excluded) == (9, 13, 1)
    assert fc.accuracy == pytest.approx(9 / 13)
    assert fc.mean_score == pytest.approx((9 + 0.5 + 0.5) / 13)
    assert fc.plasticity == pytest.approx(5 / 6) and fc.stability == pytest.approx(4 / 7)
    p, s = 5 / 6, 4 / 7
    assert fc.sp_balance == pytest.approx(2 * p * s / (p + s))
    assert fc.update_err == pytest.approx(1 / 6) and fc.preserve_err == pytest.approx(3 / 7)
    assert fc.historical == 1.0 and fc.temporal == 0.0
    assert (fc.source_probe, fc.conflict_status, fc.source_fidelity) == (0.0, 0.5, pytest.approx(1 / 3))
    assert fc.split == 1.0 and fc.non_split == pytest.approx(7 / 11)
    assert fc.delta_split == pytest.approx(1 - 7 / 11) and fc.split_cv == 1.0 and fc.split_cd == 1.0
    assert rag.accuracy == pytest.approx(1 / 14)
    gap = M.retrieval_gap(M.system_metrics(probes)).set_index("system").loc["naive_rag"]
    assert gap.delta_fc == pytest.approx(9 / 13 - 1 / 14) and gap.rag_norm == pytest.approx((1 / 14) / (9 / 13))
    by_paradigm = M.breakdown(probes, "paradigm", M.PARADIGM_ORDER)
    fc_par = by_paradigm[by_paradigm.system == "full_context"].set_index("paradigm")["accuracy"]
    assert fc_par.to_dict() == {"interference": 6 / 8, "misinformation": 1.0, "consolidation": 1 / 3}


def test_failure_categories_of_every_wrong_probe(recording: Path) -> None:
    probes = load_paradigm_frames([recording]).probes
    row = M.failures(probes).set_index("system").loc["naive_rag"]
    assert row.to_dict() == {"under_update": 1, "over_update": 4, "historical_overwrite": 1, "provenance_loss": 2,
                             "temporal_reconstruction": 1, "distributed_evidence_miss": 2, "conflict_missed": 2}
    assert int(row.sum()) == 13   # every not-correct probe has exactly one category


def test_episode_bootstrap_matches_a_direct_loop_and_is_reproducible(recording: Path) -> None:
    probes = load_paradigm_frames([recording]).probes
    counts = M.episode_counts(probes)
    weights = M.draws(len(counts.episodes))
    assert weights.shape == (M.N_RESAMPLES, 4) and (weights.sum(axis=1) == 4).all()
    ci = M.bootstrap_ci(counts, weights)
    assert ci == M.bootstrap_ci(M.episode_counts(probes))          # fixed seed
    # The same draws, accuracy recomputed episode by episode.
    c, n = counts.correct[0], counts.total[0]
    direct = [sum(w * c) / sum(w * n) for w in weights]
    assert ci["full_context"] == pytest.approx((np.percentile(direct, 2.5), np.percentile(direct, 97.5)))
    low, high = ci["full_context"]
    assert low <= 9 / 13 <= high


def test_paired_bootstrap_between_systems(recording: Path) -> None:
    probes = load_paradigm_frames([recording]).probes
    paired = M.paired_bootstrap(M.episode_counts(probes)).iloc[0]
    assert (paired.system_a, paired.system_b) == ("full_context", "naive_rag")
    assert paired["diff"] == pytest.approx(9 / 13 - 1 / 14)
    # Full context is ahead on every episode, so every resample favours it: p = 0.
    assert paired.p == 0.0 and paired.ci_low > 0
    every = M.paired_bootstrap(M.episode_counts(probes), frame=probes).set_index("metric")
    assert {"overall", "plasticity", "stability", "sp_balance", "historical", "delta_split",
            "probe:current_value"} <= set(every.index)
    assert every.loc["overall", "diff"] == pytest.approx(paired["diff"])
    assert every.loc["plasticity", "diff"] == pytest.approx(5 / 6 - 1 / 7)
    fc_sp = 2 * (5 / 6) * (4 / 7) / (5 / 6 + 4 / 7)
    assert every.loc["sp_balance", "diff"] == pytest.approx(fc_sp - 0.0)


def test_sp_balance_is_undefined_on_a_draw_without_one_of_its_parts(tmp_path: Path) -> None:
    """A draw with no should_preserve episode has no stability, so no SP-Balance (Table 2 prints none
    either): it must drop out of the interval, not count as SP-Balance 0."""
    episodes = [Ep("A", "interference", "authoritative_update", "should_update", False, [P("current_value", 1.0)]),
                Ep("B", "interference", "decoy_no_update", "should_preserve", False, [P("current_value", 1.0)])]
    path = write_paradigm_recording(tmp_path / "rec", {"full_context": episodes, "naive_rag": episodes})
    probes = load_paradigm_frames([path]).probes
    weights = np.array([[2, 0], [0, 2], [1, 1]])   # A only, B only, both
    per = M.metric_draws(probes, weights, M.PAIRED_METRICS)
    observed, resampled = per["sp_balance"]
    assert observed.tolist() == [1.0, 1.0]
    assert np.isnan(resampled[0, :2]).all() and resampled[0, 2] == 1.0


def test_latest_rescore_counts(tmp_path: Path) -> None:
    path = write_paradigm_recording(tmp_path / "rec", {"full_context": fc_episodes()},
                                    rescore={("full_context", "E4", 0): 1.0})
    probes = load_paradigm_frames([path]).probes
    e4 = probes[(probes.episode_id == "E4") & (probes.probe_index == 0)].iloc[0]
    assert e4.score == 1.0 and e4.rescored == 1
    assert M.system_metrics(probes).iloc[0].accuracy == pytest.approx(10 / 13)


def test_tables_and_report_cli(recording: Path, tmp_path: Path) -> None:
    tables = build_paradigm_tables(load_paradigm_frames([recording]).probes)
    assert {"table1", "table2", "table3", "table4_probe_types", "table5", "table7", "paired_bootstrap",
            "failures", "exclusions"} <= set(tables)
    assert list(tables["table3"].columns) == ["system", "interference", "misinformation", "consolidation", "overall"]
    assert len(tables["exclusions"]) == 1
    from memprobe_engine.cli import app
    result = CliRunner().invoke(app, ["report", str(recording), "--csv", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    for title in ("Table 1", "Table 2", "Table 3", "Table 5", "Table 7", "95% CI", "Paired bootstrap"):
        assert title in result.output
    assert "69.2" in result.output          # 9/13 full-context accuracy, in percent
    written = pd.read_csv(tmp_path / "out" / "table1.csv")
    assert written.loc[0, "accuracy"] == pytest.approx(9 / 13)
    assert (tmp_path / "out" / "probes.csv").exists()


def test_report_refuses_a_mix_of_protocols(recording: Path, tmp_path: Path) -> None:
    from memprobe_engine.cli import app
    from memprobe_engine.events.header import new_header
    from memprobe_engine.events.writer import open_writer
    open_writer(tmp_path / "a", new_header("a", "recovery", {})).close()
    result = CliRunner().invoke(app, ["report", str(recording), str(tmp_path / "a")])
    assert isinstance(result.exception, ConfigError) and "mix protocols (paradigms: " in str(result.exception)


def test_damaged_recording_warns_and_keeps_the_rest(recording: Path) -> None:
    events = recording / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    # Damage one probe_score line of naive_rag (its checksum no longer matches).
    target = next(i for i, line in enumerate(lines) if b'"probe_score"' in line and b'"naive_rag"' in line
                  and b'"score":0.0' in line)
    lines[target] = lines[target].replace(b'"score":0.0', b'"score":1.0')
    events.write_bytes(b"".join(lines))
    frames = load_paradigm_frames([recording])
    assert any("damaged recording" in w for w in frames.warnings)
    assert len(frames.probes) == 27          # the one damaged score is left out, nothing else
