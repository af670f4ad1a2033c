"""Mutated recordings and the readers they are fed to: shared by the property test and
``bench/fuzz_recordings.py``.

A *base* recording is a small protocol-A-shaped run (``tests/synthetic.py``) in schema 2, and the
schema-1 and schema-0 fixtures. A *mutation* changes one thing the way damage or a buggy producer
would: bytes (flip, insert, delete, truncate, duplicate or swap lines), a field's value or type (the
line is re-sealed, so only typed validation can catch it), span ids and parents (cycles, unknown
parents, reused ids), the payload file (deleted, emptied, flipped, torn, data changed under its hash)
and the header. :func:`run_readers` then opens the mutant with every reader the product has — the
reader and its integrity check, the summary, the replay index and its folds, the store timeline, the
report frames, the replay backend, the browser's catalog — and says how it went: each must serve the
intact events or raise the project's own error type (:class:`MemProbeError`).
"""

from __future__ import annotations

import random
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.checksum import seal, unseal
from memprobe_engine.protocols import open_session

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EVENTS, PAYLOADS, HEADER = "events.jsonl", "payloads.jsonl", "header.json"


@dataclass(frozen=True)
class Base:
    """One base recording held in memory: its three files' bytes."""

    name: str
    header: bytes
    events: bytes
    payloads: bytes | None


def make_bases(workdir: Path) -> list[Base]:
    """The base recordings: a fresh schema-2 synthetic run, the schema-1 TUI fixture, the schema-0 one."""
    from tests.synthetic import generic_users, write_synthetic_run

    v2 = workdir / "base-v2"
    write_synthetic_run(v2, generic_users(1, 2), ["amem"], turns=(1, 1), seed=3)
    bases = [_load("v2", v2)]
    for name, path in (("v1", FIXTURES / "tui" / "run"), ("v0", FIXTURES / "recording-v0")):
        bases.append(_load(name, path))
    # The schema-1 fixture's first 100 lines: each input costs time linear in its size.
    v1 = bases[1]
    bases[1] = Base("v1", v1.header, b"".join(v1.events.splitlines(keepends=True)[:100]), v1.payloads)
    return bases


def _load(name: str, path: Path) -> Base:
    payloads = path / PAYLOADS
    return Base(name, (path / HEADER).read_bytes(), (path / EVENTS).read_bytes(),
                payloads.read_bytes() if payloads.exists() else None)


# -- mutations -------------------------------------------------------------------------------------

Files = dict[str, bytes | None]
Mutation = Callable[[random.Random, Files], str]

_ODD_VALUES: list[Any] = [None, True, -1, 0, 2**63 - 1, -(2**63), 1.5e308, "", "x" * 300, [], [1, [2]], {}, {"kind": "judge_score"},
                          "sha256:" + "0" * 64, "\u0000\udcff".encode("utf-8", "surrogatepass").decode("latin-1")]


#: Stands for a very deeply nested array in an edited line (orjson will not serialize one).
_DEEP = "__deeply_nested__"
_DEEP_BYTES = b"[" * 1500 + b'"leaf"' + b"]" * 1500


def _lines(files: Files) -> list[bytes]:
    return (files[EVENTS] or b"").splitlines(keepends=True)


def _reseal(line: bytes, data: dict[str, Any]) -> bytes:
    """Re-serialize an edited event and seal it again when the original line carried a seal."""
    _, sealed = unseal(line)
    body = orjson.dumps(data).replace(b'"%s"' % _DEEP.encode(), _DEEP_BYTES)
    return (seal(body) if sealed is not None else body) + b"\n"


def _edit_line(rng: random.Random, files: Files, edit: Callable[[dict[str, Any]], None],
               want: Callable[[dict[str, Any]], bool] = lambda d: True) -> str:
    lines = _lines(files)
    candidates = []
    for i, line in enumerate(lines):
        try:
            data = orjson.loads(unseal(line)[0])
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict) and want(data):
            candidates.append((i, data))
    if not candidates:
        return "no candidate line"
    i, data = rng.choice(candidates)
    edit(data)
    lines[i] = _reseal(lines[i], data)
    files[EVENTS] = b"".join(lines)
    return f"line {i + 1}"


def m_flip_byte(rng: random.Random, files: Files) -> str:
    blob = bytearray(files[EVENTS] or b"")
    if not blob:
        return "empty"
    at = rng.randrange(len(blob))
    blob[at] ^= 1 << rng.randrange(8)
    files[EVENTS] = bytes(blob)
    return f"flip byte {at}"


