"""``memprobe report`` on protocol-B recordings: read the probes, build the tables, print, export."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from memprobe_engine.errors import ConfigError
from memprobe_engine.report.paradigm_frames import (
    load_paradigm_frames,
    recording_is_paradigm,
)
from memprobe_engine.report.paradigm_tables import (
    DEFAULT_TABLES,
    build_paradigm_tables,
    parse_paradigm_tables,
    print_paradigm_tables,
)
from memprobe_engine.report.render import WIDTH, export


def split_by_protocol(recordings: Sequence[Path]) -> bool:
    """True when every recording is a paradigm run, False when none is; a mix is refused."""
    kinds = {str(path): recording_is_paradigm(Path(path)) for path in recordings}
    if all(kinds.values()):
        return True
    if not any(kinds.values()):
        return False
    paradigm = [p for p, is_b in kinds.items() if is_b]
    other = [p for p, is_b in kinds.items() if not is_b]
    raise ConfigError(f"these recordings mix protocol B ({', '.join(paradigm)}) and protocol A "
                      f"({', '.join(other)}); report each protocol separately.")


def paradigm_report(recordings: Sequence[Path], *, csv: Path | None = None, parquet: Path | None = None,
                    tables: str | None = None, console: Console | None = None,
                    errors: Console | None = None) -> None:
    """Print Tables 1, 2, 3, 5, 7 (and Figure 4, paired bootstrap, failures, exclusions); export frames."""
    names = parse_paradigm_tables(tables or DEFAULT_TABLES)
    console = console or Console(width=WIDTH, highlight=False)
    errors = errors or Console(stderr=True, highlight=False)
    frames = load_paradigm_frames(recordings)
    for warning in frames.warnings:
        errors.print(f"[yellow]warning:[/] {warning}", markup=True, soft_wrap=True)
    if frames.probes.empty:
        errors.print("[yellow]warning:[/] these recordings hold no scored protocol-B probes yet.", markup=True)
    built = build_paradigm_tables(frames.probes, names)
    print_paradigm_tables(built, console)
    bundle = {"probes": frames.probes, **built}
    for folder, fmt in ((csv, "csv"), (parquet, "parquet")):
        if folder is not None:
            written = export(bundle, folder, formats={fmt})
            console.print(f"wrote {len(written)} {fmt} files to {folder}")
