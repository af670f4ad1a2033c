"""Every shipped recording reports, and pairs of them compare, byte for byte as they did before the
protocol packages were reorganised (``tests/fixtures/shipped-outputs`` holds what the earlier tree
printed; the TUI's snapshots cover the screens). One deliberate change since: compare-layers.txt's
hint names ``rescore --as NAME``, the flag that writes a layer now that ``--layer`` only reads one. Another:
the three sample-quick reports' cost tables, whose estimate no longer reads the recordings beside them
(the release's shares alone) and whose actual calls count a resumed unit's replayed calls once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXPECTED = REPO / "tests" / "fixtures" / "shipped-outputs"

COMMANDS = {
    **{f"{name}.txt": ["report", f"recordings/{name}"] for name in (
        "release-a-user_001-amem", "release-a-user_001-mem0", "sample-paradigms-mem0", "sample-paradigms-quick",
        "sample-quick-fixed-user_001", "sample-quick-live-sim_01", "sample-quick-sim_01")},
    "compare-release-a.txt": ["compare", "recordings/release-a-user_001-amem", "recordings/release-a-user_001-mem0"],
    "compare-sim.txt": ["compare", "recordings/sample-quick-sim_01", "recordings/sample-quick-live-sim_01"],
    "compare-paradigms.txt": ["compare", "recordings/sample-paradigms-quick", "recordings/sample-paradigms-quick"],
    "compare-layers.txt": ["compare", "--layers", "recordings/release-a-user_001-mem0"],
}


def printed(command: list[str], cache: Path) -> str:
    """What ``memprobe COMMAND`` prints, with an empty cache folder: the cost table's wall-time line
    quotes the embedded model's rates measured on this machine (``memprobe doctor``), which must not
    decide the text."""
    result = subprocess.run([sys.executable, "-m", "memprobe_tui.main", *command], cwd=REPO, capture_output=True,
                            text=True, env={**os.environ, "COLUMNS": "100", "MEMPROBE_CACHE_DIR": str(cache)},
                            timeout=300)
    # compare-layers.txt is an error (the recording holds no layer), printed on stderr with exit 2.
    return result.stdout if result.returncode == 0 else result.stdout + result.stderr


@pytest.mark.parametrize("expected", sorted(COMMANDS))
def test_output_is_unchanged(expected: str, tmp_path: Path) -> None:
    assert printed(COMMANDS[expected], tmp_path) == (EXPECTED / expected).read_text()


if __name__ == "__main__":  # regenerate (only for a deliberate change of what they print): python -m ...
    import tempfile

    for name, command in COMMANDS.items():
        with tempfile.TemporaryDirectory() as empty:
            (EXPECTED / name).write_text(printed(command, Path(empty)))
