"""Human-readable times for the screens: wall times as local date and time, durations in words."""

from __future__ import annotations

import datetime as dt


def local_time(epoch: float, seconds: bool = True) -> str:
    """``2026-11-30 14:14:29`` (local time; the tests pin TZ=UTC)."""
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def duration(seconds: float) -> str:
    """``0.42 s``, ``12.3 s``, ``4 min 14 s``, ``1 h 03 min``."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
