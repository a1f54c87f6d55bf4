"""The paired-start cluster bootstrap and the decision rules, on synthetic data with known truth."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evhelpers import write_protocol
from overlay.evidence import analyze, decide, synth
from overlay.evidence.protocol import load_protocol
from overlay.evidence.stats import (paired_bootstrap, paired_bootstrap_from_indices,
                                    per_start_statistic, resample_indices)


def naive_bootstrap(base, treat, idx, confidence):
    """Independent reference: plain Python loops over replicates and pairs."""
    rel, diff = [], []
    for row in idx:
        b = sum(base[i] for i in row) / len(row)
        t = sum(treat[i] for i in row) / len(row)
        rel.append(100.0 * (t / b - 1.0))
        diff.append(t - b)

    def quantile(values, q):  # linear interpolation, as numpy's default
        s = sorted(values)
        pos = q * (len(s) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    a = 1 - confidence
    return (quantile(rel, a / 2), quantile(rel, 1 - a / 2), quantile(diff, a / 2), quantile(diff, 1 - a / 2))


def test_vectorised_bootstrap_equals_naive_loop():
    rng = np.random.default_rng(11)
    base = rng.normal(100, 3, size=7)
    treat = base * 0.97 + rng.normal(0, 1, size=7)
    idx = resample_indices(7, 800, seed=5)
    iv = paired_bootstrap_from_indices(base, treat, idx, 0.9)
    lo, hi, dlo, dhi = naive_bootstrap(base.tolist(), treat.tolist(), idx.tolist(), 0.9)
    assert iv.low_pct == pytest.approx(lo, rel=1e-12)
    assert iv.high_pct == pytest.approx(hi, rel=1e-12)
    assert iv.low == pytest.approx(dlo, rel=1e-12)
    assert iv.high == pytest.approx(dhi, rel=1e-12)
    assert iv.delta_pct == pytest.approx(100 * (treat.mean() / base.mean() - 1))
    assert iv.positive_pairs + iv.negative_pairs == 7
    assert iv.positive_pairs == int((treat > base).sum())


def test_bootstrap_spread_matches_the_analytic_standard_error():
    # For a mean difference of n i.i.d. pairs, the bootstrap SE is sd/sqrt(n) (plug-in).
    rng = np.random.default_rng(3)
    base = rng.normal(50, 1, size=40)
    treat = base + rng.normal(0.5, 2.0, size=40)
    idx = resample_indices(40, 4000, seed=9)
    diffs = treat[idx].mean(axis=1) - base[idx].mean(axis=1)
    d = treat - base
    analytic = d.std(ddof=0) / math.sqrt(len(d))
    assert diffs.std() == pytest.approx(analytic, rel=0.06)
    iv = paired_bootstrap_from_indices(base, treat, idx, 0.95)
    assert iv.low == pytest.approx(d.mean() - 1.96 * analytic, abs=0.15 * analytic + 0.05)


def test_bootstrap_is_seeded_and_deterministic():
    rng = np.random.default_rng(0)
    b = rng.normal(10, 1, size=12)
    t = b + rng.normal(-0.3, 0.5, size=12)
    one = paired_bootstrap(b, t, resamples=300, seed=42)
    two = paired_bootstrap(b, t, resamples=300, seed=42)
    other = paired_bootstrap(b, t, resamples=300, seed=43)
    assert one == two
    assert (one.low_pct, one.high_pct) != (other.low_pct, other.high_pct)


def test_per_start_statistic_matches_numpy_percentile():
    v = np.arange(1, 101, dtype=float)
    assert per_start_statistic(v, "p99") == pytest.approx(np.percentile(v, 99))
    assert per_start_statistic(v, "mean") == pytest.approx(50.5)
    assert per_start_statistic(np.array([3.0]), "value") == 3.0


@pytest.mark.parametrize("change,est,lo,hi,effect,rule,expected", [
    ("higher", 3.0, 1.0, 5.0, 2.0, "interval-excludes-min-effect", decide.REPRODUCED),
    ("higher", 3.0, -1.0, 5.0, 2.0, "interval-excludes-min-effect", decide.INCONCLUSIVE),
    ("higher", 0.1, -1.0, 1.5, 2.0, "interval-excludes-min-effect", decide.NOT_REPRODUCED),
    ("lower", -3.0, -5.0, -1.0, 2.0, "interval-excludes-min-effect", decide.REPRODUCED),
    ("lower", 2.0, 1.0, 3.0, 0.0, "interval-excludes-min-effect", decide.NOT_REPRODUCED),
    ("higher", 3.0, -1.0, 5.0, 0.0, "interval-includes-zero", decide.NOT_REPRODUCED),
    ("higher", 1.0, 0.5, 1.5, 2.0, "interval-excludes-min-effect", decide.NOT_REPRODUCED),
])
def test_decide_check(change, est, lo, hi, effect, rule, expected):
    assert decide.decide_check(change=change, estimate_pct=est, low_pct=lo, high_pct=hi,
                               min_effect_pct=effect, rule=rule) == expected


def test_decide_check_requires_enough_agreeing_pairs():
    kw = dict(change="higher", estimate_pct=3.0, low_pct=1.0, high_pct=5.0, min_effect_pct=0.0,
              rule="interval-excludes-min-effect")
    assert decide.decide_check(**kw, agreeing_pairs=3, min_pairs=4) == decide.INCONCLUSIVE
    assert decide.decide_check(**kw, agreeing_pairs=4, min_pairs=4) == decide.REPRODUCED


def test_aggregate():
    R, N, U = decide.REPRODUCED, decide.NOT_REPRODUCED, decide.INCONCLUSIVE
    assert decide.aggregate([R, R]) == R
    assert decide.aggregate([N, N]) == N
    assert decide.aggregate([N, U]) == U
    assert decide.aggregate([R, N]) == U
    assert decide.aggregate([]) == U


def _analysis(tmp_path: Path, *, effect: float, between: float, seed: int = 3, starts: int = 5,
              min_effect: float = 2.0):
    proto = load_protocol(write_protocol(tmp_path / "claim", starts=starts, effect=min_effect))
    synth.write_dataset(proto, tmp_path / "claim", effect_pct={"fast": effect}, between_sd=between,
                        seed=seed)
    return analyze.analyze(proto, tmp_path / "claim", ())


def test_planted_effect_is_detected(tmp_path):
    a = _analysis(tmp_path, effect=-6.0, between=0.01)
    (claim,) = a.claims
    assert claim.decision == decide.REPRODUCED
    for c in claim.checks:
        iv = c.delta.interval
        truth = 100 * (1 / 0.94 - 1) if c.check.change == "higher" else -6.0
        assert abs(iv.delta_pct - truth) < 2.0
        assert iv.low_pct > 0 if c.check.change == "higher" else iv.high_pct < 0
        assert c.agreeing_pairs == 5


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_null_effect_is_not_detected(tmp_path, seed):
    a = _analysis(tmp_path, effect=0.0, between=0.01, seed=seed)
    (claim,) = a.claims
    assert claim.decision != decide.REPRODUCED
    for c in claim.checks:
        assert c.decision != decide.REPRODUCED
        assert abs(c.delta.interval.delta_pct) < 2.0


def test_null_effect_with_a_tight_interval_is_not_reproduced(tmp_path):
    a = _analysis(tmp_path, effect=0.0, between=0.002, seed=4, starts=8)
    assert a.claims[0].decision == decide.NOT_REPRODUCED


def _per_request_z(a) -> float:
    """The naive per-request Welch z-test, pooling every request as if independent."""
    base = np.concatenate([r.tpot for r in a.results if r.variant == "base"])
    fast = np.concatenate([r.tpot for r in a.results if r.variant == "fast"])
    return (base.mean() - fast.mean()) / math.sqrt(base.var(ddof=1) / base.size + fast.var(ddof=1) / fast.size)


def test_between_start_variance_swamps_within_start_effect(tmp_path):
    """A 3% effect under 6% start-to-start luck: a per-request test calls it highly
    significant (z > 5), the paired-start bootstrap says INCONCLUSIVE."""
    a = _analysis(tmp_path, effect=-3.0, between=0.06, seed=1, min_effect=2.0)
    tpot = next(c for c in a.claims[0].checks if c.check.metric == "tpot")
    assert tpot.decision == decide.INCONCLUSIVE
    assert tpot.delta.interval.low_pct < 0 < tpot.delta.interval.high_pct
    assert _per_request_z(a) > 5.0


def test_between_start_variance_over_many_seeds(tmp_path):
    """Over 12 worlds, per-request tests are 'significant' in most; the cluster
    bootstrap is INCONCLUSIVE in most and never claims the opposite direction."""
    z_sig, inconclusive, wrong_way = 0, 0, 0
    for seed in range(1, 13):
        a = _analysis(tmp_path / str(seed), effect=-3.0, between=0.06, seed=seed, min_effect=2.0)
        tpot = next(c for c in a.claims[0].checks if c.check.metric == "tpot")
        z_sig += abs(_per_request_z(a)) > 3.0
        inconclusive += tpot.decision == decide.INCONCLUSIVE
        wrong_way += tpot.delta.interval.low_pct > 0
    assert z_sig >= 7
    assert inconclusive >= 8
    assert wrong_way <= 1
