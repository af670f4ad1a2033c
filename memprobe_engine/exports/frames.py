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
from memprobe_engine.report.output import export

SUFFIXES = {"csv": ".csv", "parquet": ".parquet"}


def write_bundle(bundle: Mapping[str, pd.DataFrame], out_dir: Path, fmt: str) -> list[Path]:
    """Write each frame or table of ``bundle`` as ``<name>.<fmt>`` under ``out_dir`` (created), through
    the one loop every report shares (:func:`memprobe_engine.report.output.export`)."""
    if fmt not in SUFFIXES:
        raise ConfigError(f"frames export as {fmt!r} is not supported; use {' or '.join(SUFFIXES)}.")
    return export(bundle, out_dir, formats={fmt})


def report_bundle(recordings: Sequence[Path]) -> dict[str, pd.DataFrame]:
    """What ``memprobe report --csv`` writes for ``recordings``, as their protocol builds it."""
    from memprobe_engine.protocols import one_protocol

    if not recordings:
        raise ConfigError("name a recording to export.")
    return dict(one_protocol(recordings).frames(recordings))
