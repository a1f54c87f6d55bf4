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


def per_start_deltas(a: Analysis, out: Path) -> list[Path]:
    """One figure per treatment and scenario: per-start % deltas of every checked
    metric, with the bootstrap estimate and interval drawn over them."""
    plt = _plt()
    paths = []
    checked = {(c.check.metric, c.check.statistic) for cl in a.claims for c in cl.checks}
    for t in a.protocol.treatments:
        for sc in a.protocol.scenarios:
            ds = [d for d in a.deltas if d.treatment == t and d.scenario == sc.name
                  and (d.metric, d.statistic) in checked]
            if not ds:
                continue
            fig, ax = plt.subplots(figsize=(7, 0.6 * len(ds) + 1.6))
            for i, d in enumerate(ds):
                b, x = np.array(d.baseline), np.array(d.treated)
                per = 100.0 * (x / b - 1.0)
                ax.scatter(per, np.full(per.shape, i), color="tab:gray", zorder=3, s=18,
                           label="per start pair" if i == 0 else None)
                iv = d.interval
                ax.errorbar([iv.delta_pct], [i], xerr=[[iv.delta_pct - iv.low_pct], [iv.high_pct - iv.delta_pct]],
                            fmt="o", color="tab:blue", capsize=4, zorder=4,
                            label=f"estimate, {int(iv.confidence * 100)}% CI" if i == 0 else None)
            ax.axvline(0, color="black", lw=0.8)
            ax.set_yticks(range(len(ds)))
            ax.set_yticklabels([d.metric if d.statistic == "value" else f"{d.statistic} {d.metric}" for d in ds])
            ax.set_xlabel(f"{t} vs {a.protocol.baseline}: change (%)")
            ax.set_title(f"{a.protocol.claim}: {sc.name} (paired starts, n={ds[0].interval.n_pairs})")
            ax.legend(loc="best", fontsize=8)
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
