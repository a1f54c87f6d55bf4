"""Paired-start cluster bootstrap: resample server starts, never requests.

Requests from one server start share that start's luck (memory layout, graph
capture, clocks, neighbours), so they are not independent draws; treating them as
independent makes a between-start difference look like a significant effect. The
unit here is the start: each start is reduced to one number per (metric,
statistic), and start k of the treatment is paired with start k of the baseline
(they ran next to each other in the balanced order). A bootstrap replicate draws
n pair indices with replacement and recomputes the relative difference of the
means. Pure functions, vectorised over replicates, seeded.
"""

from __future__ import annotations

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
