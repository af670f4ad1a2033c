"""``memprobe recording info|events|verify``: look into a recording without the TUI."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.integrity import check_recording, damage_warning
from memprobe_engine.events.reader import DamagedEvent, DamageReport, open_recording
from memprobe_engine.events.summary import summarize

recording_app = typer.Typer(help="Inspect a recording: summary, events, damage.", no_args_is_help=True)
console = Console(highlight=False)

RecordingArg = Annotated[Path, typer.Argument(help="Recording directory (holds header.json and events.jsonl).")]


def _when(stamp: float | None) -> str:
    return dt.datetime.fromtimestamp(stamp).isoformat(timespec="seconds") if stamp else "-"


@recording_app.command("info")
def info(recording: RecordingArg) -> None:
    """Counts by event kind and span kind, users, systems, time range, tokens, damage."""
    with open_recording(recording) as reader:
        summary = summarize(reader)
        header = reader.header
        console.print(f"[bold]{recording}[/]  run [cyan]{header.run_id}[/]  suite {header.suite}  "
                      f"schema v{header.schema_version}")
        console.print(f"events {summary.events:,}   status {summary.run_status or 'running or interrupted'}   "
                      f"{_when(summary.first_time)} → {_when(summary.last_time)}")
        console.print(f"units {len(summary.units)}   systems {', '.join(sorted(summary.systems)) or '-'}")
        console.print(f"llm calls {summary.llm_calls:,} ({summary.llm_cache_hits:,} from cache), "
                      f"tokens {summary.prompt_tokens:,} prompt / {summary.completion_tokens:,} completion")
        if summary.cached_prompt_tokens:
            console.print(f"prompt tokens served from the server's prefix cache {summary.cached_prompt_tokens:,} "
                          f"({summary.cached_prompt_tokens / max(1, summary.prompt_tokens):.0%})")
        table = Table("event kind", "count", title="events by kind", title_justify="left")
        for kind, count in summary.by_kind.most_common():
            table.add_row(kind, f"{count:,}")
        console.print(table)
        if summary.spans_by_kind:
            spans = Table("span kind", "count", title="spans", title_justify="left")
            for kind, count in summary.spans_by_kind.most_common():
                spans.add_row(kind, f"{count:,}")
            console.print(spans)
        _print_provenance(header)
        damage = check_recording(reader)
        _print_damage(damage, len(reader) - len(damage.bad_lines), reader.path)


def _print_provenance(header: RecordingHeader) -> None:
    """The header's provenance (or that it has none), and the package versions it names."""
    packages = ", ".join(f"{name} {version}" for name, version in sorted(header.packages.items()))
    console.print(f"python {header.python or '-'}; packages: {escape(packages) or '-'}")
    found = header.provenance
    if found is None:
        console.print("provenance: not recorded (made before MemProbe recorded it)")
        return
    own = found.memprobe
    commit = f" @ {str(own['commit'])[:12]}{' (uncommitted changes)' if own.get('dirty') else ''}" \
        if own.get("commit") else " (source commit unknown)"
    console.print(f"provenance: memprobe {own.get('version') or '?'}{commit}")
    table = Table("what", "value", title="provenance", title_justify="left")
    for name, digest in found.inputs.items():
        table.add_row(f"input {name}", digest)
    for role, spec in found.models.items():
        table.add_row(f"model {role}", escape(f"{spec.get('spec')} ({spec.get('backend')}, "
                                              f"quantization {spec.get('quantization')})"))
    if found.prompts:
        table.add_row("prompt templates", f"{len(found.prompts)} hashed, together "
                                          f"{_together(found.prompts)}")
    else:
        table.add_row("prompt templates", "none of MemProbe's (an imported run used its authors' prompts)")
    console.print(table)


def _together(hashes: dict[str, str]) -> str:
    from memprobe_engine.provenance import short_hash

    return short_hash("\n".join(f"{k}={v}" for k, v in sorted(hashes.items())).encode())


