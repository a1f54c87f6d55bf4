"""PNG figures a reviewer would rather look at than read (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from overlay.evidence.analyze import Analysis


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


def per_start_deltas(a: Analysis, out: Path) -> list[Path]:
    """One figure per treatment and scenario, one axis per checked metric (their scales
    differ by orders of magnitude): the per-start-pair % deltas, the estimate with its
    interval, zero and the decision thresholds the checks use."""
    plt = _plt()
    paths = []
    checked = {(c.check.metric, c.check.statistic) for cl in a.claims for c in cl.checks}
    for t in a.protocol.treatments:
        for sc in a.protocol.scenarios:
            ds = [d for d in a.deltas if d.treatment == t and d.scenario == sc.name
                  and (d.metric, d.statistic) in checked]
            if not ds:
                continue
            fig, axes = plt.subplots(len(ds), 1, figsize=(7, 1.9 * len(ds) + 0.9), squeeze=False)
            for ax, d in zip(axes[:, 0], ds):
                b, x = np.array(d.baseline), np.array(d.treated)
                with np.errstate(divide="ignore", invalid="ignore"):
                    per = 100.0 * (x / b - 1.0)
                ax.scatter(per, np.zeros(per.shape), color="tab:gray", zorder=3, s=18, label="start pairs")
                iv = d.interval
                ax.errorbar([iv.delta_pct], [0.35], xerr=[[iv.delta_pct - iv.low_pct], [iv.high_pct - iv.delta_pct]],
                            fmt="o", color="tab:blue", capsize=4, zorder=4,
                            label=f"estimate, {int(round(iv.confidence * 100))}% CI ({iv.method})")
                ax.axvline(0, color="black", lw=0.8)
                for xt, label in thresholds(a, t, sc.name, d.metric, d.statistic):
                    ax.axvline(xt, color="tab:red", ls="--", lw=1.0, label=label)
                ax.set_ylim(-0.6, 0.9)
                ax.set_yticks([])
                name = d.metric if d.statistic == "value" else f"{d.statistic} {d.metric}"
                ax.set_title(f"{name} (n={iv.n_pairs} pairs)", fontsize=9, loc="left")
                ax.set_xlabel("change (%)", fontsize=8)
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
            fig.suptitle(f"{a.protocol.claim}: {t} vs {a.protocol.baseline}, {sc.name}", fontsize=10)
            fig.tight_layout()
            p = out / f"deltas-{t}-{sc.name}.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            paths.append(p)
    return paths


def itl_distributions(a: Analysis, out: Path) -> list[Path]:
    """Per scenario: ITL empirical CDF per variant (log x), p50/p99 marked."""
    plt = _plt()
    paths = []
    for sc in a.protocol.scenarios:
        fig, ax = plt.subplots(figsize=(7, 4))
        drawn = False
        for v in a.protocol.variant_names:
            vals = [r.itl for r in a.results if r.variant == v and r.scenario == sc.name and r.itl.size]
            if not vals:
                continue
            x = np.sort(np.concatenate(vals))
            y = np.arange(1, x.size + 1) / x.size
            line, = ax.plot(x, y, label=f"{v} (n={x.size})")
            for q in (50, 99):
                ax.axvline(np.percentile(x, q), color=line.get_color(), ls=":", lw=0.8)
            drawn = True
        if not drawn:
            plt.close(fig)
            continue
        lo, hi = ax.get_xlim()
        if lo > 0 and hi / lo > 20:  # long tails: a log axis keeps the body readable
            ax.set_xscale("log")
            from matplotlib.ticker import ScalarFormatter

            ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("inter-token latency (ms), dotted: p50 and p99")
        ax.set_ylabel("fraction of tokens")
        ax.set_title(f"{a.protocol.claim}: ITL distribution, {sc.name}")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        p = out / f"itl-{sc.name}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def render_all(a: Analysis, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return per_start_deltas(a, out) + itl_distributions(a, out)
