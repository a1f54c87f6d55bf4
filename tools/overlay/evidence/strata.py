"""Node as a stratum: a campaign's pairs resampled within the node they ran on.

Runs on a cluster differ by node (card bin, cooling, host load) as well as by start.
Both members of a pair ran on one node (evidence.campaign), so the pair stays the
unit; resampling keeps each node's number of pairs fixed, so a replicate never
over-represents one node. A claim whose direction differs between nodes is reported
as such. Pure functions.
"""

from __future__ import annotations

import numpy as np


MIN_PAIRS_PER_STRATUM = 2


def resamplable(strata: list[str | None]) -> bool:
    """Several nodes, each with enough pairs to resample within: one pair on a node has
    a single resample, and a stratified interval would shrink to a point. Otherwise the
    pairs are resampled across nodes (the analysis says how many nodes there were)."""
    labels = [s for s in strata if s]
    if len(labels) != len(strata) or len(set(labels)) < 2:
        return False
    return min(labels.count(s) for s in set(labels)) >= MIN_PAIRS_PER_STRATUM


def stratified_indices(strata: list[str], resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) pair indices, drawn with replacement within each stratum; the
    column order is the pairs' own, so `paired_bootstrap_from_indices` takes it as is."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(strata)
    idx = np.empty((resamples, labels.size), dtype=np.int64)
    for label in sorted(set(strata)):
        members = np.flatnonzero(labels == label)
        idx[:, members] = members[rng.integers(0, members.size, size=(resamples, members.size))]
    return idx


def per_stratum_delta_pct(baseline: np.ndarray, treatment: np.ndarray,
                          strata: list[str]) -> dict[str, float]:
    """100 * (treatment mean / baseline mean - 1) within each stratum."""
    b, t, labels = np.asarray(baseline, float), np.asarray(treatment, float), np.asarray(strata)
    out = {}
    for label in sorted(set(strata)):
        m = labels == label
        bm = float(b[m].mean())
        out[label] = 100.0 * (float(t[m].mean()) / bm - 1.0) if bm else float("nan")
    return out


def sign_differs(per_stratum: dict[str, float]) -> bool:
    """Some stratum says up and another says down."""
    vals = [v for v in per_stratum.values() if np.isfinite(v)]
    return any(v > 0 for v in vals) and any(v < 0 for v in vals)
