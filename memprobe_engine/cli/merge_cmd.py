"""``memprobe merge``: join the shard recordings of one run into a single new recording.

Shards of one run share their configuration except for which shard they are; the merged recording
takes the first shard's header, notes its inputs in ``config["merged_from"]`` and holds every
shard's events in input order, re-sequenced. Each shard numbered its spans on its own, so span ids
get a per-input prefix (``a/``, ``b/``, …) to stay unique, and the fields that point at another
event by sequence number are moved to the new numbers. Which fields point where is declared on the
event models (``SeqRef`` / ``SpanRef`` in ``events/base.py``), read here through ``POINTERS_OF_KIND``. Payloads are
content-addressed, so copying them keeps every payload reference valid.

The inputs must be one whole run: every shard ``I/N`` of one ``N``, each once. A shard given twice
(every unit twice), shards of different counts (or a shard with the full run, ``0/1``) and a
missing shard are refused, naming the inputs; ``--allow-incomplete`` merges a run with shards
missing and notes them in the merged header (``config["missing_shards"]``).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.base import SCHEMA_VERSION, EventBase, pointer_fields
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.events.merged import AskedTwice, span_prefix
from memprobe_engine.events.payloads import PAYLOADS_FILE
from memprobe_engine.events.reader import DamagedEvent, RecordingReader, open_recording
from memprobe_engine.events.union import POINTERS_OF_KIND
from memprobe_engine.events.writer import EventWriter, open_writer

#: Config keys that legitimately differ between shards of one run.
SHARD_KEYS = frozenset({"shard", "fingerprint", "merged_from", "missing_shards"})
#: The envelope's pointers, for a line whose kind this MemProbe does not know.
_ENVELOPE_POINTERS = pointer_fields(EventBase)
_MISSING = object()


@dataclass
class MergeResult:
    """What a merge wrote: events and payloads copied, and damaged lines skipped per input."""

    out: Path
    events: int = 0
    payloads: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    missing_shards: list[str] = field(default_factory=list)
    #: Model requests sent by more than one shard (shards that shared no response cache: a request two
    #: shards' units both ask, such as protocol A's stage 0 for a user whose systems fell into different
    #: shards, is paid for once per shard); ``events.merged`` declares how the merged recording shows it.
    asked: AskedTwice = field(default_factory=AskedTwice)

    @property
    def asked_again(self) -> int:
        """Distinct requests more than one shard sent."""
        return self.asked.requests


def check_compatible(inputs: Sequence[Path], headers: Sequence[RecordingHeader]) -> None:
    """RecordingError naming the first config key (or the suite) in which an input differs."""
    first, base = inputs[0], headers[0]
    for path, header in zip(inputs[1:], headers[1:]):
        if header.suite != base.suite:
            raise RecordingError(f"{path} is a {header.suite!r} run but {first} is a {base.suite!r} run; only shards "
                                 f"of one run can be merged.")
        for key in sorted((set(base.config) | set(header.config)) - SHARD_KEYS):
            ours, theirs = base.config.get(key, _MISSING), header.config.get(key, _MISSING)
            if ours != theirs:
                shown = ["(absent)" if v is _MISSING else repr(v) for v in (ours, theirs)]
                raise RecordingError(
                    f"{path} differs from {first} in config key {key!r} ({shown[1]} vs {shown[0]}); only "
                    f"{', '.join(sorted(SHARD_KEYS - {'merged_from'}))} may differ between shards of one run. "
                    f"Merge only shards run with the same configuration.")


def _shard_of(path: Path, header: RecordingHeader) -> tuple[int, int]:
    """(I, N) from the header's ``shard`` ("I/N"); a recording without one is the whole run, 0/1."""
    value = HeaderConfig.of(header).shard
    try:
        index, count = (int(part) for part in str(value).split("/"))
    except ValueError:
        raise RecordingError(f"{path}: its header names shard {value!r}, not I/N; it was not written by "
                             f"`memprobe run --shard`. Merge only shard recordings of one run.") from None
    if not 0 <= index < count:
        raise RecordingError(f"{path}: its header names shard {value!r}, outside 0..{count - 1}. Merge only shard "
                             f"recordings written by `memprobe run --shard`.")
    return index, count


def check_shard_set(inputs: Sequence[Path], headers: Sequence[RecordingHeader], *,
                    allow_incomplete: bool = False) -> list[str]:
    """RecordingError when ``inputs`` are not every shard of one run once; returns the missing
    shards (``"I/N"``) that ``allow_incomplete`` lets through."""
    shards = [_shard_of(path, header) for path, header in zip(inputs, headers)]

    def named(chosen: Sequence[int]) -> str:
        return ", ".join(f"{inputs[i]} (shard {shards[i][0]}/{shards[i][1]})" for i in chosen)

    counts = sorted({count for _, count in shards})
    if len(counts) > 1:
        raise RecordingError(f"these recordings are shards of different counts ({' vs '.join(map(str, counts))}; "
                             f"0/1 is a whole run): {named(range(len(inputs)))}. Merge the shards of one "
                             f"--shard I/N split only.")
    seen: dict[int, int] = {}
    for position, (index, _) in enumerate(shards):
        if index in seen:
            raise RecordingError(f"shard {index}/{counts[0]} is given twice: {named([seen[index], position])}; "
                                 f"every unit of it would be merged twice. Pass each shard once.")
        seen[index] = position
    if counts == [1]:  # one whole run: a "merge" would only copy it under a merged header
        raise RecordingError(f"{inputs[0]} is a whole run, not a shard (its header names no --shard I/N split), "
                             f"so there is nothing to merge. Merge the shard recordings of one `memprobe run "
                             f"--shard I/N` split; to copy a recording, copy its folder.")
    missing = [f"{index}/{counts[0]}" for index in range(counts[0]) if index not in seen]
    if missing and not allow_incomplete:
        raise RecordingError(f"shard(s) {', '.join(missing)} missing: given only {named(range(len(inputs)))}. "
                             f"Pass every shard of the run, or --allow-incomplete to merge a partial run (the "
                             f"merged header then lists the missing shards).")
    return missing


