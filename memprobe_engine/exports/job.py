"""What an export is asked to do and what it did: the job every writer of the registry takes, its result,
and where a format writes by default. Kept apart from the registry, which imports the writers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ExportJob:
    """One export: the recordings it reads (or frames already built), where it writes, its options.

    ``out`` None: the format's default next to the working directory (named after the recording).
    ``frames``: for csv/parquet, the bundle to write (report and compare pass theirs); None reads
    the recordings' report frames. ``content`` (otel): put message texts and memory records on the
    spans. ``endpoint`` (otel): also POST the traces there, in ``protocol``'s encoding (``http/json``
    or ``http/protobuf``). ``cases`` (html): ``USER:DIM`` cases whose why-chain to include.
    """

    recordings: tuple[Path, ...] = ()
    out: Path | None = None
    frames: Mapping[str, pd.DataFrame] | None = None
    content: bool = False
    endpoint: str | None = None
    protocol: str = "http/json"
    cases: tuple[str, ...] = ()


@dataclass
class ExportResult:
    """What a writer did: the files written and one line each about anything else (a POST)."""

    written: list[Path] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)



def default_out(job: ExportJob, suffix: str) -> Path:
    """``<recording name><suffix>`` in the working directory (``run-1.html``, ``run-1-csv``)."""
    name = job.recordings[0].resolve().name if job.recordings else "export"
    return Path(f"{name}{suffix}")
