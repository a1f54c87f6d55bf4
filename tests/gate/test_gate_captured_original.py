"""A replacement that keeps the original it replaces leaves the original's body running
(issue 27; synthetic trees written here, never copied upstream code).

vllm-rbln 0.11.0a1 saves `fused_moe_upstream__init__ = FusedMoE.__init__`, then installs
`FusedMoE.__init__ = _fused_moe_init_with_all2all`, which calls the saved original first.
The gate counted core's `FusedMoE.__init__` as dead code, so the `MoERunner` only it builds
had no instance and the runner's `quant_method.apply(topk_weights=...)` call, which the
plugin's `Fp8MoEMethod.apply(layer, x, router_logits)` cannot take, was no evidence: two true
errors of vLLM 0.22.0 went (a mention of the runner in core's comments had kept them until
comments stopped counting as values).
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/model_executor/__init__.py": ""}

CORE = """
    class Method:
        def apply(self, layer, x, topk_weights, topk_ids):
            raise NotImplementedError


    class Runner:
        def __init__(self, method):
            self.method = method

        def run(self, layer, x):
            return self.method.apply(layer=layer, x=x, topk_weights=1, topk_ids=2)


    class FusedMoE:
        def __init__(self, method):
            self.runner = Runner(method)

        def forward(self, x):
            return self.runner.run(self, x)


    class Model:
        def __init__(self):
            self.moe = FusedMoE(Method())

        def forward(self, x):
            return self.moe.forward(x)
"""

PLUGIN = """
    import vllm.model_executor.moe as moe_mod
    from vllm.model_executor.moe import FusedMoE, Method

    _upstream_init = FusedMoE.__init__


    def _init_with_masks(self, *args, **kwargs):
        _upstream_init(self, *args, **kwargs)
        self.masks = None


    FusedMoE.__init__ = _init_with_masks


    class AscendMethod(Method):
        def apply(self, layer, x, router_logits):
            return x


    moe_mod.Method = AscendMethod
"""

APPLY = "override:vllm_ascend.moe.AscendMethod.apply"


def gate(tmp_path, plugin: str):
    return gatekit.gate_loaded(tmp_path, PKGS, {"vllm/model_executor/moe.py": CORE},
                               {"vllm_ascend/moe.py": plugin}, ("vllm_ascend.moe",))


def test_a_replacement_that_calls_the_saved_original_keeps_core_s_body_running(tmp_path):
    found = gatekit.by_symbol(gate(tmp_path, PLUGIN), APPLY)
    assert [f.severity for f in found] == ["error"], [(f.severity, f.reason) for f in found]
    assert "Runner.run" in found[0].reason, found[0].reason


def test_a_replacement_that_drops_the_original_leaves_its_body_dead(tmp_path):
    dropped = PLUGIN.replace("_upstream_init = FusedMoE.__init__\n", "").replace(
        "    _upstream_init(self, *args, **kwargs)\n", "    self.runner = None\n")
    assert "_upstream_init" not in dropped
    found = gatekit.by_symbol(gate(tmp_path, dropped), APPLY)
    assert [f.severity for f in found if f.severity == "error"] == [], [(f.severity, f.reason) for f in found]
