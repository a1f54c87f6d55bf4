"""A plugin class whose bases include a class of another vLLM plugin: vllm-omni's NPU runner is
`class OmniNPUModelRunner(OmniGPUModelRunner, NPUModelRunner)`, NPUModelRunner being
vllm-ascend's subclass of core's GPUModelRunner. Python's C3 order puts NPUModelRunner before
GPUModelRunner, so `self._prepare_inputs(...)` may run vllm-ascend's override, which the gate
cannot read: the call is not proven against core's signature. A base from a package that is not
built on vLLM cannot subclass core's classes and changes nothing. Synthetic trees; no upstream
code is copied."""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": ""}
CORE = {"vllm/v1/worker/gpu_model_runner.py": """
    class GPUModelRunner:
        def _prepare_inputs(self, scheduler_output, num_scheduled_tokens):
            return None
"""}


def _symbols(tmp_path, foreign: str):
    plugin = {
        "vllm_ascend/worker/__init__.py": "",
        "vllm_ascend/worker/gpu_runner.py": """
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner


            class PluginGPURunner(GPUModelRunner):
                pass
        """,
        "vllm_ascend/worker/npu_runner.py": f"""
            from {foreign} import NPUModelRunner
            from vllm_ascend.worker.gpu_runner import PluginGPURunner


            class PluginNPURunner(PluginGPURunner, NPUModelRunner):
                def execute_model(self, scheduler_output):
                    return self._prepare_inputs(scheduler_output)
        """}
    report = gatekit.gate_loaded(tmp_path, PKGS, CORE, plugin, ("vllm_ascend.worker.npu_runner",))
    return {(f.symbol, f.severity) for f in report.findings}


def test_a_base_from_another_vllm_plugin_may_come_before_core_in_the_mro(tmp_path):
    assert _symbols(tmp_path / "a", "vllm_other.worker.model_runner_v1") == set()
    # negative twin: a mixin of a package not built on vLLM cannot subclass core's runner,
    # so core's method is the one the call reaches
    assert _symbols(tmp_path / "b", "somelib.runners") == {
        ("call:vllm.v1.worker.gpu_model_runner.GPUModelRunner._prepare_inputs", "error")}
