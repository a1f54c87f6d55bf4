"""The two startup failures of seed 000, reproduced on fixture trees, and their fixes."""

from __future__ import annotations

import gatekit
import pytest

from overlay.gate import run_gate


@pytest.fixture
def trees(tmp_path):
    def make(new_core: bool, fixed: bool, version: str | None = None):
        c = gatekit.core(tmp_path / f"core-{new_core}-{version}", new=new_core, version=version)
        p = gatekit.plugin(tmp_path / f"plugin-{fixed}", fixed=fixed)
        return c, p
    return make


def test_factory_without_lora_capture_cases_is_caught(trees):
    core, plugin = trees(new_core=True, fixed=False, version="0.25.0")
    report = run_gate(core, plugin)
    assert [f.kind for f in report.findings] == ["replacement"]
    f = report.findings[0]
    assert f.plugin_path == "vllm_ascend/worker/v2/model_runner.py"
    assert f.plugin_line == gatekit.line_of(plugin, f.plugin_path,
                                            "vllm_model_runner.ModelCudaGraphManager = factory")
    assert f.core_path == "vllm/v1/worker/gpu/model_runner.py"
    assert f.core_line == gatekit.line_of(core, f.core_path, "ModelCudaGraphManager(")
    # The same words the runtime error used on the NPU.
    assert "got an unexpected keyword argument 'lora_capture_cases'" in f.message
    assert f.symbol == "replacement:vllm.v1.worker.gpu.model_runner.ModelCudaGraphManager"


def test_new_helper_import_against_old_core_is_caught(trees):
    core, plugin = trees(new_core=False, fixed=False, version="0.23.0")
    report = run_gate(core, plugin)
    imports = [f for f in report.findings if f.kind == "import"]
    assert {f.symbol for f in imports} == {
        "import:vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils:_compute_global_logsumexp",
        "import:vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils:_compute_local_logits_stats_kernel",
    }
    f = next(f for f in imports if f.symbol.endswith("_compute_global_logsumexp"))
    assert f.plugin_path == "vllm_ascend/worker/v2/spec_decode/rejection_sampler_utils.py"
    assert f.plugin_line == 1
    assert f.core_path == "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py"
    assert "has no name '_compute_global_logsumexp'" in f.message
    # The old core does not pass lora_capture_cases, so the old factory is fine there.
    assert not [f for f in report.findings if f.kind != "import"]


@pytest.mark.parametrize("new_core,version", [(True, "0.25.0"), (False, "0.23.0")])
def test_fixed_plugin_passes_against_both_cores(trees, new_core, version):
    core, plugin = trees(new_core=new_core, fixed=True, version=version)
    report = run_gate(core, plugin)
    assert report.ok, [f.message for f in report.findings]
    assert report.core_version == version


def test_version_condition_is_undecidable_without_a_core_version(trees):
    core, plugin = trees(new_core=True, fixed=True, version=None)
    report = run_gate(core, plugin)
    # The 0.23.0 branch would fail against this core, and the gate cannot tell
    # whether it runs: reported as undecidable, not as a pass.
    assert report.findings
    assert {f.kind for f in report.findings} == {"undecidable"}
    assert all("vllm_version_is('0.23.0')" in f.message for f in report.findings)
    # Telling the gate the version decides it.
    assert run_gate(core, plugin, core_version="0.25.0").ok


def test_broken_plugin_against_new_core_has_exactly_the_factory_finding(trees):
    core, plugin = trees(new_core=True, fixed=False, version="0.25.0")
    report = run_gate(core, plugin)
    assert len(report.findings) == 1  # tests/ in the plugin tree are not gated
