"""The statistics ``memprobe compare`` reports, each small enough to check by hand.

* :func:`paired_bootstrap` — a percentile 95 % interval of a mean paired difference, resampling the
  pairs (users in protocol A) with replacement; the same seed and resample count as protocol B's
  episode bootstrap, so runs are reproducible.
* :func:`mcnemar_exact` — the exact two-sided McNemar test on discordant pairs: under no change
  the ``b`` cases recovered only in one run and the ``c`` recovered only in the other are a
  Binomial(b + c, ½) split; p doubles the smaller tail, capped at 1.
* :func:`weighted_kappa` — Cohen's kappa with linear weights over an ordered scale (the judge's five
  levels {0, .25, .5, .75, 1}): 1 − Σ w·observed / Σ w·expected, w = |i − j| / (levels − 1).
* :func:`kendall_tau_b` — rank agreement of two scorings of the same systems, ties counted as in
  Kendall's tau-b.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Bootstrap resamples and seed of every paired interval (protocol B's episode bootstrap uses the same).
N_RESAMPLES = 2000
SEED = 20260101

#: The judge's five-level rubric, in order.
JUDGE_LEVELS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
def level_index(score: float, levels: Sequence[float] = JUDGE_LEVELS) -> int:
    """The index of the level nearest ``score`` (so 0.7499999 reads as 0.75)."""
    return int(min(range(len(levels)), key=lambda i: abs(levels[i] - score)))


def linear_weighted_kappa(reference: Sequence[int], candidate: Sequence[int], levels: int = 5) -> float:
    """Cohen's kappa with linear disagreement weights |i − j| / (levels − 1)."""
    table = np.zeros((levels, levels))
    for r, c in zip(reference, candidate):
        table[r, c] += 1
    total = table.sum()
    if total == 0:
        return float("nan")
    weights = np.abs(np.subtract.outer(np.arange(levels), np.arange(levels))) / (levels - 1)
    observed = (weights * table).sum() / total
    expected = (weights * np.outer(table.sum(1), table.sum(0))).sum() / total ** 2
    return float(1.0 - observed / expected) if expected > 0 else float("nan")


#: A case counts as recovered at or above this score (the paper's flip threshold).
RECOVERED_AT = 0.75


def paired_bootstrap(differences: Sequence[float], *, n_resamples: int = N_RESAMPLES,
                     seed: int = SEED) -> tuple[float, float, float] | None:
    """(mean, 2.5th percentile, 97.5th percentile) of the mean of ``differences`` over
    ``n_resamples`` draws of the pairs with replacement; None when there is no pair."""
    values = np.asarray(differences, dtype=float)
    if not values.size:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.size, size=(n_resamples, values.size))
    means = values[picks].mean(axis=1)
    return float(values.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def mcnemar_exact(only_base: int, only_other: int) -> float:
    """Two-sided exact McNemar p from the discordant counts (1.0 when there is none)."""
    n = only_base + only_other
    if n == 0:
        return 1.0
    k = min(only_base, only_other)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)
    return min(1.0, 2 * tail)


def weighted_kappa(a: Sequence[float], b: Sequence[float], levels: Sequence[float] = JUDGE_LEVELS) -> float | None:
    """Linear-weighted Cohen's kappa of two raters' scores on ``levels`` (the one computation
    ``memprobe judge check`` uses too); None for no pair, and None when the expected disagreement is
    zero (both raters used one same level throughout)."""
    if len(a) != len(b):
        raise ValueError("the two raters must score the same cases")
    if not a:
        return None
    kappa = linear_weighted_kappa([level_index(x, levels) for x in a], [level_index(y, levels) for y in b],
                                  levels=len(levels))
    return None if math.isnan(kappa) else kappa


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two paired sequences; None with fewer than two items or no untied pair."""
    if len(x) != len(y):
        raise ValueError("the two rankings must cover the same items")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return None if denominator == 0 else (concordant - discordant) / denominator
