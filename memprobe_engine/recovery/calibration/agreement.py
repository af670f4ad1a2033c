"""How far one judge agrees with another on the five-level rubric (0, 0.25, 0.5, 0.75, 1).

The figures a judge is held to (issue #33 of the project): exact agreement, agreement within one
level, Cohen's kappa with linear weights (the chance-corrected figure for an ordinal scale: a miss by
two levels counts twice a miss by one), Spearman's rank correlation, the 5×5 confusion table, and the
mean difference (candidate − reference) per memory system — a judge whose error depends on a
system's style does not cancel out when two systems are compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from memprobe_engine.report.compare_stats import JUDGE_LEVELS as LEVELS
from memprobe_engine.report.compare_stats import level_index, linear_weighted_kappa


@dataclass(frozen=True)
class ScoredPair:
    """One case scored by both judges."""

    system: str
    reference: float
    candidate: float


@dataclass
class Agreement:
    """Agreement of a candidate judge with a reference over ``n`` cases."""

    n: int
    exact: float
    within_one: float
    kappa_linear: float
    spearman: float
    #: ``confusion[r][c]``: cases the reference put at level r and the candidate at level c.
    confusion: list[list[int]]
    #: Mean (candidate − reference) per system, and the number of cases behind it.
    bias_by_system: dict[str, tuple[float, int]] = field(default_factory=dict)
    mean_reference: float = 0.0
    mean_candidate: float = 0.0
    #: Standard deviation of (candidate − reference): the judge's own noise on one case.
    error_sd: float = 0.0


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0
        start = end + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    x, y = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def agreement(pairs: Sequence[ScoredPair]) -> Agreement:
    """Every figure of :class:`Agreement` for ``pairs`` (empty: all NaN, n = 0)."""
    ref = [level_index(p.reference) for p in pairs]
    cand = [level_index(p.candidate) for p in pairs]
    confusion = [[0] * len(LEVELS) for _ in LEVELS]
    for r, c in zip(ref, cand):
        confusion[r][c] += 1
    if not pairs:
        nan = float("nan")
        return Agreement(n=0, exact=nan, within_one=nan, kappa_linear=nan, spearman=nan, confusion=confusion)
    by_system: dict[str, list[float]] = defaultdict(list)
    for p in pairs:
        by_system[p.system].append(LEVELS[level_index(p.candidate)] - LEVELS[level_index(p.reference)])
    diffs = np.array([LEVELS[c] - LEVELS[r] for r, c in zip(ref, cand)])
    return Agreement(
        n=len(pairs), exact=sum(r == c for r, c in zip(ref, cand)) / len(pairs),
        within_one=sum(abs(r - c) <= 1 for r, c in zip(ref, cand)) / len(pairs),
        kappa_linear=linear_weighted_kappa(ref, cand), spearman=spearman(ref, cand), confusion=confusion,
        bias_by_system={s: (float(np.mean(v)), len(v)) for s, v in sorted(by_system.items())},
        mean_reference=float(np.mean([LEVELS[r] for r in ref])), mean_candidate=float(np.mean([LEVELS[c] for c in cand])),
        error_sd=float(diffs.std(ddof=1)) if len(diffs) > 1 else 0.0)


def render(result: Agreement, *, title: str) -> str:
    """The figures as plain text: one summary line, the confusion table, the bias per system."""
    lines = [title,
             f"  cases {result.n}   exact {result.exact:.1%}   within one level {result.within_one:.1%}   "
             f"linear-weighted kappa {result.kappa_linear:.3f}   Spearman {result.spearman:.3f}",
             f"  mean score: reference {result.mean_reference:.3f}, candidate {result.mean_candidate:.3f}; "
             f"SD of the difference {result.error_sd:.3f}",
             "  confusion (rows: reference level, columns: candidate level)",
             "    ref\\cand " + "".join(f"{level:>7}" for level in LEVELS) + "    n"]
    for level, row in zip(LEVELS, result.confusion):
        lines.append(f"    {level:>8} " + "".join(f"{count:>7}" for count in row) + f"  {sum(row):>3}")
    if result.bias_by_system:
        lines.append("  mean difference (candidate − reference) per system")
        for system, (bias, count) in result.bias_by_system.items():
            lines.append(f"    {system:<16} {bias:+.3f}  ({count} cases)")
    return "\n".join(lines)
