"""PNG figures a reviewer would rather look at than read (matplotlib, Agg backend).

Each figure carries what it shows: the scenario, the number of start pairs or starts
and the units in its titles, and on every delta panel the decision with the threshold
it was taken against. Changes are drawn on a log-ratio axis (treatment / baseline) with
% tick labels, the scale the intervals are computed on: a +52,939 % bound does not
squash 0 and +100 % into one line. Each start pair is labelled with its start number.
ITL is drawn per start, as the fraction of gaps above x (log-log), so the p99 (the
line at 1 %) is where the curves can be read, not flat at y = 1. Counters claims get
one panel per counted API: measured per step per variant beside the expectation.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from overlay.evidence.analyze import Analysis, ClaimDecision
from overlay.evidence.protocol import RUN_METRICS

UNITS = {"throughput": "tokens/s", "request-throughput": "requests/s", "ttft": "ms", "tpot": "ms",
         "e2el": "ms", "itl": "ms"}
DECISION_COLOURS = {"REPRODUCED": "tab:green", "NOT_REPRODUCED": "tab:red", "INCONCLUSIVE": "tab:orange"}
# Candidate ticks of the ratio axis, as ratios (0.5 = -50 %, 2 = +100 %).
RATIO_TICKS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5,
               2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
FLOOR_RATIO = 1e-3  # an interval reaching -100 % or below (a difference interval) is drawn to here


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # no display: CI machines and servers have none
    import matplotlib.pyplot as plt

    return plt


def thresholds(a: Analysis, treatment: str, scenario: str, metric: str, statistic: str
               ) -> list[tuple[float, str]]:
    """(x in %, label) of every decision threshold a check puts on this delta: the signed
    minimum effect in the claimed direction; pure."""
    out = []
    for cl in a.claims:
        for c in cl.checks:
            if (c.treatment, c.scenario, c.check.metric, c.check.statistic) == (treatment, scenario, metric,
                                                                                  statistic):
                x = c.check.min_effect_pct if c.check.change == "higher" else -c.check.min_effect_pct
                item = (x, f"{cl.name}: min effect {x:+g}%")
                if item not in out:
                    out.append(item)
    return out


def decisions(a: Analysis, treatment: str, scenario: str, metric: str, statistic: str) -> list[tuple[str, str]]:
    """(claim, decision) of every check on this delta; pure."""
    return [(cl.name, c.decision) for cl in a.claims for c in cl.checks
            if (c.treatment, c.scenario, c.check.metric, c.check.statistic) == (treatment, scenario, metric,
                                                                                 statistic)]


def pct_label(ratio: float) -> str:
    """A ratio as the % change a tick shows: 0.5 -> '-50%', 2 -> '+100%', 1 -> '0%'; pure."""
    pct = 100.0 * (ratio - 1.0)
    if abs(pct) < 1e-9:
        return "0%"
    digits = 0 if abs(pct) >= 10 else 1
    return f"{pct:+,.{digits}f}%"


def ratio(pct: float) -> float:
    """A % change as the ratio the axis is drawn in, floored above 0 (log axis); pure."""
    return max(1.0 + pct / 100.0, FLOOR_RATIO)


def ratio_ticks(lo: float, hi: float, most: int = 8) -> list[float]:
    """Candidate ticks within [lo, hi], at least 1/most of the log span apart, 1 (0 %)
    always kept; pure."""
    span = math.log(hi / lo)
    gap = span / most
    inside = [t for t in RATIO_TICKS if lo <= t <= hi]
    kept = [1.0] if lo <= 1.0 <= hi else []
    for t in sorted(inside, key=lambda t: abs(math.log(t))):  # outward from 0 %
        if all(abs(math.log(t / k)) >= gap for k in kept):
            kept.append(t)
    return sorted(kept)


def _unit_label(metric: str, statistic: str) -> str:
    name = metric if statistic == "value" or metric in RUN_METRICS else f"{statistic} {metric}"
    return f"{name} ({UNITS.get(metric, '')})"


def per_start_deltas(a: Analysis, out: Path) -> list[Path]:
    """One figure per treatment and scenario, one axis per checked metric (their scales
    differ by orders of magnitude): each start pair's treatment/baseline ratio (labelled
    r<start>), the estimate with its interval, 0 % and the thresholds, the decision."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    plt = _plt()
    paths = []
    checked = {(c.check.metric, c.check.statistic) for cl in a.claims for c in cl.checks}
    for t in a.protocol.treatments:
        for sc in a.protocol.scenarios:
            ds = [d for d in a.deltas if d.treatment == t and d.scenario == sc.name
                  and (d.metric, d.statistic) in checked]
            if not ds:
                continue
            fig, axes = plt.subplots(len(ds), 1, figsize=(8, 2.3 * len(ds) + 1.0), squeeze=False)
            for ax, d in zip(axes[:, 0], ds):
                b, x = np.array(d.baseline), np.array(d.treated)
                with np.errstate(divide="ignore", invalid="ignore"):
                    per = np.maximum(x / b, FLOOR_RATIO)
                iv = d.interval
                ax.set_xscale("log")
                ax.scatter(per, np.zeros(per.shape), color="tab:gray", zorder=3, s=18, label="start pairs")
                for k, (start, r) in enumerate(zip(d.starts, per)):
                    ax.annotate(f"r{start}", (r, 0.0), xytext=(0, -11 - 8 * (k % 2)), textcoords="offset points",
                                ha="center", fontsize=6.5, color="dimgray")
                est, lo, hi = ratio(iv.delta_pct), ratio(iv.low_pct), ratio(iv.high_pct)
                ax.errorbar([est], [0.35], xerr=[[est - lo], [hi - est]], fmt="o", color="tab:blue", capsize=4,
                            zorder=4, label=f"estimate, {int(round(iv.confidence * 100))}% interval ({iv.method})")
                ax.axvline(1.0, color="black", lw=0.8)
                marks = thresholds(a, t, sc.name, d.metric, d.statistic)
                for xt, label in marks:
                    ax.axvline(ratio(xt), color="tab:red", ls="--", lw=1.0, label=label)
                span = [float(v) for v in (*per, lo, hi, est, 1.0, *(ratio(m) for m, _ in marks)) if math.isfinite(v)]
                left, right = min(span) / 1.6, max(span) * 1.6
                ax.set_xlim(left, right)
                ax.xaxis.set_major_locator(FixedLocator(ratio_ticks(left, right)))
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: pct_label(v)))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.tick_params(axis="x", labelsize=7)
                ax.set_ylim(-0.7, 0.9)
                ax.set_yticks([])
                said = decisions(a, t, sc.name, d.metric, d.statistic)
                verdict = "; ".join(f"{c}: {dec}" for c, dec in said)
                unit = UNITS.get(d.metric, "")
                ax.set_title(f"{_unit_label(d.metric, d.statistic)}: {sc.name}, n={iv.n_pairs} pairs; "
                             f"baseline {iv.baseline_mean:.4g} -> {iv.treatment_mean:.4g} {unit}",
                             fontsize=8.5, loc="left")
                if said:
                    colour = DECISION_COLOURS.get(said[0][1], "black")
                    ax.text(0.99, 0.93, verdict, transform=ax.transAxes, ha="right", va="top", fontsize=8,
                            fontweight="bold", color=colour,
                            bbox=dict(boxstyle="round,pad=0.25", fc="white", ec=colour, lw=0.8))
                ax.set_xlabel("change, treatment / baseline per start pair (log-ratio axis, % labels)", fontsize=7.5)
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
            fig.suptitle(f"{a.protocol.claim}: {t} vs {a.protocol.compared_with(t)}, scenario {sc.name}, "
                         f"{len(ds[0].starts)} start pairs", fontsize=10)
            fig.tight_layout()
            p = out / f"deltas-{t}-{sc.name}.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            paths.append(p)
    return paths


