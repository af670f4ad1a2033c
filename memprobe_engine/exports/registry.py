"""The one registry of export formats: a table from format name to writer.

Every export MemProbe writes goes through :func:`run_export`: ``memprobe export FORMAT``, and the
``--csv`` / ``--parquet`` folders of ``memprobe report`` and ``memprobe compare`` (through
:func:`write_frames`, which is the registry's csv/parquet entry called with frames already built).
A writer takes an :class:`ExportJob` (what to export, where, with which options) and returns the
files it wrote and the lines to say about them. Writers import their modules when called: the
table itself is cheap to import from the report and the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memprobe_engine.errors import ConfigError
from memprobe_engine.exports.job import ExportJob, ExportResult, default_out

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ExportFormat:
    """A format of the registry: its name, a one-line summary for help, and its writer."""

    name: str
    summary: str
    write: Callable[[ExportJob], ExportResult]


def _frames(fmt: str) -> Callable[[ExportJob], ExportResult]:
    def write(job: ExportJob) -> ExportResult:
        from memprobe_engine.exports.frames import report_bundle, write_bundle

        bundle = job.frames if job.frames is not None else report_bundle(job.recordings)
        out = job.out if job.out is not None else default_out(job, f"-{fmt}")
        written = write_bundle(bundle, out, fmt)
        return ExportResult(written, [f"wrote {len(written)} {fmt} file(s) to {out}"])
    return write


def _otel(job: ExportJob) -> ExportResult:
    from memprobe_engine.exports.otlp_send import export_otel

    return export_otel(job)


def _html(job: ExportJob) -> ExportResult:
    from memprobe_engine.exports.html_page import export_html

    return export_html(job)


def _eee(job: ExportJob) -> ExportResult:
    from memprobe_engine.exports.eee import export_eee

    return export_eee(job)


#: The formats, by name. csv and parquet write one file per frame or table into a folder.
FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("csv", "the report's frames and tables as CSV files in a folder", _frames("csv")),
    ExportFormat("parquet", "the report's frames and tables as parquet files in a folder (needs pyarrow)",
                 _frames("parquet")),
    ExportFormat("otel", "OpenTelemetry traces (OTLP/JSON): one trace per unit, GenAI model and memory spans",
                 _otel),
    ExportFormat("html", "one self-contained HTML page: the report's tables and chosen cases' why-chains",
                 _html),
    ExportFormat("eee", "Every Eval Ever results (schema 0.3.0): aggregate and per-instance, validated", _eee),
)}


def run_export(fmt: str, job: ExportJob) -> ExportResult:
    """Run the registry's writer of ``fmt`` on ``job``."""
    found = FORMATS.get(fmt)
    if found is None:
        raise ConfigError(f"export format {fmt!r} is not known; use one of {', '.join(FORMATS)}.")
    return found.write(job)


def write_frames(bundle: Mapping[str, pd.DataFrame], folder: Path, fmt: str) -> list[Path]:
    """The csv/parquet entries of the registry on frames already built (report, compare)."""
    if fmt not in ("csv", "parquet"):
        raise ConfigError(f"frames export as {fmt!r} is not supported; use csv or parquet.")
    return run_export(fmt, ExportJob(frames=bundle, out=folder)).written
