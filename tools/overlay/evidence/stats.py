"""Paired-start cluster bootstrap: resample server starts, never requests.

Requests from one server start share that start's luck (memory layout, graph
capture, clocks, neighbours), so they are not independent draws; treating them as
independent makes a between-start difference look like a significant effect. The
unit here is the start: each start is reduced to one number per (metric,
statistic), and start k of the treatment is paired with start k of the baseline
(they ran next to each other in the balanced order). A bootstrap replicate draws
n pair indices with replacement and recomputes the relative difference of the
means. Pure functions, vectorised over replicates, seeded.

Small samples. With n pairs the bootstrap has only C(2n-1, n) distinct resamples (10
at n = 3, 126 at n = 5), and its percentile interval at n = 3 is the min..max of the
pair ratios: not a 95 % interval (it covers the true ratio with probability 1 - 2/2^3
= 75 % at best, for the median). Below BOOTSTRAP_MIN_PAIRS the interval is a Student
t-interval on the log pair ratios (exact under log-normal start-to-start noise, and
wide at n = 3, as it must be: t(0.975, 2) = 4.30), reported with the range of the pair
ratios (labelled as a range, never as a confidence interval), the count of distinct
resamples, and the exact sign-flip permutation p-value (which cannot go below 2^(1-n):
0.25 at n = 3, so no distribution-free test can exclude zero at 5 % with fewer than 6
pairs; evidence/README.md says what that means for the decisions).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

# np.percentile's default (linear) method is what `vllm bench serve` uses for its
# own P50/P95/P99, so a per-start p99 here equals the one the client printed.
_PCT = {"p50": 50.0, "p95": 95.0, "p99": 99.0}


def per_start_statistic(values: np.ndarray, statistic: str) -> float:
    """One number for one start: mean, p50, p95, p99 (or `value` for a scalar)."""
    arr = np.asarray(values, dtype=float)
    if statistic == "value":
        return float(arr.reshape(-1)[0])
    if arr.size == 0:
        return float("nan")
    if statistic == "mean":
        return float(arr.mean())
    return float(np.percentile(arr, _PCT[statistic]))


@dataclass(frozen=True)
class PairedInterval:
    """Treatment minus baseline, over paired starts, with a percentile interval."""

    n_pairs: int
    baseline_mean: float
    treatment_mean: float
    delta: float  # treatment mean - baseline mean (metric units)
    delta_pct: float  # 100 * (treatment mean / baseline mean - 1)
    low_pct: float
    high_pct: float
    low: float
    high: float
    confidence: float
    resamples: int
    positive_pairs: int  # pairs whose treatment value exceeds the baseline's
    negative_pairs: int
    method: str = "bootstrap"  # METHOD_T, METHOD_T_DIFF or METHOD_BOOTSTRAP: how low/high came about
    pair_low_pct: float = math.nan  # the range of the per-pair ratios (a range, not an interval)
    pair_high_pct: float = math.nan
    distinct_resamples: int = 0  # distinct bootstrap resamples n pairs allow, C(2n-1, n)
    sign_flip_p: float | None = None  # exact two-sided sign-flip p of the mean log ratio (n <= 16)


METHOD_T = "t-log-ratio"
METHOD_T_DIFF = "t-difference"
METHOD_BOOTSTRAP = "bootstrap"
# Below this many pairs the percentile bootstrap's coverage falls short of its label (its
# plug-in variance is (n-1)/n of the unbiased one and it ignores t's wider tails: about
# 90 % for a nominal 95 % at n = 10, 93 % at n = 20), so the t-interval decides instead.
BOOTSTRAP_MIN_PAIRS = 20
SIGN_FLIP_MAX_PAIRS = 16  # 2^16 sign patterns, enumerated exactly


def distinct_resamples(n: int) -> int:
    """How many different multisets of n pairs a bootstrap can draw: C(2n-1, n)."""
    return math.comb(2 * n - 1, n)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                    -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(x: float, df: int) -> float:
    """Student t distribution function."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + x * x))
    return 1.0 - tail if x > 0 else tail


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """Student t quantile (bisection on t_cdf; p in (0, 1))."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError("t_quantile needs 0 < p < 1 and df >= 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def log_ratio_t_interval(baseline: np.ndarray, treatment: np.ndarray,
                         confidence: float) -> tuple[float, float]:
    """(low %, high %) of the typical paired ratio: a t-interval on log(treatment / baseline)
    over the pairs, transformed back. Needs positive values (times, throughputs)."""
    d = np.log(np.asarray(treatment, dtype=float) / np.asarray(baseline, dtype=float))
    n = d.size
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * float(d.std(ddof=1)) / math.sqrt(n)
    m = float(d.mean())
    return 100.0 * math.expm1(m - half), 100.0 * math.expm1(m + half)


def sign_flip_p(baseline: np.ndarray, treatment: np.ndarray) -> float | None:
    """Exact two-sided p-value of 'no effect' from all 2^n sign flips of the log pair
    ratios (no distributional assumption); None above SIGN_FLIP_MAX_PAIRS."""
    d = np.log(np.asarray(treatment, dtype=float) / np.asarray(baseline, dtype=float))
    n = d.size
    if n > SIGN_FLIP_MAX_PAIRS:
        return None
    signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)  # (2^n, n) of +-1
    stats = np.abs(signs @ d)
    return float(np.mean(stats >= abs(float(d.sum())) - 1e-12 * max(1.0, float(np.abs(d).sum()))))


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) pair indices drawn with replacement; the only randomness."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(resamples, n))


def paired_bootstrap_from_indices(baseline: np.ndarray, treatment: np.ndarray,
                                  idx: np.ndarray, confidence: float) -> PairedInterval:
    """The interval for given resample indices (so tests can pin the randomness)."""
    b = np.asarray(baseline, dtype=float)
    t = np.asarray(treatment, dtype=float)
    if b.shape != t.shape or b.ndim != 1 or b.size < 2:
        raise ValueError("baseline and treatment must be equal-length 1-D arrays of >= 2 starts")
    bm, tm = float(b.mean()), float(t.mean())
    rb = b[idx].mean(axis=1)  # (resamples,) baseline means
    rt = t[idx].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = 100.0 * (rt / rb - 1.0)
    diff = rt - rb
    alpha = 1.0 - confidence
    q = [alpha / 2.0, 1.0 - alpha / 2.0]
    lo_pct, hi_pct = np.quantile(rel, q)
    lo, hi = np.quantile(diff, q)
    return PairedInterval(
        n_pairs=int(b.size), baseline_mean=bm, treatment_mean=tm, delta=tm - bm,
        delta_pct=100.0 * (tm / bm - 1.0) if bm else float("nan"),
        low_pct=float(lo_pct), high_pct=float(hi_pct), low=float(lo), high=float(hi),
        confidence=confidence, resamples=int(idx.shape[0]),
        positive_pairs=int((t > b).sum()), negative_pairs=int((t < b).sum()))


def paired_bootstrap(baseline: np.ndarray, treatment: np.ndarray, *, resamples: int = 10000,
                     confidence: float = 0.95, seed: int = 0) -> PairedInterval:
    """Seeded paired-start cluster bootstrap of the relative difference of means."""
    idx = resample_indices(len(baseline), resamples, seed)
    return paired_bootstrap_from_indices(baseline, treatment, idx, confidence)


def paired_interval(baseline: np.ndarray, treatment: np.ndarray, *, resamples: int = 10000,
                    confidence: float = 0.95, seed: int = 0) -> PairedInterval:
    """The interval the decisions use: the paired bootstrap from BOOTSTRAP_MIN_PAIRS pairs
    on, the t-interval on log pair ratios below (where the bootstrap's min..max would
    pass for a 95 % interval). Either way with the pair range, the count of distinct
    resamples and, up to SIGN_FLIP_MAX_PAIRS pairs, the exact sign-flip p-value."""
    b = np.asarray(baseline, dtype=float)
    t = np.asarray(treatment, dtype=float)
    if b.shape != t.shape or b.ndim != 1 or b.size < 2:
        raise ValueError("baseline and treatment must be equal-length 1-D arrays of >= 2 starts")
    n = int(b.size)
    positive = bool(np.all(b > 0) and np.all(t > 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        per_pair = 100.0 * (t / b - 1.0)
    extra = dict(pair_low_pct=float(per_pair.min()), pair_high_pct=float(per_pair.max()),
                 distinct_resamples=distinct_resamples(n),
                 sign_flip_p=sign_flip_p(b, t) if positive else None)
    if n >= BOOTSTRAP_MIN_PAIRS:
        iv = paired_bootstrap(b, t, resamples=resamples, confidence=confidence, seed=seed)
        return dataclasses.replace(iv, method=METHOD_BOOTSTRAP, **extra)
    bm, tm = float(b.mean()), float(t.mean())
    if positive:
        lo_pct, hi_pct = log_ratio_t_interval(b, t, confidence)
        method = METHOD_T
    else:  # a zero (an idle gap, a counter) has no log: the t-interval of the differences
        diff = t - b
        half = t_quantile(0.5 + confidence / 2.0, n - 1) * float(diff.std(ddof=1)) / math.sqrt(n)
        lo_pct, hi_pct = (100.0 * (float(diff.mean()) + k * half) / bm if bm else math.nan for k in (-1, 1))
        method = METHOD_T_DIFF
    return PairedInterval(
        n_pairs=n, baseline_mean=bm, treatment_mean=tm, delta=tm - bm,
        delta_pct=100.0 * (tm / bm - 1.0), low_pct=lo_pct, high_pct=hi_pct,
        low=bm * lo_pct / 100.0, high=bm * hi_pct / 100.0, confidence=confidence, resamples=0,
        positive_pairs=int((t > b).sum()), negative_pairs=int((t < b).sum()),
        method=method, **extra)


# ----------------------------------------------------------------------------- power (before the runs)
# How many start pairs a protocol needs is decided before any run, from the noise a pilot
# measured: the spread of the per-pair log ratios log(treatment_k / baseline_k). Under the
# same log-normal model the t-interval assumes, `decision_power` is the probability that
# the decision rule (decide.decide_check) returns REPRODUCED: the t-interval on the log
# ratios excludes zero on the claimed side, the estimate reaches the minimum effect, and
# at least `min_agreeing` pairs point the claimed way. The estimate is taken as the
# geometric mean ratio exp(mean log ratio), the ratio-of-means' close cousin.
# Seeded Monte Carlo, vectorised over replicates: pure.

POWER_REPLICATES = 20000
MAX_POWER_PAIRS = 100  # protocol.MAX_STARTS


def log_ratio_sd(baseline: np.ndarray, treatment: np.ndarray) -> float:
    """Sample standard deviation of the per-pair log ratios (a pilot's noise)."""
    d = np.log(np.asarray(treatment, dtype=float) / np.asarray(baseline, dtype=float))
    if d.size < 2 or not np.all(np.isfinite(d)):
        raise ValueError("needs >= 2 pairs of positive values")
    return float(d.std(ddof=1))


def reproduces(log_ratios: np.ndarray, *, change: str, min_effect_pct: float, min_agreeing: int = 0,
               confidence: float = 0.95) -> np.ndarray:
    """Per row of pair log ratios (replicates x n): whether the decision rule says
    REPRODUCED, with the estimate taken as exp(mean log ratio) - 1."""
    if change not in ("higher", "lower"):
        raise ValueError("change must be higher or lower")
    sign = 1.0 if change == "higher" else -1.0
    d = np.atleast_2d(np.asarray(log_ratios, dtype=float)) * sign  # positive: as claimed
    n = d.shape[1]
    m = d.mean(axis=1)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    # Oriented: a lower claim's estimate is -(ratio - 1) = 1 - exp(-m).
    estimate_pct = 100.0 * (np.exp(m) - 1.0) if sign > 0 else 100.0 * (1.0 - np.exp(-m))
    return (m - half > 0) & (estimate_pct >= min_effect_pct) & ((d > 0).sum(axis=1) >= min_agreeing)


def decision_power(n: int, mean_log: float, sd_log: float, *, change: str, min_effect_pct: float,
                   min_agreeing: int = 0, confidence: float = 0.95,
                   replicates: int = POWER_REPLICATES, seed: int = 0) -> float:
    """P(REPRODUCED) at n pairs whose log ratios are N(mean_log, sd_log^2)."""
    if n < 2 or sd_log <= 0 or change not in ("higher", "lower"):
        raise ValueError("decision_power needs n >= 2, sd_log > 0 and change higher|lower")
    d = np.random.default_rng(seed).normal(mean_log, sd_log, size=(replicates, n))
    return float(reproduces(d, change=change, min_effect_pct=min_effect_pct, min_agreeing=min_agreeing,
                            confidence=confidence).mean())


def required_pairs(mean_log: float, sd_log: float, *, change: str, min_effect_pct: float,
                   power: float = 0.9, min_agreeing_fraction: float = 0.0, confidence: float = 0.95,
                   max_pairs: int = MAX_POWER_PAIRS, seed: int = 0,
                   replicates: int = POWER_REPLICATES) -> int | None:
    """The fewest pairs (2..max_pairs) at which `decision_power` reaches `power`, with
    min_agreeing = ceil(fraction * n); None when even max_pairs do not."""
    if not 0.0 < power < 1.0:
        raise ValueError("power must be in (0, 1)")
    for n in range(2, max_pairs + 1):
        k = math.ceil(min_agreeing_fraction * n)
        if decision_power(n, mean_log, sd_log, change=change, min_effect_pct=min_effect_pct,
                          min_agreeing=k, confidence=confidence, replicates=replicates, seed=seed) >= power:
            return n
    return None
