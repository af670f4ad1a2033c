"""A recording opened for replay: the reader, its run index and store timeline, shared safely.

A replay UI reads events on its own thread (stepping must answer in milliseconds) while worker
threads index the recording, rebuild memory stores or follow a live run. The reader's LRU cache is
not thread-safe, so every parsed read goes through :meth:`ReplaySession.event`, which holds one
lock; the long passes (run index, store timeline scan) read raw bytes without that lock so they
never stall the UI. Lock order is always store lock, then read lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memprobe_engine.processes import running
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.integrity import QUICK_CHECK_ABOVE, check_recording
from memprobe_engine.events.reader import DamagedEvent, DamageReport, RecordingReader, open_recording
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.memory.timeline import Items, StoreDiff, StoreTimeline, store_diff
from memprobe_engine.replay.index import IndexFold, Progress, RunIndex, StopFlag, extend_run_index


@dataclass(frozen=True)
class Damage:
    """What a replay cannot show: a torn last line and lines that are not events. ``report`` is the
    whole-recording integrity check (``events/integrity.py``) once it has run; the banner then names
    the same counts as ``memprobe recording verify``."""

    tail_bytes: int
    bad_lines: dict[int, str]
    report: DamageReport | None = None

    @property
    def clean(self) -> bool:
        if self.report is not None:
            return self.report.clean
        return not self.tail_bytes and not self.bad_lines

    def message(self, events_path: Path, live: bool) -> str | None:
        """One sentence for a banner, or None when nothing is missing (and no span was interrupted)."""
        if self.report is not None and not self.report.clean:
            if live and self.report.count == bool(self.report.tail_bytes) and self.tail_bytes:
                return (f"{events_path} ends with {self.tail_bytes:,} bytes of a line still being written; "
                        f"it is not shown. Every complete event is shown.")
            return (f"damaged recording {events_path.parent}: {self.report.summary()}. Damaged lines are "
                    f"skipped; every intact event is shown (details: memprobe recording verify).")
        parts: list[str] = []
        if self.tail_bytes:
            cause = "a line still being written" if live else "a torn last line (the writer stopped mid-event)"
            parts.append(f"{events_path} ends with {self.tail_bytes:,} bytes of {cause}; it is not shown")
        if self.bad_lines:
            first = min(self.bad_lines)
            parts.append(f"{len(self.bad_lines)} line(s) are not valid events and are skipped "
                         f"(first: line {first + 1}, {self.bad_lines[first]})")
        if parts:
            return "; ".join(parts) + ". Every complete event is shown."
        # Not damage, but worth a line: the run was killed once, and resuming closed these spans.
        note = self.report.interrupted_note() if self.report is not None else None
        return f"{note}. Every event is shown." if note else None


class ReplaySession:
    """One open recording plus what the replay has learned about it. Use :meth:`open`."""

    def __init__(self, reader: RecordingReader, folds: Mapping[str, IndexFold] | None = None) -> None:
        self.reader = reader
        self.index = RunIndex(folds=dict(folds or {}))
        self.timeline = StoreTimeline(reader)
        self._read_lock = threading.RLock()
        self._pass_lock = threading.Lock()
        self._store_lock = threading.Lock()
        #: Bumped whenever the index learns new lines, so screens know to redraw.
        self.version = 0
        #: True once a full index pass has covered every line the reader had at that time.
        self.indexed = False
        self.closed = False
        #: The integrity check of the whole recording, run once the first index pass completes.
        self.integrity: DamageReport | None = None

    @classmethod
    def open(cls, directory: Path | str, folds: Mapping[str, IndexFold] | None = None) -> ReplaySession:
        """Open a recording; raises RecordingError (a user-facing message) if it is not one. ``folds`` are
        the recording's protocol's index folds (``memprobe_engine.protocols.open_session`` passes them),
        fed by the first pass; a fold asked for later is attached then, at the cost of one more scan."""
        return cls(open_recording(directory), folds)

    # -- identity ------------------------------------------------------------------------------
    @property
    def directory(self) -> Path:
        return self.reader.directory

    @property
    def header(self) -> RecordingHeader:
        return self.reader.header

    def __len__(self) -> int:
        return len(self.reader)

    @property
    def live(self) -> bool:
        """No run_end after the last run_start: a run still writing, or one that died without closing."""
        return self.index.run_status is None

    def writer_alive(self) -> bool:
        """Whether the process named in ``writer.lock`` still exists (a live run is appending)."""
        return writer_alive(self.directory)

    # -- reading (thread-safe) ----------------------------------------------------------------
    def event(self, line: int) -> AnyEvent:
        """The parsed event at ``line``; raises DamagedEvent for a line that is not one."""
        with self._read_lock:
            return self.reader.get(line)

    def event_or_none(self, line: int) -> AnyEvent | None:
        try:
            return self.event(line)
        except DamagedEvent:
            return None

    def raw(self, line: int) -> bytes:
        return self.reader.raw(line)  # pread: safe from any thread

    def payload(self, ref: str) -> object:
        with self._read_lock:
            return self.reader.payload(ref)

    def line_of_seq(self, seq: int) -> int | None:
        """The line holding event ``seq``: the same number for one writer's recordings, else searched."""
        total = len(self.reader)
        if 0 <= seq < total and self.raw(seq).startswith(b'{"seq":%d,' % seq):
            return seq
        lo, hi = 0, total - 1
        while lo <= hi:  # seqs increase along the file, so bisect on them
            mid = (lo + hi) // 2
            found = _seq_of(self.raw(mid))
            if found is None:
                return None
            if found == seq:
                return mid
            lo, hi = (mid + 1, hi) if found < seq else (lo, mid - 1)
        return None

    def event_by_seq(self, seq: int) -> AnyEvent | None:
        line = self.line_of_seq(seq)
        return None if line is None else self.event_or_none(line)

    # -- index ---------------------------------------------------------------------------------
    def build_index(self, progress: Progress | None = None, should_stop: StopFlag | None = None) -> int:
        """Index every line not indexed yet (run it in a worker thread); returns lines scanned."""
        with self._pass_lock:
            scanned = extend_run_index(self.index, self.reader, progress, should_stop)
            if self.index.scanned_lines >= len(self.reader):
                first = not self.indexed
                self.indexed = True
                if first or (scanned and self.integrity is not None and not self.integrity.clean):
                    # Once the index is complete, and again when damage was found and lines came in.
                    self.integrity = self._checked(should_stop)
            if scanned:
                self.version += 1
            return scanned

    def follow(self) -> int:
        """Pick up events a live run appended since the last call; returns how many are new."""
        with self._read_lock:
            added = self.reader.refresh()
        if added or self.index.scanned_lines < len(self.reader):
            self.build_index()
        return added

    def check(self) -> DamageReport:
        """Run the whole-recording integrity check (in a worker: it reads every line once; a very
        large recording gets the quick check without typed validation). Kept for :meth:`damage`."""
        with self._pass_lock:
            report = self._checked(None)
            self.integrity = report
            self.version += 1
            return report

    def _checked(self, should_stop: StopFlag | None) -> DamageReport:
        """The integrity check; a large recording gets the quick one (seal, JSON, envelope, span
        tree, payloads; no typed validation of every line), and then keeps the wrong-typed lines
        that reads so far found (the index pass validates every scoring and lifecycle event), so
        the banner names them too. Other wrong-typed lines are skipped when shown, never served,
        and ``memprobe recording verify`` (always the full check) names every one."""
        deep = len(self.reader) <= QUICK_CHECK_ABOVE
        found_before = dict(self.reader.damage.bad_lines)
        report = check_recording(self.reader, deep=deep, should_stop=should_stop)
        if not deep:
            for line, reason in found_before.items():
                report.bad_lines.setdefault(line, reason)
        return report

    def damage(self) -> Damage:
        bad = {**self.reader.damage.bad_lines, **self.index.bad_lines}
        return Damage(tail_bytes=self.reader.damage.tail_bytes, bad_lines=bad, report=self.integrity)

    def damage_message(self) -> str | None:
        return self.damage().message(self.reader.path, self.live and self.writer_alive())

    # -- memory stores ---------------------------------------------------------------------------
    def store_at(self, unit: str, system: str, upto_seq: int) -> Items:
        """The store of (unit, system) after every memory event with seq <= ``upto_seq``."""
        with self._store_lock:
            self.timeline.refresh()  # the long scan reads raw lines only: no read lock held
            with self._read_lock:
                return self.timeline.store_at(unit=unit, system=system, upto_seq=upto_seq)

    def scan_memory(self) -> None:
        """Find every memory event now: the store timeline's one scan of the file (3.4 s at 1M events),
        which the first memory view would otherwise wait for. The TUI runs it in a worker right after
        the index pass, while the overview is read."""
        with self._store_lock:
            self.timeline.refresh()

    def memory_seqs(self, unit: str, system: str) -> list[int]:
        """Seqs of the memory events of one store: the points where it changes."""
        with self._store_lock:
            return self.timeline.event_seqs(unit=unit, system=system)

    @staticmethod
    def diff(before: Items, after: Items) -> StoreDiff:
        return store_diff(before, after)

    def close(self) -> None:
        """Close the file once no pass, rebuild or read is using it (idempotent; may block briefly:
        call it off the UI thread when workers may still be running)."""
        with self._pass_lock, self._store_lock, self._read_lock:
            if not self.closed:
                self.closed = True
                self.reader.close()


def _seq_of(raw: bytes) -> int | None:
    if not raw.startswith(b'{"seq":'):
        return None
    end = raw.find(b",", 7)
    try:
        return int(raw[7:end])
    except ValueError:
        return None


def writer_alive(directory: Path) -> bool:
    """True when ``writer.lock`` names a process that exists (a run is, or may be, appending)."""
    try:
        pid = int((directory / "writer.lock").read_text().strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    return running(pid)
