"""`memprobe import release-b` on a small checkout in the upstream layout (tests/fixtures/release-b)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from memprobe_engine.cli.groups import import_app
from memprobe_engine.errors import ConfigError
from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.events.reader import open_recording
from memprobe_engine.paradigms.release.importer import import_release_b
from memprobe_engine.paradigms.read.frames import load_paradigm_frames
from memprobe_engine.protocols import open_session

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "release-b"


def test_cli_prints_the_agreement_line_per_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(import_app, ["release-b", str(FIXTURE), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert ("baselines_report_amem_qwen3.json: agreement with upstream labels: upstream 14/14 (100.0%), "
            "corrected 13/14 (92.9%) probes") in result.output
    assert ("baselines_report_gpt54_v2.json: agreement with upstream labels: upstream 7/7 (100.0%), "
            "corrected 7/7 (100.0%) probes") in result.output
    assert "broken_report.json" in result.output and "PILOT-77X" in result.output   # named, not fatal


def test_recordings_hold_every_prediction_rescored(tmp_path: Path) -> None:
    result = import_release_b(FIXTURE, tmp_path / "out")
    recordings = sorted(p.name for p in (tmp_path / "out" / "recordings").iterdir())
    assert recordings == ["baselines_report_amem_qwen3__amem_full", "baselines_report_gpt54_v2__judge"]
    rec = tmp_path / "out" / "recordings" / "baselines_report_amem_qwen3__amem_full"
    with open_recording(rec) as reader:
        assert reader.header.suite == "paradigms" and reader.damage.clean
        answers = list(reader.iter_of(ProbeAnswer))
        every = list(reader.iter_of(ProbeScore))
    scores = [s for s in every if s.layer is None]
    assert len(answers) == 15 and len(scores) == 14          # PILOT-77X is recorded but has no gold
    assert all(s.system == "amem_full" and s.scorer_version == "b1-upstream-1" for s in scores)
    # Beside the default (upstream) mode: the corrected mode and the report's own labels, as layers.
    assert sorted({str(s.layer) for s in every if s.layer}) == ["scoring:corrected", "upstream-labels"]
    assert sum(s.layer == "upstream-labels" for s in every) == 14
    excluded = [s for s in scores if s.excluded]
    assert [(s.episode_id, s.probe_type) for s in excluded] == [("PILOT-02B", "current_value")]
    first = answers[0]
    assert first.answer is not None and first.answer["answer"] == "CrossFit Central"
    assert first.question == "What gym does the user currently go to?"   # from episodes.jsonl
    # The report side reads the imported recording like a run's.
    frame = load_paradigm_frames([rec]).probes
    assert set(frame["paradigm"]) == {"interference", "misinformation"} and len(frame) == 14
    report = orjson.loads((tmp_path / "out" / "import-report.json").read_bytes())
    amem = report["reports"][0]
    assert (amem["agree"], amem["compared"]) == (14, 14) and amem["agree_by_mode"]["corrected"] == 13
    assert amem["disagreements"] == []
    [disagreement] = amem["disagreements_by_mode"]["corrected"]
    assert (disagreement["episode_id"], disagreement["upstream"], disagreement["ours"]) == \
        ("PILOT-16A", "correct", "incorrect")      # the named conflict value (3000) is not the gold 8443
    assert report["problem_counts"]["error"] == 1 and result.problems.items


def test_missing_data_and_reports_are_problems_not_crashes(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(FIXTURE / "results", checkout / "results")
    result = import_release_b(checkout, tmp_path / "out")
    assert any(p.file == "data/suite56" and p.level == "error" for p in result.problems.items)
    assert all(r.compared == 0 for r in result.reports)       # nothing scorable without gold
    empty = tmp_path / "empty"  # neither part: a wrong folder, refused before anything is written (#22)
    empty.mkdir()
    with pytest.raises(ConfigError, match="not a checkout of the protocol-B repository"):
        import_release_b(empty, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()


def test_reimport_replaces_recordings(tmp_path: Path) -> None:
    import_release_b(FIXTURE, tmp_path / "out")
    again = import_release_b(FIXTURE, tmp_path / "out")
    assert again.reports[0].agree == 14
    rec = tmp_path / "out" / "recordings" / "baselines_report_amem_qwen3__amem_full"
    with open_recording(rec) as reader:
        assert len([s for s in reader.iter_of(ProbeScore) if s.layer is None]) == 14


REAL = Path(__file__).resolve().parents[1] / "fixtures" / "release-b-real"


def test_agreement_with_real_upstream_labels(tmp_path: Path) -> None:
    """122 real upstream answers: the default mode gives every one upstream's label; every difference of
    the corrected mode is the documented temporal one (a structured ``"changed": false`` is no change
    direction, where upstream counted the key as a change word)."""
    result = import_release_b(REAL, tmp_path / "out")
    assert [(r.agree, r.compared) for r in result.reports] == [(27, 27), (39, 39), (27, 27), (29, 29)]
    assert [r.agree_by_mode["corrected"] for r in result.reports] == [27, 39, 26, 26]
    disagreements = [d for r in result.reports for d in r.disagreements_by_mode.get("corrected", [])]
    assert {d["probe_type"] for d in disagreements} == {"temporal"} and len(disagreements) == 4
    assert all('"changed": false' in d["predicted"] for d in disagreements)


def test_imported_episodes_carry_their_payload_so_the_replay_shows_gold(tmp_path: Path) -> None:
    from memprobe_engine.paradigms.read.probe import probe_detail

    import_release_b(FIXTURE, tmp_path / "out")
    rec = tmp_path / "out" / "recordings" / "baselines_report_amem_qwen3__amem_full"
    with open_recording(rec) as reader:
        spans = [e for e in reader.iter_events(kinds=["span_begin"]) if e.span_kind == "episode"]
    with_payload = {s.attrs["episode_id"] for s in spans if s.attrs.get("inputs_ref")}
    assert "PILOT-01A" in with_payload and "PILOT-77X" not in with_payload   # 77X is not in data/
    session = open_session(rec)
    try:
        session.build_index()
        detail = probe_detail(session, "PILOT-01A", "amem_full", 0)
        assert detail.gold is not None and detail.gold_note is None
        assert detail.gold.gold["current_value"] == "CrossFit Central"
        assert detail.gold.question == "What gym does the user currently go to?"
        assert detail.answer is not None and detail.answer.probe_type == detail.gold.probe_type
    finally:
        session.close()
