"""Three more miss classes of the hand engine (issue 27), on synthetic trees (written here,
never copied upstream code):

- (A) a plugin subclass whose `__init__` skips core's (`super().__init__` never called)
  inherits a core method that reads `self.x`, which only core's `__init__` sets;
- (B) a plugin `@dataclass` subclass of a core dataclass declares a field without a
  default after a core field that has one: `TypeError` when the class is created;
- (C) a plugin function installed as a method of a core class reads `self.x`, and the
  core class has no such attribute (for a torch module: no buffer or parameter of that
  name registered either).
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/core/__init__.py": "",
        "vllm/v1/worker/__init__.py": "", "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/models/__init__.py": ""}


def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], loaded: tuple[str, ...]):
    return gatekit.gate_loaded(tmp_path, PKGS, core, plugin, loaded)


by_symbol = gatekit.by_symbol


# ----------------------------------------------------------------------------- (A) base __init__ skipped

CORE_COORDINATOR = """
    class Coordinator:
        block_size = 16

        def __init__(self, config, lookahead=0):
            self.config = config
            self.lookahead = lookahead
            self.pool = []

        def cache_blocks(self, request, num_tokens):
            limit = num_tokens - self.lookahead
            return self.pool[:limit], self.block_size

        def reset(self):
            self.pool = []


    class HybridCoordinator(Coordinator):
        def find_hit(self, request):
            return self.config, self.lookahead


    class KVCacheManager:
        def __init__(self, config):
            self.coordinator = HybridCoordinator(config)

        def allocate(self, request):
            self.coordinator.cache_blocks(request, 4)
            self.coordinator.find_hit(request)
"""

PLUGIN_OWN_INIT = """
    from vllm.v1.core.coordinator import HybridCoordinator


    class AscendCoordinator(HybridCoordinator):
        def __init__(self, config):
            self.config = config
            self.pool = [1, 2]

        def find_hit(self, request):
            return self.config
"""

PLUGIN_SUPER_INIT = """
    from vllm.v1.core.coordinator import HybridCoordinator


    class AscendCoordinator(HybridCoordinator):
        def __init__(self, config):
            super().__init__(config)
            self.pool = [1, 2]
"""

PLUGIN_SETS_IT = """
    from vllm.v1.core.coordinator import HybridCoordinator


    class AscendCoordinator(HybridCoordinator):
        def __init__(self, config):
            self.config = config
            self.pool = [1, 2]
            self.lookahead = 0
"""

PLUGIN_OVERRIDES_READER = """
    from vllm.v1.core.coordinator import HybridCoordinator


    class AscendCoordinator(HybridCoordinator):
        def __init__(self, config):
            self.config = config
            self.pool = [1, 2]

        def cache_blocks(self, request, num_tokens):
            return self.pool

        def find_hit(self, request):
            return self.config
"""

LOOKAHEAD = "attribute:vllm.v1.core.coordinator.Coordinator.lookahead"
HYBRID_LOOKAHEAD = "attribute:vllm.v1.core.coordinator.HybridCoordinator.lookahead"


def test_a_plugin_init_that_skips_core_init_leaves_an_inherited_read_unset(tmp_path):
    core = {"vllm/v1/core/coordinator.py": CORE_COORDINATOR}
    report = gate(tmp_path, core, {"vllm_ascend/coord.py": PLUGIN_OWN_INIT}, ("vllm_ascend.coord",))
    found = by_symbol(report, LOOKAHEAD)
    assert [(f.severity, f.plugin_path, f.kind) for f in found] == [("error", "vllm_ascend/coord.py", "attribute")]
    assert "cache_blocks" in found[0].message and "AscendCoordinator" in found[0].message
    # the plugin sets config and pool itself; the class attribute needs no __init__;
    # find_hit (which reads lookahead too) is the plugin's own
    assert not by_symbol(report, "attribute:vllm.v1.core.coordinator.Coordinator.config")
    assert not by_symbol(report, "attribute:vllm.v1.core.coordinator.Coordinator.pool")
    assert not by_symbol(report, "attribute:vllm.v1.core.coordinator.Coordinator.block_size")
    assert not by_symbol(report, HYBRID_LOOKAHEAD)


def test_an_inherited_read_in_the_intermediate_core_class_is_named_by_that_class(tmp_path):
    plugin = PLUGIN_OWN_INIT.replace("        def find_hit(self, request):\n            return self.config\n", "")
    core = {"vllm/v1/core/coordinator.py": CORE_COORDINATOR}
    report = gate(tmp_path, core, {"vllm_ascend/coord.py": plugin}, ("vllm_ascend.coord",))
    assert [f.severity for f in by_symbol(report, HYBRID_LOOKAHEAD)] == ["error"]
    assert [f.severity for f in by_symbol(report, LOOKAHEAD)] == ["error"]


def test_no_finding_when_the_plugin_calls_core_init_sets_the_field_or_overrides_the_reader(tmp_path):
    core = {"vllm/v1/core/coordinator.py": CORE_COORDINATOR}
    for i, plugin in enumerate((PLUGIN_SUPER_INIT, PLUGIN_SETS_IT, PLUGIN_OVERRIDES_READER)):
        report = gate(tmp_path / str(i), core, {"vllm_ascend/coord.py": plugin}, ("vllm_ascend.coord",))
        assert not [f for f in report.findings if f.kind == "attribute"], i


CORE_HELPER = CORE_COORDINATOR.replace(
    "            self.pool = []\n\n        def cache_blocks",
    "            self.pool = []\n            self.alignment = 4\n\n        def cache_blocks").replace(
    "            return self.pool[:limit], self.block_size",
    "            return self._split(limit), self.block_size\n\n"
    "        def _split(self, n):\n            return n // self.alignment")
ALIGNMENT = "attribute:vllm.v1.core.coordinator.Coordinator.alignment"


def test_a_read_in_a_helper_only_an_overridden_core_method_calls_never_runs_on_the_plugins_object(tmp_path):
    """Core's `_split` reads `self.alignment` (only core's `__init__` sets it) and only core's
    `cache_blocks` calls it, as `self._split(...)`. A plugin class that skips core's
    `__init__` and overrides `cache_blocks` without `super()` never runs core's
    `cache_blocks`, so never `_split`: no error (vllm-rbln's optimum scheduler overrides
    `schedule`, the only caller of `_mamba_block_aligned_split`). Inheriting `cache_blocks`,
    it is one."""
    assert "self._split(limit)" in CORE_HELPER and "self.alignment = 4" in CORE_HELPER
    core = {"vllm/v1/core/coordinator.py": CORE_HELPER}
    inherits = gate(tmp_path / "a", core, {"vllm_ascend/coord.py": PLUGIN_OWN_INIT}, ("vllm_ascend.coord",))
    assert [f.severity for f in by_symbol(inherits, ALIGNMENT)] == ["error"]
    # another plugin class (it calls core's __init__) calls `self._split(...)` in its own
    # override: that runs on its objects, never on this one's (vllm-rbln's RBLNScheduler)
    sibling = ("\n\n    class FullCoordinator(HybridCoordinator):\n        def __init__(self, config):\n"
               "            super().__init__(config)\n\n        def cache_blocks(self, request, num_tokens):\n"
               "            return self._split(num_tokens)\n")
    overrides = gate(tmp_path / "b", core, {"vllm_ascend/coord.py": PLUGIN_OVERRIDES_READER + sibling},
                     ("vllm_ascend.coord",))
    assert [f.severity for f in by_symbol(overrides, ALIGNMENT) if f.severity == "error"] == []
    calls_super = PLUGIN_OVERRIDES_READER.replace("            return self.pool\n",
                                                  "            return super().cache_blocks(request, num_tokens)\n")
    through_super = gate(tmp_path / "c", core, {"vllm_ascend/coord.py": calls_super}, ("vllm_ascend.coord",))
    assert [f.severity for f in by_symbol(through_super, ALIGNMENT)] == ["error"]


def test_a_field_core_sets_outside_init_or_reads_behind_hasattr_is_no_finding(tmp_path):
    lazily = CORE_COORDINATOR.replace("        def reset(self):\n            self.pool = []",
                                      "        def reset(self):\n            self.pool = []\n"
                                      "            self.lookahead = 0")
    guarded = CORE_COORDINATOR.replace("            limit = num_tokens - self.lookahead",
                                       "            limit = num_tokens - (self.lookahead if hasattr(self, "
                                       "'lookahead') else 0)")
    for i, core_text in enumerate((lazily, guarded)):
        report = gate(tmp_path / str(i), {"vllm/v1/core/coordinator.py": core_text},
                      {"vllm_ascend/coord.py": PLUGIN_OWN_INIT}, ("vllm_ascend.coord",))
        assert not [f for f in report.findings if f.kind == "attribute"], i


def test_a_skipped_init_in_a_module_start_up_never_loads_is_a_warning(tmp_path):
    core = {"vllm/v1/core/coordinator.py": CORE_COORDINATOR}
    report = gate(tmp_path, core, {"vllm_ascend/coord.py": PLUGIN_OWN_INIT}, ())
    assert [f.severity for f in by_symbol(report, LOOKAHEAD)] == ["warning"]


# ----------------------------------------------------------------------------- (B) dataclass field order

CORE_BATCH = """
    from dataclasses import dataclass, field


    @dataclass
    class InputBatch:
        req_ids: list
        num_reqs: int
        max_query_len: int | None = None