@recording_app.command("events")
def events(
    recording: RecordingArg,
    kind: Annotated[Optional[list[str]], typer.Option("--kind", "-k", help="Only these kinds (repeatable).")] = None,
    user: Annotated[Optional[str], typer.Option(help="Only events about this user id.")] = None,
    start: Annotated[int, typer.Option(help="First line (0-based); negative counts from the end.")] = 0,
    limit: Annotated[int, typer.Option(help="At most this many events.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print raw JSON lines instead of a table.")] = False,
) -> None:
    """List events (filtered), one per line."""
    with open_recording(recording) as reader:
        first = start if start >= 0 else max(0, len(reader) + start)
        table = Table("seq", "kind", "user", "system", "dim", "summary", show_lines=False)
        shown = 0
        for event in reader.iter_events(kinds=kind, start=first):
            if user is not None and event.user_id != user:
                continue
            if as_json:
                typer.echo(orjson.dumps(event.model_dump(exclude_none=True)).decode())
            else:
                table.add_row(str(event.seq), event.kind, event.user_id or "", event.system or "",
                              event.dimension or "", _one_line(event))
            shown += 1
            if shown >= limit:
                break
        if not as_json:
            console.print(table)
        # What the line index and the listing met (a torn tail, a damaged line), said as every reader
        # says it; not the whole-recording check, which took 17 s on a million events to list one.
        warning = damage_warning(str(reader.directory), reader.damage)
        if warning:
            Console(stderr=True, highlight=False, soft_wrap=True).print(f"[yellow]warning:[/] {escape(warning)}")


@recording_app.command("verify")
def verify(recording: RecordingArg) -> None:
    """Check every line (seal, JSON, types), the span tree and the payloads. Exit status 1 when damaged."""
    with open_recording(recording) as reader:
        damage = check_recording(reader)
        if len(reader) == 0 and damage.clean:  # "intact: 0 complete events" read as a good recording
            raise RecordingError(f"{reader.path} holds no event, so {recording} holds no run (it stopped before "
                                 f"its first event, or the file was emptied): run the command that writes it again.")
        ok = _print_damage(damage, len(reader) - len(damage.bad_lines), reader.path)
    raise typer.Exit(0 if ok else 1)


def _print_damage(damage: DamageReport, complete: int, path: Path) -> bool:
    """Print the integrity check: one summary line (the same the report, TUI and browser show),
    then the details. Returns whether the recording is intact."""
    note: str | None = None
    if damage.interrupted_spans:
        shown = ", ".join(damage.interrupted_spans[:5])
        more = " …" if len(damage.interrupted_spans) > 5 else ""
        note = f"  {damage.interrupted_note()}: {escape(shown)}{more}"
    if damage.clean:
        console.print(f"[green]intact[/]: {complete:,} complete events, no damage")
        if note is not None:
            console.print(note)
        return True
    console.print(f"[yellow]damaged[/]: {complete:,} complete events readable; {damage.count} problem(s): "
                  f"{escape(damage.summary())}")
    if note is not None:
        console.print(note)
    if damage.tail_bytes:
        console.print(f"  damaged tail: {damage.tail_bytes:,} bytes after the last complete line of {path} "
                      f"(a crash mid-write); it is skipped, and a resumed run moves it aside")
    for line, reason in sorted(damage.bad_lines.items())[:20]:
        console.print(f"  line {line + 1}: {escape(reason)}")
    if len(damage.bad_lines) > 20:
        console.print(f"  … and {len(damage.bad_lines) - 20:,} more damaged lines")
    if damage.unclosed_spans:
        shown = ", ".join(damage.unclosed_spans[:5])
        console.print(f"  {len(damage.unclosed_spans)} span(s) opened and never closed (the run stopped without "
                      f"ending them): {escape(shown)}{' …' if len(damage.unclosed_spans) > 5 else ''}")
    for ref, reason in list(damage.payload_problems.items())[:20]:
        console.print(f"  payload {escape(ref[:60])}: {escape(reason)}")
    if damage.payload_tail_bytes:
        console.print(f"  payloads.jsonl ends with {damage.payload_tail_bytes:,} bytes of a torn line; a resumed "
                      f"run moves it aside")
    return False


def _one_line(event: object) -> str:
    for name in ("content", "name", "response_text", "label", "query", "op", "message", "status", "run_id"):
        value = getattr(event, name, None)
        if value:
            text = str(value).replace("\n", " ")
            return text[:70] + ("…" if len(text) > 70 else "")
    score = getattr(event, "score", None)
    return "" if score is None else f"score {score}"


__all__ = ["recording_app", "DamagedEvent"]
