"""Plots a reader can trust, checked on the figure objects (not pixels): the decision and
threshold on each panel, a log-ratio axis with % tick labels, labelled start pairs,
titles with scenario, n and units, a per-start ITL curve on log axes showing the p99,
and figures of counted mechanisms."""

from __future__ import annotations

from pathlib import Path

import pytest

from evhelpers import write_protocol
from overlay.evidence import analyze, plots, synth
from overlay.evidence.analyze import ClaimDecision, CounterDecision
from overlay.evidence.protocol import load_protocol


@pytest.fixture()
def figures(monkeypatch):
    import matplotlib.pyplot as plt

    made = []
    real = plt.subplots

    def spy(*args, **kw):
        fig, axes = real(*args, **kw)
        made.append(fig)
        return fig, axes

    monkeypatch.setattr(plt, "subplots", spy)
    monkeypatch.setattr(plt, "close", lambda fig: None)
    return made


@pytest.fixture()
def analysis(tmp_path: Path):
    folder = tmp_path / "claim"
    proto = load_protocol(write_protocol(folder, starts=4, prompts=12, resamples=300, effect=5.0))
    synth.write_dataset(proto, folder, effect_pct={"fast": -40.0}, between_sd=0.02, seed=5)
    return analyze.analyze(proto, folder, ())


def test_delta_panels_carry_decision_threshold_ratio_axis_pairs_and_units(analysis, figures, tmp_path):
    plots.per_start_deltas(analysis, tmp_path)
    (fig,) = figures
    assert "c4" in fig._suptitle.get_text() and "4 start pairs" in fig._suptitle.get_text()
    checks = {(c.check.metric, c.check.statistic): c.decision for cl in analysis.claims for c in cl.checks}
    for ax in fig.axes:
        assert ax.get_xscale() == "log"
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert labels and all(lab.endswith("%") for lab in labels) and "0%" in labels
        title = ax.get_title(loc="left")
        assert "c4" in title and "n=4 pairs" in title
        assert ("(ms)" in title) or ("(tokens/s)" in title)
        texts = [t.get_text() for t in ax.texts]
        assert sorted(t for t in texts if t.startswith("r")) == ["r1", "r2", "r3", "r4"]
        verdicts = [t for t in texts if t.startswith("latency:")]
        assert len(verdicts) == 1 and any(verdicts[0] == f"latency: {d}" for d in checks.values())
        dashed = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert len(dashed) == 1 and dashed[0] in (pytest.approx(0.95), pytest.approx(1.05))
        solid = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "-"]
        assert 1.0 in solid  # no change


def test_the_axis_is_a_log_ratio_so_a_huge_bound_keeps_zero_and_plus_100_apart():
    import math

    lo, hi = 0.02, 530.39 * 1.6  # the pilot's TTFT panel: -98 % .. +52,939 % (issue 28)
    gap = (math.log(2.0) - math.log(1.0)) / (math.log(hi) - math.log(lo))
    assert gap > 0.06  # 0 % and +100 % are 6 % of the axis apart (a linear axis: 0.1 %)
    ticks = plots.ratio_ticks(lo, hi)
    assert 1.0 in ticks and len(ticks) <= 9 and ticks == sorted(ticks)
    assert plots.pct_label(2.0) == "+100%" and plots.pct_label(0.5) == "-50%" and plots.pct_label(1.0) == "0%"
    assert plots.pct_label(530.39) == "+52,939%"
    assert plots.ratio(-120.0) == plots.FLOOR_RATIO  # a difference interval below -100 % stays drawable


def test_itl_is_per_start_on_log_axes_with_the_p99_line(analysis, figures, tmp_path):
    (path,) = plots.itl_distributions(analysis, tmp_path)
    (fig,) = figures
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    starts = [r for r in analysis.results if r.scenario == "c4"]
    steps = [line for line in ax.get_lines() if line.get_drawstyle().startswith("steps")]
    assert len(steps) == len(starts) == 8  # one curve per start, not pooled
    assert any(line.get_ydata()[0] == 0.01 and line.get_linestyle() == ":" for line in ax.get_lines())
    assert "c4" in ax.get_title() and "8 starts" in ax.get_title() and "ms" in ax.get_xlabel()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_counters_figure_shows_measured_expected_and_the_decision(figures, tmp_path):
    k = CounterDecision("acl_memcpy_device_to_host", 8, {"baseline": 3.0, "optimized": 2.0},
                        {"baseline": 3.0, "optimized": 2.0}, {"baseline": 24, "optimized": 16}, "REPRODUCED")
    cl = ClaimDecision("mechanism", "one copy fewer per step", "counters", "REPRODUCED", counters=(k,))
    (path,) = plots.counters([cl], tmp_path, "mrv2: counted here (pin v0.27.1)")
    (fig,) = figures
    (ax,) = fig.axes
    assert [round(b.get_height(), 6) for b in ax.patches] == [3.0, 2.0]
    assert "REPRODUCED" in ax.get_title() and "8 steps" in ax.get_title()
    assert "pin v0.27.1" in fig._suptitle.get_text() and "mechanism: REPRODUCED" in fig._suptitle.get_text()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["baseline", "optimized"]
    assert any("24 counted" in t.get_text() for t in ax.texts)
    assert path.name == "counters-mechanism.png"


def test_reported_packet_with_counts_gets_its_counter_plots(run, tmp_path):
    repo = Path(__file__).resolve().parents[2]
    code, out, err = run("evidence", "analyze", repo / "evidence" / "mrv2-metadata-barrier", "--out", tmp_path,
                         root=repo)
    assert code == 0, err
    assert (tmp_path / "counters-mechanism.png").is_file()
    assert "counters-mechanism.png" in (tmp_path / "analysis.md").read_text()