"""

CORE_BATCH_OLD = """
    from dataclasses import dataclass


    @dataclass
    class InputBatch:
        req_ids: list
        num_reqs: int
"""

PLUGIN_BATCH = """
    from dataclasses import dataclass

    import numpy as np

    from vllm.v1.worker.input_batch import InputBatch


    @dataclass
    class AscendInputBatch(InputBatch):
        seq_lens_np: np.ndarray
"""

ORDER = "type:misc:Attributes without a default cannot follow attributes with one"


def test_a_plugin_dataclass_field_without_default_after_a_new_core_default_fails_at_import(tmp_path):
    core = {"vllm/v1/worker/input_batch.py": CORE_BATCH}
    report = gate(tmp_path, core, {"vllm_ascend/batch.py": PLUGIN_BATCH}, ("vllm_ascend.batch",))
    found = by_symbol(report, ORDER)
    assert [(f.severity, f.kind, f.engine, f.plugin_path, f.plugin_line) for f in found] == \
        [("error", "type", "hand", "vllm_ascend/batch.py", 10)]
    assert "seq_lens_np" in found[0].message and "max_query_len" in found[0].message
    old = gate(tmp_path / "old", {"vllm/v1/worker/input_batch.py": CORE_BATCH_OLD},
               {"vllm_ascend/batch.py": PLUGIN_BATCH}, ("vllm_ascend.batch",))
    assert not by_symbol(old, ORDER)


def test_a_dataclass_order_break_in_a_module_nothing_loads_is_a_warning(tmp_path):
    core = {"vllm/v1/worker/input_batch.py": CORE_BATCH}
    report = gate(tmp_path, core, {"vllm_ascend/batch.py": PLUGIN_BATCH}, ())
    assert [f.severity for f in by_symbol(report, ORDER)] == ["warning"]


def test_field_order_respects_kw_only_field_options_classvar_and_initvar(tmp_path):
    core = {"vllm/v1/worker/input_batch.py": CORE_BATCH}
    fine = {
        "kw_only decorator": ("@dataclass(kw_only=True)", "seq_lens_np: np.ndarray"),
        "KW_ONLY marker": ("@dataclass", "_: KW_ONLY\n        seq_lens_np: np.ndarray"),
        "field kw_only": ("@dataclass", "seq_lens_np: np.ndarray = field(kw_only=True)"),
        "field default": ("@dataclass", "seq_lens_np: np.ndarray = field(default=None)"),
        "default_factory": ("@dataclass", "seq_lens_np: list = field(default_factory=list)"),
        "ClassVar": ("@dataclass", "seq_lens_np: ClassVar[int]"),
        "init=False field": ("@dataclass", "seq_lens_np: np.ndarray = field(init=False)"),
        "no generated init": ("@dataclass(init=False)", "seq_lens_np: np.ndarray"),
        "redefined base field": ("@dataclass", "max_query_len: int"),  # keeps its place, loses the default
    }
    broken = {
        "InitVar": ("@dataclass", "seq_lens_np: InitVar[int]"),
        "field without default": ("@dataclass", "seq_lens_np: np.ndarray = field(repr=False)"),
        "kw_only=False field": ("@dataclass", "seq_lens_np: np.ndarray = field(kw_only=False)"),
    }
    head = ("from dataclasses import KW_ONLY, InitVar, dataclass, field\nfrom typing import ClassVar\n"
            "import numpy as np\nfrom vllm.v1.worker.input_batch import InputBatch\n\n\n")
    for i, (name, (deco, body)) in enumerate([*fine.items(), *broken.items()]):
        text = head + f"{deco}\nclass AscendInputBatch(InputBatch):\n        {body}\n".replace("        ", "    ")
        report = gate(tmp_path / str(i), core, {"vllm_ascend/batch.py": text}, ("vllm_ascend.batch",))
        got = [f.severity for f in by_symbol(report, ORDER)]
        assert got == ([] if name in fine else ["error"]), name


def test_a_redefined_core_field_keeps_its_place(tmp_path):
    core = {"vllm/v1/worker/input_batch.py": CORE_BATCH}
    # num_reqs gains a default in its own place, before max_query_len: no break
    fine = PLUGIN_BATCH.replace("seq_lens_np: np.ndarray", "num_reqs: int = 0")
    report = gate(tmp_path / "fine", core, {"vllm_ascend/batch.py": fine}, ("vllm_ascend.batch",))
    assert not by_symbol(report, ORDER)
    # req_ids gains a default in its own place, first: core's num_reqs then follows it
    broken = PLUGIN_BATCH.replace("seq_lens_np: np.ndarray", "req_ids: list = None")
    report = gate(tmp_path / "broken", core, {"vllm_ascend/batch.py": broken}, ("vllm_ascend.batch",))
    assert [f.severity for f in by_symbol(report, ORDER)] == ["error"]


# ----------------------------------------------------------------------------- (C) reads in replacement methods

CORE_VISION = """
    import torch
    from torch import nn


    class FusedInputNorm(nn.Module):
        def __init__(self, mean, std, channel=3):
            super().__init__()
            self.channel = channel
            self.is_identity = False
            self.register_buffer("weight", torch.tensor(std))
            self.register_buffer("bias", torch.tensor(mean))

        @property
        def dtype(self):
            return self.weight.dtype

        def forward(self, x):
            return x * self.weight + self.bias


    class VisionEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = FusedInputNorm([0.0], [1.0])

        def forward(self, x):
            return self.norm(x)