def _copy_payloads(source: Path, writer: EventWriter) -> int:
    """Re-store every complete payload line of ``source`` (a torn last line is skipped)."""
    path = source / PAYLOADS_FILE
    if not path.exists():
        return 0
    copied = 0
    with open(path, "rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break
            stored = orjson.loads(line)
            if writer.put_payload(stored["data"]) != stored["hash"]:
                raise RecordingError(f"{path}: payload {stored['hash']} does not match its content; the payload "
                                     f"store is damaged, so events referring to it could not be resolved.")
            copied += 1
    return copied


def _copy_events(reader: RecordingReader, prefix: str, writer: EventWriter,
                 asked: AskedTwice | None = None) -> tuple[int, int]:
    """Append ``reader``'s events to ``writer`` with prefixed span ids; returns (copied, skipped).
    ``asked`` takes in each event as the merged recording holds it (which shard sent which request)."""
    new_seq: dict[int, int] = {}
    copied = skipped = 0
    for line in range(len(reader)):
        try:
            data: dict[str, Any] = reader.get_dict(line)
        except DamagedEvent:
            skipped += 1
            continue
        for key, target in POINTERS_OF_KIND.get(str(data.get("kind")), _ENVELOPE_POINTERS).items():
            if data.get(key) is not None:
                data[key] = prefix + str(data[key]) if target == "span" else new_seq.get(data[key])
        if asked is not None:
            asked.add(data)
        old = data.get("seq")
        seq = writer.write_dict(data)
        if isinstance(old, int):
            new_seq[old] = seq
        copied += 1
    return copied, skipped


def merge_recordings(out: Path, inputs: Sequence[Path], progress: Callable[[str], None] | None = None, *,
                     allow_incomplete: bool = False) -> MergeResult:
    """Write the merge of ``inputs`` into the new recording ``out`` (removed again if the merge fails);
    ``progress`` hears of each input once it is copied; ``allow_incomplete`` lets shards be missing
    (see the module docstring)."""
    out, inputs = Path(out), [Path(p) for p in inputs]
    if not inputs:
        raise RecordingError("merge needs at least one input recording.")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RecordingError(f"{out} already exists; merge writes a new recording. Pass a new folder.")
    if any(out.resolve() == p.resolve() for p in inputs):
        raise RecordingError(f"{out} is one of the inputs; merge into a new folder.")
    result = MergeResult(out=out)
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(open_recording(p)) for p in inputs]
        check_compatible(inputs, [r.header for r in readers])
        missing = check_shard_set(inputs, [r.header for r in readers], allow_incomplete=allow_incomplete)
        result.missing_shards = missing
        first = readers[0].header
        header = first.model_copy(update={
            "schema_version": SCHEMA_VERSION, "created": time.time(),
            "config": {**first.config, "merged_from": [str(p) for p in inputs],
                       **({"missing_shards": missing} if missing else {})}})
        try:
            with open_writer(out, header) as writer:
                for index, (path, reader) in enumerate(zip(inputs, readers)):
                    result.payloads += _copy_payloads(path, writer)
                    copied, skipped = _copy_events(reader, span_prefix(index), writer, result.asked)
                    result.events += copied
                    if skipped or reader.damage.tail_bytes:
                        result.skipped[str(path)] = skipped + (1 if reader.damage.tail_bytes else 0)
                    if progress is not None:
                        progress(f"{path}: {copied:,} events")
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)
            raise
    return result


def merge(
    out: Annotated[Path, typer.Argument(help="New recording folder to create.")],
    inputs: Annotated[list[Path], typer.Argument(help="Shard recordings of one run, in order.")],
    allow_incomplete: Annotated[bool, typer.Option("--allow-incomplete", help="Merge even when shards are missing "
                                                   "(the merged header lists them).")] = False,
) -> None:
    """Join shard recordings of one run into one new recording (events re-sequenced, span ids kept unique)."""
    from memprobe_engine.orchestration.progress import CommandProgress

    with CommandProgress("merge", unit="recordings", total=len(inputs)) as progress:
        result = merge_recordings(out, inputs, progress=lambda note: progress.advance(note=note),
                                  allow_incomplete=allow_incomplete)
    console = Console(highlight=False)
    console.print(f"merged {result.events:,} events and {result.payloads:,} payloads from {len(inputs)} "
                  f"recordings into {result.out}")
    if result.asked.line():
        console.print(result.asked.line(), soft_wrap=True)
    if result.missing_shards:
        Console(stderr=True, highlight=False).print(
            f"[yellow]warning:[/] shard(s) {', '.join(result.missing_shards)} missing; the merged recording is "
            f"a partial run (its header lists them).", markup=True, soft_wrap=True)
    for path, count in result.skipped.items():
        Console(stderr=True, highlight=False).print(
            f"[yellow]warning:[/] {path}: {count} damaged line(s) skipped (see `memprobe recording verify {path}`).",
            markup=True, soft_wrap=True)