def itl_distributions(a: Analysis, out: Path) -> list[Path]:
    """Per scenario: each start's ITL as the fraction of gaps above x (log-log), one colour
    per variant, its p99 marked, and the 1 % line where every p99 sits."""
    plt = _plt()
    paths = []
    colours = dict(zip(a.protocol.variant_names, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4))
    for sc in a.protocol.scenarios:
        results = sorted((r for r in a.results if r.scenario == sc.name and r.itl.size),
                         key=lambda r: (a.protocol.variant_names.index(r.variant), r.start))
        if not results:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.6))
        seen: set[str] = set()
        for i, r in enumerate(results):
            x = np.sort(r.itl[r.itl > 0])
            if not x.size:
                continue
            above = 1.0 - np.arange(x.size) / x.size  # fraction of gaps >= x: from 1 down to 1/size
            n_starts = sum(1 for q in results if q.variant == r.variant)
            n_gaps = sum(q.itl.size for q in results if q.variant == r.variant)
            label = None if r.variant in seen else f"{r.variant} ({n_starts} starts, {n_gaps} gaps)"
            seen.add(r.variant)
            ax.step(x, above, where="post", color=colours[r.variant], lw=0.9, alpha=0.8, label=label)
            p99 = float(np.percentile(r.itl, 99))
            ax.plot([p99], [0.01], marker="o", ms=3.5, color=colours[r.variant], ls="none")
            ax.annotate(f"r{r.start}", (p99, 0.01), xytext=(2, 3 + 7 * (i % 3)), textcoords="offset points",
                        fontsize=6, color=colours[r.variant])
        ax.set_xscale("log")
        ax.set_yscale("log")
        gaps = np.concatenate([r.itl[r.itl > 0] for r in results])
        if gaps.size:  # the body from the 0.5th percentile on: sub-microsecond gaps are not the story
            ax.set_xlim(float(np.percentile(gaps, 0.5)) / 1.5, float(gaps.max()) * 1.5)
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.axhline(0.01, color="black", ls=":", lw=0.9, label="p99 (1% of gaps above)")
        ax.axhline(0.5, color="gray", ls=":", lw=0.7, label="p50")
        ax.set_xlabel("inter-token latency (ms, log)")
        ax.set_ylabel("fraction of gaps above x (log)")
        ax.set_title(f"{a.protocol.claim}: ITL per start, scenario {sc.name} "
                     f"({len(results)} starts; dots: each start's p99)", fontsize=9.5)
        ax.legend(loc="lower left", fontsize=7)
        fig.tight_layout()
        p = out / f"itl-{sc.name}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def counters(claims: tuple[ClaimDecision, ...] | list[ClaimDecision], out: Path, title: str) -> list[Path]:
    """Per counters claim: one panel per counted API, the measured count per step of each
    variant (bars, the raw count and steps on them) beside the preregistered expectation
    (black ticks), and the decision. `title` names the packet and what was measured
    (implementation, pin)."""
    plt = _plt()
    paths = []
    for cl in claims:
        if not cl.counters:
            continue
        fig, axes = plt.subplots(1, len(cl.counters), figsize=(3.6 * len(cl.counters) + 1.2, 3.8), squeeze=False)
        for ax, k in zip(axes[0], cl.counters):
            variants = list(k.expected) + [v for v in k.measured if v not in k.expected]
            xs = np.arange(len(variants))
            got = [k.measured.get(v, math.nan) for v in variants]
            colour = DECISION_COLOURS.get(k.decision, "tab:gray")
            bars = ax.bar(xs, got, color=colour, alpha=0.55, label="measured per step")
            for bar, v in zip(bars, variants):
                if v in k.raw:
                    ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() / 2,
                            f"{k.raw[v]} counted\nover {k.steps} steps", ha="center", va="center", fontsize=7)
            want = [k.expected.get(v, math.nan) for v in variants]
            ax.scatter(xs, want, marker="_", s=600, color="black", lw=2, zorder=4, label="expected per step")
            ax.set_xticks(xs)
            ax.set_xticklabels(variants, fontsize=8)
            ax.set_ylabel("count per decode step")
            ax.set_ylim(0, max([g for g in got + want if math.isfinite(g)] + [1.0]) * 1.3)
            ax.set_title(f"{k.api}\n{k.steps} steps: {k.decision}", fontsize=8.5, color=colour)
            ax.legend(loc="upper right", fontsize=6.5)
        import textwrap

        fig.suptitle("\n".join(textwrap.wrap(title, 90)) + f"\nclaim {cl.name}: {cl.decision}", fontsize=9.5)
        fig.tight_layout()
        p = out / f"counters-{cl.name}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def render_all(a: Analysis, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return (per_start_deltas(a, out) + itl_distributions(a, out)
            + counters(a.claims, out, f"{a.protocol.claim} (counters/)"))
