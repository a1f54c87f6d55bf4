"""Synthetic results in the `vllm bench serve --save-detailed` schema, with known truth.

Used by the tests, the benchmark and the documentation to show what the analysis
does with a planted effect, with no effect, and with a between-start variance
that swamps a within-start effect. Each start draws its own multiplicative
offset (the start's luck); each token draws its own noise.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from overlay.evidence.plan import plan
from overlay.evidence.protocol import Protocol


def scenario_result(rng: np.random.Generator, *, num_prompts: int, output_len: int, input_len: int,
                    itl_ms: float, ttft_ms: float, token_sd: float, concurrency: int | None,
                    request_rate: float) -> dict:
    itls = rng.normal(itl_ms, itl_ms * token_sd, size=(num_prompts, output_len - 1)).clip(itl_ms * 0.2) / 1000
    ttfts = rng.normal(ttft_ms, ttft_ms * token_sd, size=num_prompts).clip(ttft_ms * 0.2) / 1000
    lat = ttfts + itls.sum(axis=1)
    duration = float(lat.sum() / (concurrency or 1))
    total_out = num_prompts * output_len
    return {
        "date": "20260801-000000", "endpoint_type": "openai", "backend": "openai", "label": None,
        "model_id": "synthetic", "tokenizer_id": "synthetic", "num_prompts": num_prompts,
        "request_rate": "inf" if np.isinf(request_rate) else request_rate, "burstiness": 1.0,
        "max_concurrency": concurrency, "duration": duration, "completed": num_prompts, "failed": 0,
        "total_input_tokens": num_prompts * input_len, "total_output_tokens": total_out,
        "request_throughput": num_prompts / duration, "request_goodput": None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_out + num_prompts * input_len) / duration,
        "input_lens": [input_len] * num_prompts, "output_lens": [output_len] * num_prompts,
        "ttfts": ttfts.tolist(), "itls": itls.tolist(), "latencies": lat.tolist(),
        "start_times": [0.0] * num_prompts, "queue_times": [0.0] * num_prompts,
        "generated_texts": [""] * num_prompts, "errors": [""] * num_prompts,
    }


def write_dataset(protocol: Protocol, results: Path, *, effect_pct: dict[str, float],
                  between_sd: float, token_sd: float = 0.05, itl_ms: float = 20.0,
                  ttft_ms: float = 80.0, seed: int = 1) -> None:
    """Write runs/<run>/<scenario>.json for every planned run. `effect_pct` is the
    true per-variant change of ITL/TTFT in percent (negative = faster)."""
    rng = np.random.default_rng(seed)
    for p in plan(protocol):
        d = results / "runs" / p.run_id
        d.mkdir(parents=True, exist_ok=True)
        luck = 1.0 + rng.normal(0.0, between_sd)
        factor = (1.0 + effect_pct.get(p.variant, 0.0) / 100.0) * luck
        for s in protocol.scenarios:
            res = scenario_result(rng, num_prompts=s.num_prompts, output_len=s.output_len,
                                  input_len=s.input_len, itl_ms=itl_ms * factor, ttft_ms=ttft_ms * factor,
                                  token_sd=token_sd, concurrency=s.max_concurrency,
                                  request_rate=s.request_rate)
            (d / f"{s.name}.json").write_text(json.dumps(res), encoding="utf-8")
        (d / "run.json").write_text(json.dumps({"run": p.run_id, "variant": p.variant, "start": p.start,
                                                "position": p.position, "synthetic": True}),
                                    encoding="utf-8")
