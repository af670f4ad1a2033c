"""``memprobe export FORMAT REC``: a recording in a format other tools read (the registry of
``memprobe_engine/exports``: csv, parquet, otel, html, eee). Parse the flags, run the registry's
writer, print what it wrote; a bad recording or flag is one line and exit status 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from memprobe_engine.errors import ConfigError
from memprobe_engine.exports.job import ExportJob
from memprobe_engine.exports.registry import FORMATS, run_export

export_app = typer.Typer(help="Export a recording: " + "; ".join(f"{f.name}: {f.summary}" for f in FORMATS.values())
                         + ".", no_args_is_help=True)

Recording = Annotated[Path, typer.Argument(help="The recording directory.", show_default=False)]


def _run(fmt: str, job: ExportJob) -> None:
    recording = job.recordings[0]
    if not (recording / "events.jsonl").is_file():
        what = "does not exist" if not recording.exists() else "is not a recording (no events.jsonl)"
        raise ConfigError(f"{recording}: {what}; pass a recording directory (as `memprobe replay` takes).")
    result = run_export(fmt, job)
    console = Console(highlight=False, soft_wrap=True)
    for line in result.lines:
        console.print(escape(line))


@export_app.command("otel")
def otel(
    recording: Recording,
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="Write the OTLP/JSON traces to this file (default REC-NAME.otlp.json when no --endpoint).")] = None,
    endpoint: Annotated[Optional[str], typer.Option(
        "--endpoint", help="Also POST them to this OTLP/HTTP receiver (http://host:4318; /v1/traces is added). "
                           "Headers from OTEL_EXPORTER_OTLP_HEADERS.")] = None,
    protocol: Annotated[str, typer.Option(
        "--protocol", help="The encoding of the POST: http/json, or http/protobuf for receivers that take only "
                           "protobuf (Phoenix; needs opentelemetry-proto, in memprobe[otel]). The file is JSON.")
    ] = "http/json",
    content: Annotated[bool, typer.Option(
        "--content", help="Include message texts, responses, memory records and queries (opt-in GenAI "
                          "attributes; they hold what the users said).")] = False,
) -> None:
    """The recording as OpenTelemetry traces: one trace per unit, a span per stage, GenAI model-call
    and memory spans (docs/exports.md)."""
    _run("otel", ExportJob(recordings=(recording,), out=out, endpoint=endpoint, content=content, protocol=protocol))


@export_app.command("html")
def html(
    recording: Recording,
    case: Annotated[Optional[list[str]], typer.Option(
        "--case", help="USER:DIM (or USER:DIM:SYSTEM) whose why-chain to include (repeatable; protocol B: "
                       "EPISODE or EPISODE:SYSTEM).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="The HTML file (default REC-NAME.html).")] = None,
) -> None:
    """One self-contained HTML page (no network, no server): the report's tables and, per --case, the
    why-chain — transcript, store at the fill with diff marks, top-k, fills, judge reasons, labels."""
    _run("html", ExportJob(recordings=(recording,), out=out, cases=tuple(case or ())))


@export_app.command("eee")
def eee(
    recording: Recording,
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="The folder to write into (default REC-NAME-eee); files go under data/… as the Every "
                      "Eval Ever datastore lays them out.")] = None,
) -> None:
    """The run's results in the Every Eval Ever schema 0.3.0: one aggregate file per system and its
    per-instance samples, validated against the schema before they are written."""
    _run("eee", ExportJob(recordings=(recording,), out=out))


FolderOut = Annotated[Optional[Path], typer.Option("--out", help="The folder (default REC-NAME-csv / -parquet).")]


@export_app.command("csv")
def csv(recording: Recording, out: FolderOut = None) -> None:
    """What `memprobe report --csv DIR` writes: the report's frames and tables, one .csv each."""
    _run("csv", ExportJob(recordings=(recording,), out=out))


@export_app.command("parquet")
def parquet(recording: Recording, out: FolderOut = None) -> None:
    """What `memprobe report --parquet DIR` writes: the report's frames and tables, one .parquet each."""
    _run("parquet", ExportJob(recordings=(recording,), out=out))