def m_bytes(rng: random.Random, files: Files) -> str:
    blob = bytearray(files[EVENTS] or b"")
    at = rng.randrange(len(blob) + 1)
    choice = rng.randrange(5)
    if choice == 0:
        blob[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif choice == 1:
        del blob[at:at + rng.randint(1, 64)]
    elif choice == 2:
        del blob[at:]
    elif choice == 3:
        blob[at:at] = b"\n" * rng.randint(1, 3)
    else:
        blob[at:at] = rng.choice([b"\xff\xfe", b"{", b"}", b'"', b"\\", b"[" * 2000, b"\x00"])
    files[EVENTS] = bytes(blob)
    return f"bytes op {choice} at {at}"


def m_lines(rng: random.Random, files: Files) -> str:
    lines = _lines(files)
    if len(lines) < 2:
        return "too short"
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    choice = rng.randrange(3)
    if choice == 0:
        lines.insert(j, lines[i])
    elif choice == 1:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        del lines[i]
    files[EVENTS] = b"".join(lines)
    return f"lines op {choice} {i}/{j}"


def m_field(rng: random.Random, files: Files) -> str:
    """A field set to a value of a random (often wrong) type; the line is re-sealed."""
    def edit(data: dict[str, Any]) -> None:
        key = rng.choice(list(data) + ["kind", "seq", "extra_field"])
        value = rng.choice(_ODD_VALUES + [_DEEP, [[[[[[[[1]]]]]]]]])
        data[key] = value
    return _edit_line(rng, files, edit)


def m_nested_field(rng: random.Random, files: Files) -> str:
    """A value inside a nested object (usage, attrs, messages, patch, scores) changed."""
    def edit(data: dict[str, Any]) -> None:
        containers = [(k, v) for k, v in data.items() if isinstance(v, (dict, list)) and v]
        if not containers:
            data["attrs"] = rng.choice(_ODD_VALUES)
            return
        key, value = rng.choice(containers)
        if isinstance(value, dict):
            value[rng.choice(list(value))] = rng.choice(_ODD_VALUES)
        else:
            value[rng.randrange(len(value))] = rng.choice(_ODD_VALUES)
    return _edit_line(rng, files, edit)


def m_span(rng: random.Random, files: Files) -> str:
    """Span ids rewired: another span's id (reuse / cycle), a later span as parent, self as parent."""
    lines = _lines(files)
    ids = []
    for line in lines:
        try:
            data = orjson.loads(unseal(line)[0])
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("span_id"), str):
            ids.append(data["span_id"])
    if not ids:
        return "no spans"

    def edit(data: dict[str, Any]) -> None:
        field = rng.choice(["span_id", "parent_span_id"])
        data[field] = rng.choice(ids + [data.get("span_id"), "nope", None])

    return _edit_line(rng, files, edit, want=lambda d: d.get("kind") in ("span_begin", "span_end")
                      or "span_id" in d)


def m_payloads(rng: random.Random, files: Files) -> str:
    blob = files[PAYLOADS]
    choice = rng.randrange(6)
    if choice == 0 or blob is None:
        files[PAYLOADS] = None
    elif choice == 1:
        files[PAYLOADS] = b""
    elif choice == 2 and blob:
        data = bytearray(blob)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        files[PAYLOADS] = bytes(data)
    elif choice == 3 and blob:
        files[PAYLOADS] = blob[:rng.randrange(len(blob))]
    elif choice == 4:
        lines = blob.splitlines(keepends=True)
        if lines:
            i = rng.randrange(len(lines))
            record = orjson.loads(lines[i])
            record["data"] = rng.choice(_ODD_VALUES)
            lines[i] = orjson.dumps(record) + b"\n"
        files[PAYLOADS] = b"".join(lines)
    else:
        files[PAYLOADS] = blob + rng.choice([b"not json\n", b'{"hash": 5, "data": 1}\n', b"[]\n", b'{"hash":"x"'])
    return f"payloads op {choice}"


def m_header(rng: random.Random, files: Files) -> str:
    choice = rng.randrange(4)
    header = files[HEADER] or b""
    if choice == 0:
        files[HEADER] = header[:rng.randrange(len(header) + 1)]
    else:
        try:
            data = orjson.loads(header)
        except orjson.JSONDecodeError:
            return "header not JSON"
        if choice == 1:
            data["schema_version"] = rng.choice([-1, 0, 1, 2, 3, "2", None, 1.5, True, [2]])
        elif choice == 2:
            data[rng.choice(list(data))] = rng.choice(_ODD_VALUES)
        else:
            data.pop(rng.choice(list(data)), None)
        files[HEADER] = orjson.dumps(data)
    return f"header op {choice}"


MUTATIONS: dict[str, Mutation] = {
    "flip": m_flip_byte, "bytes": m_bytes, "lines": m_lines, "field": m_field, "nested": m_nested_field,
    "span": m_span, "payloads": m_payloads, "header": m_header,
}


