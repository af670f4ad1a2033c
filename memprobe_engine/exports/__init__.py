"""Exports of recordings and report frames: every format behind one registry.

``registry.FORMATS`` is the one table of export formats (name → writer): the report frames as CSV
and parquet (``memprobe report --csv``, ``memprobe compare --parquet``, ``memprobe export csv``),
OpenTelemetry traces (``otel``), a self-contained HTML page (``html``) and Every Eval Ever results
(``eee``). Writers import their heavy modules on first use, so ``memprobe export otel`` never loads
pandas and ``memprobe report`` never loads the HTML builder. Nothing here imports Textual.
"""

from memprobe_engine.exports.job import ExportJob, ExportResult
from memprobe_engine.exports.registry import FORMATS, ExportFormat, run_export, write_frames

__all__ = ["FORMATS", "ExportFormat", "ExportJob", "ExportResult", "run_export", "write_frames"]
