"""`memprobe report --plots`: the protocol-A figures from the shipped sample recording and the
protocol-B figures from a small probe frame, written as real PNG files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.paradigms.read.plots import paradigm_plots
from memprobe_engine.recovery.read.frames import load_frames
from memprobe_engine.recovery.read.plots import category_b, recovery_plots, system_b

SAMPLE = Path(__file__).resolve().parents[2] / "recordings" / "sample-quick-sim_01"
PNG = b"\x89PNG\r\n\x1a\n"


def test_recovery_figures_are_pngs_and_b_matches_the_per_category_mean(tmp_path: Path) -> None:
    scores = load_frames([SAMPLE]).scores
    written = recovery_plots(scores, tmp_path)
    assert [p.name for p in written] == ["recovery_by_category.png", "access_gap.png", "score_distribution.png"]
    assert all(p.read_bytes().startswith(PNG) and p.stat().st_size > 5_000 for p in written)
    b = system_b(scores)
    per_cat = category_b(scores)
    full = per_cat[(per_cat["system"] == "longctx_full") & (per_cat["mode"] == "dump_all")]["score"].mean()
    assert float(b[(b["system"] == "longctx_full") & (b["mode"] == "dump_all")]["score"].iloc[0]) == full


def test_paradigm_figures_from_a_probe_frame(tmp_path: Path) -> None:
    rows = []
    for system, update_ok, preserve_ok in (("full_context", 1.0, 1.0), ("naive_rag", 0.0, 1.0)):
        for i, (behaviour, score, probe) in enumerate((("should_update", update_ok, "current_value"),
                                                       ("should_preserve", preserve_ok, "previous_value"))):
            rows.append({"system": system, "episode_id": f"e{i}", "paradigm": "interference", "condition": "A",
                         "expected_behavior": behaviour, "split": False, "probe_index": i, "probe_type": probe,
                         "score": score, "excluded": None})
    written = paradigm_plots(pd.DataFrame(rows), tmp_path)
    assert [p.name for p in written] == ["stability_plasticity.png", "probe_types.png"]
    assert all(p.read_bytes().startswith(PNG) for p in written)


def test_report_command_writes_the_figures(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", str(SAMPLE), "--plots", str(tmp_path / "figs")])
    assert result.exit_code == 0, result.output
    assert "wrote 3 PNG figures" in result.output and (tmp_path / "figs" / "access_gap.png").exists()
