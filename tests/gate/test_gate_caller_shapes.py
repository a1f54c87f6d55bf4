"""A call by name is a caller only if core's own method could take it (issue 27).

Reachability follows calls by name: `x.set_eplb_state(...)` counts as a caller of every
method of that name. In vLLM 0.10.0, `Glm4MoeForCausalLM.set_eplb_state(expert_load_view,
...)` calls `layer.set_eplb_state(moe_layer_idx=..., ...)` on its MoE layers, a call meant
for `FusedMoE.set_eplb_state`. Read as a call of the models' own `set_eplb_state`, it made
the models' methods reach each other as a cycle, and a cycle counts as reachable. A core
call that core's own signature of the method rejects is no caller of it (`namedsites`
already applies that test to override sites). A plugin call always counts: the plugin
may call its own override with its own arguments (vllm-rbln calls its
`get_num_blocks_to_allocate` so).

Synthetic fixtures; the shapes follow vLLM 0.10.0's `models/glm4_moe.py`,
`layers/fused_moe/layer.py` and the EPLB state's `model.set_eplb_state(...)`.
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/model_executor/__init__.py": "", "vllm/model_executor/models/__init__.py": "",
        "vllm/model_executor/layers/__init__.py": "", "vllm/distributed/__init__.py": ""}


MOE = """
    class FusedMoE:
        def set_eplb_state(self, moe_layer_idx, expert_load_view):
            self.idx = moe_layer_idx

        def update_expert_map(self, expert_load_view, new_arg=None):
            return expert_load_view
"""

MODELS = """
    class DeepseekForCausalLM:
        def set_eplb_state(self, expert_load_view):
            for i, layer in enumerate(self.moe_layers):
                layer.set_eplb_state(moe_layer_idx=i, expert_load_view=expert_load_view)
                layer.update_expert_map(expert_load_view, new_arg=1)


    class GlmForCausalLM:
        def set_eplb_state(self, expert_load_view):
            for i, layer in enumerate(self.moe_layers):
                layer.set_eplb_state(moe_layer_idx=i, expert_load_view=expert_load_view)
"""

# the models' only real caller sits in another platform's EPLB driver
EPLB = """
    class EplbBase:
        def step(self, model):
            raise NotImplementedError


    class GPUEplb(EplbBase):
        def step(self, model):
            model.set_eplb_state(self.load)
"""

PLUGIN = """
    from vllm.distributed.eplb import EplbBase
    from vllm.model_executor.layers.moe import FusedMoE


    class AscendFusedMoE(FusedMoE):
        def update_expert_map(self, expert_load_view):
            return expert_load_view


    class NPUEplb(EplbBase):
        def step(self, model):
            return None
"""

CORE = {"vllm/model_executor/layers/moe.py": MOE, "vllm/model_executor/models/deepseek.py": MODELS,
        "vllm/distributed/eplb.py": EPLB}
OVERRIDE = "AscendFusedMoE.update_expert_map"


def gate(tmp_path, plugin: str = PLUGIN, core: dict[str, str] = CORE):
    return gatekit.gate_loaded(tmp_path, PKGS, core, {"vllm_ascend/moe.py": plugin}, ("vllm_ascend.moe",))


def severities(report) -> list[str]:
    return sorted(f.severity for f in report.findings if f.symbol.endswith(OVERRIDE))


def test_a_call_core_s_own_method_would_refuse_is_no_caller_of_it(tmp_path):
    # the layer calls (moe_layer_idx=...) are meant for FusedMoE: the models' set_eplb_state is
    # reached only from another platform's EPLB driver, so the break under it is no error
    found = severities(gate(tmp_path / "a"))
    assert found and "error" not in found


def test_a_call_core_s_method_takes_is_a_caller(tmp_path):
    # a live core call with the models' own arguments reaches them: the break is an error
    core = {**CORE, "vllm/distributed/eplb.py": EPLB + "\n\n    def rebalance(model, load):\n"
                                                      "        model.set_eplb_state(load)\n"}
    assert severities(gate(tmp_path / "a", core=core)) == ["error"]


def test_a_plugin_call_always_counts(tmp_path):
    # the plugin calls the method with arguments core's signature refuses (its own override's):
    # still a caller, as plugin code runs what it calls
    plugin = PLUGIN + "\n\n    def kick(model):\n        model.set_eplb_state(view=None, extra=1)\n"
    assert severities(gate(tmp_path / "a", plugin=plugin)) == ["error"]


# the same cycle through a module-level function: its own signature decides too
MODELS_FN = """
    def set_eplb_state(model, expert_load_view):
        for i, layer in enumerate(model.moe_layers):
            layer.set_eplb_state(moe_layer_idx=i, expert_load_view=expert_load_view)
            layer.update_expert_map(expert_load_view, new_arg=1)


    class GlmForCausalLM:
        def set_eplb_state(self, expert_load_view):
            for i, layer in enumerate(self.moe_layers):
                layer.set_eplb_state(moe_layer_idx=i, expert_load_view=expert_load_view)
"""


def test_a_call_a_core_function_would_refuse_is_no_caller_of_it(tmp_path):
    eplb = EPLB.replace("model.set_eplb_state(self.load)",
                        "from vllm.model_executor.models.deepseek import set_eplb_state\n"
                        "            set_eplb_state(model, self.load)")
    core = {**CORE, "vllm/model_executor/models/deepseek.py": MODELS_FN, "vllm/distributed/eplb.py": eplb}
    found = severities(gate(tmp_path / "a", core=core))
    assert found and "error" not in found