"""

PLUGIN_VISION = """
    import contextlib

    import torch


    def _forward(self, x):
        if self.is_identity or not self.training:
            return x
        x = x.view(self.channel, -1).to(self.dtype)
        self.eval()
        return torch.nn.functional.batch_norm(x, running_mean=self.running_mean, running_var=self.running_var,
                                              weight=self.weight, bias=self.bias, eps=1e-5)


    def install_patch():
        from vllm.model_executor.models.vision import FusedInputNorm

        FusedInputNorm.forward = _forward


    with contextlib.suppress(ImportError):
        install_patch()
"""

MEAN = "attribute:vllm.model_executor.models.vision.FusedInputNorm.running_mean"
VAR = "attribute:vllm.model_executor.models.vision.FusedInputNorm.running_var"


def test_a_replacement_method_reading_a_buffer_core_no_longer_registers(tmp_path):
    core = {"vllm/model_executor/models/vision.py": CORE_VISION}
    report = gate(tmp_path, core, {"vllm_ascend/patch_vision.py": PLUGIN_VISION}, ("vllm_ascend.patch_vision",))
    for symbol in (MEAN, VAR):
        found = by_symbol(report, symbol)
        assert [(f.severity, f.plugin_path) for f in found] == [("error", "vllm_ascend/patch_vision.py")], symbol
    # buffers core registers, its attributes, its property, nn.Module's own `training`
    # and methods: none of them is a finding
    attrs = {f.symbol.rsplit(".", 1)[-1] for f in report.findings if f.kind == "attribute"}
    assert attrs == {"running_mean", "running_var"}


def _vision_init_with(tmp_path, line: str):
    """The replacement-read gate with one more statement at the end of core's
    FusedInputNorm.__init__."""
    anchor = '            self.register_buffer("bias", torch.tensor(mean))'
    core = CORE_VISION.replace(anchor, f"{anchor}\n            {line}")
    assert core != CORE_VISION
    return gate(tmp_path, {"vllm/model_executor/models/vision.py": core},
                {"vllm_ascend/patch_vision.py": PLUGIN_VISION}, ("vllm_ascend.patch_vision",))


def test_an_attribute_core_sets_by_unpacking_is_provided(tmp_path):
    """`self.running_mean, self.running_var = ...` in core's __init__ sets both: no finding
    (the tuned pairings' `self.attn_groups, self.attn_cg_support, _ = init_attn_backend(...)`)."""
    report = _vision_init_with(
        tmp_path, "self.running_mean, (self.running_var, _) = torch.zeros(channel), (torch.ones(channel), 0)")
    assert not by_symbol(report, MEAN) and not by_symbol(report, VAR)


def test_no_finding_when_core_registers_the_buffers_or_the_plugin_sets_them(tmp_path):
    registered = CORE_VISION.replace(
        '            self.register_buffer("bias", torch.tensor(mean))',
        '            self.register_buffer("bias", torch.tensor(mean))\n'
        '            self.register_buffer("running_mean", torch.zeros(channel))\n'
        '            self.running_var = nn.Parameter(torch.ones(channel))')
    plugin_sets = PLUGIN_VISION.replace("        FusedInputNorm.forward = _forward",
                                        "        FusedInputNorm.forward = _forward\n"
                                        "        FusedInputNorm.running_mean = None\n"
                                        "        FusedInputNorm.running_var = None")
    cases = (({"vllm/model_executor/models/vision.py": registered}, PLUGIN_VISION),
             ({"vllm/model_executor/models/vision.py": CORE_VISION}, plugin_sets))
    for i, (core, plugin) in enumerate(cases):
        report = gate(tmp_path / str(i), core, {"vllm_ascend/patch_vision.py": plugin}, ("vllm_ascend.patch_vision",))
        assert not [f for f in report.findings if f.kind == "attribute"], i


def test_no_finding_when_a_core_subclass_defines_the_name_or_a_base_cannot_be_read(tmp_path):
    subclass = CORE_VISION + """

    class StatefulNorm(FusedInputNorm):
        def __init__(self):
            super().__init__([0.0], [1.0])
            self.register_buffer("running_mean", None)
            self.running_var = None
"""
    unknown_base = CORE_VISION.replace("class FusedInputNorm(nn.Module):", "class FusedInputNorm(make_base()):")
    for i, text in enumerate((subclass, unknown_base)):
        report = gate(tmp_path / str(i), {"vllm/model_executor/models/vision.py": text},
                      {"vllm_ascend/patch_vision.py": PLUGIN_VISION}, ("vllm_ascend.patch_vision",))
        assert not [f for f in report.findings if f.kind == "attribute"], i


def test_a_replacement_read_in_a_module_nothing_loads_is_a_warning(tmp_path):
    core = {"vllm/model_executor/models/vision.py": CORE_VISION}
    report = gate(tmp_path, core, {"vllm_ascend/patch_vision.py": PLUGIN_VISION}, ())
    assert [f.severity for f in by_symbol(report, MEAN)] == ["warning"]


def test_an_inherited_read_under_a_test_of_the_objects_own_state_is_a_warning(tmp_path):
    # core pairs the field with a flag (`if self.use_lookahead:`); the plugin sets the flag
    # itself, so whether the read runs is the object's state, which the gate does not evaluate
    flagged = CORE_COORDINATOR.replace(
        "            limit = num_tokens - self.lookahead\n",
        "            limit = num_tokens\n            if self.use_lookahead:\n"
        "                limit -= self.lookahead\n").replace(
        "            self.lookahead = lookahead\n",
        "            self.lookahead = lookahead\n            self.use_lookahead = bool(lookahead)\n")
    plugin = PLUGIN_OWN_INIT.replace("            self.pool = [1, 2]\n",
                                     "            self.pool = [1, 2]\n            self.use_lookahead = False\n")
    report = gate(tmp_path, {"vllm/v1/core/coordinator.py": flagged}, {"vllm_ascend/coord.py": plugin},
                  ("vllm_ascend.coord",))
    found = by_symbol(report, LOOKAHEAD)
    assert [f.severity for f in found] == ["warning"]
    assert "self.use_lookahead" in found[0].reason


def test_an_inherited_reader_called_only_from_code_the_plugin_overrides_is_a_warning(tmp_path):
    # core calls `_allocate` only from its own __init__ and from `setup`, which the plugin
    # overrides: on the plugin's object nothing runs it
    core_text = """
    class Zeroer:
        def __init__(self, device, concurrency=4):
            self.device = device
            self.concurrency = concurrency
            self._allocate()

        def _allocate(self):
            return [0] * self.concurrency

        def setup(self):
            self._allocate()
"""
    plugin = """
    from vllm.v1.worker.zeroer import Zeroer


    class AscendZeroer(Zeroer):
        def __init__(self, device):
            self.device = device

        def setup(self):
            return None
"""
    report = gate(tmp_path, {"vllm/v1/worker/zeroer.py": core_text}, {"vllm_ascend/zeroer.py": plugin},
                  ("vllm_ascend.zeroer",))
    assert [f.severity for f in by_symbol(report, "attribute:vllm.v1.worker.zeroer.Zeroer.concurrency")] == \
        ["warning"]


def test_a_replaced_static_method_has_no_self_to_read(tmp_path):
    core_text = """
    class SpecConfig:
        def __init__(self, method):
            self.method = method

        @staticmethod
        def hf_config_override(hf_config):
            return hf_config
"""
    plugin = """
    from vllm.v1.core.spec import SpecConfig


    def _override(hf_config):
        hf_config.update({"x": 1})
        return hf_config


    SpecConfig.hf_config_override = staticmethod(_override)
    SpecConfig.hf_config_override = _override
"""
    report = gate(tmp_path, {"vllm/v1/core/spec.py": core_text}, {"vllm_ascend/spec.py": plugin},
                  ("vllm_ascend.spec",))
    assert not [f for f in report.findings if f.kind == "attribute"]


def test_a_plugin_init_under_a_version_branch_that_calls_core_init_skips_nothing(tmp_path):
    plugin = """
    from vllm.v1.core.coordinator import HybridCoordinator

    NEW_CORE = True


    class AscendCoordinator(HybridCoordinator):
        if NEW_CORE:
            def __init__(self, config):
                super().__init__(config, lookahead=1)
                self.pool = [1, 2]
        else:
            def __init__(self, config):
                super().__init__(config)
"""
    report = gate(tmp_path, {"vllm/v1/core/coordinator.py": CORE_COORDINATOR}, {"vllm_ascend/coord.py": plugin},
                  ("vllm_ascend.coord",))
    assert not [f for f in report.findings if f.kind == "attribute"]


def test_a_replacement_in_an_installer_nothing_calls_is_a_warning(tmp_path):
    # the installer is defined but never called (a version gate that does not run, a
    # helper nobody uses): the method is never replaced
    core = {"vllm/model_executor/models/vision.py": CORE_VISION}
    plugin = PLUGIN_VISION.replace("        install_patch()\n", "        pass\n")
    assert plugin != PLUGIN_VISION
    report = gate(tmp_path, core, {"vllm_ascend/patch_vision.py": plugin}, ("vllm_ascend.patch_vision",))
    found = by_symbol(report, MEAN)
    assert [f.severity for f in found] == ["warning"]
    assert "install_patch" in found[0].reason


def test_an_inherited_reader_called_only_from_a_core_constructor_is_a_warning(tmp_path):
    """A call inside a core `__init__` proves the read runs only if that class is built on
    a path the plugin runs, which a name-based search cannot tell (vLLM has two
    GPUModelRunner classes; the v2 runner's PPHandler.__init__ calls
    make_sibling_device_group, a false error where the plugin turns the v2 runner off)."""
    only_ctor = CORE_COORDINATOR.replace(
        "        def allocate(self, request):\n            self.coordinator.cache_blocks(request, 4)\n",
        "        def allocate(self, request):\n").replace(
        "            self.coordinator = HybridCoordinator(config)\n",
        "            self.coordinator = HybridCoordinator(config)\n            self.coordinator.cache_blocks(None, 4)\n")
    report = gate(tmp_path, {"vllm/v1/core/coordinator.py": only_ctor}, {"vllm_ascend/coord.py": PLUGIN_OWN_INIT},
                  ("vllm_ascend.coord",))
    found = by_symbol(report, LOOKAHEAD)
    assert [f.severity for f in found] == ["warning"]
    assert "constructor" in found[0].reason, found[0].reason


def test_an_augmented_assignment_reads_first_and_provides_nothing(tmp_path):
    assert by_symbol(_vision_init_with(tmp_path, "self.running_mean += 0"), MEAN)


# (tuned on the eleventh held-out set's misses, 2026-12-03: vllm-ascend 0.9.1rc1's
# CustomDeepseekV2ForCausalLM rebuilds the model in its own __init__, calling only
# `nn.Module.__init__(self)`, and inherits core 0.9.2's DeepseekV2ForCausalLM.load_weights,
# which reads self.num_redundant_experts; core's MixtureOfExperts Protocol only declares it)

CORE_MODEL = """
    from typing import Protocol

    import torch.nn as nn


    class MixtureOfExperts(Protocol):
        num_redundant_experts: int
        expert_count: int = 0


    class DeepseekForCausalLM(nn.Module, MixtureOfExperts):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.num_redundant_experts = 0

        def load_weights(self, weights):
            return [self.num_redundant_experts, self.expert_count, self.config]


    def load(model, weights):
        return model.load_weights(weights)
"""

PLUGIN_MODEL = """
    import torch.nn as nn

    from vllm.model_executor.models.deepseek import DeepseekForCausalLM


    class CustomDeepseekForCausalLM(DeepseekForCausalLM):
        def __init__(self, config):
            nn.Module.__init__(self)
            self.config = config
"""

REDUNDANT = "attribute:vllm.model_executor.models.deepseek.DeepseekForCausalLM.num_redundant_experts"


def test_an_init_that_calls_only_torch_s_module_init_skips_core_s_and_a_protocol_declares_nothing(tmp_path):
    core = {"vllm/model_executor/models/deepseek.py": CORE_MODEL}
    report = gate(tmp_path / "a", core, {"vllm_ascend/model.py": PLUGIN_MODEL}, ("vllm_ascend.model",))
    assert [f.severity for f in by_symbol(report, REDUNDANT)] == ["error"]
    # a Protocol's attribute with a value is the class's own; config is set by the plugin
    assert not by_symbol(report, "attribute:vllm.model_executor.models.deepseek.DeepseekForCausalLM.expert_count")
    assert not by_symbol(report, "attribute:vllm.model_executor.models.deepseek.DeepseekForCausalLM.config")
    # calling core's own __init__ (by super() or by name) skips nothing
    for i, call in enumerate(("super().__init__(config)", "DeepseekForCausalLM.__init__(self, config)")):
        plugin = PLUGIN_MODEL.replace("nn.Module.__init__(self)", call)
        report = gate(tmp_path / f"b{i}", core, {"vllm_ascend/model.py": plugin}, ("vllm_ascend.model",))
        assert not by_symbol(report, REDUNDANT), call



# ----------------------------------------------------------------------------- (A) more shapes of a skipped __init__
# Each missed by the tuned set's truth (vllm-omni's `_has_fault` / `_num_nans`, vllm-metax's
# `fi_ar_comm` and `fp8_enabled`): core's method runs on the plugin's object, and the field it
# reads is set only where core's skipped `__init__` would have set it.

def test_a_core_method_the_plugin_override_reaches_through_super_reads_the_unset_field(tmp_path):
    """The plugin overrides `cache_blocks` but calls `super().cache_blocks(...)`: core's
    `cache_blocks` runs on the plugin's object and reads `self.lookahead` (vllm-omni's
    `get_output` reading `_has_fault` through `super().get_output()`)."""
    plugin = PLUGIN_OVERRIDES_READER.replace("            return self.pool\n",
                                             "            blocks = super().cache_blocks(request, num_tokens)\n"
                                             "            return blocks\n")
    core = {"vllm/v1/core/coordinator.py": CORE_COORDINATOR}
    report = gate(tmp_path / "a", core, {"vllm_ascend/coord.py": plugin}, ("vllm_ascend.coord",))
    found = by_symbol(report, LOOKAHEAD)
    assert [f.severity for f in found] == ["error"]
    assert "super()" in found[0].message and "cache_blocks" in found[0].message
    # without the super() call core's cache_blocks never runs on it (the test above)
    report = gate(tmp_path / "b", core, {"vllm_ascend/coord.py": PLUGIN_OVERRIDES_READER}, ("vllm_ascend.coord",))
    assert not by_symbol(report, LOOKAHEAD)


CORE_COMMUNICATORS = """
    class DeviceCommunicatorBase:
        def __init__(self, group):
            self.group = group
            self.world_size = 2


    class CudaCommunicator(DeviceCommunicatorBase):
        def __init__(self, group):
            super().__init__(group)
            self.fi_ar_comm = None
            self._init_symm_state()

        def _init_symm_state(self):
            self.symm_enabled = False

        def all_reduce(self, x):
            if self.fi_ar_comm is not None:
                return x
            return x * self.world_size

        def destroy(self):
            return self.symm_enabled


    class Group:
        def __init__(self):
            self.comm = None

        def reduce(self, x):
            self.comm.destroy()
            return self.comm.all_reduce(x)
"""

PLUGIN_GRANDPARENT_INIT = """
    from vllm.distributed.comm import CudaCommunicator, DeviceCommunicatorBase


    class MacaCommunicator(CudaCommunicator):
        def __init__(self, group):
            DeviceCommunicatorBase.__init__(self, group)
            self.maca = True
"""

FI_AR = "attribute:vllm.distributed.comm.CudaCommunicator.fi_ar_comm"
SYMM = "attribute:vllm.distributed.comm.CudaCommunicator.symm_enabled"


def test_an_init_that_calls_a_grandparents_init_by_name_skips_the_classes_between(tmp_path):
    """`DeviceCommunicatorBase.__init__(self, ...)` runs that class's `__init__`, never
    `CudaCommunicator.__init__`: what only the latter sets is unset (vllm-metax's
    MacaCommunicator and `fi_ar_comm`). What the grandparent sets (`world_size`) is set.
    A helper only the skipped `__init__` calls (`_init_symm_state`) sets nothing either."""
    pkgs = {"vllm/distributed/__init__.py": ""}
    core = {"vllm/distributed/comm.py": CORE_COMMUNICATORS}
    report = gatekit.gate_loaded(tmp_path / "a", {**PKGS, **pkgs}, core,
                                 {"vllm_ascend/comm.py": PLUGIN_GRANDPARENT_INIT}, ("vllm_ascend.comm",))
    assert [f.severity for f in by_symbol(report, FI_AR)] == ["error"]
    assert [f.severity for f in by_symbol(report, SYMM)] == ["error"]
    assert not [f for f in report.findings if f.symbol.endswith(".world_size")]
    # the parent's own __init__ by name, or super(), skips nothing
    for i, call in enumerate(("CudaCommunicator.__init__(self, group)", "super().__init__(group)")):
        plugin = PLUGIN_GRANDPARENT_INIT.replace("DeviceCommunicatorBase.__init__(self, group)", call)
        report = gatekit.gate_loaded(tmp_path / f"b{i}", {**PKGS, **pkgs}, core, {"vllm_ascend/comm.py": plugin},
                                     ("vllm_ascend.comm",))
        assert not [f for f in report.findings if f.kind == "attribute"], call


def test_a_field_a_helper_sets_is_unset_only_where_nothing_but_the_skipped_init_calls_the_helper(tmp_path):
    pkgs = {"vllm/distributed/__init__.py": ""}
    # another core method calls the helper too: the field may be set by then, not proven
    core_text = CORE_COMMUNICATORS.replace("        def destroy(self):\n",
                                           "        def reset(self):\n            self._init_symm_state()\n\n"
                                           "        def destroy(self):\n")
    report = gatekit.gate_loaded(tmp_path, {**PKGS, **pkgs}, {"vllm/distributed/comm.py": core_text},
                                 {"vllm_ascend/comm.py": PLUGIN_GRANDPARENT_INIT}, ("vllm_ascend.comm",))
    assert not by_symbol(report, SYMM)
    assert [f.severity for f in by_symbol(report, FI_AR)] == ["error"]


def test_super_with_a_core_class_named_skips_that_class_s_init(tmp_path):
    """`super(CudaCommunicator, self).__init__(...)` starts after CudaCommunicator: its
    `__init__` never runs, and what only it sets is unset where core reads it (vllm-metax's
    `fp8_enabled`). `super(MacaCommunicator, self)`, the class itself, is `super()`."""
    pkgs = {"vllm/distributed/__init__.py": ""}
    core = {"vllm/distributed/comm.py": CORE_COMMUNICATORS}
    for i, (call, expected) in enumerate((("super(CudaCommunicator, self).__init__(group)", ["error"]),
                                          ("super(MacaCommunicator, self).__init__(group)", []))):
        plugin = PLUGIN_GRANDPARENT_INIT.replace("DeviceCommunicatorBase.__init__(self, group)", call)
        report = gatekit.gate_loaded(tmp_path / str(i), {**PKGS, **pkgs}, core, {"vllm_ascend/comm.py": plugin},
                                     ("vllm_ascend.comm",))
        assert [f.severity for f in by_symbol(report, FI_AR)] == expected, call
        assert not [f for f in report.findings if f.symbol.endswith(".world_size")], call


# cut from vLLM 0.9.1's fused_moe/layer.py: `forward` calls `forward_impl` directly or
# through the custom op `moe_forward`, registered at import, which looks the layer up by name
CORE_MOE = """
    import torch


    class FusedMoE(torch.nn.Module):
        def __init__(self, num_experts, layer_name=""):
            super().__init__()
            self.num_experts = num_experts
            self.use_direct_call = True
            self.dp_size = 1
            self.moe_config = None
            self.layer_name = layer_name
            self.quant_method = None

        def forward(self, hidden_states, router_logits):
            if self.use_direct_call:
                return self.forward_impl(hidden_states, router_logits)
            return moe_forward(hidden_states, router_logits, self.layer_name)

        def forward_impl_chunked(self, hidden_states, router_logits):
            return self.moe_config, hidden_states

        def forward_impl(self, hidden_states, router_logits):
            assert self.quant_method is not None
            if self.quant_method.use_pplx_kernels:
                return self.forward_impl_chunked(hidden_states, router_logits)
            if self.dp_size > 1:
                hidden_states = hidden_states[0]
            return self.quant_method.apply(self, hidden_states, router_logits)


    def moe_forward(hidden_states, router_logits, layer_name):
        self = LAYERS[layer_name]
        return self.forward_impl(hidden_states, router_logits)


    LAYERS = {}
    OPS = {}


    def direct_register_custom_op(op_name, op_func):
        OPS[op_name] = op_func


    direct_register_custom_op(op_name="moe_forward", op_func=moe_forward)
"""

# cut from vllm-ascend 0.9.1rc1's ops/fused_moe.py: AscendFusedMoE skips FusedMoE.__init__
# with `super(FusedMoE, self).__init__()` and overrides `forward`
PLUGIN_MOE = """
    from vllm.model_executor.layers.fused_moe.layer import FusedMoE


    class AscendFusedMoE(FusedMoE):
        def __init__(self, num_experts, layer_name=""):
            super(FusedMoE, self).__init__()
            self.num_experts = num_experts
            self.quant_method = object()

        def forward(self, hidden_states, router_logits):
            return self.quant_method.apply(self, hidden_states, router_logits)
"""


def test_a_reader_called_only_from_a_method_the_plugin_overrides_is_no_error(tmp_path):
    """AscendFusedMoE overrides `forward`, so core's `FusedMoE.forward`, the one method that
    calls `self.forward_impl(...)` on the layer, never runs on it: neither `forward_impl`'s
    read of `dp_size` nor the read of `moe_config` in `forward_impl_chunked`, which only
    `forward_impl` calls, is shown to run there (the second was an error while liveness
    stopped one caller up). With the override handing over (`super().forward(...)`), core's
    `forward` runs, and its read of `use_direct_call`, which only FusedMoE's skipped
    `__init__` sets, is an error."""
    pkgs = {"vllm/model_executor/__init__.py": "", "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/layers/fused_moe/__init__.py": ""}
    core = {"vllm/model_executor/layers/fused_moe/layer.py": CORE_MOE}
    prefix = "attribute:vllm.model_executor.layers.fused_moe.layer.FusedMoE."
    overriding = "            return self.quant_method.apply(self, hidden_states, router_logits)\n"
    handing_over = "            return super().forward(hidden_states, router_logits)\n"
    for i, (body, expected) in enumerate(((None, []), (handing_over, ["use_direct_call"]))):
        plugin = PLUGIN_MOE if body is None else PLUGIN_MOE.replace(overriding, body)
        report = gatekit.gate_loaded(tmp_path / str(i), {**PKGS, **pkgs}, core,
                                     {"vllm_ascend/fused_moe.py": plugin}, ("vllm_ascend.fused_moe",))
        unset = {f.symbol.removeprefix(prefix): f.severity for f in report.findings if f.symbol.startswith(prefix)}
        assert sorted(k for k, v in unset.items() if v == "error") == expected, body
        assert {"dp_size", "moe_config"} <= unset.keys(), body  # still reported, as warnings


# cut from vllm-ascend 0.9.2rc1's models/pangu_moe.py: a plugin model builds core's own
# FusedMoE and calls `forward_impl` on it
PLUGIN_PANGU = """
    from vllm.model_executor.layers.fused_moe.layer import FusedMoE


    class PanguProMoESparseMoeBlock:
        def __init__(self, config):
            self.experts = FusedMoE(num_experts=8)

        def forward(self, hidden_states, router_logits):
            return self.experts.forward_impl(hidden_states, router_logits)
"""


def test_a_call_on_a_base_the_plugin_builds_outright_does_not_run_on_its_subclass(tmp_path):
    """vllm-ascend's pangu model holds `self.experts = FusedMoE(...)`: its
    `self.experts.forward_impl(...)` runs on core's FusedMoE, never on AscendFusedMoE, so it
    does not make `forward_impl`'s reads run on the plugin's object. Built as the plugin's
    class, or swapped in from outside (`block.experts = ...`), it does."""
    pkgs = {"vllm/model_executor/__init__.py": "", "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/layers/fused_moe/__init__.py": ""}
    core = {"vllm/model_executor/layers/fused_moe/layer.py": CORE_MOE}
    prefix = "attribute:vllm.model_executor.layers.fused_moe.layer.FusedMoE."
    own = PLUGIN_PANGU.replace("from vllm.model_executor.layers.fused_moe.layer import FusedMoE",
                               "from vllm_ascend.fused_moe import AscendFusedMoE as FusedMoE")
    swapped = PLUGIN_PANGU + "\n\n    def swap(block, layer):\n        block.experts = layer\n"
    for i, (pangu, expected) in enumerate(((PLUGIN_PANGU, []), (own, ["dp_size", "moe_config"]),
                                           (swapped, ["dp_size", "moe_config"]))):
        report = gatekit.gate_loaded(tmp_path / str(i), {**PKGS, **pkgs}, core,
                                     {"vllm_ascend/fused_moe.py": PLUGIN_MOE, "vllm_ascend/pangu.py": pangu},
                                     ("vllm_ascend.fused_moe", "vllm_ascend.pangu"))
        unset = {f.symbol.removeprefix(prefix): f.severity for f in report.findings if f.symbol.startswith(prefix)}
        assert sorted(k for k, v in unset.items() if v == "error") == expected, i


# cut from vLLM 0.21.0's custom_op.py and attention/mm_encoder_attention.py: CustomOp's
# `__new__` builds the out-of-tree class a plugin registers; MMEncoderAttention's FP8 state
# is set by a helper only its `__init__` calls, and read where the model loader finishes
# each such module
CORE_CUSTOM_OP = """
    import torch

    op_registry_oot = {}


    class CustomOp(torch.nn.Module):
        def __new__(cls, *args, **kwargs):
            op_name = cls.__name__
            if op_name not in op_registry_oot:
                op_cls_to_instantiate = cls
            else:
                op_cls_to_instantiate = op_registry_oot[op_name]
            return super().__new__(op_cls_to_instantiate)

        def __init__(self):
            super().__init__()
            self._forward_method = self.forward_native

        @classmethod
        def register_oot(cls, op_cls):
            op_registry_oot[cls.__name__] = op_cls
            return op_cls
"""

CORE_MM_ENCODER = """
    from vllm.model_executor.custom_op import CustomOp


    class MMEncoderAttention(CustomOp):
        def __init__(self, num_heads, head_size):
            super().__init__()
            self.num_heads = num_heads
            self.head_size = head_size
            self._init_fp8_state()

        def _init_fp8_state(self):
            self.fp8_enabled = False

        def process_weights_after_loading(self, act_dtype):
            if not self.fp8_enabled:
                return
            self.head_size = act_dtype
"""

CORE_LOADER = """
    from vllm.model_executor.layers.mm_encoder_attention import MMEncoderAttention


    def process_weights_after_loading(model, model_config):
        for _, module in model.named_modules():
            if isinstance(module, MMEncoderAttention):
                module.process_weights_after_loading(model_config.dtype)
"""

# cut from vllm-metax 0.20.0's customized/layers/mm_encoder_attention.py
PLUGIN_MM_ENCODER = """
    from vllm.model_executor.layers.mm_encoder_attention import MMEncoderAttention as vllm_MMEncoderAttention


    @vllm_MMEncoderAttention.register_oot
    class MMEncoderAttention(vllm_MMEncoderAttention):
        def __init__(self, num_heads, head_size):
            super(vllm_MMEncoderAttention, self).__init__()
            self.num_heads = num_heads
            self.head_size = head_size
"""


def test_a_class_built_through_a_core_new_is_not_judged(tmp_path):
    """vllm-metax's MMEncoderAttention calls `super(vllm_MMEncoderAttention, self).__init__()`,
    running CustomOp's `__init__` and skipping core MMEncoderAttention's, whose helper alone
    sets `fp8_enabled`, which core's model loader reads. It is a real break, but CustomOp's
    `__new__` keeps the class out of the check: judging such classes (a `__new__` that only
    picks the out-of-tree class, stores nothing) put false errors on vllm-ascend 0.10.0 ...
    0.14.0 (thirty-fourth session): `AscendLinearBase`, an `__init__` helper never built
    itself, and layers that override `forward`, whose `forward_native` the gate took as run
    through CustomOp's dispatch (`self._forward_method = self.forward_cuda`, a value it cannot
    follow). Without the `__new__` the same class is judged."""
    pkgs = {"vllm/model_executor/__init__.py": "", "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/model_loader/__init__.py": ""}
    symbol = "attribute:vllm.model_executor.layers.mm_encoder_attention.MMEncoderAttention.fp8_enabled"
    start = CORE_CUSTOM_OP.index("        def __new__(")
    without_new = CORE_CUSTOM_OP[:start] + CORE_CUSTOM_OP[CORE_CUSTOM_OP.index("        def __init__(self):"):]
    for i, (custom_op, expected) in enumerate(((CORE_CUSTOM_OP, []), (without_new, ["error"]))):
        core = {"vllm/model_executor/custom_op.py": custom_op,
                "vllm/model_executor/layers/mm_encoder_attention.py": CORE_MM_ENCODER,
                "vllm/model_executor/model_loader/utils.py": CORE_LOADER}
        report = gatekit.gate_loaded(tmp_path / str(i), {**PKGS, **pkgs}, core,
                                     {"vllm_ascend/mm.py": PLUGIN_MM_ENCODER}, ("vllm_ascend.mm",))
        assert [f.severity for f in by_symbol(report, symbol)] == expected, i


# cut from vLLM 0.18.0's v1/spec_decode/eagle.py: SpecDecodeBaseProposer.__init__ sets the
# drafting flags that load_model reads; EagleProposer's __init__ hands over to it
CORE_EAGLE = """
    class SpecDecodeBaseProposer:
        def __init__(self, vllm_config, device, runner=None):
            self.vllm_config = vllm_config
            self.device = device
            self.parallel_drafting = False
            self.pass_hidden_states_to_model = True

        def load_model(self, target_model):
            self.model = target_model
            if self.parallel_drafting and self.pass_hidden_states_to_model:
                self.model = None


    class EagleProposer(SpecDecodeBaseProposer):
        def __init__(self, vllm_config, device, runner=None):
            super().__init__(vllm_config, device, runner)


    class GPUModelRunner:
        def __init__(self, vllm_config, device):
            self.drafter = EagleProposer(vllm_config, device, self)

        def load_model(self, model):
            self.drafter.load_model(model)
"""

# cut from vllm-rbln 0.10.2.post2's v1/spec_decoding/eagle.py: a module-level function
# installed as EagleProposer.__init__, setting its own fields
PLUGIN_EAGLE_INIT = """
    from vllm.v1.spec_decode.eagle import EagleProposer


    def __custom_init__(self, vllm_config, device, runner=None):
        self.vllm_config = vllm_config
        self.device = device
        self.runner = runner


    EagleProposer.__init__ = __custom_init__
"""


def test_a_replacement_init_that_runs_no_other_leaves_core_s_fields_unset(tmp_path):
    """vllm-rbln installs its own function as core's `EagleProposer.__init__`; it never runs
    `SpecDecodeBaseProposer.__init__`, the one place that sets `parallel_drafting`, which
    core's `load_model` reads on every EAGLE proposer; calling torch's `Module.__init__(self)`
    changes nothing. A replacement that hands over to the original (`original(self, ...)`,
    `self._orig_init(...)`) or to the base that sets the field, or sets it itself, is no
    finding, and one installed by a function nothing calls is a warning."""
    pkgs = {"vllm/v1/spec_decode/__init__.py": ""}
    core = {"vllm/v1/spec_decode/eagle.py": CORE_EAGLE}
    symbol = "attribute:vllm.v1.spec_decode.eagle.SpecDecodeBaseProposer.parallel_drafting"
    handing_over = PLUGIN_EAGLE_INIT.replace(
        "    def __custom_init__(self, vllm_config, device, runner=None):\n",
        "    original = EagleProposer.__init__\n\n\n"
        "    def __custom_init__(self, vllm_config, device, runner=None):\n"
        "        original(self, vllm_config, device, runner)\n")
    setting = PLUGIN_EAGLE_INIT.replace("        self.runner = runner\n",
                                        "        self.runner = runner\n        self.parallel_drafting = False\n")
    uncalled = PLUGIN_EAGLE_INIT.replace("    EagleProposer.__init__ = __custom_init__\n",
                                         "    def install():\n        EagleProposer.__init__ = __custom_init__\n")
    torch_init = PLUGIN_EAGLE_INIT.replace(
        "    from vllm.v1.spec_decode.eagle import EagleProposer\n",
        "    import torch\n    from vllm.v1.spec_decode.eagle import EagleProposer, SpecDecodeBaseProposer\n").replace(
        "        self.vllm_config = vllm_config\n", "        torch.nn.Module.__init__(self)\n        self.vllm_config = vllm_config\n")
    base_init = torch_init.replace("torch.nn.Module.__init__(self)",
                                   "SpecDecodeBaseProposer.__init__(self, vllm_config, device)")
    # arctic-inference's class-body patches keep the original on the class and call it on self
    saved = PLUGIN_EAGLE_INIT.replace(
        "    def __custom_init__(self, vllm_config, device, runner=None):\n",
        "    EagleProposer._orig_init = EagleProposer.__init__\n\n\n"
        "    def __custom_init__(self, vllm_config, device, runner=None):\n"
        "        self._orig_init(vllm_config, device, runner)\n")
    cases = ((PLUGIN_EAGLE_INIT, ["error"]), (handing_over, []), (setting, []), (uncalled, ["warning"]),
             (torch_init, ["error"]), (base_init, []), (saved, []))
    for i, (plugin, expected) in enumerate(cases):
        report = gatekit.gate_loaded(tmp_path / str(i), {**PKGS, **pkgs}, core, {"vllm_ascend/eagle.py": plugin},
                                     ("vllm_ascend.eagle",))
        assert [f.severity for f in by_symbol(report, symbol)] == expected, i
        # what the replacement sets is set
        assert not [f for f in report.findings if f.symbol.endswith((".vllm_config", ".device"))], i


CORE_PROPOSERS = """
    class SpecDecodeBaseProposer:
        def __init__(self, config):
            self.config = config
            self.method = "eagle"

        def propose(self):
            return self.method


    class EagleProposer(SpecDecodeBaseProposer):
        def __init__(self, config):
            super().__init__(config)
            self.eagle_only = True

        def load(self):
            return self.eagle_only


    class Runner:
        def __init__(self):
            self.drafter = None

        def step(self):
            self.drafter.load()
            return self.drafter.propose()
"""

PLUGIN_DIAMOND = """
    from vllm.v1.spec_decode.proposers import EagleProposer, SpecDecodeBaseProposer


    class AscendBaseProposer(SpecDecodeBaseProposer):
        def __init__(self, config):
            super().__init__(config)


    class AscendEagleProposer(EagleProposer, AscendBaseProposer):
        def __init__(self, config):
            AscendBaseProposer.__init__(self, config)
"""


def test_a_named_init_in_a_diamond_is_judged_by_the_mro_not_the_depth_first_order(tmp_path):
    """The MRO is AscendEagleProposer, EagleProposer, AscendBaseProposer, SpecDecodeBaseProposer:
    `AscendBaseProposer.__init__(self, ...)` skips EagleProposer's `__init__` only, and its
    own `super().__init__` runs SpecDecodeBaseProposer's (vllm-ascend's proposers). The gate's
    depth-first chain puts SpecDecodeBaseProposer before AscendBaseProposer, so it does not
    judge such a diamond: no finding for `method` (which would be false)."""
    pkgs = {"vllm/v1/spec_decode/__init__.py": ""}
    core = {"vllm/v1/spec_decode/proposers.py": CORE_PROPOSERS}
    report = gatekit.gate_loaded(tmp_path, {**PKGS, **pkgs}, core, {"vllm_ascend/proposer.py": PLUGIN_DIAMOND},
                                 ("vllm_ascend.proposer",))
    assert not by_symbol(report, "attribute:vllm.v1.spec_decode.proposers.SpecDecodeBaseProposer.method")
    # on a single line of bases the same named call is judged (EagleProposer's field is unset)
    line = PLUGIN_DIAMOND.replace("class AscendEagleProposer(EagleProposer, AscendBaseProposer):",
                                  "class AscendEagleProposer(EagleProposer):").replace(
        "AscendBaseProposer.__init__(self, config)", "SpecDecodeBaseProposer.__init__(self, config)")
    report = gatekit.gate_loaded(tmp_path / "line", {**PKGS, **pkgs}, core, {"vllm_ascend/proposer.py": line},
                                 ("vllm_ascend.proposer",))
    assert [f.severity for f in by_symbol(report, "attribute:vllm.v1.spec_decode.proposers.EagleProposer.eagle_only")] \
        == ["error"]
    assert not by_symbol(report, "attribute:vllm.v1.spec_decode.proposers.SpecDecodeBaseProposer.method")


def test_a_base_method_named_outright_skips_the_core_definition_between(tmp_path):
    """`Coordinator.cache_blocks(self, ...)` in the plugin's override runs Coordinator's,
    not HybridCoordinator's (vllm-ascend's `BaseLayerWithLoRA.set_mapping(self, ...)` in a
    subclass of `FusedMoEWithLoRA`): only what the named class's method reads counts."""
    core_text = CORE_COORDINATOR.replace(
        "    class HybridCoordinator(Coordinator):\n",
        "    class HybridCoordinator(Coordinator):\n        def cache_blocks(self, request, num_tokens):\n"
        "            return self.lookahead\n\n")
    core_text = core_text.replace("            limit = num_tokens - self.lookahead\n", "            limit = num_tokens\n")
    assert core_text.count("self.lookahead") == 3  # set in __init__, read by Hybrid's cache_blocks and find_hit
    named = PLUGIN_OVERRIDES_READER.replace("            return self.pool\n",
                                            "            return Coordinator.cache_blocks(self, request, num_tokens)\n"
                                            ).replace("import HybridCoordinator", "import Coordinator, HybridCoordinator")
    plain = named.replace("Coordinator.cache_blocks(self, request, num_tokens)",
                          "super().cache_blocks(request, num_tokens)")
    core = {"vllm/v1/core/coordinator.py": core_text}
    report = gate(tmp_path / "named", core, {"vllm_ascend/coord.py": named}, ("vllm_ascend.coord",))
    assert not by_symbol(report, HYBRID_LOOKAHEAD)
    report = gate(tmp_path / "super", core, {"vllm_ascend/coord.py": plain}, ("vllm_ascend.coord",))
    assert [f.severity for f in by_symbol(report, HYBRID_LOOKAHEAD)] == ["error"]
