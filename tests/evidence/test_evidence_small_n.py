"""Intervals at the protocols' sample sizes (issue 20, item 3): with 3-5 paired starts the
percentile bootstrap prints the min..max of the pair ratios as a "95% CI"; the t-interval
on log pair ratios is what decides below BOOTSTRAP_MIN_PAIRS pairs."""

from __future__ import annotations

import numpy as np
import pytest

from overlay.evidence import stats
from overlay.evidence.stats import (BOOTSTRAP_MIN_PAIRS, METHOD_BOOTSTRAP, METHOD_T, METHOD_T_DIFF,
                                    log_ratio_t_interval, paired_bootstrap, paired_interval, sign_flip_p)

# The A/A throughput pairs of issue 20: -8.6 %, -51.0 %, +42.2 %.
AA_BASE = np.array([1000.0, 1000.0, 1000.0])
AA_COPY = np.array([914.0, 490.0, 1422.0])


@pytest.mark.parametrize("p, df, published", [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 4, 2.7764), (0.975, 9, 2.2622),
    (0.95, 2, 2.9200), (0.995, 30, 2.7500), (0.025, 3, -3.1824)])
def test_t_quantile_matches_the_published_table(p, df, published):
    assert stats.t_quantile(p, df) == pytest.approx(published, abs=1e-4)


def test_the_issues_aa_example_gets_the_t_interval_not_the_range():
    boot = paired_bootstrap(AA_BASE, AA_COPY, resamples=10000, seed=3)
    # the problem: the bootstrap's "95% CI" is exactly the pairs' min..max
    assert (boot.low_pct, boot.high_pct) == pytest.approx((-51.0, 42.2))
    iv = paired_interval(AA_BASE, AA_COPY, resamples=10000, seed=3)
    assert iv.method == METHOD_T
    assert (iv.low_pct, iv.high_pct) == pytest.approx((-77.2, 225.2), abs=0.1)  # "about (-77, +225) %"
    assert (iv.pair_low_pct, iv.pair_high_pct) == pytest.approx((-51.0, 42.2))
    assert iv.distinct_resamples == 10 and iv.resamples == 0
    assert iv.sign_flip_p == pytest.approx(0.75)


def test_distinct_resamples_and_the_sign_flip_floor():
    assert [stats.distinct_resamples(n) for n in (2, 3, 4, 5)] == [3, 10, 35, 126]
    # all pairs one way: the smallest p any sign-flip test can give, 2 / 2^n
    for n in (3, 4, 5, 6):
        b = np.full(n, 100.0)
        assert sign_flip_p(b, b * np.linspace(0.5, 0.6, n)) == pytest.approx(2.0 / 2 ** n)


def test_t_interval_keeps_its_coverage_at_three_pairs_where_the_bootstrap_cannot():
    """Log-normal start-to-start noise, a true typical ratio of 0.9: the t-interval covers
    it about 95% of the time at n = 3 and 5. The percentile bootstrap's interval never
    leaves the pairs' min..max, which holds the truth only 1 - 2/2^n of the time (75% at
    n = 3)."""
    rng = np.random.default_rng(20)
    truth = -10.0  # percent
    for n in (3, 5):
        t_hits = range_hits = 0
        trials = 400
        for _ in range(trials):
            base = np.exp(rng.normal(0.0, 0.2, n)) * 100
            treat = base * 0.9 * np.exp(rng.normal(0.0, 0.3, n))
            lo, hi = log_ratio_t_interval(base, treat, 0.95)
            t_hits += lo <= truth <= hi
            per_pair = 100 * (treat / base - 1)
            range_hits += per_pair.min() <= truth <= per_pair.max()
            boot = paired_bootstrap(np.ones(n), treat / base, resamples=200, seed=int(rng.integers(1 << 30)))
            assert per_pair.min() - 1e-9 <= boot.low_pct and boot.high_pct <= per_pair.max() + 1e-9
        assert 0.92 <= t_hits / trials <= 0.98, (n, t_hits)
        assert abs(range_hits / trials - (1 - 2 / 2 ** n)) < 0.06, (n, range_hits)


def test_zero_values_use_the_t_interval_of_the_differences():
    iv = paired_interval(np.array([0.0, 2.0, 4.0]), np.array([1.0, 2.5, 5.0]))
    assert iv.method == METHOD_T_DIFF and iv.sign_flip_p is None
    assert iv.low_pct < iv.delta_pct < iv.high_pct


def test_the_bootstrap_decides_only_from_enough_pairs():
    rng = np.random.default_rng(1)
    b = rng.normal(100, 2, BOOTSTRAP_MIN_PAIRS)
    assert paired_interval(b, b * 0.95, resamples=500).method == METHOD_BOOTSTRAP
    assert paired_interval(b[:-1], b[:-1] * 0.95, resamples=500).method == METHOD_T
