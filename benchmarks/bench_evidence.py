"""Paired-start bootstrap: vectorised numpy vs a plain Python loop (prints the ratio).

Run: python benchmarks/bench_evidence.py [--starts 10] [--resamples 10000]
Both compute the same interval from the same resample indices; the script checks
they agree before it reports the speed ratio. No assertion on time: speed is
reported, not tested.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from overlay.evidence.stats import paired_bootstrap_from_indices, resample_indices


def naive(base: list[float], treat: list[float], idx: list[list[int]], confidence: float) -> tuple[float, float]:
    rel = []
    for row in idx:
        b = sum(base[i] for i in row) / len(row)
        t = sum(treat[i] for i in row) / len(row)
        rel.append(100.0 * (t / b - 1.0))
    a = 1.0 - confidence
    return float(np.quantile(rel, a / 2)), float(np.quantile(rel, 1 - a / 2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    base = rng.normal(100, 2, size=args.starts)
    treat = base * 0.98 + rng.normal(0, 1, size=args.starts)
    idx = resample_indices(args.starts, args.resamples, seed=1)
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        iv = paired_bootstrap_from_indices(base, treat, idx, 0.95)
    vec = (time.perf_counter() - t0) / args.repeat
    b, t, rows = base.tolist(), treat.tolist(), idx.tolist()
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        lo, hi = naive(b, t, rows, 0.95)
    loop = (time.perf_counter() - t0) / args.repeat
    assert abs(lo - iv.low_pct) < 1e-9 and abs(hi - iv.high_pct) < 1e-9, "implementations disagree"
    print(f"starts={args.starts} resamples={args.resamples}: vectorised {vec * 1e3:.2f} ms, "
          f"loop {loop * 1e3:.2f} ms, ratio {loop / vec:.1f}x; interval ({iv.low_pct:+.3f}%, {iv.high_pct:+.3f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
