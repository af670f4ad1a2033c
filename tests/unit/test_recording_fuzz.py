"""Property tests: mutated recordings (bytes, fields, types, spans, payloads, headers) are served
intact-events-only by every reader, or refused with the project's own error — never a foreign
exception, never past the time bound. ``bench/fuzz_recordings.py N`` runs the same at scale."""

from __future__ import annotations

import atexit
import functools
import random
import shutil
import tempfile
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprobe_engine.events.checksum import unseal
from memprobe_engine.events.integrity import check_recording
from memprobe_engine.events.reader import open_recording
from tests.fuzzing import EVENTS, HEADER, MUTATIONS, PAYLOADS, Base, classify, make_bases, mutate, warm_up, write_files

BOUND_S = 5.0
SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def _bases() -> tuple[Path, list[Base]]:
    workdir = Path(tempfile.mkdtemp(prefix="memprobe-fuzz-test-"))
    atexit.register(shutil.rmtree, workdir, True)  # cached for the session, so no fixture can own it
    bases = make_bases(workdir)
    warm_up(bases, workdir)  # imports (pandas) happen here, not inside a time-bounded input
    return workdir, bases


@SETTINGS
@given(base=st.integers(0, 2), seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 3))
def test_every_reader_serves_intact_events_or_raises_ours(base: int, seed: int, rounds: int) -> None:
    workdir, bases = _bases()
    files, notes = mutate(bases[base], random.Random(seed), rounds)
    write_files(workdir / "mutant", files)
    outcome = classify(workdir / "mutant", BOUND_S)
    assert outcome.kind in ("intact", "damaged", "refused"), (outcome, bases[base].name, notes)


@SETTINGS
@given(family=st.sampled_from(sorted(MUTATIONS)), seed=st.integers(0, 2**32 - 1))
def test_each_mutation_family_on_the_sealed_base(family: str, seed: int) -> None:
    workdir, bases = _bases()
    files = {HEADER: bases[0].header, EVENTS: bases[0].events, PAYLOADS: bases[0].payloads}
    note = MUTATIONS[family](random.Random(seed), files)
    write_files(workdir / "family", files)
    outcome = classify(workdir / "family", BOUND_S)
    assert outcome.kind in ("intact", "damaged", "refused"), (outcome, family, note)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(position=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_a_flipped_bit_loses_exactly_the_lines_it_touched(position: float, bit: int) -> None:
    """Schema 2 seals every line: one flipped bit anywhere costs exactly the line(s) holding it (two
    when it hits a newline), and every other event is served unchanged."""
    workdir, bases = _bases()
    base = bases[0]
    lines = base.events.splitlines(keepends=True)
    at = int(position * len(base.events))
    blob = bytearray(base.events)
    blob[at] ^= 1 << bit
    write_files(workdir / "flip", {HEADER: base.header, EVENTS: bytes(blob), PAYLOADS: base.payloads})
    ends, touched = 0, set()
    for number, line in enumerate(lines):
        start, ends = ends, ends + len(line)
        if start <= at < ends:
            touched.add(number)
            if line[at - start:at - start + 1] == b"\n" and number + 1 < len(lines):
                touched.add(number + 1)  # a newline turned into another byte joins two lines
    expected = [orjson.loads(unseal(line)[0]) for number, line in enumerate(lines) if number not in touched]
    with open_recording(workdir / "flip") as reader:
        served = [event.model_dump(exclude_none=True) for event in reader.iter_events()]
        damage = check_recording(reader)
    assert served == expected
    assert damage.bad_lines or damage.tail_bytes
