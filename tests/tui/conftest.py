"""Shared fixtures of the TUI tests: the committed fixture recordings and app builders.

Times are shown in local time; the tests pin the zone to UTC so snapshots match on any machine.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memprobe_engine.recovery.read import RescoreFunction
from memprobe_tui.app import MemProbeApp
from memprobe_engine.protocols import open_session

os.environ["TZ"] = "UTC"
time.tzset()

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "tui"
RUN = FIXTURES / "run"
TRUNCATED = FIXTURES / "truncated"


def make_app(path: Path = RUN, rescore: RescoreFunction | None = None) -> MemProbeApp:
    """An app replaying ``path`` with no user keymap (tests must not read ~/.config)."""
    return MemProbeApp(session=open_session(path), live={"rescore": rescore}, keymap_path=None)


@pytest.fixture
def run_copy(tmp_path: Path) -> Iterator[Path]:
    """A private copy of the finished fixture run (for tests that append to it)."""
    target = tmp_path / "run"
    shutil.copytree(RUN, target)
    yield target
