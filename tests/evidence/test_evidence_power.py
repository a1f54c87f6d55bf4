"""The power calculation that chooses a protocol's number of starts before its runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from overlay.evidence import decide
from overlay.evidence.stats import (decision_power, log_ratio_sd, log_ratio_t_interval,
                                    reproduces, required_pairs, t_cdf, t_quantile)


def test_power_of_the_interval_alone_matches_the_noncentral_t():
    # No minimum effect, no agreement rule: P(t-interval excludes zero) is the one-sided power
    # of the t-test, P(T'(n-1, delta*sqrt(n)/sd) > t_crit), here by the shifted central t.
    n, delta, sd = 40, 0.5, 1.0
    reference = t_cdf(delta * math.sqrt(n) / sd - t_quantile(0.975, n - 1), n - 1)
    got = decision_power(n, delta, sd, change="higher", min_effect_pct=0.0)
    assert abs(got - reference) < 0.02


def test_no_effect_is_reproduced_at_most_at_the_one_sided_level():
    for n in (3, 8, 20):
        assert decision_power(n, 0.0, 0.5, change="lower", min_effect_pct=0.0) <= 0.025 + 0.005


def test_power_follows_the_decision_rule_pair_set_by_pair_set():
    """The vectorised rule equals decide.decide_check (with the t-interval) on the same pairs."""
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(300):
        n = int(rng.integers(3, 9))
        d = rng.normal(-0.8, 0.7, size=n)
        base = np.full(n, 100.0)
        lo, hi = log_ratio_t_interval(base, base * np.exp(d), 0.95)
        expected = decide.decide_check(change="lower", estimate_pct=100.0 * math.expm1(float(d.mean())),
                                       low_pct=lo, high_pct=hi, min_effect_pct=40.0,
                                       rule="interval-excludes-min-effect",
                                       agreeing_pairs=int((d < 0).sum()), min_pairs=n - 1)
        got = bool(reproduces(d[None, :], change="lower", min_effect_pct=40.0, min_agreeing=n - 1)[0])
        assert got == (expected == decide.REPRODUCED)
        seen.add(got)
    assert seen == {True, False}


def test_required_pairs_for_the_cpu_pilot():
    # The cpu-engine-smoke pilot: planted log ratios sd 0.96 around -1.39 (-75%).
    n = required_pairs(-1.39, 0.96, change="lower", min_effect_pct=40.0, power=0.9)
    assert n is not None and 6 <= n <= 10
    assert decision_power(n, -1.39, 0.96, change="lower", min_effect_pct=40.0) >= 0.9
    assert decision_power(n - 1, -1.39, 0.96, change="lower", min_effect_pct=40.0) < 0.9


def test_no_effect_never_reaches_power():
    assert required_pairs(0.0, 0.5, change="higher", min_effect_pct=10.0, max_pairs=12) is None


@given(sd=st.floats(0.05, 1.5), more=st.floats(1.2, 3.0), effect=st.floats(0.3, 2.0))
def test_more_noise_never_needs_fewer_pairs(sd, more, effect):
    a = required_pairs(-effect, sd, change="lower", min_effect_pct=10.0, max_pairs=40, replicates=3000)
    b = required_pairs(-effect, sd * more, change="lower", min_effect_pct=10.0, max_pairs=40, replicates=3000)
    if a is not None and b is not None:
        assert b >= a - 1  # Monte Carlo jitter of one pair at the threshold
    if a is None:
        assert b is None


def test_log_ratio_sd():
    assert log_ratio_sd(np.array([1.0, 1.0, 1.0]), np.array([1.0, math.e, 1.0])) == pytest.approx(
        float(np.std([0.0, 1.0, 0.0], ddof=1)))
    with pytest.raises(ValueError):
        log_ratio_sd(np.array([1.0]), np.array([2.0]))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        decision_power(1, 0.0, 1.0, change="lower", min_effect_pct=0.0)
    with pytest.raises(ValueError):
        decision_power(3, 0.0, 0.0, change="lower", min_effect_pct=0.0)
    with pytest.raises(ValueError):
        required_pairs(0.0, 1.0, change="lower", min_effect_pct=0.0, power=1.0)


def test_analysis_reports_the_noise_and_the_pairs_a_rerun_needs(tmp_path):
    from evhelpers import write_protocol
    from overlay.evidence import analyze, report, synth
    from overlay.evidence.protocol import load_protocol

    folder = tmp_path / "claim"
    proto = load_protocol(write_protocol(folder, starts=4, prompts=12, resamples=300, effect=5.0))
    synth.write_dataset(proto, folder, effect_pct={"fast": -30.0}, between_sd=0.1, seed=8)
    a = analyze.analyze(proto, folder, ())
    rows = report.noise(a)
    assert {r["check"] for r in rows} == {"mean tpot", "p99 itl", "throughput"}
    tpot = next(r for r in rows if r["check"] == "mean tpot")
    d = next(x.delta for c in a.claims for x in c.checks if x.check.label == "mean tpot")
    b, t = np.array(d.baseline), np.array(d.treated)
    assert tpot["baseline_cv"] == pytest.approx(b.std(ddof=1) / b.mean())
    assert tpot["sd_log_ratio"] == pytest.approx(log_ratio_sd(b, t))
    assert isinstance(tpot["pairs_for_power_0.9"], int) and tpot["pairs_for_power_0.9"] >= 2
    assert "## Noise between starts" in report.render_markdown(a, [])
