"""The CI gate of ``memprobe compare --fail-on``: did OTHER get worse than BASE, and by more than noise?

``regression`` fails when a paired 95 % interval lies wholly below 0: ΔB (category-balanced, either
access mode) of protocol A — its bootstrap over the paired users — or Δaccuracy of protocol B — its
episode bootstrap. An interval needs at least two paired users (episodes); with fewer the gate
cannot call anything significant and passes, saying so. ``any-regressed`` fails when any single
case (protocol A) or probe (protocol B) got worse, noise or not. The verdict is one line for a CI
log; the numbers are the comparison's own (``compare_a.py``, ``compare_b.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
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


def _fmt(delta: float, low: float, high: float) -> str:
    return f"{delta:+.3f} [95% CI {low:+.3f}, {high:+.3f}]"


def _interval_gate(rows: pd.DataFrame, what: Callable[[dict[str, object]], str], delta: str, paired: str,
                   unit: str) -> Verdict:
    """Shared by both protocols: rows with ``delta``, ``ci_low``, ``ci_high`` and a paired count."""
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


def gate_a(categories: pd.DataFrame, cases: pd.DataFrame, name: str) -> Verdict:
    """Protocol A's verdict from the comparison's categories and cases frames."""
    if name == "any-regressed":
        regressed = cases[cases["change"] == "regressed"]
        if len(regressed):
            first = regressed.iloc[0]
            return Verdict(True, f"FAIL: {len(regressed)} case(s) regressed, e.g. {first['user_id']}:"
                                 f"{first['dimension']} ({first['mode']}) {float(first['base_score']):.2f} → "
                                 f"{float(first['other_score']):.2f}")
        return Verdict(False, f"PASS: no case regressed ({len(cases)} compared)")
    rows = categories[categories["category"] == "B"]
    return _interval_gate(rows, lambda r: f"ΔB {r['mode']} {r['base_system']}→{r['other_system']}", "delta_B",
                          "users", "user")


def gate_b(metrics: pd.DataFrame, probes: pd.DataFrame, name: str) -> Verdict:
    """Protocol B's verdict from the comparison's metrics and probes frames."""
    if name == "any-regressed":
        lost = probes[probes["change"] == "lost"]
        if len(lost):
            first = lost.iloc[0]
            return Verdict(True, f"FAIL: {len(lost)} probe(s) regressed, e.g. {first['episode_id']} probe "
                                 f"{first['probe_index']} ({first['probe_type']})")
        return Verdict(False, f"PASS: no probe regressed ({len(probes)} compared)")
    rows = metrics[metrics["metric"] == "accuracy"]
    return _interval_gate(rows, lambda r: f"Δaccuracy {r['base_system']}→{r['other_system']}", "delta", "episodes",
                          "episode")
