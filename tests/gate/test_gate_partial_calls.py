"""Core calls an override through `functools.partial`: vLLM 0.16's CUDA-graph capture binds
`dummy_run = functools.partial(self._dummy_run, ...)` and calls `dummy_run(n, ...,
num_active_loras=k)`, so a plugin runner whose `_dummy_run` lacks the new parameter fails at
start-up. The partial's bound arguments come first, then the call's own. Synthetic trees; no
upstream code is copied."""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": ""}


def _core(call: str) -> dict[str, str]:
    return {"vllm/v1/worker/gpu_model_runner.py": f"""
        import functools


        class GPUModelRunner:
            def _dummy_run(self, num_tokens, cudagraph_runtime_mode=None, num_active_loras=0):
                return None

            def capture_model(self):
                for num_tokens in (1, 2):
                    dummy_run = functools.partial(self._dummy_run, cudagraph_runtime_mode="FULL")
                    {call}
                return 0
    """}


PLUGIN = {"vllm_ascend/worker/__init__.py": "", "vllm_ascend/worker/runner.py": """
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner


    class PluginRunner(GPUModelRunner):
        def _dummy_run(self, num_tokens, cudagraph_runtime_mode=None):
            return None
"""}


def _overrides(tmp_path, call):
    report = gatekit.gate_loaded(tmp_path, PKGS, _core(call), PLUGIN, ("vllm_ascend.worker.runner",))
    return [(f.symbol, f.severity) for f in report.findings]


def test_a_call_through_a_partial_of_a_self_method_reaches_the_override(tmp_path):
    # a warning: nothing in this core calls capture_model, so the call is not shown to run
    assert _overrides(tmp_path / "a", "dummy_run(num_tokens, num_active_loras=2)") == [
        ("override:vllm_ascend.worker.runner.PluginRunner._dummy_run", "warning")]
    # negative twin: the call passes nothing the override lacks
    assert _overrides(tmp_path / "b", "dummy_run(num_tokens)") == []
