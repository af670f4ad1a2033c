"""The statistics of `memprobe compare`, each against a direct computation on explicit data."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from memprobe_engine.report.compare_stats import kendall_tau_b, mcnemar_exact, paired_bootstrap, weighted_kappa


def test_mcnemar_exact_p_equals_the_binomial_tail_by_hand() -> None:
    # 1 case lost, 6 gained: n = 7, P(X <= 1) = (1 + 7) / 128, two-sided 16 / 128
    assert mcnemar_exact(1, 6) == pytest.approx(16 / 128, abs=1e-15)
    assert mcnemar_exact(6, 1) == mcnemar_exact(1, 6)
    # 0 vs 5: 2 * (1 / 32)
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32, abs=1e-15)
    # a balanced split is no evidence: capped at 1
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    # 4 vs 6 (the release sample's amem → mem0 full-store flips): 2 * (1+10+45+120+210)/1024
    assert mcnemar_exact(4, 6) == pytest.approx(2 * 386 / 1024, abs=1e-15)


def test_mcnemar_matches_an_enumeration_of_every_outcome() -> None:
    """Direct definition: p = P(outcomes as or less likely than the one seen) under Binomial(n, 1/2)."""
    for b, c in [(2, 9), (5, 5), (0, 12), (7, 3)]:
        n = b + c
        probs = [math.comb(n, i) / 2 ** n for i in range(n + 1)]
        seen = probs[b]
        direct = sum(p for p in probs if p <= seen + 1e-15)
        assert mcnemar_exact(b, c) == pytest.approx(min(1.0, direct), abs=1e-12)


def test_paired_bootstrap_on_two_pairs_has_the_exact_percentiles() -> None:
    """Two users: a resample's mean is d1 (¼), (d1+d2)/2 (½) or d2 (¼), so the 2.5th and 97.5th
    percentiles of 2000 draws are d1 and d2 themselves."""
    mean, low, high = paired_bootstrap([-0.25, 0.5]) or (0, 0, 0)
    assert mean == pytest.approx(0.125) and low == -0.25 and high == 0.5


def test_paired_bootstrap_equals_a_direct_resampling_with_the_same_draws() -> None:
    diffs = np.array([0.1, -0.05, 0.3, 0.0, 0.2, 0.15, -0.1, 0.05])
    rng = np.random.default_rng(7)
    means = [diffs[rng.integers(0, diffs.size, diffs.size)].mean() for _ in range(500)]
    mean, low, high = paired_bootstrap(diffs.tolist(), n_resamples=500, seed=7) or (0, 0, 0)
    assert mean == pytest.approx(diffs.mean())
    assert low == pytest.approx(np.percentile(means, 2.5)) and high == pytest.approx(np.percentile(means, 97.5))
    assert low < mean < high
    assert paired_bootstrap([]) is None
    assert paired_bootstrap([0.25] * 5) == (0.25, 0.25, 0.25)


def test_weighted_kappa_by_hand() -> None:
    a = [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert weighted_kappa(a, a) == pytest.approx(1.0)
    b = [0.0, 0.5, 0.5, 0.75, 0.75, 1.0]
    # direct: observed/expected weighted disagreement with w = |i-j|/4
    idx = {v: i for i, v in enumerate((0.0, 0.25, 0.5, 0.75, 1.0))}
    n = len(a)
    observed = sum(abs(idx[x] - idx[y]) / 4 for x, y in zip(a, b)) / n
    expected = sum(abs(idx[x] - idx[y]) / 4 for x, y in itertools.product(a, b)) / n ** 2
    assert weighted_kappa(a, b) == pytest.approx(1 - observed / expected, abs=1e-12)
    assert weighted_kappa([0.5, 0.5], [0.5, 0.5]) is None  # no expected disagreement: undefined
    assert weighted_kappa([], []) is None


def test_kendall_tau_b_by_hand() -> None:
    assert kendall_tau_b([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau_b([1, 2, 3], [30, 20, 10]) == -1.0
    # one tie in y: pairs (12: +, 13: +, 23: tie in y) -> (2 - 0) / sqrt(3 * 2)
    assert kendall_tau_b([1, 2, 3], [1, 2, 2]) == pytest.approx(2 / math.sqrt(6))
    assert kendall_tau_b([1], [1]) is None
