"""Evidence analysis speed, side by side (prints ratios; nothing is asserted on time).

1. Paired-start bootstrap: vectorised numpy vs a plain Python loop, same resample
   indices, same interval.
2. Reading one large `vllm bench serve --save-detailed` result (default 2000
   requests x 512 output tokens, in the vLLM 0.23 schema without `latencies`):
   the vectorised, validating `load_result` vs a per-request Python loop that
   computes the same TTFT/TPOT/E2E/ITL arrays (the way it was read before).

Run: python benchmarks/bench_evidence.py [--starts 10] [--resamples 10000] [--requests 2000 --tokens 512]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from overlay.evidence.results import load_result
from overlay.evidence.stats import paired_bootstrap_from_indices, resample_indices

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "evidence"))
from client_schemas import synthetic_result  # noqa: E402  (the real key lists, see that module)


def naive(base: list[float], treat: list[float], idx: list[list[int]], confidence: float) -> tuple[float, float]:
    rel = []
    for row in idx:
        b = sum(base[i] for i in row) / len(row)
        t = sum(treat[i] for i in row) / len(row)
        rel.append(100.0 * (t / b - 1.0))
    a = 1.0 - confidence
    return float(np.quantile(rel, a / 2)), float(np.quantile(rel, 1 - a / 2))


def loop_read(path: Path) -> dict[str, np.ndarray]:
    """Per-request Python loop over the same fields (no validation)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    ttft, tpot, e2el, itl = [], [], [], []
    for i, err in enumerate(data["errors"]):
        if err:
            continue
        t, gaps, out = data["ttfts"][i], data["itls"][i], data["output_lens"][i]
        lat = data["latencies"][i] if "latencies" in data else t + sum(gaps)
        ttft.append(t * 1000.0)
        e2el.append(lat * 1000.0)
        if out > 1:
            tpot.append((lat - t) / (out - 1) * 1000.0)
        itl.extend(x * 1000.0 for x in gaps)
    return {"ttft": np.array(ttft), "tpot": np.array(tpot), "e2el": np.array(e2el), "itl": np.array(itl)}


def bench_read(requests: int, tokens: int, repeat: int) -> None:
    rng = np.random.default_rng(2)
    ttfts = list(rng.uniform(0.01, 0.2, requests))
    itls = [list(rng.uniform(0.001, 0.02, tokens - 1)) for _ in range(requests)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        path.write_text(json.dumps(synthetic_result("0.23.0", ttfts, itls)), encoding="utf-8")
        size = path.stat().st_size / 1e6
        t0 = time.perf_counter()
        for _ in range(repeat):
            ref = loop_read(path)
        loop = (time.perf_counter() - t0) / repeat
        t0 = time.perf_counter()
        for _ in range(repeat):
            res = load_result(path, "base-r1", "base", 1, "big")
        vec = (time.perf_counter() - t0) / repeat
    for k in ("ttft", "tpot", "e2el", "itl"):
        assert np.allclose(getattr(res, k), ref[k]), f"implementations disagree on {k}"
    print(f"read result {requests} requests x {tokens} tokens ({size:.0f} MB): load_result "
          f"{vec * 1e3:.0f} ms (validated), per-request loop {loop * 1e3:.0f} ms, ratio {loop / vec:.1f}x")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=512)
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
    bench_read(args.requests, args.tokens, max(1, args.repeat // 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
