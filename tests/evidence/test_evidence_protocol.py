"""Protocol loading and the run plan: valid protocols load, bad ones give one located error line."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from evhelpers import write_protocol
from overlay.errors import OverlayError
from overlay.evidence.plan import balanced_order, plan
from overlay.evidence.protocol import load_protocol

REPO = Path(__file__).resolve().parents[2]


def test_valid_protocol_loads(tmp_path):
    p = load_protocol(write_protocol(tmp_path / "c"))
    assert p.baseline == "base" and p.treatments == ("fast",)
    assert p.variant("fast").env == (("FAKE_SPEEDUP", "1"),)
    sc = p.scenario("c4")
    assert (sc.max_concurrency, sc.num_prompts, math.isinf(sc.request_rate)) == (4, 24, True)
    assert p.claims[0].checks[1].statistic == "p99"
    assert p.bootstrap.resamples == 2000 and p.bootstrap.seed == 7


def test_packet_protocol_loads():
    p = load_protocol(REPO / "evidence" / "mrv2-metadata-barrier")
    assert p.preregistered.isoformat() == "2026-11-30"  # first committed then (git log)
    assert p.starts == 5 and (p.server_cpus, p.client_cpus) == ("96-119", "120-127")
    assert [c.name for c in p.claims] == ["mechanism", "service-gain", "p99-itl-regression"]
    assert p.scenario("qps1").request_rate == 1.0


@pytest.mark.parametrize("old,new,message,line", [
    ("preregistered: 2026-11-30\n", "", "field 'preregistered' of the protocol: missing", 1),
    ("preregistered: 2026-11-30", "preregistered: soon", "'soon' is not a date", 2),
    ("baseline: base", "baseline: nope", "'nope' is not a variant", 5),
    ('FAKE_SPEEDUP: "1"', "FAKE_SPEEDUP: 1", "env FAKE_SPEEDUP must be a string", 9),
    ("starts: 5", "starts: 1", "1 is below the minimum 2", 12),
    ("starts: 5", "starts: 5\ncolour: blue", "unknown field 'colour' in the protocol", 13),
    ("max-concurrency: 4}", "warmups: 1}", "needs max-concurrency, a finite request-rate", 11),
    ("metric: tpot,", "metric: speed,", "'speed' is not one of", 19),
    ("mean, change: lower", "mean, change: down", "'down' is not higher or lower", 19),
    ("statistic: p99", "statistic: p42", "'p42' is not one of mean, p50, p95, p99", 20),
    ("preregistered: 2026-11-30", "preregistered: 2026-13-45", "bad value '2026-13-45'", 2),
    ("  base: {}", '  base:\n    server-args: ["--served-model-name", "{modle}"]',
     "unknown placeholder {modle} in '{modle}'", 8),
    ("  base: {}", '  base:\n    server-args: ["--tree", "{composed:plugin}"]',
     "variant 'base' uses {composed:plugin} but has no pin", 8),
    ("seed: 7", 'seed: 7\nserver: {command: [vllm, serve, "{model}", "--port={prot}"]}',
     "unknown placeholder {prot} in '--port={prot}'", 14),
    ("  latency:\n", "  latency:\n    treatments: [slow]\n", "field 'treatments' of claim 'latency': unknown variant 'slow'", 17),
    ("  latency:\n", "  latency:\n    treatments: [base]\n", "the baseline 'base' cannot be one of its treatments", 17),
])
def test_bad_protocol_gives_one_located_error(tmp_path, old, new, message, line):
    path = write_protocol(tmp_path / "c")
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(OverlayError) as exc:
        load_protocol(path, tmp_path)
    assert message in exc.value.one_line()
    assert exc.value.path == "c/protocol.yaml"
    assert exc.value.line == line


def test_bad_protocol_via_cli_is_one_line_and_nonzero(tmp_path, run, evroot):
    path = write_protocol(evroot / "c")
    path.write_text(path.read_text().replace("starts: 5", "starts: five"))
    code, out, err = run("evidence", "plan", path, root=evroot)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("overlay: error: c/protocol.yaml:12: field 'starts'")


def test_balanced_order_two_variants():
    order = balanced_order(("A", "B"), 4)
    assert [v for v, _ in order] == list("ABBAABBA")
    # start k of A and start k of B are adjacent: pairs ran next to each other
    for k in range(1, 5):
        pos = [i for i, (v, s) in enumerate(order) if s == k]
        assert pos[1] - pos[0] == 1


def test_balanced_order_three_variants_is_a_latin_square():
    order = balanced_order(("A", "B", "C"), 6)
    places = Counter((v, i % 3) for i, (v, _) in enumerate(order))
    assert set(places.values()) == {2}  # every variant in every place of a block equally often


def test_plan_names_runs_like_the_seed(tmp_path):
    p = load_protocol(write_protocol(tmp_path / "c", starts=3))
    runs = plan(p)
    assert [r.run_id for r in runs] == ["base-r1", "fast-r1", "fast-r2", "base-r2", "base-r3", "fast-r3"]
    assert [r.position for r in runs] == list(range(1, 7))


def test_plan_cli_prints_order_and_pinning(tmp_path, run, evroot):
    path = write_protocol(evroot / "c", starts=2, extra="cpus: {server: 96-119, client: 120-127}\n")
    code, out, err = run("evidence", "plan", path, root=evroot)
    assert code == 0, err
    assert "server CPUs 96-119, client CPUs 120-127" in out
    lines = [line.split()[1] for line in out.splitlines() if line[:3].strip().isdigit()]
    assert lines == ["base-r1", "fast-r1", "fast-r2", "base-r2"]
    assert "FAKE_SPEEDUP=1 taskset -c 96-119 vllm serve synthetic" in out
    code, out, _ = run("evidence", "plan", path, "--json", root=evroot)
    import json

    data = json.loads(out)
    assert data["runs"][1]["server_argv"][:3] == ["taskset", "-c", "96-119"]


def test_plan_refuses_a_variant_naming_a_patch_not_in_the_series(run, evroot):
    path = write_protocol(evroot / "c")
    path.write_text(path.read_text().replace("  base: {}", "  base: {series: [0009-nope.patch]}"))
    code, out, err = run("evidence", "plan", path, root=evroot)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "variant 'base' names patch 0009-nope.patch, which series.yaml does not list" in err


@pytest.mark.parametrize("old, new, message", [
    ("starts: 5", "starts: 100000000", "field 'starts' of the protocol: 100000000 is above the maximum 100: "
                                       "each start is a server start"),
    ("resamples: 2000", "resamples: 100000000000", "100000000000 is above the maximum 100000: the bootstrap "
                                                   "holds resamples x starts indices in memory"),
    ("resamples: 2000", "resamples: 1.0e+11", "100000000000 is above the maximum 100000"),
    ("num-prompts: 24", "num-prompts: 1000000000", "1000000000 is above the maximum 100000: every request's "
                                                   "token gaps are kept"),
])
def test_sizes_beyond_the_bounds_are_refused_at_load_with_the_reason(tmp_path, run, evroot, old, new, message):
    """Issue 16, item 10: a few zeros too many must be one line at load, not minutes of
    planning and a MemoryError traceback from numpy."""
    path = write_protocol(evroot / "c")
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(OverlayError, match=message.replace("(", r"\(")):
        load_protocol(path)
    code, out, err = run("evidence", "plan", path, root=evroot)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err
    assert "Traceback" not in err and "MemoryError" not in err
