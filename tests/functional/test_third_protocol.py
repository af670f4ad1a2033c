"""A third protocol is one package plus one registry line: ``tests/protocol_c`` (keyrecall), registered by
an entry point written here, runs, resumes, reports, compares and opens in the TUI through the shared
commands, adds a command of its own to a shared group — and no module of MemProbe names it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from memprobe_engine import protocols as registry
from memprobe_engine.protocols import open_session
from tests.protocol_c.run import CRASH_ENV

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one registry line: an installed distribution's entry point naming the spec."""
    folder = tmp_path_factory.mktemp("site")
    info = folder / "keyrecall-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: keyrecall\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[memprobe.protocols]\nkeyrecall = tests.protocol_c.spec:SPEC\n")
    return folder


def memprobe(site: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "COLUMNS": "100"}
    env.pop(CRASH_ENV, None)
    if crash is not None:
        env[CRASH_ENV] = crash
    return subprocess.run([sys.executable, "-m", "memprobe_tui.main", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def unit_attempts(record: Path) -> dict[str, int]:
    attempts: dict[str, int] = {}
    for line in (record / "events.jsonl").read_bytes().splitlines():
        event = orjson.loads(line)
        if event.get("kind") == "span_begin" and event.get("span_kind") == "unit":
            attempts[event["system"]] = attempts.get(event["system"], 0) + 1
    return attempts


@pytest.fixture(scope="module")
def runs(site: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Run A crashes in its second unit and is resumed; run B asks with a larger k."""
    root = tmp_path_factory.mktemp("keyrecall")
    first, second = root / "k2", root / "k3"
    crashed = memprobe(site, "run", "--suite", "keyrecall", "--record", str(first), "--systems", "nomem,longctx_full",
                       "-P", "facts=3", crash="longctx_full")
    assert crashed.returncode != 0, crashed.stdout + crashed.stderr
    assert unit_attempts(first) == {"nomem": 1, "longctx_full": 1}
    resumed = memprobe(site, "run", "--suite", "keyrecall", "--record", str(first), "--systems", "nomem,longctx_full",
                       "-P", "facts=3")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # The finished unit is not run again; the failed one is.
    assert unit_attempts(first) == {"nomem": 1, "longctx_full": 2}
    done = memprobe(site, "run", "--suite", "keyrecall", "--record", str(second), "--systems", "nomem,longctx_full",
                    "-P", "facts=3", "-P", "k=3")
    assert done.returncode == 0, done.stdout + done.stderr
    return first, second


def test_it_reports_and_compares_through_the_shared_commands(site: Path, runs: tuple[Path, Path]) -> None:
    first, second = runs
    report = memprobe(site, "report", str(first))
    assert report.returncode == 0, report.stderr
    assert "keyrecall" in report.stdout and "nomem" in report.stdout and "0.000" in report.stdout
    compared = memprobe(site, "compare", str(first), str(second))
    assert compared.returncode == 0, compared.stderr
    # longctx_full keeps every code: with k=3 of 3 codes, every one is found.
    assert "longctx_full: recall@k" in compared.stdout and "→ 1.000" in compared.stdout


def test_the_exports_it_cannot_give_say_so_in_one_line(site: Path, runs: tuple[Path, Path], tmp_path: Path) -> None:
    first, second = runs
    traces = memprobe(site, "export", "otel", str(first), "--out", str(tmp_path / "k.otlp.json"))
    assert traces.returncode == 0, traces.stderr  # traces are every protocol's: the recording's own spans
    assert orjson.loads((tmp_path / "k.otlp.json").read_bytes())["resourceSpans"]
    for args, says in ((("export", "eee", str(first)), "have no Every Eval Ever results"),
                       (("export", "html", str(first)), "have no HTML page"),
                       (("export", "csv", str(first)), "have no report frames to export"),
                       (("compare", str(first), str(second), "--fail-on", "regression"), "have no CI gate")):
        done = memprobe(site, *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, (args, done.stderr)
        assert done.stderr.startswith("error: ") and "keyrecall runs (keyrecall: " in done.stderr
    assert not any(REPO.glob("k2*"))  # nothing half-written where the default output would go


def test_its_options_are_its_own(site: Path, tmp_path: Path) -> None:
    unknown = memprobe(site, "run", "--suite", "keyrecall", "--record", str(tmp_path / "x"), "-P", "turns=3")
    assert unknown.returncode == 2 and "has no option 'turns' (its options: facts, k)" in unknown.stderr
    foreign = memprobe(site, "run", "--suite", "keyrecall", "--record", str(tmp_path / "x"), "--max-turns", "3")
    assert foreign.returncode == 2 and "--max-turns: only a --suite recovery run reads this flag" in foreign.stderr
    assert not (tmp_path / "x").exists()


def test_it_adds_its_own_command_to_a_shared_group(site: Path) -> None:
    listed = memprobe(site, "generate", "--help")
    assert listed.returncode == 0, listed.stderr
    assert all(name in listed.stdout for name in ("users", "episodes", "lockers"))
    printed = memprobe(site, "generate", "lockers", "--facts", "2", "--seed", "1")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == ["locker 1: 2648", "locker 2: 7377"]


@pytest.fixture
def registered(site: Path) -> Iterator[None]:
    """The entry point visible in this process too (for the TUI, which runs in-process here)."""
    from memprobe_tui import protocols as tui_registry

    sys.path.insert(0, str(site))
    registry.protocols.cache_clear()
    tui_registry.entries.cache_clear()
    try:
        yield
    finally:
        sys.path.remove(str(site))
        registry.protocols.cache_clear()
        tui_registry.entries.cache_clear()


@pytest.mark.usefixtures("registered")
async def test_it_opens_in_the_tui_on_the_generic_overview(runs: tuple[Path, Path]) -> None:
    from textual.widgets import DataTable

    from memprobe_tui.app import MemProbeApp
    from memprobe_tui.screens.generic_overview import GenericOverviewScreen
    from memprobe_tui.screens.memory import MemoryScreen

    session = open_session(runs[0])
    try:
        app = MemProbeApp(session=session, keymap_path=None)
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if isinstance(app.screen, GenericOverviewScreen) and app.screen.units:
                    break
            screen = app.screen
            assert isinstance(screen, GenericOverviewScreen)
            rows = [row[:3] for row in screen.units]  # units start costliest first, so order is not asserted
            assert sorted(rows) == [("recall", "longctx_full", "error"), ("recall", "longctx_full", "ok"),
                                    ("recall", "nomem", "ok")]
            assert screen.query_one(DataTable).row_count == 5  # three unit attempts, two metrics
            await pilot.press(*["down"] * rows.index(("recall", "longctx_full", "ok")), "enter")
            await pilot.pause(0.5)
            assert isinstance(app.screen, MemoryScreen)
            assert "longctx_full store" in app.screen.title_text
    finally:
        session.close()


def test_no_module_of_memprobe_names_it() -> None:
    named = [str(path.relative_to(REPO)) for folder in ("memprobe_engine", "memprobe_tui")
             for path in (REPO / folder).rglob("*.py") if "keyrecall" in path.read_text(encoding="utf-8")]
    assert named == []