def mutate(base: Base, rng: random.Random, rounds: int = 1) -> tuple[Files, list[str]]:
    files: Files = {HEADER: base.header, EVENTS: base.events, PAYLOADS: base.payloads}
    notes = []
    for _ in range(rounds):
        name = rng.choice(list(MUTATIONS))
        try:
            notes.append(f"{name}: {MUTATIONS[name](rng, files)}")
        except (ValueError, TypeError, IndexError, KeyError) as err:
            # A mutation that does not apply to what an earlier round left (e.g. a torn payload file).
            notes.append(f"{name}: not applicable ({type(err).__name__})")
    return files, notes


def write_files(directory: Path, files: Files) -> None:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for name, blob in files.items():
        if blob is not None:
            (directory / name).write_bytes(blob)


# -- readers ---------------------------------------------------------------------------------------

class Timeout(BaseException):
    """Raised by the alarm when one input runs past its time bound (a BaseException, so no reader's
    ``except Exception`` swallows it)."""


@contextmanager
def time_bound(seconds: float, *, cpu: bool = False) -> Iterator[None]:
    """Raise :class:`Timeout` after ``seconds`` of wall time, or of this process's CPU time with
    ``cpu=True`` (a loop that never ends burns CPU, so it is caught either way; CPU time does not count
    the time a heavily shared machine spends running other processes)."""
    def _alarm(signum: int, frame: FrameType | None) -> None:
        raise Timeout()

    which, timer = (signal.SIGPROF, signal.ITIMER_PROF) if cpu else (signal.SIGALRM, signal.ITIMER_REAL)
    previous = signal.signal(which, _alarm)
    signal.setitimer(timer, seconds)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(which, previous)


@dataclass
class Outcome:
    """How one input went: ``intact`` (no damage found), ``damaged`` (damage reported, intact events
    served), ``refused`` (a MemProbeError), ``foreign`` (any other exception: a bug), ``timeout``."""

    kind: str
    seconds: float
    detail: str = ""
    served: int = 0


def run_readers(directory: Path, *, tables: bool = True) -> tuple[int, bool]:
    """Feed one recording to every reader; returns how many events the reader served and whether
    the integrity check found it intact. ``tables`` also runs the replay backend's load and the
    report (frames and tables: pandas, the slowest step, so the bench samples it).

    Raises MemProbeError where a reader refuses the recording; anything else escaping is a bug.
    """
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.events.summary import summarize
    from memprobe_engine.llm.backends.replay import ReplayBackend
    from memprobe_engine.recovery.read.frames import load_frames
    from memprobe_engine.recovery.read.scores import score_board
    from memprobe_engine.recovery.read.tables import build_tables, parse_table_names
    from memprobe_engine.replay.catalog import describe_recording
    from memprobe_engine.replay.queries import episodes, units

    describe_recording(directory)
    with open_recording(directory) as reader:
        served = sum(1 for _ in reader.iter_events())
        summarize(reader)
    session = open_session(directory)
    try:
        session.build_index()  # runs the integrity check once the index is complete
        clean = session.integrity is not None and session.integrity.clean
        session.damage_message()
        score_board(session).headline()
        for unit in units(session):
            episodes(session, unit.user_id, unit.system)
            for seq in session.memory_seqs(unit.user_id, unit.system)[-1:]:
                session.store_at(unit.user_id, unit.system, seq)
    finally:
        session.close()
    if not tables:
        return served, clean
    try:
        ReplayBackend(directory)
    except MemProbeError:
        pass
    frames = load_frames([directory])
    build_tables(frames, parse_table_names("2,3,4,13,14"))
    return served, clean


def classify(directory: Path, seconds: float = 5.0, *, tables: bool = True, cpu: bool = False) -> Outcome:
    """Run the readers under a time bound (wall time, or CPU time with ``cpu``) and classify what happened."""
    started = time.perf_counter()
    try:
        with time_bound(seconds, cpu=cpu):
            served, clean = run_readers(directory, tables=tables)
    except Timeout:
        return Outcome("timeout", time.perf_counter() - started)
    except MemProbeError as err:
        return Outcome("refused", time.perf_counter() - started, str(err)[:200])
    except Exception as err:  # noqa: BLE001 - the point is to catch what should not escape
        where = traceback.extract_tb(err.__traceback__)[-1]
        return Outcome("foreign", time.perf_counter() - started,
                       f"{type(err).__name__} at {Path(where.filename).name}:{where.lineno}: {str(err)[:120]}")
    return Outcome("intact" if clean else "damaged", time.perf_counter() - started, served=served)


def warm_up(bases: list[Base], workdir: Path) -> None:
    """Run every reader once on an intact base, so imports (pandas) are not timed as an input."""
    files: Files = {HEADER: bases[0].header, EVENTS: bases[0].events, PAYLOADS: bases[0].payloads}
    write_files(workdir / "warm", files)
    classify(workdir / "warm", 60.0)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="memprobe-fuzz-"))
