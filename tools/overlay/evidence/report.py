"""Render an analysis (measured here, or reported by a source) as Markdown and JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from overlay.evidence.analyze import Analysis, ClaimDecision
from overlay.evidence.stats import BOOTSTRAP_MIN_PAIRS, METHOD_BOOTSTRAP, METHOD_T, METHOD_T_DIFF, distinct_resamples


@dataclass(frozen=True)
class Row:
    """One decided check, whatever produced it."""

    claim: str
    treatment: str
    scenario: str
    check: str  # e.g. "p99 itl (claimed: higher by >= 2.0%)"
    estimate_pct: float | None
    low_pct: float | None
    high_pct: float | None
    pairs: str  # "3/5" agreeing pairs, or ""
    decision: str
    note: str = ""


def _pct(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.2f}%"


def _ci(lo: float | None, hi: float | None, note: str = "") -> str:
    if lo is None or hi is None:
        return note or "not reported"
    return f"({lo:+.2f}%, {hi:+.2f}%)"


def check_label(metric: str, statistic: str, change: str, min_effect: float) -> str:
    name = metric if statistic == "value" else f"{statistic} {metric}"
    return f"{name} ({change}, min {min_effect:g}%)"


def rows_from_claims(claims: tuple[ClaimDecision, ...]) -> list[Row]:
    rows = []
    for c in claims:
        for cd in c.checks:
            iv = cd.delta.interval if cd.delta else None
            label = check_label(cd.check.metric, cd.check.statistic, cd.check.change,
                                cd.check.min_effect_pct)
            rows.append(Row(c.name, cd.treatment, cd.scenario, label,
                            iv.delta_pct if iv else None, iv.low_pct if iv else None,
                            iv.high_pct if iv else None,
                            f"{cd.agreeing_pairs}/{iv.n_pairs}" if iv else "",
                            cd.decision, "" if iv else "no paired data"))
        for k in c.counters:
            exp = ", ".join(f"{v} {n:g}" for v, n in k.expected.items())
            got = ", ".join(f"{v} {k.raw[v]} ({k.measured[v]:g}/step)" for v in k.measured)
            rows.append(Row(c.name, "", "", f"{k.api} per step over {k.steps} steps", None, None, None,
                            "", k.decision, f"expected {exp}; counted {got}"))
    return rows


def decision_table(claims: tuple[ClaimDecision, ...], rows: list[Row]) -> str:
    lines = ["| claim | decision | hypothesis |", "| --- | --- | --- |"]
    for c in claims:
        lines.append(f"| {c.name} | **{c.decision}** | {c.hypothesis}{' — ' + c.note if c.note else ''} |")
    lines += ["", "| claim | treatment | scenario | check | delta | 95% CI | agreeing pairs | decision | note |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.claim} | {r.treatment} | {r.scenario} | {r.check} | {_pct(r.estimate_pct)} | "
                     f"{_ci(r.low_pct, r.high_pct)} | {r.pairs} | {r.decision} | {r.note} |")
    return "\n".join(lines) + "\n"


def interval_note(a: Analysis) -> str:
    """Which interval method the deltas used, and why (one line); pure."""
    p = a.protocol
    conf = int(round(p.bootstrap.confidence * 100))
    methods = {d.interval.method for d in a.deltas}
    ns = sorted({d.interval.n_pairs for d in a.deltas})
    parts = []
    if methods & {METHOD_T, METHOD_T_DIFF}:
        small = [n for n in ns if n < BOOTSTRAP_MIN_PAIRS]
        resamples = ", ".join(f"{distinct_resamples(n)} at n={n}" for n in small)
        parts.append(f"{conf}% Student t-intervals on the log ratios of paired starts (on the differences "
                     f"where a value is 0): with fewer than {BOOTSTRAP_MIN_PAIRS} pairs a bootstrap has few "
                     f"distinct resamples ({resamples}) and its interval shrinks to the pairs' min..max; "
                     "the pair range is shown beside them and is not an interval")
    if METHOD_BOOTSTRAP in methods:
        parts.append(f"{conf}% paired-start cluster bootstrap (server starts resampled, not requests), "
                     f"{p.bootstrap.resamples} resamples, seed {p.bootstrap.seed}")
    return "; ".join(parts) or "none (no paired starts)"


def _range(lo: float, hi: float) -> str:
    return "n/a" if math.isnan(lo) or math.isnan(hi) else f"{lo:+.2f}%..{hi:+.2f}%"


def noise(a: Analysis) -> list[dict]:
    """Per checked comparison: the start-to-start noise the runs showed (coefficient of
    variation of each side's per-start values, sd of the pair log ratios) and, where the
    observed change reaches the minimum effect, the pairs the decision rule would need at
    this noise for power 0.9 (stats.required_pairs): what a rerun should plan for; pure."""
    from overlay.evidence.stats import MAX_POWER_PAIRS, required_pairs

    rows = []
    agreeing = {k.name: k.min_positive_pairs for k in a.protocol.claims}
    for cl in a.claims:
        for c in cl.checks:
            d = c.delta
            if d is None:
                continue
            b, x = np.array(d.baseline), np.array(d.treated)
            if not (np.all(b > 0) and np.all(x > 0)) or b.size < 2:
                continue
            logs = np.log(x / b)
            sd = float(logs.std(ddof=1))
            cv = lambda v: float(v.std(ddof=1) / v.mean())  # noqa: E731
            oriented = d.interval.delta_pct if c.check.change == "higher" else -d.interval.delta_pct
            need: int | str = "n/a (change below the minimum effect)"
            if oriented >= c.check.min_effect_pct and sd > 0:
                need = required_pairs(float(logs.mean()), sd, change=c.check.change,
                                      min_effect_pct=c.check.min_effect_pct, power=0.9,
                                      min_agreeing_fraction=agreeing.get(cl.name, 0) / b.size) or (
                    f"more than {MAX_POWER_PAIRS}")
            rows.append({"claim": cl.name, "treatment": c.treatment, "scenario": c.scenario,
                         "check": c.check.label, "n_pairs": int(b.size), "baseline_cv": cv(b),
                         "treatment_cv": cv(x), "sd_log_ratio": sd, "pairs_for_power_0.9": need})
    return rows


def render_markdown(a: Analysis, plots: list[str]) -> str:
    p = a.protocol
    conf = int(round(p.bootstrap.confidence * 100))
    out = [f"# Analysis: {p.claim}", "",
           f"Protocol preregistered {p.preregistered.isoformat()}; {p.starts} independent server "
           f"starts per variant in balanced interleaved order; baseline `{p.baseline}`.", "",
           f"Hypothesis: {p.hypothesis}", "",
           f"Intervals: {interval_note(a)}.", "",
           "## Decisions", "", decision_table(a.claims, rows_from_claims(a.claims)),
           "## Per variant (mean over starts of the per-start statistic)", "",
           "| variant | scenario | metric | mean | p50 | p95 | p99 | starts |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    by = {(s.variant, s.scenario, s.metric, s.statistic): s for s in a.summaries}
    for v in p.variant_names:
        for sc in p.scenarios:
            for m in p.metrics:
                if (v, sc.name, m, "value") in by:
                    s = by[(v, sc.name, m, "value")]
                    unit = "req/s" if m == "request-throughput" else "output tok/s"
                    out.append(f"| {v} | {sc.name} | {m} ({unit}) | {s.mean:.3f} | | | | {len(s.starts)} |")
                    continue
                cells = [by.get((v, sc.name, m, st)) for st in ("mean", "p50", "p95", "p99")]
                if all(c is None for c in cells):
                    continue
                vals = " | ".join("" if c is None else f"{c.mean:.3f}" for c in cells)
                n = max(len(c.starts) for c in cells if c is not None)
                out.append(f"| {v} | {sc.name} | {m} (ms) | {vals} | {n} |")
    out += ["", "## Deltas (treatment minus baseline)", "",
            "| treatment | scenario | metric | baseline | treatment | delta | delta % | "
            f"{conf}% CI | method | pair range (not a CI) | distinct resamples | sign-flip p | positive pairs |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for d in a.deltas:
        iv = d.interval
        name = d.metric if d.statistic == "value" else f"{d.statistic} {d.metric}"
        flip = "n/a" if iv.sign_flip_p is None else f"{iv.sign_flip_p:.3g}"
        out.append(f"| {d.treatment} | {d.scenario} | {name} | {iv.baseline_mean:.3f} | "
                   f"{iv.treatment_mean:.3f} | {iv.delta:+.3f} | {_pct(iv.delta_pct)} | "
                   f"{_ci(iv.low_pct, iv.high_pct)} | {iv.method} | {_range(iv.pair_low_pct, iv.pair_high_pct)} | "
                   f"{iv.distinct_resamples} | {flip} | {iv.positive_pairs}/{iv.n_pairs} |")
    rows = noise(a)
    if rows:
        out += ["", "## Noise between starts", "",
                "| claim | treatment | scenario | check | pairs | CV baseline | CV treatment | sd of pair log ratios "
                "| pairs for power 0.9 at this noise |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            need = r["pairs_for_power_0.9"]
            out.append(f"| {r['claim']} | {r['treatment']} | {r['scenario']} | {r['check']} | {r['n_pairs']} | "
                       f"{100 * r['baseline_cv']:.1f}% | {100 * r['treatment_cv']:.1f}% | {r['sd_log_ratio']:.3f} | "
                       f"{need} |")
    out += ["", "## Deviations", ""]
    for issue, dev in a.recorded:
        out.append(f"- {issue.detail} — recorded ({dev.kind}): {dev.reason}")
    for dev in a.declared:
        out.append(f"- declared ({dev.kind}, deviations.yaml:{dev.line}): {dev.reason}")
    if not a.recorded and not a.declared:
        out.append("- none")
    for n in a.notes:
        out.append(f"- note: {n}")
    if a.e2el_source:
        out += ["", f"E2E latency (feeds e2el and tpot): {a.e2el_source}."]
    if a.engine:
        out += ["", f"Engine (run.json `engine.server`, read from the installed packages at run time): {a.engine}."]
    if plots:
        out += ["", "## Plots", ""] + [f"![{x}]({x})" for x in plots]
    return "\n".join(out) + "\n"


def to_json(a: Analysis, plots: list[str]) -> dict:
    def iv_dict(iv):
        return {k: getattr(iv, k) for k in iv.__dataclass_fields__}

    return {
        "claim": a.protocol.claim,
        "preregistered": a.protocol.preregistered.isoformat(),
        "baseline": a.protocol.baseline,
        "bootstrap": {"resamples": a.protocol.bootstrap.resamples,
                      "confidence": a.protocol.bootstrap.confidence, "seed": a.protocol.bootstrap.seed,
                      "unit": "server start (paired by start number)"},
        "intervals": {"note": interval_note(a), "bootstrap_min_pairs": BOOTSTRAP_MIN_PAIRS},
        "claims": [{"name": c.name, "hypothesis": c.hypothesis, "kind": c.kind, "decision": c.decision,
                    "note": c.note,
                    "checks": [{"treatment": x.treatment, "scenario": x.scenario, "metric": x.check.metric,
                                "statistic": x.check.statistic, "change": x.check.change,
                                "min_effect_pct": x.check.min_effect_pct, "decision": x.decision,
                                "agreeing_pairs": x.agreeing_pairs,
                                "interval": iv_dict(x.delta.interval) if x.delta else None}
                               for x in c.checks],
                    "counters": [{"api": k.api, "steps": k.steps, "expected_per_step": k.expected,
                                  "measured_per_step": k.measured, "raw": k.raw, "decision": k.decision}
                                 for k in c.counters]}
                   for c in a.claims],
        "summaries": [{"variant": s.variant, "scenario": s.scenario, "metric": s.metric,
                       "statistic": s.statistic, "starts": list(s.starts), "per_start": list(s.per_start),
                       "mean": s.mean} for s in a.summaries],
        "deltas": [{"treatment": d.treatment, "scenario": d.scenario, "metric": d.metric,
                    "statistic": d.statistic, "starts": list(d.starts), "baseline": list(d.baseline),
                    "treatment_values": list(d.treated), "interval": iv_dict(d.interval),
                    **({"nodes": list(d.nodes), "per_node_pct": dict(d.per_node_pct)} if d.nodes else {})}
                   for d in a.deltas],
        "deviations": [{"kind": i.kind, "run": i.run, "scenario": i.scenario, "detail": i.detail,
                        "reason": d.reason} for i, d in a.recorded]
                      + [{"kind": d.kind, "run": d.run, "scenario": d.scenario, "detail": "declared",
                          "reason": d.reason} for d in a.declared],
        "engine": a.engine,
        "noise": noise(a),
        "notes": list(a.notes),
        "e2el_source": a.e2el_source,
        "e2el_sources": {r.run_id + "/" + r.scenario: r.e2el_source for r in a.results},
        "plots": plots,
    }
