"""The report's frames and tables as files: one ``<name>.csv`` or ``<name>.parquet`` per frame.

The one loop that writes them (``memprobe report``, ``memprobe compare`` and ``memprobe export
csv`` all reach it through the registry); :func:`report_bundle` builds the bundle ``memprobe
report`` exports when the export starts from recordings instead of frames already built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from memprobe_engine.errors import ConfigError
from memprobe_engine.exports.files import output_folder

SUFFIXES = {"csv": ".csv", "parquet": ".parquet"}


def _write_one(df: pd.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False, engine="pyarrow")


def write_bundle(bundle: Mapping[str, pd.DataFrame], out_dir: Path, fmt: str) -> list[Path]:
    """Write each frame or table of ``bundle`` as ``<name>.<fmt>`` under ``out_dir`` (created)."""
    if fmt not in SUFFIXES:
        raise ConfigError(f"frames export as {fmt!r} is not supported; use {' or '.join(SUFFIXES)}.")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ConfigError("parquet export needs pyarrow (pip install pyarrow); or export as csv.") from None
    out_dir = output_folder(out_dir)
    written: list[Path] = []
    try:
        for name, df in bundle.items():
            path = out_dir / f"{name}{SUFFIXES[fmt]}"
            _write_one(df, path, fmt)
            written.append(path)
    except OSError as err:
        raise ConfigError(f"{getattr(err, 'filename', None) or out_dir}: cannot write the export "
                          f"({err.strerror or err}); free space or make {out_dir} writable, or pass another "
                          f"folder.") from None
    return written


def report_bundle(recordings: Sequence[Path]) -> dict[str, pd.DataFrame]:
    """What ``memprobe report --csv`` writes for ``recordings``: protocol A's frames and Tables 2, 3,
    4, 13, 14; protocol B's probe frame and its default tables."""
    from memprobe_engine.report.paradigm_report import split_by_protocol

    if not recordings:
        raise ConfigError("name a recording to export.")
    if split_by_protocol(recordings):
        from memprobe_engine.report.paradigm_frames import load_paradigm_frames
        from memprobe_engine.report.paradigm_tables import (DEFAULT_TABLES, build_paradigm_tables,
                                                            parse_paradigm_tables)

        probes = load_paradigm_frames(recordings).probes
        return {"probes": probes, **build_paradigm_tables(probes, parse_paradigm_tables(DEFAULT_TABLES))}
    from memprobe_engine.report.frames import load_frames
    from memprobe_engine.report.tables import build_tables

    frames = load_frames(recordings)
    return {**frames.as_dict(), **build_tables(frames)}
