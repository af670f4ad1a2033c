"""``memprobe report`` prints the same text for a run killed and resumed as for a clean run of the same
job: a resume's replay of an interrupted unit is not counted as more calls, and the estimate beside
the run reads no other recording. Two SIGKILL + resume cycles per protocol here;
``bench/resume_report.py`` runs ten."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.functional.resume_cycles import compare_reports


@pytest.mark.parametrize("protocol", ["A", "B"])
def test_a_killed_and_resumed_run_reports_byte_for_byte_as_a_clean_run(tmp_path: Path, protocol: str) -> None:
    cycles = compare_reports(protocol, 2, tmp_path)
    assert cycles.killed >= 1, "no session was killed mid-run; nothing to test"
    assert "tokens and cost per role" in cycles.clean
    assert cycles.resumed == cycles.clean


def test_the_estimate_beside_a_run_does_not_depend_on_the_recordings_beside_it(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    alone = tmp_path / "alone"
    crowded = tmp_path / "crowded"
    alone.mkdir()
    crowded.mkdir()
    for folder in (alone, crowded):
        shutil.copytree(root / "recordings" / "sample-quick-sim_01", folder / "rec")
        (folder / "sessions").symlink_to(root / "sessions", target_is_directory=True)  # its header's inputs
    for neighbour in ("sample-quick-live-sim_01", "sample-quick-fixed-user_001"):
        shutil.copytree(root / "recordings" / neighbour, crowded / neighbour)
    printed = [subprocess.run([sys.executable, "-m", "memprobe_tui.main", "report", "rec"], cwd=folder,
                              capture_output=True, text=True, timeout=300,
                              env={"PYTHONPATH": str(root), "NO_COLOR": "1", "COLUMNS": "100",
                                   "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}).stdout
               for folder in (alone, crowded)]
    assert "reads no other recording" in printed[0]
    assert printed[0] == printed[1]
