"""Read the benchmark client's raw results and the run folders `bench ab` writes.

Supported input: the JSON file `vllm bench serve --save-result --save-detailed`
writes (one per scenario per server start). Per-request fields used: `ttfts`,
`itls` (one list per request), `latencies`, `output_lens`, `errors` (all in
seconds / tokens, one entry per request); per-run fields: `output_throughput`,
`request_throughput`, `num_prompts`, `max_concurrency`, `request_rate`. A
request counts as successful when its `errors` entry is empty. TPOT per request
is computed as vLLM does: (latency - ttft) / (output tokens - 1).

Layout of a results folder:
  runs/<variant>-r<start>/run.json          written by `overlay bench ab` (optional)
  runs/<variant>-r<start>/<scenario>.json   the client's result file
  excluded/<anything>/reason.txt            runs set aside, with the reason
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from overlay.errors import OverlayError

RUN_DIR = re.compile(r"^(?P<variant>[A-Za-z0-9][A-Za-z0-9_-]*?)-r(?P<start>\d+)$")
REQUIRED = ("output_throughput", "request_throughput", "ttfts", "itls", "latencies",
            "output_lens", "errors")


@dataclass(frozen=True)
class ScenarioResult:
    run_id: str
    variant: str
    start: int
    scenario: str
    path: Path
    throughput: float  # output tokens/s
    request_throughput: float
    ttft: np.ndarray  # ms, successful requests
    tpot: np.ndarray
    e2el: np.ndarray
    itl: np.ndarray  # ms, every inter-token gap of successful requests
    completed: int
    failed: int
    num_prompts: int | None
    max_concurrency: int | None
    request_rate: float | None

    def values(self, metric: str) -> np.ndarray:
        if metric == "throughput":
            return np.array([self.throughput])
        if metric == "request-throughput":
            return np.array([self.request_throughput])
        return getattr(self, metric)


@dataclass(frozen=True)
class RunFolder:
    run_id: str
    variant: str
    start: int
    path: Path
    position: int | None  # where it actually ran (run.json), if known
    scenarios: tuple[str, ...]  # scenario files present
    started: str | None = None  # ISO time the server start began (run.json)
    has_meta: bool = True  # run.json present (bench ab always writes one)


@dataclass(frozen=True)
class Excluded:
    name: str
    run_id: str | None
    reason: str
    path: Path
    started: str | None = None


def _rate(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        return math.inf if value.strip().lower() in ("inf", "infinity") else float(value)
    return float(value)  # type: ignore[arg-type]


def load_result(path: Path, run_id: str, variant: str, start: int, scenario: str,
                shown: str | None = None) -> ScenarioResult:
    where = shown or str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OverlayError("result file not found", path=where) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OverlayError(f"not valid JSON: {exc}", path=where) from None
    if not isinstance(data, dict):
        raise OverlayError("not a `vllm bench serve` result (expected a JSON object)", path=where)
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise OverlayError(f"not a detailed `vllm bench serve` result: missing {', '.join(missing)}",
                           path=where, hint="run the client with --save-result --save-detailed")
    n = len(data["ttfts"])
    for key in ("itls", "latencies", "output_lens", "errors"):
        if not isinstance(data[key], list) or len(data[key]) != n:
            raise OverlayError(f"field '{key}' must list one entry per request ({n})", path=where)
    ok = [not e for e in data["errors"]]
    ttft, tpot, e2el, itl = [], [], [], []
    for i in range(n):
        if not ok[i]:
            continue
        t, lat, out = float(data["ttfts"][i]), float(data["latencies"][i]), int(data["output_lens"][i])
        ttft.append(t * 1000.0)
        e2el.append(lat * 1000.0)
        if out > 1:
            tpot.append((lat - t) / (out - 1) * 1000.0)
        itl.extend(float(x) * 1000.0 for x in data["itls"][i])
    completed = sum(ok)
    conc = data.get("max_concurrency")
    return ScenarioResult(
        run_id=run_id, variant=variant, start=start, scenario=scenario, path=path,
        throughput=float(data["output_throughput"]),
        request_throughput=float(data["request_throughput"]),
        ttft=np.array(ttft), tpot=np.array(tpot), e2el=np.array(e2el), itl=np.array(itl),
        completed=completed, failed=n - completed,
        num_prompts=data.get("num_prompts"), max_concurrency=None if conc is None else int(conc),
        request_rate=_rate(data.get("request_rate")))


def parse_run_id(name: str) -> tuple[str, int] | None:
    m = RUN_DIR.match(name)
    return (m.group("variant"), int(m.group("start"))) if m else None


def _meta(path: Path) -> dict:
    """run.json as written by `bench ab` ({} when absent)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise OverlayError("run.json is not valid JSON", path=str(path)) from None
    if not isinstance(data, dict):
        raise OverlayError("run.json is not a JSON object", path=str(path))
    return data


def scan_runs(results: Path) -> tuple[RunFolder, ...]:
    """Complete run folders under results/runs (partial ones end in .partial)."""
    runs_dir = results / "runs"
    out = []
    if not runs_dir.is_dir():
        return ()
    for d in sorted(runs_dir.iterdir()):
        parsed = parse_run_id(d.name) if d.is_dir() else None
        if parsed is None:
            continue
        meta = _meta(d / "run.json")
        scen = tuple(sorted(p.stem for p in d.glob("*.json") if p.name != "run.json"))
        out.append(RunFolder(d.name, parsed[0], parsed[1], d, meta.get("position"), scen,
                             meta.get("started"), (d / "run.json").is_file()))
    return tuple(out)


def scan_excluded(results: Path) -> tuple[Excluded, ...]:
    base = results / "excluded"
    if not base.is_dir():
        return ()
    out = []
    for d in sorted(base.iterdir()):
        if not d.is_dir():
            continue
        reason_file = d / "reason.txt"
        reason = reason_file.read_text(encoding="utf-8").strip() if reason_file.is_file() else ""
        run = d.name.split(".")[0]
        out.append(Excluded(d.name, run if parse_run_id(run) else None, reason, d,
                            _meta(d / "run.json").get("started")))
    return tuple(out)
