"""A stand-in for `vllm bench serve` that writes the same result schema.

vLLM cannot be installed on the CPU-only test machines, so the end-to-end tests
drive this client with the exact arguments `overlay bench ab` gives the real one
and it writes the keys `--save-result --save-detailed` writes (vllm/benchmarks/
serve.py): per-request `ttfts`, `itls`, `latencies`, `output_lens`, `errors`,
`start_times`, ... in seconds, plus the run-level fields and the traffic setup.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path


def one_request(host: str, port: int, model: str, prompt_len: int, out_len: int) -> dict:
    body = json.dumps({"model": model, "prompt": "x " * prompt_len, "max_tokens": out_len,
                       "stream": True, "ignore_eos": True, "prompt_len": prompt_len}).encode()
    start = time.perf_counter()
    res = {"start_time": start, "ttft": 0.0, "itl": [], "latency": 0.0, "output_len": 0, "error": "",
           "text": ""}
    try:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}")
        last = start
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            payload = line[len("data: "):]
            if payload == "[DONE]":
                break
            chunk = json.loads(payload)
            if chunk.get("choices"):
                now = time.perf_counter()
                if res["output_len"] == 0:
                    res["ttft"] = now - start
                else:
                    res["itl"].append(now - last)
                last = now
                res["output_len"] += 1
                res["text"] += chunk["choices"][0].get("text", "")
        res["latency"] = time.perf_counter() - start
        conn.close()
    except Exception as exc:  # recorded per request, like the real client
        res["error"] = str(exc) or type(exc).__name__
        res["ttft"], res["itl"], res["latency"], res["output_len"] = 0.0, [], 0.0, 0
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    for flag in ("--backend", "--host", "--model", "--dataset-name", "--result-dir", "--result-filename",
                 "--percentile-metrics", "--metric-percentiles", "--label"):
        ap.add_argument(flag)
    ap.add_argument("--port", type=int)
    ap.add_argument("--random-input-len", type=int, default=16)
    ap.add_argument("--random-output-len", type=int, default=8)
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--max-concurrency", type=int)
    ap.add_argument("--request-rate", default="inf")
    ap.add_argument("--num-warmups", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metadata", nargs="*", default=[])
    for flag in ("--ignore-eos", "--save-result", "--save-detailed"):
        ap.add_argument(flag, action="store_true")
    args, _unknown = ap.parse_known_args()
    rate = math.inf if args.request_rate == "inf" else float(args.request_rate)
    workers = args.max_concurrency or args.num_prompts
    call = lambda: one_request(args.host, args.port, args.model, args.random_input_len,  # noqa: E731
                               args.random_output_len)
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: call(), range(args.num_warmups)))
        t0 = time.perf_counter()
        futures = []
        lock = threading.Lock()
        for i in range(args.num_prompts):
            if not math.isinf(rate):
                time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            with lock:
                futures.append(pool.submit(call))
        outs = [f.result() for f in futures]
    duration = time.perf_counter() - t0
    ok = [o for o in outs if not o["error"]]
    total_out = sum(o["output_len"] for o in ok)
    result = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"), "endpoint_type": args.backend,
        "backend": args.backend, "label": args.label, "model_id": args.model, "tokenizer_id": args.model,
        "num_prompts": args.num_prompts,
    }
    for item in args.metadata:
        k, v = item.split("=", 1)
        result[k.strip()] = v.strip()
    result.update({
        "request_rate": "inf" if math.isinf(rate) else rate, "burstiness": 1.0,
        "max_concurrency": args.max_concurrency, "duration": duration, "completed": len(ok),
        "failed": len(outs) - len(ok), "total_input_tokens": args.random_input_len * len(ok),
        "total_output_tokens": total_out, "request_throughput": len(ok) / duration,
        "request_goodput": None, "output_throughput": total_out / duration,
        "total_token_throughput": (total_out + args.random_input_len * len(ok)) / duration,
        "input_lens": [args.random_input_len] * len(outs), "output_lens": [o["output_len"] for o in outs],
        "ttfts": [o["ttft"] for o in outs], "itls": [o["itl"] for o in outs],
        "latencies": [o["latency"] for o in outs], "start_times": [o["start_time"] for o in outs],
        "queue_times": [0.0] * len(outs), "generated_texts": [o["text"] for o in outs],
        "errors": [o["error"] for o in outs], "max_output_tokens_per_s": 0.0,
        "max_concurrent_requests": workers, "rtfx": 0.0,
    })
    out = Path(args.result_dir) / args.result_filename
    out.write_text(json.dumps(result), encoding="utf-8")
    print(f"fake client: {len(ok)}/{len(outs)} ok, wrote {out}")
    return 0 if args.save_result else 2


if __name__ == "__main__":
    sys.exit(main())
