"""The real trees (needs OVERLAY_MIRROR): vllm-ascend at the pinned commit against the
vLLM 0.23.0 and 0.25.0 source archives, before and after the series."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import gatekit
from overlay.gate import run_gate

pytestmark = pytest.mark.mirror

ROOT = Path(__file__).resolve().parents[2]
FACTORY = "replacement:vllm.v1.worker.gpu.model_runner.ModelCudaGraphManager"
HELPERS = "import:vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils:"


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    mirror = Path(os.environ["OVERLAY_MIRROR"])
    base = tmp_path_factory.mktemp("real")
    plugin, cores = gatekit.real_trees(mirror, base, "1f486d96", ("0.23.0", "0.25.0"))
    series = base / "plugin-series"
    subprocess.run(["cp", "-r", str(plugin), str(series)], check=True)
    patches = [ROOT / "patches" / e for e in _plugin_patches()]
    for patch in patches:
        subprocess.run(["git", "apply", str(patch)], cwd=series, check=True, capture_output=True)
    return cores, plugin, series, bool(patches)


def _plugin_patches() -> list[str]:
    from overlay.series.model import load_series
    return [e.patch for e in load_series(ROOT).for_target("plugin", "1f486d96")]  # the pin gated here


def symbols(report) -> set[str]:
    return {f.symbol for f in report.findings}


def test_before_the_series(real):
    cores, plugin, _, _ = real
    new = symbols(run_gate(cores["0.25.0"], plugin))
    assert FACTORY in new
    assert {HELPERS + "_compute_global_lse", HELPERS + "_compute_block_stats_kernel"} <= new
    old = symbols(run_gate(cores["0.23.0"], plugin))
    assert FACTORY not in old and not any(s.startswith(HELPERS) for s in old)


def test_after_the_series(real):
    cores, _, series, applied = real
    if not applied:
        pytest.skip("series.yaml has no plugin patches yet")
    for version in ("0.23.0", "0.25.0"):
        found = symbols(run_gate(cores[version], series))
        assert FACTORY not in found, version
        assert not any(s.startswith(HELPERS) for s in found), version


def test_review_false_positives_are_gone_and_real_breaks_stay(real):
    """The committed allowlist accepts only the confirmed load_model cases; a core method
    that only raises (BaseKVCacheMethod.apply) demands nothing; the real break the series
    does not fix yet (npu_rejection_sample lacks use_block_verification) stays."""
    cores, _, series, _ = real
    allow = ROOT / "gate-allowlist.yaml"
    report = run_gate(cores["0.25.0"], series, allow)
    found = symbols(report)
    accepted = {s.finding.symbol for s in report.suppressed}
    assert accepted == {"override:vllm_ascend.worker.worker.NPUWorker.load_model",
                        "override:vllm_ascend.worker.model_runner_v1.NPUModelRunner.load_model"}
    assert not any(s.endswith("AscendKVCacheMethod.apply") for s in found)
    assert "replacement:vllm.v1.worker.gpu.spec_decode.rejection_sampler.rejection_sample" in found
    assert not any("matched nothing" in n for n in report.notes)
