"""What every report writes besides the terminal: number formatting and files (CSV / parquet).

Shared by every protocol's report and by ``memprobe compare``: one place turns a missing value into
``–`` and one loop writes frames to files, so exports and the terminal never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from memprobe_engine.errors import ConfigError

if TYPE_CHECKING:  # the frames only pass through; importing pandas here cost every command 0.5 s at start-up
    import pandas as pd

#: Columns of every report table printed to a terminal (tables are designed to fit it).
WIDTH = 100
FORMATS = frozenset({"csv", "parquet"})
DASH = "–"


def missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_num(value: object, decimals: int = 3, suffix: str = "") -> str:
    """A number with fixed decimals, or ``–`` when there is none."""
    return DASH if missing(value) else f"{float(value):.{decimals}f}{suffix}"  # type: ignore[arg-type]



def export(frames_tables: Mapping[str, pd.DataFrame], out_dir: Path,
           formats: Collection[str] = FORMATS) -> list[Path]:
    """Write each frame or table as ``<name>.csv`` / ``<name>.parquet`` under ``out_dir``."""
    unknown = set(formats) - FORMATS
    if unknown:
        raise ConfigError(f"export formats {sorted(unknown)} are not supported; use {sorted(FORMATS)}.")
    if "parquet" in formats:
        try:
            import pyarrow  # noqa: F401 - only whether it is installed
        except ImportError:
            raise ConfigError("parquet export needs pyarrow (pip install pyarrow); or export as csv.") from None
    out_dir = output_folder(out_dir)
    written: list[Path] = []
    try:
        for name, df in frames_tables.items():
            if "csv" in formats:
                df.to_csv(out_dir / f"{name}.csv", index=False)
                written.append(out_dir / f"{name}.csv")
            if "parquet" in formats:
                df.to_parquet(out_dir / f"{name}.parquet", index=False, engine="pyarrow")
                written.append(out_dir / f"{name}.parquet")
    except OSError as err:
        raise ConfigError(f"{getattr(err, 'filename', None) or out_dir}: cannot write the export "
                          f"({err.strerror or err}); free space or make {out_dir} writable, or pass another "
                          f"folder.") from None
    return written


def output_folder(folder: Path) -> Path:
    """``folder``, created if needed, for files a report writes (--csv, --parquet, --plots);
    ConfigError naming it and the fix when it is a file or cannot be created."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file; pass a folder to write the exports into.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{folder}: the folder cannot be created ({err.strerror or err}); pass a folder "
                          f"under a writable directory (a path whose parents are folders, not files).") from None
    return folder


def say_plots(written: list[Path], folder: Path) -> None:
    """One line saying which figures a report wrote (or that there was nothing to draw)."""
    from rich.console import Console

    console = Console(highlight=False)
    if written:
        console.print(f"wrote {len(written)} PNG figures to {folder}: {', '.join(p.name for p in written)}")
    else:
        console.print(f"no figures written to {folder}: these recordings hold no scores yet")


def say_written(console: Console, written: list[Path], folder: Path) -> None:
    """One line naming the figures a command wrote into ``folder``."""
    console.print(f"wrote {len(written)} figure(s) to {folder}: {', '.join(p.name for p in written)}")


def export_to_folders(bundle: Mapping[str, pd.DataFrame], csv: Path | None,
                      parquet: Path | None) -> list[tuple[str, Path, int]]:
    """A command's ``--csv DIR`` / ``--parquet DIR``: write ``bundle`` into each folder given; returns
    (format, folder, files written) per folder, for the command's own line about it."""
    done: list[tuple[str, Path, int]] = []
    for folder, fmt in ((csv, "csv"), (parquet, "parquet")):
        if folder is not None:
            done.append((fmt, folder, len(export(bundle, folder, formats={fmt}))))
    return done
