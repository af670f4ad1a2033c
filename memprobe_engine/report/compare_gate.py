"""The CI gate of ``memprobe compare --fail-on``: did OTHER get worse than BASE, and by more than noise?

What is shared by every protocol lives here: the rules ``--fail-on`` takes, the :class:`Verdict` (one
line for a CI log), and the interval test. Each protocol applies a rule to its own comparison through
:meth:`~memprobe_engine.protocol_spec.ProtocolSpec.gate` (protocol A: ``recovery/read/compare_gate.py``,
protocol B: ``paradigms/read/compare_gate.py``); a protocol without a gate refuses ``--fail-on``.

``regression`` fails when a paired 95 % interval lies wholly below 0. An interval needs at least two
paired units (users, episodes); with fewer the gate cannot call anything significant and passes,
saying so. ``any-regressed`` fails when any single case got worse, noise or not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

from memprobe_engine.errors import ConfigError

#: The gates ``--fail-on`` takes.
GATES = ("regression", "any-regressed")
#: Fewest paired users (protocol A) or episodes (protocol B) for an interval to count.
MIN_PAIRED = 2


@dataclass(frozen=True)
class Verdict:
    """Whether the gate failed, and the one line that says why."""

    failed: bool
    line: str


def check_gate(name: str) -> str:
    if name not in GATES:
        raise ConfigError(f"--fail-on {name}: use {' or '.join(GATES)}.")
    return name


def frame(comparison: Mapping[str, object], name: str) -> pd.DataFrame:
    """The frame ``name`` of a comparison's plain data (what ``ProtocolSpec.compare`` returned)."""
    found = comparison.get(name)
    if not isinstance(found, pd.DataFrame):
        raise ConfigError(f"--fail-on: the comparison has no {name} table to gate on.")
    return found


def _fmt(delta: float, low: float, high: float) -> str:
    return f"{delta:+.3f} [95% CI {low:+.3f}, {high:+.3f}]"


def interval_gate(rows: pd.DataFrame, what: Callable[[dict[str, object]], str], delta: str, paired: str,
                  unit: str) -> Verdict:
    """The ``regression`` rule on rows with ``delta``, ``ci_low``, ``ci_high`` and a paired count
    (column ``paired``, counted in ``unit``s); ``what`` names a row in the verdict."""
    usable = rows[[not math.isnan(float(v)) for v in rows["ci_high"]]] if len(rows) else rows
    usable = usable[usable[paired].astype(int) >= MIN_PAIRED] if len(usable) else usable
    if not len(usable):
        most = int(rows[paired].max()) if len(rows) else 0
        return Verdict(False, f"PASS: no significant regression can be shown: {most} paired {unit}(s), an interval "
                              f"needs at least {MIN_PAIRED}")
    worse = usable[usable["ci_high"].astype(float) < 0]
    described = [f"{what(r)} {_fmt(float(r[delta]), float(r['ci_low']), float(r['ci_high']))}"
                 for r in (worse if len(worse) else usable).to_dict("records")]
    if len(worse):
        return Verdict(True, f"FAIL: significant regression: {'; '.join(described)} (interval below 0)")
    return Verdict(False, f"PASS: no significant regression: {'; '.join(described)}")
