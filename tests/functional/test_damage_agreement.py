"""A garbled line in the middle of events.jsonl and a flipped byte that still parses as JSON are
reported with the same count by `recording verify`, `memprobe report`, the browser and the TUI."""

from __future__ import annotations

from pathlib import Path

import orjson
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.events.checksum import unseal
from memprobe_engine.recovery.read.frames import load_frames
from memprobe_engine.protocols import headline_and_damage
from tests.synthetic import generic_users, write_synthetic_run
from memprobe_engine.protocols import open_session


def _damaged_recording(directory: Path) -> tuple[int, int]:
    write_synthetic_run(directory, generic_users(1, 2), ["amem"], turns=(1, 2), seed=11)
    path = directory / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    # Message lines, so no span is lost with them (a lost span_begin also damages its span_end).
    garbled = next(i for i in range(len(lines) // 3, len(lines)) if b'"kind":"message"' in lines[i])
    lines[garbled] = lines[garbled][:20] + b"\x00garbage" + lines[garbled][28:]
    flipped = next(i for i in range(garbled + 1, len(lines))
                   if b'"kind":"message"' in lines[i] and b"a" in lines[i][40:])
    at = lines[flipped].index(b"a", 40)
    lines[flipped] = lines[flipped][:at] + b"b" + lines[flipped][at + 1:]
    orjson.loads(unseal(lines[flipped])[0])  # still valid JSON: only the seal can tell
    path.write_bytes(b"".join(lines))
    return garbled, flipped


def test_verify_report_browser_and_tui_name_the_same_damage(tmp_path: Path) -> None:
    record = tmp_path / "run"
    garbled, flipped = _damaged_recording(record)

    verified = CliRunner().invoke(app, ["recording", "verify", str(record)])
    assert verified.exit_code == 1
    assert f"line {garbled + 1}:" in verified.output and f"line {flipped + 1}: checksum mismatch" in verified.output
    assert "2 damaged line(s)" in " ".join(verified.output.split())

    warnings = load_frames([record]).warnings
    assert any("2 damaged line(s)" in w and f"line {garbled + 1}, {flipped + 1}" in w for w in warnings), warnings

    _, browser = headline_and_damage(record)
    assert browser is not None and sorted(browser.bad_lines) == [garbled, flipped]

    session = open_session(record)
    try:
        session.build_index()
        damage = session.damage()
        message = session.damage_message()
    finally:
        session.close()
    assert damage.report is not None and sorted(damage.report.bad_lines) == [garbled, flipped]
    assert message is not None and "2 damaged line(s)" in message
    assert damage.report.count == browser.count
