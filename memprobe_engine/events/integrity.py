"""The whole-recording integrity check: one function, so every reader reports the same damage.

``recording verify``, ``memprobe report`` (a warning on stderr), the TUI (a banner) and the browser
(a status) all call :func:`check_recording` and print its :class:`DamageReport`, so they name the
same counts. The check reads every line once through the reader (seal, JSON, object, schema
upgrade, typed validation), follows the span tree with :class:`SpanTree` (cycles, unknown parents,
reused ids, unclosed spans) and resolves every payload reference against ``payloads.jsonl``
(missing, damaged, hash mismatch), plus the payload file's own bad lines and torn tail.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from memprobe_engine.processes import running
from memprobe_engine.events.reader import DamagedEvent, DamageReport, RecordingReader
from memprobe_engine.events.spans import SpanTree

#: A recording above this many lines gets the quick check in interactive readers (no typed
#: validation of every line); ``recording verify`` always runs the full one.
QUICK_CHECK_ABOVE = 300_000
_REF_MARK = b'_ref":"sha256:'
#: A member ``"<key>_ref":"sha256:<digest>"`` of the object (the key and value without escapes).
_REF_MEMBER = re.compile(rb'[{,]"[^"\\]*_ref":"(sha256:[^"\\]*)"')

Progress = Callable[[int, int], None]


def check_recording(reader: RecordingReader, *, deep: bool = True, progress: Progress | None = None,
                    should_stop: Callable[[], bool] | None = None) -> DamageReport:
    """Check everything the reader has indexed; the result also replaces ``reader.damage``.

    ``deep`` validates every line into its model (wrong-typed fields); without it lines are checked
    for seal, JSON and envelope only. ``progress(done, total)`` is called every 50,000 lines.
    """
    report = DamageReport(tail_bytes=reader.index.tail_bytes)
    reader.damage = report  # the reader files bad lines here as it decodes
    spans = SpanTree()
    store = reader.payloads
    store.refresh()
    stored = store.index.offsets
    # Only the references payloads.jsonl lacks are kept (ref -> first line): keeping every one held
    # ~17 MB at the check's peak on a million events (bench/tui.py's peak RSS).
    unresolved: dict[str, int] = {}
    total = len(reader)
    for line, raw in reader.raw_lines(range(total)):
        if line % 50_000 == 0:
            if should_stop is not None and should_stop():
                break
            if progress is not None:
                progress(line, total)
        try:
            data = reader.decode(line, raw)
            if deep:
                reader.parse(line, data)
        except DamagedEvent:
            continue
        kind = data["kind"]
        if kind == "span_begin" or kind == "span_end":
            span_id, parent = data.get("span_id"), data.get("parent_span_id")
            if not isinstance(span_id, str):
                report.bad_lines[line] = f"seq {data['seq']}: field span_id: {kind} without a span id"
                continue
            if kind == "span_begin":
                problem = spans.begin(span_id, parent if isinstance(parent, str) else None, line)
            else:
                problem = spans.end(span_id)
                if problem is None and data.get("status") == "interrupted":
                    report.interrupted_spans.append(span_id)
            if problem is not None:
                report.bad_lines[line] = f"seq {data['seq']}: {problem}"
        if _REF_MARK in raw:  # look for references only where the bytes hold one
            for ref in _refs(raw):
                if ref not in stored and ref not in unresolved:
                    unresolved[ref] = line
    if not writer_alive(reader.directory):  # a live run's open spans are still being worked on
        report.unclosed_spans = spans.unclosed()
    _check_payloads(reader, unresolved, report)
    if progress is not None:
        progress(total, total)
    return report


def damage_warning(name: str, report: DamageReport) -> str | None:
    """The one warning line a report prints for a damaged recording (None when intact)."""
    if report.clean:
        return None
    return (f"{name}: damaged recording: {report.summary()}; damaged lines are left out. Details: "
            f"`memprobe recording verify {name}`.")


def damage_warning_of(reader: RecordingReader) -> str | None:
    """The whole-recording check and its one warning line, for a command that reads a recording
    without a report of its own (``recording events``, ``rescore``, a run's ``--dialogues``): every
    reader of a damaged recording warns the same way."""
    return damage_warning(str(reader.directory), check_recording(reader))


def say_damage(reader: RecordingReader) -> None:
    """Print :func:`damage_warning_of` as one ``warning:`` line on stderr when the recording is damaged."""
    warning = damage_warning_of(reader)
    if warning:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[yellow]warning:[/] {escape(warning)}")


def interrupted_note(name: str, report: DamageReport) -> str | None:
    """The note a report prints for spans closed on resume (None when there are none)."""
    note = report.interrupted_note()
    return None if note is None else f"{name}: {note}."


def _refs(raw: bytes) -> Iterator[str]:
    """Payload references in an event's stored bytes: string members whose key ends in ``_ref`` and
    whose value starts with ``sha256:``, at any depth. Read from the bytes, not the parsed event: in
    JSON an unescaped quote after ``{`` or ``,`` always opens a key (a quote inside a string is
    written ``\\"``), so the pattern cannot match text inside a string, and no nested walk is needed
    (half the lines of a run hold references; walking them was most of the check's time)."""
    for match in _REF_MEMBER.finditer(raw):
        yield match.group(1).decode("ascii", "replace")


def _check_payloads(reader: RecordingReader, unresolved: dict[str, int], report: DamageReport) -> None:
    """``unresolved``: the references the lines hold that the payload index read before them lacked
    (ref -> first line); the index is read again here, so one a live run wrote meanwhile is found."""
    store = reader.payloads
    if unresolved:
        store.refresh()
    index = store.index  # one scan, shared with the reads below (a second one doubled the peak)
    for number, reason in index.bad_lines.items():
        report.payload_problems[f"payloads.jsonl line {number + 1}"] = reason
    report.payload_tail_bytes = index.tail_bytes
    for ref in index.offsets:
        problem = store.check(ref)
        if problem is not None:
            report.payload_problems[ref] = f"{problem} (does not match its hash)"
    for ref, line in unresolved.items():
        if ref not in index.offsets:
            where = "payloads.jsonl is missing" if not index.exists else "not in payloads.jsonl"
            report.payload_problems[ref] = f"referenced at line {line + 1}, {where}"


def writer_alive(directory: Path) -> bool:
    """True when ``writer.lock`` names a process that exists (a run is, or may be, appending)."""
    try:
        pid = int((directory / "writer.lock").read_text().strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():
        return pid == os.getpid() and _lock_held(directory)
    return running(pid)


def _lock_held(directory: Path) -> bool:
    """For our own pid: whether the lock is really held now (a closed writer leaves its pid behind)."""
    import fcntl

    try:
        fd = os.open(directory / "writer.lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
