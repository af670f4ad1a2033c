"""Report frames and Tables 2, 3, 4, 13, 14 against numbers computed by hand; exports; merge.

Two shard recordings of one run are built with the real writer and recorder in the protocol-A
layout (unit → episode spans, footprint, dimension → mode spans with slot-fill, judge score and
attribution): shard ``a`` holds user u1, shard ``b`` user u2, both for systems alpha and beta.
Four dimensions per user — two skill, one knowledge, one preference — make the category-balanced
B differ from a plain mean over dimensions, and the per-user mean over all judged turns
differ from a pooled one.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from memprobe_engine.cli.merge_cmd import merge, merge_recordings
from memprobe_engine.cli.report_cmd import report
from memprobe_engine.errors import RecordingError
from memprobe_engine.events.header import new_header
from memprobe_engine.events.memory import MemoryFootprint
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment
from memprobe_engine.events.scoring import AttributionLabel, JudgeScore, SlotFill
from memprobe_engine.events.writer import open_writer
from memprobe_engine.recovery.read import build_tables, load_frames, print_tables
from memprobe_engine.recovery.read.frames import ReportFrames
from memprobe_engine.recovery.read.render import fmt_mean_std
from memprobe_engine.recovery.read.tables import table14
from memprobe_engine.exports import write_frames
from memprobe_engine.report.output import WIDTH

SK, KN, PR = "skill_memory", "knowledge_memory", "assistance_preference"
DIMS = {"s1": SK, "s2": SK, "k1": KN, "p1": PR}
SYSTEMS = ("alpha", "beta")

# (end_reason, turns, [per-turn preference means; None = excluded judgment]) per task, in DIMS order.
EPISODES: dict[tuple[str, str], list[tuple[str, int, list[float | None]]]] = {
    ("alpha", "u1"): [("satisfied", 2, [4.0, 5.0]), ("satisfied", 3, [3.0]), ("turn_cap", 5, [None]),
                      ("satisfied", 2, [])],
    ("alpha", "u2"): [("satisfied", 1, [5.0]), ("satisfied", 2, [4.0, 4.0, 1.0]), ("satisfied", 3, []),
                      ("satisfied", 2, [])],
    ("beta", "u1"): [("satisfied", 2, [2.0]), ("satisfied", 2, []), ("satisfied", 2, []), ("satisfied", 2, [])],
    ("beta", "u2"): [("satisfied", 4, [4.0]), ("satisfied", 1, [5.0]), ("satisfied", 3, []),
                     ("satisfied", 4, [])],
}
FOOTPRINTS = {("alpha", "u1"): (10, 100.0), ("alpha", "u2"): (20, 200.0),
              ("beta", "u1"): (3, 50.0), ("beta", "u2"): (5, 70.0)}
OVERFLOW, EXCLUDED = "overflow", "excluded"
# (system, user) → mode → dimension → (score or OVERFLOW/EXCLUDED, attribution label)
CASES: dict[tuple[str, str], dict[str, dict[str, tuple[Any, str]]]] = {
    ("alpha", "u1"): {
        "dump_all": {"s1": (1.0, "ok"), "s2": (0.5, "memory_failure"), "k1": (0.75, "ok"), "p1": (1.0, "ok")},
        "retrieve": {"s1": (0.5, "memory_failure"), "s2": (0.0, "agent_elicitation_failure"),
                     "k1": (0.25, "memory_failure"), "p1": (1.0, "ok")}},
    ("alpha", "u2"): {
        # k1 is re-scored below: 0.0 / memory_failure becomes 0.5 / simulator_too_strict.
        "dump_all": {"s1": (0.75, "ok"), "s2": (0.75, "ok"), "k1": (0.0, "memory_failure"),
                     "p1": (0.25, "task_design_failure")},
        "retrieve": {"s1": (0.25, "memory_failure"), "s2": (0.75, "ok"), "k1": (0.0, "task_design_failure"),
                     "p1": (0.5, "memory_failure")}},
    ("beta", "u1"): {
        "dump_all": {"s1": (OVERFLOW, "excluded"), "s2": (0.0, "memory_failure"), "k1": (0.0, "memory_failure"),
                     "p1": (0.25, "simulator_too_strict")},
        "retrieve": {"s1": (0.0, "memory_failure"), "s2": (0.0, "memory_failure"), "k1": (0.0, "memory_failure"),
                     "p1": (0.5, "memory_failure")}},
    ("beta", "u2"): {
        "dump_all": {"s1": (0.5, "memory_failure"), "s2": (0.0, "task_design_failure"), "k1": (1.0, "ok"),
                     "p1": (0.0, "memory_failure")},
        "retrieve": {"s1": (0.25, "memory_failure"), "s2": (0.25, "memory_failure"), "k1": (EXCLUDED, "excluded"),
                     "p1": (0.75, "ok")}},
}
RESCORE = ("alpha", "u2", "k1", "dump_all", 0.5, "simulator_too_strict")

# Per-user B by hand: mean of (skill mean, knowledge mean, preference mean), exclusions left out.
B_FULL = {"alpha": [(0.75 + 0.75 + 1.0) / 3, (0.75 + 0.5 + 0.25) / 3],
          "beta": [(0.0 + 0.0 + 0.25) / 3, (0.25 + 1.0 + 0.0) / 3]}
B_TOPK = {"alpha": [(0.25 + 0.25 + 1.0) / 3, (0.5 + 0.0 + 0.5) / 3],
          "beta": [(0.0 + 0.0 + 0.5) / 3, (0.25 + 0.75) / 2]}


def _unit(recorder: Recorder, system: str, user: str) -> dict[tuple[str, str], int]:
    """One unit in the protocol-A layout; returns the judge-score seq of each (dimension, mode)."""
    judge_seqs: dict[tuple[str, str], int] = {}
    with recorder.span(f"{user} × {system}", "unit", user_id=user, system=system):
        with recorder.span("rollout", "rollout"):
            for index, (dimension, (reason, turns, means)) in enumerate(zip(DIMS, EPISODES[(system, user)])):
                with recorder.span(f"task {index + 1}", "episode", dimension=dimension, category=DIMS[dimension],
                                   task_id=f"t{index}", task_index=index):
                    for turn, mean in enumerate(means, start=1):
                        recorder.emit(PreferenceJudgment(task_index=index, turn=turn, scores={"tone": mean},
                                                         mean=mean, excluded=None if mean is not None else "bad"))
                    recorder.emit(EpisodeEnd(task_index=index, end_reason=reason,  # type: ignore[arg-type]
                                             turns=turns))
            n_items, mean_chars = FOOTPRINTS[(system, user)]
            recorder.emit(MemoryFootprint(n_items=n_items, total_chars=int(n_items * mean_chars),
                                          mean_chars=mean_chars))
        with recorder.span("recovery", "recovery"):
            for dimension, category in DIMS.items():
                with recorder.span(f"recover {dimension}", "dimension", dimension=dimension, category=category):
                    for mode in ("dump_all", "retrieve"):
                        with recorder.span(mode, "mode", mode=mode):
                            value, label = CASES[(system, user)][mode][dimension]
                            judge_seqs[(dimension, mode)] = _score(recorder, mode, value, label)
    return judge_seqs


def _score(recorder: Recorder, mode: Any, value: Any, label: Any) -> int:
    if value == OVERFLOW:
        recorder.emit(SlotFill(mode=mode, label=None, overflow=True, excluded="store too large"))
        judged = recorder.emit(JudgeScore(mode=mode, score=None, excluded="store too large"))
    elif value == EXCLUDED:
        recorder.emit(SlotFill(mode=mode, label=None, excluded="unparseable"))
        judged = recorder.emit(JudgeScore(mode=mode, score=None, excluded="unparseable"))
    else:
        recorder.emit(SlotFill(mode=mode, label=f"guess {value}"))
        judged = recorder.emit(JudgeScore(mode=mode, score=value))
    recorder.emit(AttributionLabel(mode=mode, label=label, score=None if isinstance(value, str) else value))
    return judged.seq


def build_shard(path: Path, user: str, shard: str, **extra: Any) -> Path:
    config = {"suite": "recovery", "seed": 0, "shard": shard, "fingerprint": f"fp-{shard}", **extra}
    with open_writer(path, new_header("run1", "recovery", config)) as writer:
        recorder = Recorder(writer)
        recorder.put_payload({"prompt": "shared system prompt"})
        seqs = {system: _unit(recorder, system, user) for system in SYSTEMS}
    system, rescore_user, dimension, mode, score, label = RESCORE
    if user == rescore_user:
        with open_writer(path) as writer:  # a later session appends the re-score
            recorder = Recorder(writer)
            with recorder.scope(user_id=user, system=system, dimension=dimension):
                original = seqs[system][(dimension, mode)]
                recorder.emit(JudgeScore(mode=mode, score=score, rescore_of=original))  # type: ignore[arg-type]
                recorder.emit(AttributionLabel(mode=mode, label=label, score=score))  # type: ignore[arg-type]
    return path


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    return [build_shard(tmp_path / "shard-a", "u1", "0/2"), build_shard(tmp_path / "shard-b", "u2", "1/2")]


def _row(df: pd.DataFrame, **match: Any) -> dict[str, Any]:
    mask = pd.Series(True, index=df.index)
    for key, value in match.items():
        mask &= df[key] == value
    rows = df[mask].to_dict("records")
    assert len(rows) == 1, (match, rows)
    return {str(key): value for key, value in rows[0].items()}


def test_latest_rescore_wins(shards: list[Path]) -> None:
    frames = load_frames(shards)
    assert not frames.warnings
    scored = _row(frames.scores, system="alpha", user_id="u2", dimension="k1", mode="dump_all")
    assert scored["score"] == 0.5 and scored["category"] == KN and scored["recording"] == str(shards[1])
    assert _row(frames.attribution, system="alpha", user_id="u2", dimension="k1", mode="dump_all")["label"] == \
        "simulator_too_strict"
    assert len(frames.scores) == 2 * 2 * 4 * 2 and len(frames.attribution) == 32
    overflow = _row(frames.scores, system="beta", user_id="u1", dimension="s1", mode="dump_all")
    assert overflow["overflow"] and overflow["excluded"] == "store too large" and math.isnan(overflow["score"])


def test_table2_by_hand(shards: list[Path]) -> None:
    t2 = build_tables(load_frames(shards), ["table2"])["table2"]
    alpha, beta = _row(t2, system="alpha"), _row(t2, system="beta")
    assert alpha["A_pct"] == pytest.approx(87.5) and beta["A_pct"] == pytest.approx(100.0)
    # D: per user, the mean over all judged turns: alpha u1 (4, 5, 3) → 4.0; u2 (5, 4, 4, 1) → 3.5.
    assert (alpha["D_mean"], alpha["D_std"]) == pytest.approx((3.75, statistics.stdev([4.0, 3.5])))
    assert (beta["D_mean"], beta["D_std"]) == pytest.approx((3.25, statistics.stdev([2.0, 4.5])))
    assert (alpha["C_mean"], alpha["C_std"]) == pytest.approx((2.5, statistics.stdev([3.0, 2.0])))
    assert (beta["C_mean"], beta["C_std"]) == pytest.approx((2.5, statistics.stdev([2.0, 3.0])))
    for system, row in (("alpha", alpha), ("beta", beta)):
        assert row["B_full_mean"] == pytest.approx(statistics.mean(B_FULL[system]))
        assert row["B_full_std"] == pytest.approx(statistics.stdev(B_FULL[system]))
        assert row["B_topk_mean"] == pytest.approx(statistics.mean(B_TOPK[system]))
        assert row["B_topk_std"] == pytest.approx(statistics.stdev(B_TOPK[system]))
    assert alpha["B_full_note"] == "" and beta["B_full_note"] == "†"
    assert (alpha["excluded_cases"], alpha["overflow_cases"]) == (0, 0)
    assert (beta["excluded_cases"], beta["overflow_cases"]) == (2, 1)
    assert (alpha["N_items"], alpha["chars_per_item"]) == (15.0, 150.0)
    assert (beta["N_items"], beta["chars_per_item"]) == (4.0, 60.0)


def test_table3_by_hand(shards: list[Path]) -> None:
    t3 = build_tables(load_frames(shards), ["table3"])["table3"]
    assert list(t3[["system", "mode"]].itertuples(index=False, name=None)) == [
        ("alpha", "dump_all"), ("alpha", "retrieve"), ("beta", "dump_all"), ("beta", "retrieve")]
    expected = {  # per-user category means (u1, u2)
        ("alpha", "dump_all"): {SK: [0.75, 0.75], KN: [0.75, 0.5], PR: [1.0, 0.25]},
        ("alpha", "retrieve"): {SK: [0.25, 0.5], KN: [0.25, 0.0], PR: [1.0, 0.5]},
        ("beta", "dump_all"): {SK: [0.0, 0.25], KN: [0.0, 1.0], PR: [0.25, 0.0]},
        ("beta", "retrieve"): {SK: [0.0, 0.25], KN: [0.0], PR: [0.5, 0.75]},
    }
    for (system, mode), categories in expected.items():
        row = _row(t3, system=system, mode=mode)
        for category, values in categories.items():
            assert row[f"{category}_mean"] == pytest.approx(statistics.mean(values))
            std = statistics.stdev(values) if len(values) > 1 else math.nan
            assert row[f"{category}_std"] == pytest.approx(std, nan_ok=True)
        assert row["note"] == ("†" if (system, mode) == ("beta", "dump_all") else "")


def test_table4_and_table13_by_hand(shards: list[Path]) -> None:
    tables = build_tables(load_frames(shards), ["table4", "table13"])
    t4 = tables["table4"].set_index(["system", "mode"])
    counts = ["ok", "memory_failure", "task_design_failure", "agent_elicitation_failure", "simulator_too_strict",
              "excluded"]
    assert list(t4.loc[("alpha", "dump_all"), counts]) == [5, 1, 1, 0, 1, 0]
    assert list(t4.loc[("alpha", "retrieve"), counts]) == [2, 4, 1, 1, 0, 0]
    assert list(t4.loc[("beta", "dump_all"), counts]) == [1, 4, 1, 0, 1, 1]
    assert list(t4.loc[("beta", "retrieve"), counts]) == [1, 6, 0, 0, 0, 1]
    assert t4["total"].tolist() == [8, 8, 8, 8]
    assert t4["recovery_rate_pct"].tolist() == pytest.approx([500 / 6, 100 / 3, 20.0, 100 / 7])
    assert t4["note"].tolist() == ["", "", "†", ""]
    t13 = tables["table13"].set_index(["system", "category"])
    assert list(t13.index) == [("alpha", SK), ("alpha", KN), ("alpha", PR), ("beta", SK), ("beta", KN), ("beta", PR)]
    assert list(t13.loc[("alpha", SK), counts]) == [3, 1, 0, 0, 0, 0]
    assert list(t13.loc[("alpha", KN), counts]) == [1, 0, 0, 0, 1, 0]
    assert list(t13.loc[("alpha", PR), counts]) == [1, 0, 1, 0, 0, 0]
    assert list(t13.loc[("beta", SK), counts]) == [0, 2, 1, 0, 0, 1]
    assert list(t13.loc[("beta", KN), counts]) == [1, 1, 0, 0, 0, 0]
    assert list(t13.loc[("beta", PR), counts]) == [0, 1, 0, 0, 1, 0]
    assert t13["total"].tolist() == [4, 2, 2, 4, 2, 2]


def test_table14_lower_order_quantiles(shards: list[Path]) -> None:
    t14 = build_tables(load_frames(shards), ["table14"])["table14"].set_index("system")
    assert list(t14.loc["alpha", ["items_mean", "items_min", "items_p50", "items_max"]]) == [15.0, 10, 10, 20]
    assert list(t14.loc["beta", ["chars_mean", "chars_p25", "chars_p75", "chars_max"]]) == [60.0, 50.0, 50.0, 70.0]
    empty = load_frames([])
    footprints = pd.DataFrame({"system": ["s"] * 6, "user_id": [f"u{i}" for i in range(6)],
                               "n_items": [5, 1, 4, 2, 6, 3], "mean_chars": [10.0, 60.0, 20.0, 50.0, 30.0, 40.0]})
    six = table14(ReportFrames(empty.scores, empty.episodes, empty.preferences, footprints, empty.attribution))
    row = six.iloc[0]
    # sorted items 1..6: lower p25 = x[floor(1.25)] = 2, p50 = x[floor(2.5)] = 3 (not 3.5), p75 = x[3] = 4.
    assert [row["items_min"], row["items_p25"], row["items_p50"], row["items_p75"], row["items_max"]] == [1, 2, 3, 4, 6]
    assert row["chars_p50"] == 30.0 and row["items_mean"] == 3.5


def test_exports_equal_frames_and_tables(shards: list[Path], tmp_path: Path) -> None:
    frames = load_frames(shards)
    bundle = {**frames.as_dict(), **build_tables(frames)}
    written = write_frames(bundle, tmp_path / "out", "csv") + write_frames(bundle, tmp_path / "out", "parquet")
    assert len(written) == 2 * len(bundle)
    for name, df in bundle.items():
        back = pd.read_csv(tmp_path / "out" / f"{name}.csv")
        # CSV has one spelling for a missing value: None and "" both read back as NaN.
        pd.testing.assert_frame_equal(back, df.replace({None: math.nan, "": math.nan}), check_dtype=False)
        # parquet keeps numeric dtypes exactly; text may come back as pandas' string dtype.
        parquet = pd.read_parquet(tmp_path / "out" / f"{name}.parquet")
        pd.testing.assert_frame_equal(parquet.astype(df.dtypes.to_dict()), df)


def test_merge_gives_same_tables_and_unique_spans(shards: list[Path], tmp_path: Path) -> None:
    merged = merge_recordings(tmp_path / "merged", shards).out
    with open_recording(merged) as reader:
        assert reader.header.config["merged_from"] == [str(p) for p in shards]
        assert reader.payload(_any_payload(shards[0])) == {"prompt": "shared system prompt"}
        raw = [reader.get_dict(line) for line in range(len(reader))]
    assert [d["seq"] for d in raw] == list(range(len(raw)))
    assert len(raw) == sum(_count(p) for p in shards)
    begins = [d["span_id"] for d in raw if d["kind"] == "span_begin"]
    assert len(begins) == len(set(begins)) and {b.split("/")[0] for b in begins} == {"a", "b"}
    rescore = next(d for d in raw if d["kind"] == "judge_score" and d.get("rescore_of") is not None)
    original = raw[rescore["rescore_of"]]
    assert original["kind"] == "judge_score" and original["score"] == 0.0
    assert [original[k] for k in ("system", "user_id", "dimension", "mode")] == \
        [rescore[k] for k in ("system", "user_id", "dimension", "mode")]
    together, joined = build_tables(load_frames(shards)), build_tables(load_frames([merged]))
    for name in together:
        pd.testing.assert_frame_equal(together[name], joined[name])


def _count(recording: Path) -> int:
    with open_recording(recording) as reader:
        return len(reader)


def _any_payload(recording: Path) -> str:
    return str(orjson.loads((recording / "payloads.jsonl").read_bytes().splitlines()[0])["hash"])


def test_merge_refuses_a_different_config(shards: list[Path], tmp_path: Path) -> None:
    other = build_shard(tmp_path / "shard-c", "u1", "2/2", seed=1)
    with pytest.raises(RecordingError, match="'seed'"):
        merge_recordings(tmp_path / "merged", [*shards, other])
    assert not (tmp_path / "merged").exists()


def test_overlapping_recordings_later_wins_with_warning(shards: list[Path]) -> None:
    frames = load_frames([shards[0], shards[1], shards[0]])
    assert len(frames.warnings) == 2 and all("using the later recording" in w for w in frames.warnings)
    assert set(frames.scores.loc[frames.scores["user_id"] == "u1", "recording"]) == {str(shards[0])}
    pd.testing.assert_frame_equal(build_tables(frames)["table2"], build_tables(load_frames(shards))["table2"])


def test_rescore_outside_scope_and_rerun_unit(tmp_path: Path) -> None:
    with open_writer(tmp_path / "r", new_header("r", "recovery", {})) as writer:
        recorder = Recorder(writer)
        with recorder.span("u × s", "unit", user_id="u", system="s"):  # an interrupted first attempt
            recorder.emit(EpisodeEnd(task_index=0, end_reason="error", turns=9))
        with recorder.span("u × s", "unit", user_id="u", system="s"):
            recorder.emit(EpisodeEnd(task_index=0, end_reason="satisfied", turns=1))
            with recorder.span("recover d", "dimension", dimension="d", category=SK):
                first = recorder.emit(JudgeScore(mode="retrieve", score=0.25))
        with recorder.span("u × s", "unit", user_id="u", system="s"):  # a re-score may open its own unit span
            recorder.emit(JudgeScore(mode="retrieve", score=1.0, rescore_of=first.seq))
    frames = load_frames([tmp_path / "r"])
    assert frames.episodes[["end_reason", "turns"]].values.tolist() == [["satisfied", 1]]
    assert frames.scores[["category", "score"]].values.tolist() == [[SK, 1.0]]


def test_cli_report_and_merge(shards: list[Path], tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("report")(report)
    app.command("merge")(merge)
    runner = CliRunner()
    done = runner.invoke(app, ["merge", str(tmp_path / "m"), *map(str, shards)])
    assert done.exit_code == 0, done.output
    shown = runner.invoke(app, ["report", str(tmp_path / "m"), "--csv", str(tmp_path / "csv"),
                                "--parquet", str(tmp_path / "pq"), "--tables", "2,4"])
    assert shown.exit_code == 0, shown.output
    assert fmt_mean_std(3.75, statistics.stdev([4.0, 3.5])) in shown.output
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == sorted(
        f"{n}.csv" for n in ("scores", "episodes", "preferences", "footprints", "attribution", "table2", "table4"))
    assert len(list((tmp_path / "pq").iterdir())) == 7


def test_terminal_rendering_fits_100_columns(shards: list[Path]) -> None:
    from rich.console import Console

    console = Console(width=WIDTH, record=True, highlight=False)
    print_tables(build_tables(load_frames(shards)), console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "0.250†±0.236" in text and "Recovery rate" in text and "diagnostic" in text


def test_paper_scale_tables_fit_100_columns() -> None:
    """Long system names, all five categories, four-digit counts: still within 100 columns."""
    from rich.console import Console

    categories = [SK, KN, "episodic_memory", "self_model", PR]
    rows = [{"system": system, "user_id": user, "dimension": f"{category}-d", "category": category, "mode": mode,
             "score": 0.25 * (i % 5), "excluded": None, "overflow": False, "label": "x", "recording": "r"}
            for system in ("longctx_full", "mem0") for i, user in enumerate(["u1", "u2"])
            for category in categories for mode in ("dump_all", "retrieve")]
    rows[0].update(score=math.nan, excluded="too large", overflow=True)
    scores = pd.DataFrame(rows)
    attribution = pd.DataFrame([{**{k: r[k] for k in ("system", "user_id", "dimension", "category", "mode")},
                                 "label": "memory_failure"} for r in rows for _ in range(300)])
    episodes = pd.DataFrame({"system": ["longctx_full"] * 2 + ["mem0"] * 2, "user_id": ["u1", "u2"] * 2,
                             "task_index": [0] * 4, "end_reason": ["satisfied", "turn_cap"] * 2,
                             "turns": [25, 3, 12, 1]})
    preferences = pd.DataFrame({"system": ["longctx_full"] * 2, "user_id": ["u1", "u2"], "task_index": [0, 0],
                                "turn": [1, 1], "mean": [4.663, 1.0]})
    footprints = pd.DataFrame({"system": ["longctx_full", "mem0"], "user_id": ["u1", "u1"], "n_items": [1643, 204],
                               "mean_chars": [1510.5, 205.0]})
    frames = ReportFrames(scores, episodes, preferences, footprints, attribution)
    console = Console(width=WIDTH, record=True, highlight=False)
    print_tables(build_tables(frames), console)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert not any("…" in line for line in lines)
    assert any("Self-model" in line and "Episodic" in line for line in lines)


def _memprobe_merge(*args: Path | str) -> subprocess.CompletedProcess[str]:
    """`memprobe merge` as a user runs it: the exit status and the lines it prints."""
    memprobe = Path(sys.executable).with_name("memprobe")
    return subprocess.run([str(memprobe), "merge", *map(str, args)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400"})


@pytest.mark.parametrize("case", ["same_shard_twice", "shard_with_the_full_run", "different_counts",
                                  "one_shard_of_two", "different_config"])
def test_merge_refuses_a_bad_shard_set_with_exit_2_naming_the_shards(shards: list[Path], tmp_path: Path,
                                                                     case: str) -> None:
    inputs, named, said = {
        "same_shard_twice": ([shards[0], shards[0]], [shards[0]], "given twice"),
        "shard_with_the_full_run": ([shards[0], build_shard(tmp_path / "full", "u2", "0/1")],
                                    [shards[0], tmp_path / "full"], "different counts"),
        "different_counts": ([shards[0], build_shard(tmp_path / "third", "u2", "1/3")],
                             [shards[0], tmp_path / "third"], "different counts"),
        "one_shard_of_two": ([shards[0]], [shards[0]], "1/2 missing"),
        "different_config": ([shards[0], build_shard(tmp_path / "seed1", "u2", "1/2", seed=1)],
                             [shards[0], tmp_path / "seed1"], "config key 'seed'"),
    }[case]
    done = _memprobe_merge(tmp_path / "merged", *inputs)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert all(str(path) in lines[0] for path in named), lines[0]
    assert not (tmp_path / "merged").exists()


def test_merge_allow_incomplete_merges_one_shard_of_two_and_notes_the_missing_one(shards: list[Path],
                                                                                  tmp_path: Path) -> None:
    done = _memprobe_merge(tmp_path / "merged", shards[0], "--allow-incomplete")
    assert done.returncode == 0, done.stderr
    assert "shard(s) 1/2 missing" in done.stderr
    with open_recording(tmp_path / "merged") as reader:
        assert reader.header.config["missing_shards"] == ["1/2"]
