"""`overlay evidence analyze`: outputs, and refusal of unrecorded deviations."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evhelpers import write_protocol
from overlay.errors import OverlayError
from overlay.evidence import analyze, synth
from overlay.evidence.protocol import load_deviations, load_protocol
from overlay.evidence.results import load_result

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def claim(evroot: Path) -> Path:
    folder = evroot / "claim"
    proto = load_protocol(write_protocol(folder, starts=3, prompts=12, resamples=500))
    # -12 %: at 3 starts an honest interval (t on log ratios) needs a clear effect
    synth.write_dataset(proto, folder, effect_pct={"fast": -12.0}, between_sd=0.01, seed=2)
    return folder


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_analyze_writes_markdown_json_and_plots(claim, run, evroot):
    code, out, err = run("evidence", "analyze", claim, root=evroot)
    assert code == 0, err
    assert "| latency | **REPRODUCED** |" in out
    a = claim / "analysis"
    data = json.loads((a / "analysis.json").read_text())
    assert data["claims"][0]["decision"] == "REPRODUCED"
    assert data["bootstrap"]["unit"].startswith("server start")
    tpot = next(c for c in data["claims"][0]["checks"] if c["metric"] == "tpot")
    assert tpot["interval"]["n_pairs"] == 3 and tpot["interval"]["high_pct"] < 0
    md = (a / "analysis.md").read_text()
    assert "Student t-intervals on the log ratios of paired starts" in md and "| fast | c4 | p99 itl |" in md
    assert "distinct resamples (10 at n=3)" in md and "| t-log-ratio |" in md
    pngs = sorted(p.name for p in a.glob("*.png"))
    assert pngs == ["deltas-fast-c4.png", "itl-c4.png"]
    for p in a.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_analyze_json_mode_prints_only_json(claim, run, evroot):
    code, out, _ = run("evidence", "analyze", claim, "--json", "--no-plots", root=evroot)
    assert code == 0
    assert json.loads(out)["claims"][0]["name"] == "latency"


def test_missing_run_is_refused_and_nothing_written(claim, run, evroot):
    shutil.rmtree(claim / "runs" / "fast-r2")
    before = _snapshot(claim)
    code, out, err = run("evidence", "analyze", claim, root=evroot)
    assert code == 2 and out == ""
    assert "planned run fast-r2 has no result for c4" in err
    assert "kind: missing, run: fast-r2" in err and err.count("\n") == 1
    assert _snapshot(claim) == before


def test_recorded_missing_run_is_accepted_and_reported(claim, run, evroot):
    shutil.rmtree(claim / "runs" / "fast-r2")
    (claim / "deviations.yaml").write_text(
        "deviations:\n  - {kind: missing, run: fast-r2, reason: server host rebooted}\n")
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 0, err
    data = json.loads((claim / "analysis" / "analysis.json").read_text())
    tpot = next(c for c in data["claims"][0]["checks"] if c["metric"] == "tpot")
    assert tpot["interval"]["n_pairs"] == 2  # the unpaired baseline start is dropped
    assert data["deviations"][0]["reason"] == "server host rebooted"


def test_excluded_run_needs_a_record(claim, evroot):
    ex = claim / "excluded" / "fast-r3.1"
    ex.mkdir(parents=True)
    (ex / "reason.txt").write_text("interrupted by the operator\n")
    proto = load_protocol(claim / "protocol.yaml")
    with pytest.raises(OverlayError, match="excluded/fast-r3.1: interrupted by the operator"):
        analyze.analyze(proto, claim, ())
    (claim / "deviations.yaml").write_text(
        "deviations:\n  - kind: excluded\n    run: fast-r3\n    reason: paused mid-run, replaced by a fresh start\n")
    a = analyze.analyze(proto, claim, load_deviations(claim))
    assert a.recorded[0][1].reason.startswith("paused")


def test_changed_client_parameters_are_refused(claim, evroot):
    f = claim / "runs" / "base-r2" / "c4.json"
    data = json.loads(f.read_text())
    data["max_concurrency"] = 8
    f.write_text(json.dumps(data))
    proto = load_protocol(claim / "protocol.yaml")
    with pytest.raises(OverlayError, match=r"base-r2/c4: max_concurrency 8 != 4"):
        analyze.analyze(proto, claim, ())


def test_failed_requests_beyond_the_allowance_are_refused(claim):
    f = claim / "runs" / "fast-r1" / "c4.json"
    data = json.loads(f.read_text())
    data["errors"][0] = "HTTP 500"
    f.write_text(json.dumps(data))
    with pytest.raises(OverlayError, match="1 failed requests"):
        analyze.analyze(load_protocol(claim / "protocol.yaml"), claim, ())


def test_run_order_deviation_is_refused(claim):
    meta = claim / "runs" / "fast-r1" / "run.json"
    m = json.loads(meta.read_text())
    m["position"] = 6
    meta.write_text(json.dumps(m))
    with pytest.raises(OverlayError, match="fast-r1 ran at position 6, planned 2"):
        analyze.analyze(load_protocol(claim / "protocol.yaml"), claim, ())


def test_result_without_detail_is_rejected(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"output_throughput": 1.0, "request_throughput": 1.0}))
    with pytest.raises(OverlayError) as exc:
        load_result(f, "base-r1", "base", 1, "c4")
    assert "missing ttfts, itls" in exc.value.message and "--save-detailed" in exc.value.hint


def test_result_metrics_follow_vllm_definitions(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({
        "output_throughput": 10.0, "request_throughput": 2.0, "num_prompts": 2, "max_concurrency": 1,
        "request_rate": "inf", "ttfts": [0.1, 0.0], "itls": [[0.02, 0.04], []], "latencies": [0.16, 0.0],
        "output_lens": [3, 0], "errors": ["", "timeout"]}))
    r = load_result(f, "base-r1", "base", 1, "c4")
    assert r.completed == 1 and r.failed == 1
    assert r.ttft.tolist() == pytest.approx([100.0])
    assert r.tpot.tolist() == pytest.approx([30.0])  # (0.16 - 0.1) / (3 - 1)
    assert r.itl.tolist() == pytest.approx([20.0, 40.0])


def test_metadata_packet_decision_table(run, tmp_path):
    code, out, err = run("evidence", "analyze", REPO / "evidence" / "mrv2-metadata-barrier",
                         "--out", tmp_path / "a", root=REPO)
    assert code == 0, err
    assert "REPORTED BY THE SOURCE, not re-measured here" in out
    # mechanism from this series' counts (counters/), the rest from the source's implementation
    assert "| mechanism | **REPRODUCED** | this series, measured here (" in out
    assert "| service-gain | **NOT_REPRODUCED** | ANOTHER IMPLEMENTATION: " in out
    assert "| p99-itl-regression | **INCONCLUSIVE** | ANOTHER IMPLEMENTATION: " in out
    assert "| NOT_REPRODUCED |" in out and "| INCONCLUSIVE |" in out  # the source's own decisions
    assert "(-0.64%, +2.98%)" in out and "DISAGREES" not in out
    assert not (REPO / "evidence" / "mrv2-metadata-barrier" / "analysis").exists()  # --out is honoured
    assert (tmp_path / "a" / "analysis.md").is_file() and (tmp_path / "a" / "analysis.json").is_file()


def _stamp_runs(folder: Path, started: str) -> None:
    for meta in (folder / "runs").glob("*/run.json"):
        data = json.loads(meta.read_text())
        meta.write_text(json.dumps({**data, "started": started}))


def test_protocol_edited_after_the_runs_is_refused_unless_recorded(claim, run, evroot):
    from overlay.evidence.protocol import protocol_digest

    (claim / "protocol.sha256").write_text(protocol_digest(load_protocol(claim)) + "\n")  # as bench ab does
    assert run("evidence", "analyze", claim, "--no-plots", root=evroot)[0] == 0
    proto = claim / "protocol.yaml"
    proto.write_text(proto.read_text().replace("min-effect-pct: 2.0}", "min-effect-pct: 1.0}"))
    shutil.rmtree(claim / "analysis")
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 2 and "protocol.yaml changed after the runs" in err and "kind: protocol" in err
    assert not (claim / "analysis").exists()
    (claim / "deviations.yaml").write_text(
        "deviations:\n  - {kind: protocol, reason: thresholds lowered after the runs and disclosed here}\n")
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 0, err


def test_protocol_dated_after_the_first_run_is_refused(claim, run, evroot):
    _stamp_runs(claim, "2026-11-30T08:00:00+00:00")
    assert run("evidence", "analyze", claim, "--no-plots", root=evroot)[0] == 0
    _stamp_runs(claim, "2026-11-29T23:59:00+00:00")  # the protocol says 2026-11-30
    (claim / "deviations.yaml").write_text("deviations:\n  - {kind: protocol, reason: no excuse}\n")
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 2 and "dated 2026-11-30, after the first run (2026-11-29)" in err and out == ""


def test_unmatched_deviation_and_run_without_run_json_are_noted(claim, run, evroot):
    (claim / "runs" / "fast-r2" / "run.json").unlink()
    (claim / "deviations.yaml").write_text(
        "deviations:\n  - {kind: excluded, run: base-r9, reason: never happened}\n")
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 0, err
    assert "note: 1 run folder(s) have no run.json (fast-r2)" in out
    assert "note: deviations.yaml:2: the excluded run base-r9 deviation matches nothing" in out
    notes = json.loads((claim / "analysis" / "analysis.json").read_text())["notes"]
    assert len(notes) == 4 and "CPU-pinned" in notes[0]
    assert any("name no engine version in run.json" in n for n in notes)  # synthetic runs name none


def test_impossible_date_in_protocol_or_deviations_is_one_line(claim, run, evroot):
    proto = claim / "protocol.yaml"
    good = proto.read_text()
    proto.write_text(good.replace("preregistered: 2026-11-30", "preregistered: 2026-13-45"))
    code, out, err = run("evidence", "plan", claim, root=evroot)
    assert code == 2 and err.count("\n") == 1 and "protocol.yaml:2:" in err and "2026-13-45" in err
    assert "Traceback" not in err
    proto.write_text(good)
    (claim / "deviations.yaml").write_text("deviations:\n  - {kind: excluded, run: base-r1, reason: 2026-02-30}\n")
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 2 and err.count("\n") == 1 and "deviations.yaml:2:" in err


def test_delta_plots_give_each_metric_its_own_axis_and_draw_the_thresholds(claim, monkeypatch, tmp_path):
    """Throughput and TTFT changes differ by orders of magnitude (issue 20: -74% beside
    +5977%): one shared axis collapses the smaller one to a dot."""
    import matplotlib.pyplot as plt

    from overlay.evidence import plots

    a = analyze.analyze(load_protocol(claim), claim, ())
    assert plots.thresholds(a, "fast", "c4", "tpot", "mean") == [(-2.0, "latency: min effect -2%")]
    assert plots.thresholds(a, "fast", "c4", "throughput", "value") == [(2.0, "latency: min effect +2%")]
    figures = []
    real = plt.subplots

    def spy(*args, **kw):
        fig, axes = real(*args, **kw)
        figures.append(fig)
        return fig, axes

    monkeypatch.setattr(plt, "subplots", spy)
    monkeypatch.setattr(plt, "close", lambda fig: None)
    (path,) = plots.per_start_deltas(a, tmp_path)
    axes = figures[0].axes
    assert [ax.get_title(loc="left").split(" (")[0] for ax in axes] == ["throughput", "mean tpot", "p99 itl"]
    for ax, want in zip(axes, (1.02, 0.98, 0.98)):  # the thresholds as ratios on the log-ratio axis
        xs = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert xs == [pytest.approx(want)]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
