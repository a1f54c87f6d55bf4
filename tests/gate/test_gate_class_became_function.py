"""A core class that became a plain function (vLLM 0.24.0's `FusedMoE`, now a factory
returning a runner): the plugin's class uses of the name raise. Subclassing it raises
TypeError when the module is imported, `isinstance(x, FusedMoE)` and `case FusedMoE():`
raise TypeError when they run, and `FusedMoE.make_expert_params_mapping` /
`@FusedMoE.register_oot` raise AttributeError. vllm-ascend (ac4dc7cf3f against 0.24.0) and
tpu-inference (0.23.0 against 0.26.0) did all of these. Synthetic trees, shaped like
0.24.0's `fused_moe/layer.py`; no upstream code is copied."""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/fused_moe/__init__.py": "from vllm.fused_moe.layer import FusedMoE\n"}

FACTORY = """
    import functools


    class MoERunner:
        def forward(self, x):
            return x


    def FusedMoE(*args, **kwargs):
        return MoERunner()


    @functools.lru_cache
    def cached_layer(*args):
        return MoERunner


    def tagged():
        return MoERunner


    tagged.kind = "moe"
"""

PLUGIN = """
    from vllm.fused_moe import FusedMoE
    from vllm.fused_moe.layer import FusedMoE as LayerMoE, cached_layer, tagged
    import vllm.fused_moe.layer as layer


    class AscendFusedMoE(FusedMoE):
        pass


    class Fine(cached_layer(1)):
        pass


    def quant_method(module):
        if isinstance(module, (int, LayerMoE)):
            return LayerMoE.make_expert_params_mapping(module)
        match module:
            case layer.FusedMoE():
                return 1
        return tagged.kind, cached_layer.cache_clear, LayerMoE.__name__
"""


def _gate(tmp_path, core_layer: str):
    return gatekit.gate_loaded(tmp_path, PKGS, {"vllm/fused_moe/layer.py": core_layer},
                               {"vllm_ascend/moe.py": PLUGIN}, ("vllm_ascend.moe",))


def _found(report):
    return sorted((f.severity, f.symbol, f.plugin_line) for f in report.findings)


def test_class_uses_of_a_core_name_that_is_now_a_plain_function_are_errors(tmp_path):
    report = _gate(tmp_path, FACTORY)
    assert _found(report) == [
        ("error", "attribute:vllm.fused_moe.layer.FusedMoE.make_expert_params_mapping", 16),
        ("error", "import:vllm.fused_moe.layer:FusedMoE", 2),
        ("error", "import:vllm.fused_moe:FusedMoE", 1),
    ]
    by = {f.symbol: f for f in report.findings}
    assert "subclassed at line 6 (class AscendFusedMoE)" in by["import:vllm.fused_moe:FusedMoE"].message
    # one finding per core function and plugin module: `LayerMoE` and `layer.FusedMoE` are one
    layer_uses = by["import:vllm.fused_moe.layer:FusedMoE"].message
    assert "isinstance/issubclass at line 15" in layer_uses and "class pattern at line 18" in layer_uses
    assert "is a function" in by["attribute:vllm.fused_moe.layer.FusedMoE.make_expert_params_mapping"].message


def test_while_it_is_a_class_nothing_is_reported(tmp_path):
    as_class = FACTORY.replace("def FusedMoE(*args, **kwargs):\n        return MoERunner()",
                               "class FusedMoE(MoERunner):\n        @staticmethod\n"
                               "        def make_expert_params_mapping(m):\n            return m")
    assert "class FusedMoE" in as_class
    assert _found(_gate(tmp_path, as_class)) == []


def test_a_dotted_class_use_is_keyed_by_the_core_name(tmp_path):
    plugin = """
        import vllm.fused_moe.layer as layer


        class TpuMoE(layer.FusedMoE):
            pass
    """
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/fused_moe/layer.py": FACTORY},
                                 {"vllm_ascend/moe.py": plugin}, ("vllm_ascend.moe",))
    assert _found(report) == [("error", "attribute:vllm.fused_moe.layer.FusedMoE", 4)]


def test_a_name_the_plugin_rebinds_after_probing_it_is_not_the_core_function(tmp_path):
    """vllm-ascend's 310P MoE (pin set v0.24.0): `try: from ...layer import FusedMoE as
    _LegacyFusedMoEBase` / `except ImportError: _LegacyFusedMoEBase = torch.nn.Module`, then
    `if not isinstance(_LegacyFusedMoEBase, type): _LegacyFusedMoEBase = torch.nn.Module`:
    the class statement below subclasses whatever the probe left, never the function."""
    plugin = """
        import torch
        try:
            from vllm.fused_moe.layer import FusedMoE as _LegacyFusedMoEBase
        except ImportError:
            _LegacyFusedMoEBase = torch.nn.Module

        if not isinstance(_LegacyFusedMoEBase, type):
            _LegacyFusedMoEBase = torch.nn.Module


        class AscendFusedMoE310(_LegacyFusedMoEBase):
            pass
    """
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/fused_moe/layer.py": FACTORY},
                                 {"vllm_ascend/moe.py": plugin}, ("vllm_ascend.moe",))
    assert _found(report) == []
