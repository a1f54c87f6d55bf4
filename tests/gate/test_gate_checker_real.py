"""The checker engine on the real trees (needs OVERLAY_MIRROR and mypy): plugin
182b75ea84 (pin set v0.27.1's plugin) declares vLLM 0.27.1; against 0.29.0 the checker
finds the `KVCacheTensor.shared_by` reads the hand gate misses (issue 27), and agrees with
the hand gate on the constructor calls. Slow: two mypy runs over the whole plugin."""

from __future__ import annotations


import pytest

import gatekit
from overlay.gate import add_checker, checker, run_gate
from overlay.gate.engines import raises

pytestmark = [pytest.mark.mirror,
              pytest.mark.skipif(checker.installed() is None, reason="mypy (the `gate` extra) is not installed")]

def test_shared_by_reads_are_forecast_and_its_constructor_calls_are_errors_of_both(tmp_path, mirror_dir):
    plugin, cores = gatekit.real_trees(mirror_dir, tmp_path, "v0.27.1", ("0.27.1", "0.29.0"))
    hand = run_gate(cores["0.29.0"], plugin)
    report = add_checker(hand, cores["0.29.0"], plugin, cores["0.27.1"], "0.27.1")
    reads = [f for f in report.findings if f.engine == "checker" and f.severity in ("warning", "error")
             and '"KVCacheTensor" has no attribute "shared_by"' in f.message]
    assert len(reads) >= 20
    assert any(f.engine == "both" and f.severity == "error" and "KVCacheTensor" in f.symbol
               for f in report.findings)
    # a confirmed forecast is an error only on a raising diagnostic with evidence its line
    # runs: the V1 runner's read at every start (model_runner_v1.py, the KV cache set-up
    # NPUModelRunner.initialize_kv_cache reaches) is one; the rest stay forecasts
    confirmed = [f for f in report.findings if f.engine == "checker" and f.severity == "error"]
    assert all(raises(f) and "confirmed" in f.reason for f in confirmed)
    assert any(f.plugin_path == "vllm_ascend/worker/model_runner_v1.py" for f in reads if f in confirmed), \
        [(f.plugin_path, f.plugin_line, f.severity, f.reason) for f in reads]
    assert any(f.severity == "warning" for f in reads)
