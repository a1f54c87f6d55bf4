"""The plugin's own calls into core, version branches per core, guards, patch targets.

Every fake core here is cut from the shape of the real vLLM release it stands for (read
in the release source archives; only the parameters that matter are kept):
- `get_kv_cache_coordinator` as in vLLM 0.25.1 `vllm/v1/core/kv_cache_coordinator.py`
  (required `max_num_batched_tokens`, no `max_in_flight_tokens`);
- `_compute_slot_mapping_kernel` as in 0.25.0 `vllm/v1/worker/block_table.py`
  (`@triton.jit`, constexprs up to `BLOCK_SIZE`, no `KV_CACHE_BLOCK_SIZE`);
- `DFlashCudaGraphManager.capture` as in 0.25.1
  `vllm/v1/worker/gpu/spec_decode/dflash/cudagraph.py` (7 positions, no `causal`);
- `SpecDecodeBaseProposer.set_inputs_first_pass` as in 0.25.0
  `vllm/v1/spec_decode/llm_base_proposer.py` (no `req_scheduled_tokens`);
- the `InputBatch` dataclass-style constructor and `FusedInputNorm` (0.27.1
  `vllm/model_executor/models/vision.py` has none) for the branch and guard cases.
"""

from __future__ import annotations

from overlay.gate import run_gate

import gatekit
import pytest

UTILS = """
    def vllm_version_is(target):
        import vllm
        return vllm.__version__ == target
"""

COORDINATOR = """
    class KVCacheCoordinator:
        pass


    def get_kv_cache_coordinator(
        kv_cache_config,
        max_model_len,
        max_num_batched_tokens,
        use_eagle,
        enable_caching,
        enable_kv_cache_events,
        dcp_world_size,
        pcp_world_size,
        scheduler_block_size,
        hash_block_size,
        metrics_collector=None,
    ):
        return KVCacheCoordinator()
"""

PLUGIN_COORDINATOR = """
    import vllm
    import vllm.v1.core.kv_cache_coordinator

    from vllm_ascend.utils import vllm_version_is

    _orig_get_kv_cache_coordinator = vllm.v1.core.kv_cache_coordinator.get_kv_cache_coordinator


    def get_kv_cache_coordinator(kv_cache_config, max_model_len, max_in_flight_tokens=None, use_eagle=False,
                                 enable_caching=True, enable_kv_cache_events=False, dcp_world_size=1,
                                 pcp_world_size=1, hash_block_size=0, scheduler_block_size=None,
                                 metrics_collector=None, max_num_batched_tokens=None):
        orig_kwargs = dict(
            kv_cache_config=kv_cache_config,
            max_model_len=max_model_len,
            use_eagle=use_eagle,
            enable_caching=enable_caching,
            enable_kv_cache_events=enable_kv_cache_events,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            hash_block_size=hash_block_size,
            metrics_collector=metrics_collector,
        )
        if vllm_version_is("0.25.0"):
            orig_kwargs["max_num_batched_tokens"] = max_num_batched_tokens
        else:
            orig_kwargs["max_in_flight_tokens"] = max_in_flight_tokens
        orig_kwargs["scheduler_block_size"] = scheduler_block_size
        return _orig_get_kv_cache_coordinator(**orig_kwargs)


    vllm.v1.core.kv_cache_coordinator.get_kv_cache_coordinator = get_kv_cache_coordinator
"""

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/core/__init__.py": "",
        "vllm/v1/worker/__init__.py": "", "vllm/v1/spec_decode/__init__.py": "",
        "vllm/model_executor/__init__.py": "", "vllm/model_executor/models/__init__.py": "",
        "vllm/triton_utils.py": "import triton\nimport triton.language as tl\n"}

# The plugin's start-up chain: every module here is imported by the entry point.
ENTRY = """
    from setuptools import setup
    setup(name="vllm-ascend", entry_points={"vllm.platform_plugins": ["ascend = vllm_ascend:register"]})
"""


def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], version: str | None = None,
         loaded: tuple[str, ...] = ()):
    files = {**PKGS, **core}
    if version:
        files["vllm/_version.py"] = f"__version__ = version = '{version}'\n"
    core_dir = gatekit.tree(tmp_path / "core", files)
    imports = "".join(f"    import {m}  # noqa\n" for m in loaded)
    init = "def register():\n" + (imports or "    pass\n")
    plugin_dir = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": init,
                                                    "vllm_ascend/utils.py": UTILS, **plugin})
    return run_gate(core_dir, plugin_dir)


def of_kind(report, kind):
    return [f for f in report.findings if f.kind == kind]


def test_kwargs_built_under_a_version_branch_reach_the_captured_core_function(tmp_path):
    core = {"vllm/v1/core/kv_cache_coordinator.py": COORDINATOR}
    plugin = {"vllm_ascend/patch_coordinator.py": PLUGIN_COORDINATOR}
    report = gate(tmp_path, core, plugin, "0.25.1", loaded=("vllm_ascend.patch_coordinator",))
    calls = of_kind(report, "call")
    assert [f.symbol for f in calls] == ["call:vllm.v1.core.kv_cache_coordinator.get_kv_cache_coordinator"]
    assert calls[0].severity == "error"
    assert "unexpected keyword argument 'max_in_flight_tokens'" in calls[0].message
    assert "missing required argument(s) 'max_num_batched_tokens'" in calls[0].message
    # the exact-match guard is named: 0.25.1 takes the other branch
    guards = of_kind(report, "version-guard")
    assert [(f.symbol, f.severity) for f in guards] == [("version-guard:0.25.0", "warning")]
    assert "0.25.1" in guards[0].summary
    # with the release the guard names, the branch that runs passes what core takes
    fine = gate(tmp_path / "b", core, plugin, "0.25.0", loaded=("vllm_ascend.patch_coordinator",))
    assert of_kind(fine, "call") == [] and of_kind(fine, "version-guard") == []


KERNEL = """
    from vllm.triton_utils import tl, triton


    @triton.jit(do_not_specialize=["num_tokens", "max_num_tokens"])
    def _compute_slot_mapping_kernel(
        num_tokens,
        max_num_tokens,
        query_start_loc,
        positions,
        block_table,
        block_table_stride,
        block_size,
        slot_mapping,
        TOTAL_CP_WORLD_SIZE: tl.constexpr,
        TOTAL_CP_RANK: tl.constexpr,
        CP_KV_CACHE_INTERLEAVE_SIZE: tl.constexpr,
        PAD_ID: tl.constexpr,
        BLOCK_SIZE: tl.constexpr,
    ):
        pass
"""

PLUGIN_BLOCK_TABLE = """
    from vllm.v1.worker.block_table import _compute_slot_mapping_kernel


    class BlockTable:
        def compute_slot_mapping(self, num_reqs, num_tokens, query_start_loc, positions):
            kernel_kwargs = {
                "TOTAL_CP_WORLD_SIZE": 1,
                "TOTAL_CP_RANK": 0,
                "CP_KV_CACHE_INTERLEAVE_SIZE": 1,
                "PAD_ID": -1,
                "BLOCK_SIZE": 1024,
            }
            if self.split_blocks:
                kernel_kwargs.update(KV_CACHE_BLOCK_SIZE=self.physical_block_size,
                                     BLOCKS_PER_KV_BLOCK=self.blocks_per_phys_block)
            _compute_slot_mapping_kernel[(num_reqs + 1,)](
                num_tokens, self.max_num_batched_tokens, query_start_loc, positions, self.block_table,
                self.block_table.stride(0), self.block_size, self.slot_mapping, **kernel_kwargs, num_warps=4)
"""


def test_kernel_launch_with_constexpr_keywords_the_core_kernel_lacks(tmp_path):
    core = {"vllm/v1/worker/block_table.py": KERNEL}
    report = gate(tmp_path, core, {"vllm_ascend/block_table.py": PLUGIN_BLOCK_TABLE},
                  loaded=("vllm_ascend.block_table",))
    calls = of_kind(report, "call")
    assert [f.symbol for f in calls] == ["call:vllm.v1.worker.block_table._compute_slot_mapping_kernel"]
    assert "unexpected keyword argument 'KV_CACHE_BLOCK_SIZE'" in calls[0].message
    assert "num_warps" not in calls[0].message  # a launcher option, not a kernel parameter
    ok = PLUGIN_BLOCK_TABLE.replace("kernel_kwargs.update(KV_CACHE_BLOCK_SIZE=self.physical_block_size,\n"
                                    "                                     BLOCKS_PER_KV_BLOCK=self.blocks_per_phys_block)",
                                    "pass")
    assert of_kind(gate(tmp_path / "b", core, {"vllm_ascend/block_table.py": ok}), "call") == []


DFLASH = """
    class DFlashCudaGraphManager:
        def __init__(self, vllm_config, device, cudagraph_mode, decode_query_len, causal=False):
            pass

        def capture(self, forward_fn, input_buffers, block_tables, attn_groups, kv_cache_config,
                    max_model_len, progress_bar_desc="Capturing CUDA graphs"):
            pass
"""

PLUGIN_DFLASH = """
    from vllm.v1.worker.gpu.dflash import DFlashCudaGraphManager


    class DFlashAclGraphManager(DFlashCudaGraphManager):
        def capture(self, forward_fn, input_buffers, block_tables, attn_groups, kv_cache_config,
                    max_model_len, causal=False, progress_bar_desc="Capturing ACL graphs"):
            super().capture(forward_fn, input_buffers, block_tables, attn_groups, kv_cache_config,
                            max_model_len, causal, progress_bar_desc)
"""


def test_super_method_call_with_more_positions_than_core_takes(tmp_path):
    core = {"vllm/v1/worker/gpu/__init__.py": "", "vllm/v1/worker/gpu/dflash.py": DFLASH}
    report = gate(tmp_path, core, {"vllm_ascend/aclgraph.py": PLUGIN_DFLASH}, loaded=("vllm_ascend.aclgraph",))
    calls = of_kind(report, "call")
    assert [f.symbol for f in calls] == ["call:vllm.v1.worker.gpu.dflash.DFlashCudaGraphManager.capture"]
    assert "takes 7 positional argument(s) but the call passes 8" in calls[0].message
    assert calls[0].severity == "error"
    # not on the start-up chain: the same break is a warning
    elsewhere = gate(tmp_path / "b", core, {"vllm_ascend/aclgraph.py": PLUGIN_DFLASH})
    assert [f.severity for f in of_kind(elsewhere, "call")] == ["warning"]


PROPOSER = """
    class SpecDecodeBaseProposer:
        def __init__(self, vllm_config, device):
            self.device = device

        def set_inputs_first_pass(self, target_token_ids, next_token_ids, target_positions,
                                  target_hidden_states, token_indices_to_sample, cad, num_rejected_tokens_gpu):
            pass

        def get_model_name(self, model):
            return ""


    class MedusaProposer:
        def __init__(self, vllm_config, device):
            pass

        def propose(self, num_speculative_tokens, target_hidden_states, sampling_metadata, slot_mappings=None):
            pass


    def make_medusa(vllm_config, device) -> "MedusaProposer":
        return MedusaProposer(vllm_config, device)
"""

PLUGIN_PROPOSER = """
    from vllm.v1.spec_decode.proposer import MedusaProposer, SpecDecodeBaseProposer, make_medusa


    class Step3p5Proposer(SpecDecodeBaseProposer):
        def __init__(self, vllm_config, device):
            super().__init__(vllm_config, device)
            self.medusa = MedusaProposer(vllm_config, device)
            self.factory_made = make_medusa(vllm_config, device)

        def first_pass(self, batch):
            self.set_inputs_first_pass(batch.ids, batch.next_ids, batch.positions, batch.hidden,
                                       batch.indices, batch.cad, batch.rejected,
                                       req_scheduled_tokens=batch.scheduled)
            self.get_model_name(batch.model)

        def draft(self, hidden, metadata):
            self.medusa.propose(target_hidden_states=hidden, sampling_metadata=metadata)
            self.factory_made.propose(3, hidden, metadata)
            self.unknown.propose(target_hidden_states=hidden)
"""


def test_inherited_self_method_and_inferred_receivers(tmp_path):
    core = {"vllm/v1/spec_decode/proposer.py": PROPOSER}
    report = gate(tmp_path, core, {"vllm_ascend/step3p5.py": PLUGIN_PROPOSER}, loaded=("vllm_ascend.step3p5",))
    calls = {f.symbol: f for f in of_kind(report, "call")}
    assert sorted(calls) == ["call:vllm.v1.spec_decode.proposer.MedusaProposer.propose",
                             "call:vllm.v1.spec_decode.proposer.SpecDecodeBaseProposer.set_inputs_first_pass"]
    assert "unexpected keyword argument 'req_scheduled_tokens'" in \
        calls["call:vllm.v1.spec_decode.proposer.SpecDecodeBaseProposer.set_inputs_first_pass"].message
    medusa = calls["call:vllm.v1.spec_decode.proposer.MedusaProposer.propose"]
    assert "missing required argument(s) 'num_speculative_tokens'" in medusa.message
    assert "built as MedusaProposer(...)" in medusa.message
    # the factory's return annotation types `self.factory_made`, and its call binds;
    # `self.unknown` has no visible assignment and stays unjudged
    assert medusa.plugin_line == gatekit.line_of(tmp_path / "plugin", "vllm_ascend/step3p5.py", "self.medusa.propose")


def test_a_plugin_override_in_a_subclass_is_not_core_s_method(tmp_path):
    core = {"vllm/v1/spec_decode/proposer.py": PROPOSER}
    plugin = {"vllm_ascend/step3p5.py": PLUGIN_PROPOSER + """

    class Child(Step3p5Proposer):
        def set_inputs_first_pass(self, *args, req_scheduled_tokens=None):
            pass
"""}
    report = gate(tmp_path, core, plugin)
    assert [f.symbol for f in of_kind(report, "call")] == ["call:vllm.v1.spec_decode.proposer.MedusaProposer.propose"]


INPUT_BATCH = """
    from dataclasses import dataclass


    @dataclass
    class InputBatch:
        max_num_reqs: int
        max_model_len: int
        device: str
        pin_memory: bool = False
"""

PLUGIN_BATCH = """
    from dataclasses import dataclass

    from vllm.v1.worker.input_batch import InputBatch

    from vllm_ascend.utils import vllm_version_is


    @dataclass
    class AscendInputBatch(InputBatch):
        if vllm_version_is("0.27.1"):
            seq_lens_np: object = None
        else:
            num_tokens_np: object = None


    def build():
        return AscendInputBatch(max_num_reqs=1, max_model_len=2, device="npu", seq_lens_np=None)


    class LegacyBatch(InputBatch):
        def __init__(self, *args, **kwargs):
            super().__init__(max_num_reqs=1, max_model_len=2, device="npu", block_sizes=[16])
"""


def test_dataclass_fields_under_a_version_branch_and_super_init(tmp_path):
    core = {"vllm/v1/worker/input_batch.py": INPUT_BATCH}
    report = gate(tmp_path, core, {"vllm_ascend/batch.py": PLUGIN_BATCH}, "0.27.1", loaded=("vllm_ascend.batch",))
    assert of_kind(report, "constructor") == []  # 0.27.1 declares seq_lens_np: the call binds
    calls = of_kind(report, "call")
    assert [f.symbol for f in calls] == ["call:vllm.v1.worker.input_batch.InputBatch.__init__"]
    assert "unexpected keyword argument 'block_sizes'" in calls[0].message
    other = gate(tmp_path / "b", core, {"vllm_ascend/batch.py": PLUGIN_BATCH}, "0.26.0", loaded=("vllm_ascend.batch",))
    assert ["unexpected keyword argument 'seq_lens_np'" in f.message for f in of_kind(other, "constructor")] == [True]


RUNNER = """
    class GPUModelRunner:
        def execute_model(self, scheduler_output):
            self.prepare_inputs(scheduler_output, 4)

        def prepare_inputs(self, scheduler_output, num_scheduled_tokens):
            pass
"""

PLUGIN_RUNNER = """
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from vllm_ascend.utils import vllm_version_is


    class NPUModelRunner(GPUModelRunner):
        if vllm_version_is("0.27.1"):
            def prepare_inputs(self, scheduler_output, num_scheduled_tokens):
                pass
        else:
            def prepare_inputs(self, scheduler_output):
                pass
"""


def test_a_method_defined_twice_under_a_version_branch_is_the_one_core_runs(tmp_path):
    core = {"vllm/v1/worker/gpu_model_runner.py": RUNNER}
    plugin = {"vllm_ascend/runner.py": PLUGIN_RUNNER}
    report = gate(tmp_path, core, plugin, "0.27.1", loaded=("vllm_ascend.runner",))
    assert of_kind(report, "override") == []
    older = gate(tmp_path / "b", core, plugin, "0.26.0", loaded=("vllm_ascend.runner",))
    assert [f.symbol for f in of_kind(older, "override")] == \
        ["override:vllm_ascend.runner.NPUModelRunner.prepare_inputs"]


VISION = """
    class VisionEncoder:
        pass
"""

PLUGIN_VISION = """
    import contextlib

    from vllm_ascend.utils import vllm_version_is


    def _forward(self, x):
        return x


    def install_patch():
        from vllm.model_executor.models.vision import FusedInputNorm

        FusedInputNorm.forward = _forward


    with contextlib.suppress(ImportError):
        from vllm.model_executor.models.vision import FusedInputNorm as _probe  # noqa: F401

    with contextlib.suppress(ImportError):
        if vllm_version_is("0.27.1"):
            install_patch()
"""


def test_contextlib_suppress_import_error_is_a_guard(tmp_path):
    core = {"vllm/model_executor/models/vision.py": VISION}
    plugin = {"vllm_ascend/patch_vision.py": PLUGIN_VISION}
    report = gate(tmp_path, core, plugin, "0.27.1", loaded=("vllm_ascend.patch_vision",))
    assert of_kind(report, "import") == []
    # called once without the guard: the import in it is a plain one again
    unguarded = PLUGIN_VISION + "\n\n    install_patch()\n"
    again = gate(tmp_path / "b", core, {"vllm_ascend/patch_vision.py": unguarded}, "0.27.1",
                 loaded=("vllm_ascend.patch_vision",))
    assert [f.symbol for f in of_kind(again, "import")] == \
        ["import:vllm.model_executor.models.vision:FusedInputNorm"]


MAMBA = """
    def postprocess_mamba_fused_kernel(state_ptr, state_stride):
        pass


    def do_postprocess(state):
        postprocess_mamba_fused_kernel(state, 1)
"""

PLUGIN_PATCHES = """
    import vllm.v1.worker.mamba_utils as mamba_utils


    def ours(state_ptr, state_stride):
        pass


    def helper():
        return 1


    mamba_utils.postprocess_mamba_kernel = ours  # core renamed it: this does nothing
    mamba_utils.ascend_helper = helper
    mamba_utils._ascend_original_postprocess = mamba_utils.do_postprocess  # a saved original, not a patch


    def later():
        mamba_utils.old_fn = ours


    def use():
        mamba_utils.missing_function(1)
        return mamba_utils.ascend_helper()
"""


def test_patch_targets_that_do_not_exist_and_missing_module_functions(tmp_path):
    core = {"vllm/v1/worker/mamba_utils.py": MAMBA}
    report = gate(tmp_path, core, {"vllm_ascend/patches.py": PLUGIN_PATCHES}, loaded=("vllm_ascend.patches",))
    targets = {f.symbol: f.severity for f in of_kind(report, "patch-target")}
    # warnings: nothing raises, core never looks the name up (the reason says when it runs)
    assert targets == {"patch-target:vllm.v1.worker.mamba_utils.postprocess_mamba_kernel": "warning",
                       "patch-target:vllm.v1.worker.mamba_utils.old_fn": "warning"}
    reasons = {f.symbol.rsplit(".", 1)[-1]: f.reason for f in of_kind(report, "patch-target")}
    assert reasons["postprocess_mamba_kernel"].startswith("assigned when the module is imported")
    assert reasons["old_fn"].startswith("assigned inside a function")
    # read in a function body: a module's missing name is certain
    reads = [f for f in of_kind(report, "attribute") if "missing_function" in f.symbol]
    assert [f.severity for f in reads] == ["error"]


SPECS = """
    class KVCacheSpec:
        pass


    class SlidingWindowSpec(KVCacheSpec):
        def max_admission_blocks_per_request(self, max_num_batched_tokens, max_model_len):
            return 1


    class ChunkedLocalAttentionSpec(KVCacheSpec):
        def max_admission_blocks_per_request(self, max_num_batched_tokens, max_model_len):
            return 1
"""

PLUGIN_SPECS = """
    from vllm.v1.kv_cache_interface import ChunkedLocalAttentionSpec, KVCacheSpec, SlidingWindowSpec


    def get_manager_for_kv_cache_spec(kv_cache_spec: KVCacheSpec, max_in_flight_tokens=None, max_model_len=None):
        kwargs = {}
        if isinstance(kv_cache_spec, (SlidingWindowSpec, ChunkedLocalAttentionSpec)):
            kwargs["cap"] = kv_cache_spec.max_admission_blocks_per_request(
                max_in_flight_tokens=max_in_flight_tokens, max_model_len=max_model_len)
        kv_cache_spec.anything_else(1)
        return kwargs


    def typed(spec: SlidingWindowSpec | None):
        return spec.max_admission_blocks_per_request(1)
"""


def test_receivers_typed_by_annotation_and_isinstance(tmp_path):
    """Shapes from vLLM 0.25.0 `vllm/v1/kv_cache_interface.py` (both specs define the
    method with `max_num_batched_tokens`) and the plugin's manager factory."""
    core = {"vllm/v1/kv_cache_interface.py": SPECS}
    report = gate(tmp_path, core, {"vllm_ascend/managers.py": PLUGIN_SPECS}, loaded=("vllm_ascend.managers",))
    calls = of_kind(report, "call")
    # one callee in one file: one finding, naming the other line
    assert [f.plugin_line for f in calls] == [gatekit.line_of(tmp_path / "plugin", "vllm_ascend/managers.py",
                                                               "kwargs[\"cap\"]")]
    assert "unexpected keyword argument 'max_in_flight_tokens'" in calls[0].message
    later = gatekit.line_of(tmp_path / "plugin", "vllm_ascend/managers.py", "return spec.max_admission")
    assert f"also at line(s) {later}" in calls[0].message
    assert "anything_else" not in calls[0].message  # the base class has no such method: not judged


EAGLE = """
    class SpecDecodeBaseProposer:
        def set_inputs_first_pass(self, target_token_ids, next_token_ids):
            pass


    class EagleProposer(SpecDecodeBaseProposer):
        pass
"""

PLUGIN_EAGLE = """
    from vllm.v1.spec_decode.eagle import EagleProposer, SpecDecodeBaseProposer


    class AscendSpecDecodeBaseProposer(SpecDecodeBaseProposer):
        def set_inputs_first_pass(self, target_token_ids, next_token_ids, req_scheduled_tokens=None):
            pass


    class AscendEagleProposer(EagleProposer, AscendSpecDecodeBaseProposer):
        pass


    class Step3p5Proposer(AscendEagleProposer):
        def propose(self, ids, nxt):
            return self.set_inputs_first_pass(ids, nxt, req_scheduled_tokens=1)
"""


def test_method_resolution_order_is_c3(tmp_path):
    """vllm-ascend's AscendEagleProposer(EagleProposer, AscendSpecDecodeBaseProposer):
    Python's C3 order puts the plugin base before core's SpecDecodeBaseProposer, so the
    plugin's set_inputs_first_pass is the one that runs (a depth-first walk would reach
    core's first)."""
    report = gate(tmp_path, {"vllm/v1/spec_decode/eagle.py": EAGLE}, {"vllm_ascend/eagle.py": PLUGIN_EAGLE},
                  loaded=("vllm_ascend.eagle",))
    assert of_kind(report, "call") == []


ENVS = """
    environment_variables = {"VLLM_HOST_IP": lambda: ""}


    def __getattr__(name):
        if name in environment_variables:
            return environment_variables[name]()
        raise AttributeError(name)
"""

PLUGIN_HANDLED = """
    import vllm.envs as envs

    from vllm.v1.worker.gpu.dflash import DFlashCudaGraphManager


    def collecting():
        try:
            return envs.VLLM_ALLOW_EXPERT_LOAD_COLLECTING
        except Exception:
            return False


    def unguarded():
        return envs.VLLM_ALLOW_EXPERT_LOAD_COLLECTING


    class Manager(DFlashCudaGraphManager):
        def capture(self, forward_fn, *rest):
            try:
                super().capture(forward_fn, 1, 2, 3, 4, 5, 6, 7)
            except TypeError:
                super().capture(forward_fn, 1, 2, 3, 4, 5)


    class Skipping(Manager):
        def capture(self, forward_fn, *rest):
            super(Manager, self).capture(forward_fn, 1, 2, 3, 4, 5, 6, 7)
"""


def test_handled_exceptions_and_two_argument_super(tmp_path):
    """`vllm.envs` as in vLLM 0.25.0 (a module `__getattr__` over `environment_variables`);
    vllm-ascend's eplb_updator reads a removed variable under `except Exception`."""
    core = {"vllm/envs.py": ENVS, "vllm/v1/worker/gpu/__init__.py": "", "vllm/v1/worker/gpu/dflash.py": DFLASH}
    report = gate(tmp_path, core, {"vllm_ascend/handled.py": PLUGIN_HANDLED}, loaded=("vllm_ascend.handled",))
    reads = [f for f in of_kind(report, "attribute") if "VLLM_ALLOW_EXPERT_LOAD_COLLECTING" in f.symbol]
    assert [f.plugin_line for f in reads] == [gatekit.line_of(tmp_path / "plugin", "vllm_ascend/handled.py",
                                                               "def unguarded():") + 1]
    calls = of_kind(report, "call")
    # the try/except TypeError pair is not judged; super(Manager, self) skips Manager's
    # own capture and reaches core's, which takes 7 positions
    assert [f.plugin_line for f in calls] == [gatekit.line_of(tmp_path / "plugin", "vllm_ascend/handled.py",
                                                               "super(Manager, self)")]


MANAGERS = """
    class SingleTypeKVCacheManager:
        def get_num_blocks_to_allocate(self, request_id, num_tokens, new_computed_blocks, total_computed_tokens,
                                       num_local_computed_tokens, num_tokens_main_model, apply_admission_cap=False):
            return 0


    class FullAttentionManager(SingleTypeKVCacheManager):
        pass


    def get_manager_for_kv_cache_spec(kv_cache_spec, **kwargs) -> SingleTypeKVCacheManager:
        return FullAttentionManager()
"""

COORDINATOR_0_26 = """
    from vllm.v1.core.single_type_kv_cache_manager import get_manager_for_kv_cache_spec


    class KVCacheCoordinator:
        def __init__(self, kv_cache_config):
            self.single_type_managers = tuple(
                get_manager_for_kv_cache_spec(kv_cache_spec=g.kv_cache_spec) for g in kv_cache_config.groups)

        def get_num_blocks_to_allocate(self, request_id, num_tokens, total_computed_tokens,
                                       num_local_computed_tokens, num_tokens_main_model, apply_admission_cap=False):
            n = 0
            for i, manager in enumerate(self.single_type_managers):
                n += manager.get_num_blocks_to_allocate(request_id, num_tokens, [], total_computed_tokens,
                                                        num_local_computed_tokens, num_tokens_main_model,
                                                        apply_admission_cap=apply_admission_cap)
            return n
"""

PLUGIN_MANAGER = """
    from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager


    class CompressAttentionManager(FullAttentionManager):
        def get_num_blocks_to_allocate(self, request_id, num_tokens, new_computed_blocks, total_computed_tokens,
                                       num_tokens_main_model, apply_admission_cap=False):
            return 0
"""


def test_a_core_loop_over_factory_built_managers_types_the_receiver(tmp_path):
    """vLLM 0.26.0 `kv_cache_coordinator.py`: the coordinator builds its managers with
    `get_manager_for_kv_cache_spec(...) -> SingleTypeKVCacheManager` and calls each with
    six positions and `apply_admission_cap=`; the plugin's override lacks the inserted
    `num_local_computed_tokens` ("multiple values" in CPython)."""
    core = {"vllm/v1/core/single_type_kv_cache_manager.py": MANAGERS,
            "vllm/v1/core/kv_cache_coordinator.py": COORDINATOR_0_26}
    report = gate(tmp_path, core, {"vllm_ascend/managers.py": PLUGIN_MANAGER}, loaded=("vllm_ascend.managers",))
    overrides = of_kind(report, "override")
    assert [(f.symbol, f.severity) for f in overrides] == [
        ("override:vllm_ascend.managers.CompressAttentionManager.get_num_blocks_to_allocate", "error")]
    assert "multiple values for argument 'apply_admission_cap'" in overrides[0].message


def test_an_unreadable_base_deep_in_the_hierarchy_stops_the_lookup(tmp_path):
    core = {"vllm/v1/spec_decode/eagle.py": "import torch\n\n\nclass Base(torch.nn.Module):\n    pass\n\n\n"
                                            "class EagleProposer(Base):\n    def propose(self, a):\n        pass\n"}
    plugin = {"vllm_ascend/deep.py": """
        from vllm.v1.spec_decode.eagle import EagleProposer


        class Mine(EagleProposer):
            def run(self):
                return self.forward(1, 2, 3), self.propose(1, 2)
    """}
    report = gate(tmp_path, core, plugin, loaded=("vllm_ascend.deep",))
    # forward may come from torch's Module (not read): not judged; propose is core's and takes one
    assert [f.symbol for f in of_kind(report, "call")] == ["call:vllm.v1.spec_decode.eagle.EagleProposer.propose"]


def test_a_common_method_name_is_followed_through_files_naming_the_hierarchy(tmp_path):
    """vLLM 0.25.0 DFlashSpeculator.capture calls `self.query_cudagraph_manager.capture(
    6 positions, progress_bar_desc=...)` on the manager it builds as
    `DFlashCudaGraphManager(...)`, a name the plugin replaces with its own manager whose
    capture requires `causal`. `capture` is called in many core files."""
    core = {"vllm/v1/worker/gpu/__init__.py": "", "vllm/v1/worker/gpu/dflash.py": DFLASH,
            "vllm/v1/worker/gpu/speculator.py": """
        from vllm.v1.worker.gpu.dflash import DFlashCudaGraphManager


        class DFlashSpeculator:
            def __init__(self, vllm_config):
                self.query_cudagraph_manager = DFlashCudaGraphManager(vllm_config, None, None, 1)

            def capture(self):
                self.query_cudagraph_manager.capture(self.fwd, 1, 2, 3, 4, 5, progress_bar_desc="x")
    """}
    for i in range(30):  # many other core files call some .capture(...)
        core[f"vllm/v1/worker/other{i}.py"] = "def f(g):\n    g.capture(1)\n"
    plugin = {"vllm_ascend/aclgraph.py": """
        import vllm.v1.worker.gpu.speculator as speculator_module
        from vllm.v1.worker.gpu.dflash import DFlashCudaGraphManager


        class DFlashAclGraphManager(DFlashCudaGraphManager):
            def capture(self, forward_fn, input_buffers, block_tables, attn_groups, kv_cache_config,
                        max_model_len, causal, progress_bar_desc="Capturing ACL graphs"):
                pass


        speculator_module.DFlashCudaGraphManager = DFlashAclGraphManager
    """}
    report = gate(tmp_path, core, plugin, loaded=("vllm_ascend.aclgraph",))
    found = [f for f in of_kind(report, "override") if f.symbol.endswith("DFlashAclGraphManager.capture")]
    assert [(f.severity, "missing required argument(s) 'causal'" in f.message) for f in found] == [("error", True)]


def test_methods_the_plugin_adds_to_a_core_class_are_not_patch_targets(tmp_path):
    """vllm-ascend 15818534ec adds its tool parser's helpers to core's
    DeepSeekV4ToolParser (`DeepSeekV4ToolParser._function_name = _function_name`)."""
    core = {"vllm/v1/worker/mamba_utils.py": MAMBA + "\n\n    class Parser:\n        def parse(self):\n            pass\n"}
    plugin = {"vllm_ascend/parser.py": """
        from vllm.v1.worker.mamba_utils import Parser


        def _function_name(tool):
            return tool


        Parser._function_name = _function_name
    """}
    report = gate(tmp_path, core, plugin, loaded=("vllm_ascend.parser",))
    assert report.findings == ()


def test_code_after_a_taken_version_branch_that_returns_does_not_run(tmp_path):
    """vllm-ascend 182b75ea84 NPUModelRunner.execute_model: `if vllm_version_is("0.27.1"):
    return super().execute_model(...)` and, after it, the call for newer cores with
    `context_len=` (vLLM 0.27.1 `GPUModelRunner.execute_model` has no context_len)."""
    core = {"vllm/v1/worker/gpu_model_runner.py": """
        class GPUModelRunner:
            def execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False):
                pass
    """}
    plugin = {"vllm_ascend/runner.py": """
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        from vllm_ascend.utils import vllm_version_is


        class NPUModelRunner(GPUModelRunner):
            def execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False, context_len=0):
                if vllm_version_is("0.27.1"):
                    return super().execute_model(scheduler_output, intermediate_tensors=intermediate_tensors)
                return super().execute_model(scheduler_output, dummy_run=dummy_run, context_len=context_len)
    """}
    assert of_kind(gate(tmp_path, core, plugin, "0.27.1", loaded=("vllm_ascend.runner",)), "call") == []
    newer = gate(tmp_path / "b", core, plugin, "0.28.0", loaded=("vllm_ascend.runner",))
    assert ["context_len" in f.message for f in of_kind(newer, "call")] == [True]


MOVED_FROM = """
    def other():
        pass
"""

MOVED_TO = """
    def postprocess_mamba_fused_kernel(state_ptr, state_stride):
        pass


    def do_postprocess(state):
        postprocess_mamba_fused_kernel(state, 1)
"""

PLUGIN_PATCHES_MOVED = """
    import vllm.v1.worker.mamba_utils as mamba_utils


    def ours(state_ptr, state_stride):
        pass


    mamba_utils.postprocess_mamba_fused_kernel = ours  # core moved it to mamba_kernels


    def later():
        mamba_utils.postprocess_mamba_fused_kernel = ours
"""


def test_a_patch_of_a_function_core_moved_to_another_module_is_an_error_at_start_up(tmp_path):
    """Issue 19 item 4: the patched name is gone from its module, and one other core module
    now defines and calls it: the replacement no longer reaches what core runs. An error
    where it is assigned at import of a start-up module; a warning inside a function."""
    core = {"vllm/v1/worker/mamba_utils.py": MOVED_FROM, "vllm/v1/worker/mamba_kernels.py": MOVED_TO}
    report = gate(tmp_path, core, {"vllm_ascend/patches.py": PLUGIN_PATCHES_MOVED}, loaded=("vllm_ascend.patches",))
    found = [(f.severity, f.plugin_line, f.core_path) for f in of_kind(report, "patch-target")]
    assert sorted(found) == [("error", 8, "vllm/v1/worker/mamba_kernels.py"),
                             ("warning", 12, "vllm/v1/worker/mamba_kernels.py")]
    # a name defined in two other modules says nothing certain about where it went
    core["vllm/v1/worker/mamba_kernels_v2.py"] = MOVED_TO
    report = gate(tmp_path / "two", core, {"vllm_ascend/patches.py": PLUGIN_PATCHES_MOVED},
                  loaded=("vllm_ascend.patches",))
    assert of_kind(report, "patch-target") == []


# A keyword passed through a literal `**` dictionary, chosen by a version test (cut from the
# shape vllm-ascend 0.28.0rc1 used against vLLM 0.29.0: `**({} if vllm_version_is("0.28.0")
# else {"valid_dummy_state_slots": ...})` into the core runner's execute_model).
SPREAD_CORE = """
    class Runner:
        def execute_model(self, scheduler_output, intermediate_tensors=None):
            return None
"""

SPREAD_PLUGIN = """
    from vllm.v1.worker.runner import Runner
    from vllm_ascend.utils import vllm_version_is


    class NPURunner(Runner):
        def execute_model(self, scheduler_output, intermediate_tensors=None, valid_slots=False):
            return super().execute_model(
                scheduler_output,
                intermediate_tensors,
                **({} if vllm_version_is("0.28.0") else {"valid_slots": valid_slots}),
            )

        def literal(self, out):
            return super().execute_model(out, **{"intermediate_tensors": None})
"""


@pytest.mark.parametrize("version, broken", [("0.29.0", True), ("0.28.0", False)])
def test_a_keyword_in_a_literal_spread_chosen_by_a_version_test_is_checked(tmp_path, version, broken):
    report = gate(tmp_path, {"vllm/v1/worker/runner.py": SPREAD_CORE}, {"vllm_ascend/runner.py": SPREAD_PLUGIN},
                  version, loaded=("vllm_ascend.runner",))
    calls = [f for f in of_kind(report, "call") if f.symbol.endswith("Runner.execute_model")]
    assert len(calls) == (1 if broken else 0), [f.message for f in calls]
    if broken:
        assert "valid_slots" in calls[0].message and calls[0].plugin_line == 7, calls[0]


def test_a_spread_whose_test_the_gate_cannot_settle_passes_no_keyword(tmp_path):
    plugin = SPREAD_PLUGIN.replace('vllm_version_is("0.28.0")', "scheduler_output.flag")
    report = gate(tmp_path, {"vllm/v1/worker/runner.py": SPREAD_CORE}, {"vllm_ascend/runner.py": plugin},
                  "0.29.0", loaded=("vllm_ascend.runner",))
    assert not [f for f in of_kind(report, "call") if f.symbol.endswith("Runner.execute_model")]


# A name the plugin adds to a core module itself (cut from vllm-ascend 0.29.0rc1's
# patch_mamba_utils: `mamba_utils.do_mamba_copy_block_for_layer = ...`, read by connectors).
MAMBA_CORE = """
    def preprocess_mamba(x):
        return x
"""

MAMBA_PATCH = """
    from vllm.v1.worker import mamba_utils


    def copy_for_layer(bufs, layer):
        return bufs


    mamba_utils.copy_for_layer = copy_for_layer
"""

MAMBA_READER = """
    from vllm.v1.worker import mamba_utils


    def load(bufs, layer):
        mamba_utils.copy_for_layer(bufs, layer)
        return mamba_utils.dropped_helper(bufs)  # nobody sets this one
"""


# ... but a store in a function may come after the read (cut from vllm-ascend 97163123c9's
# eagle speculator: `original = mod.build_attn_metadata; mod.build_attn_metadata = ...`).
MAMBA_WRAPPER = """
    from vllm.v1.worker import mamba_utils


    def wrapped():
        original = mamba_utils.wrapped_helper
        mamba_utils.wrapped_helper = original
"""


def test_a_name_the_plugin_sets_on_a_core_module_is_no_missing_name(tmp_path):
    report = gate(tmp_path, {"vllm/v1/worker/mamba_utils.py": MAMBA_CORE},
                  {"vllm_ascend/patch_mamba.py": MAMBA_PATCH, "vllm_ascend/connector.py": MAMBA_READER,
                   "vllm_ascend/wrapper.py": MAMBA_WRAPPER},
                  "0.30.0", loaded=("vllm_ascend.patch_mamba", "vllm_ascend.connector", "vllm_ascend.wrapper"))
    reads = {f.symbol for f in of_kind(report, "attribute")}
    assert "attribute:vllm.v1.worker.mamba_utils.dropped_helper" in reads, reads
    assert "attribute:vllm.v1.worker.mamba_utils.copy_for_layer" not in reads, reads
    assert "attribute:vllm.v1.worker.mamba_utils.wrapped_helper" in reads, reads  # read before its store


def test_a_read_through_a_name_whose_import_fails_is_that_import_s_break_alone(tmp_path):
    """`from vllm.models.gone import Layout` then `Layout.from_config(...)`: one break, the
    import (cut from vllm-ascend 0.29.0rc1's engram hash_state against vLLM 0.30.0)."""
    plugin = {"vllm_ascend/state.py": "from vllm.models.gone import Layout\n\n\n"
                                      "def build(cfg):\n    return Layout.from_config(cfg)\n"}
    report = gate(tmp_path, {"vllm/models/__init__.py": "", "vllm/models/kept.py": "X = 1\n"}, plugin, "0.30.0",
                  loaded=("vllm_ascend.state",))
    assert [f.kind for f in report.findings if f.plugin_path == "vllm_ascend/state.py"] == ["import"], \
        [(f.kind, f.symbol, f.plugin_line) for f in report.findings]


INTERMEDIATE = """
    from dataclasses import dataclass


    @dataclass
    class IntermediateTensors:
        tensors: dict
        kv_connector_output: object | None

        def __init__(self, tensors, kv_connector_output=None):
            self.tensors = tensors
            self.kv_connector_output = kv_connector_output


    @dataclass
    class Generated:
        tensors: dict
        kv_connector_output: object | None
"""

PLUGIN_INTERMEDIATE = """
    from vllm.sequence import Generated, IntermediateTensors


    def pack(hidden):
        a = IntermediateTensors({"hidden_states": hidden})
        b = Generated({"hidden_states": hidden})
        return a, b
"""


def test_a_dataclass_that_writes_its_own_init_is_built_by_that_init(tmp_path):
    """@dataclass leaves an `__init__` of the class body in place: its default counts, not
    the field without one. A generated `__init__` (the second class) still needs both."""
    report = gate(tmp_path, {"vllm/sequence.py": INTERMEDIATE}, {"vllm_ascend/pack.py": PLUGIN_INTERMEDIATE},
                  "0.18.0", loaded=("vllm_ascend.pack",))
    built = of_kind(report, "constructor")
    assert [f.symbol.rsplit(".", 1)[-1] for f in built] == ["Generated"], [f.message for f in built]
    assert "missing required argument(s) 'kv_connector_output'" in built[0].message


FLA_CHUNK = """
    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None):
        return q
"""

PLUGIN_FLA_PATCH = """
    import vllm.model_executor.layers.fla.ops

    from vllm_ascend.ops.chunk import chunk_gated_delta_rule

    vllm.model_executor.layers.fla.ops.chunk_gated_delta_rule = chunk_gated_delta_rule
"""

PLUGIN_FLA_OWN = """
    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, prebuilt_meta=None):
        return q
"""

PLUGIN_FLA_USER = """
    from vllm.model_executor.layers.fla.ops import chunk_gated_delta_rule
    from vllm.model_executor.layers.fla.ops.chunk import chunk_gated_delta_rule as core_rule


    def attend(q, k, v, g, beta, meta):
        chunk_gated_delta_rule(q, k, v, g, beta, prebuilt_meta=meta)
        core_rule(q, k, v, g, beta, prebuilt_meta=meta)
"""


def test_a_call_of_a_name_read_from_where_the_plugin_installs_its_own_is_not_a_core_call(tmp_path):
    """The plugin replaces the package's re-export (`fla.ops.chunk_gated_delta_rule = ours`)
    and a module imports the name from there: which function it binds depends on import
    order, so no call of core's is proven. The same function read from its defining
    module, which the plugin does not patch, is core's."""
    core = {"vllm/model_executor/__init__.py": "", "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/layers/fla/__init__.py": "",
            "vllm/model_executor/layers/fla/ops/__init__.py": "from .chunk import chunk_gated_delta_rule\n",
            "vllm/model_executor/layers/fla/ops/chunk.py": FLA_CHUNK}
    plugin = {"vllm_ascend/ops/__init__.py": "", "vllm_ascend/ops/chunk.py": PLUGIN_FLA_OWN,
              "vllm_ascend/patch_triton.py": PLUGIN_FLA_PATCH, "vllm_ascend/user.py": PLUGIN_FLA_USER}
    report = gate(tmp_path, core, plugin, "0.18.0", loaded=("vllm_ascend.patch_triton", "vllm_ascend.user"))
    calls = of_kind(report, "call")
    assert [(f.symbol, f.plugin_line) for f in calls] == [
        ("call:vllm.model_executor.layers.fla.ops.chunk.chunk_gated_delta_rule", 7)], [f.message for f in calls]


CAPTURING_RUNNER = """
    class GPUModelRunner:
        def capture_model(self):
            self._capture_graphs([1, 2])

        def _capture_graphs(self, sizes):
            for n in sizes:
                self._warmup_and_capture(n)

        def _warmup_and_capture(self, n):
            self._dummy_run(n, profile_seq_lens=n)

        def _dummy_run(self, num_tokens, profile_seq_lens=None):
            pass
"""

PLUGIN_CAPTURING_RUNNER = """
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner


    class NPUModelRunner(GPUModelRunner):
        def capture_model(self):
            GPUModelRunner.capture_model(self)

        def _dummy_run(self, num_tokens):
            pass


    class Worker:
        def __init__(self, runner):
            self.model_runner = runner  # untyped: the worker's runner is built elsewhere

        def compile(self):
            self.model_runner.capture_model()
"""


def test_an_override_that_calls_the_base_method_by_its_class_keeps_cores_calls_live(tmp_path):
    """`GPUModelRunner.capture_model(self)` in the plugin's override is `super()` spelled
    out: core's capture path runs and passes `profile_seq_lens` to the plugin's
    `_dummy_run`, an error, as when the override calls `super().capture_model()`."""
    core = {"vllm/v1/worker/gpu_model_runner.py": CAPTURING_RUNNER}
    for spelled in ("GPUModelRunner.capture_model(self)", "super().capture_model()"):
        plugin = {"vllm_ascend/runner.py": PLUGIN_CAPTURING_RUNNER.replace("GPUModelRunner.capture_model(self)", spelled)}
        report = gate(tmp_path / spelled[:5], core, plugin, "0.18.0", loaded=("vllm_ascend.runner",))
        [f] = of_kind(report, "override")
        assert f.symbol.endswith("NPUModelRunner._dummy_run") and f.severity == "error", (spelled, f.summary, f.reason)


MM_ENCODER = """
    import torch


    class CustomOp(torch.nn.Module):
        @classmethod
        def register(cls, name):
            def decorator(op_cls):
                return op_cls
            return decorator


    @CustomOp.register("mm_encoder_attn")
    class MMEncoderAttention(CustomOp):
        def __init__(self, num_heads, head_size, scale=None, prefix=""):
            super().__init__()
"""

PLUGIN_MM_ENCODER = """
    from vllm.model_executor.layers.attention.mm_encoder_attention import MMEncoderAttention


    class AscendMMEncoderAttention(MMEncoderAttention):
        def __init__(self, num_heads, head_size, scale=None, prefix="", multimodal_config=None):
            super().__init__(num_heads=num_heads, head_size=head_size, scale=scale, prefix=prefix,
                             multimodal_config=multimodal_config)
"""


def test_super_init_of_a_core_class_that_writes_its_own_init_over_an_unread_base(tmp_path):
    """MMEncoderAttention(CustomOp(torch.nn.Module)) defines __init__: its signature is the
    contract, whatever torch's base (outside the trees) does."""
    core = {"vllm/model_executor/__init__.py": "", "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/layers/attention/__init__.py": "",
            "vllm/model_executor/layers/attention/mm_encoder_attention.py": MM_ENCODER}
    report = gate(tmp_path, core, {"vllm_ascend/mm.py": PLUGIN_MM_ENCODER}, "0.15.0", loaded=("vllm_ascend.mm",))
    calls = of_kind(report, "call")
    assert [f.symbol for f in calls] == [
        "call:vllm.model_executor.layers.attention.mm_encoder_attention.MMEncoderAttention.__init__"], \
        [f.message for f in report.findings]
    assert "unexpected keyword argument 'multimodal_config'" in calls[0].message


PLATFORMS = """
    class Platform:
        @classmethod
        def get_attn_backend_cls(cls, selected_backend, head_size, dtype, kv_cache_dtype, block_size,
                                 use_mla, has_sink, use_sparse):
            return ""
""" + gatekit.CURRENT_PLATFORM

SELECTOR = """
    def get_attn_backend(head_size, dtype, kv_cache_dtype, block_size, use_mla=False, has_sink=False,
                         use_sparse=False):
        from vllm.platforms import current_platform

        return current_platform.get_attn_backend_cls(None, head_size, dtype, kv_cache_dtype, block_size,
                                                     use_mla, has_sink, use_sparse)
"""

RUNNER_USING_SELECTOR = """
    from vllm.attention.selector import get_attn_backend


    class GPUModelRunner:
        def __init__(self):
            self.backend = get_attn_backend(64, None, None, 16)
"""

PLUGIN_PLATFORM = """
    from vllm.platforms import Platform


    class NPUPlatform(Platform):
        @classmethod
        def get_attn_backend_cls(cls, selected_backend, head_size, dtype, kv_cache_dtype, block_size,
                                 use_mla, has_sink=False):
            return "vllm_ascend.attention.AscendBackend"
"""


PLUGIN_PLATFORM_BASE = PLUGIN_PLATFORM.replace("class NPUPlatform(Platform)", "class NPUPlatformBase(Platform)") + """

    class SmiPlatform(NPUPlatformBase):
        pass


    class NoSmiPlatform(NPUPlatformBase):
        pass


    smi_available = False
    NPUPlatform = SmiPlatform if smi_available else NoSmiPlatform
"""


def test_a_method_the_platform_class_inherits_from_a_plugin_base_is_current_platforms(tmp_path):
    """vllm-metax's entry point returns `MacaPlatform`, an alias picking `mxsmlPlatform` or
    `NonmxsmlMetaxPlatform`, both below `MacaPlatformBase`, which defines
    `get_attn_backend_cls`: core's `current_platform.get_attn_backend_cls(...)` runs the
    base's method (0.17.0 passes `num_heads=`, which it lacks)."""
    core = {"vllm/platforms/__init__.py": PLATFORMS, "vllm/attention/__init__.py": "",
            "vllm/attention/selector.py": SELECTOR, "vllm/v1/worker/gpu_model_runner.py": RUNNER_USING_SELECTOR}
    files = {**PKGS, **core, "vllm/_version.py": "__version__ = version = '0.11.0'\n"}
    core_dir = gatekit.tree(tmp_path / "core", files)
    init = 'def register():\n    import vllm_ascend.platform  # noqa\n    return "vllm_ascend.platform.NPUPlatform"\n'

    def overrides(platform: str, at: str):
        plugin_dir = gatekit.tree(tmp_path / at, {"setup.py": ENTRY, "vllm_ascend/__init__.py": init,
                                                  "vllm_ascend/utils.py": UTILS, "vllm_ascend/platform.py": platform})
        return [f for f in of_kind(run_gate(core_dir, plugin_dir), "override")
                if f.symbol.endswith("NPUPlatformBase.get_attn_backend_cls")]

    [f] = overrides(PLUGIN_PLATFORM_BASE, "p1")
    assert f.severity == "error" and "current_platform.get_attn_backend_cls" in f.message, (f.summary, f.reason)
    # negative twin: both picked classes define the method themselves: the base's never runs
    # as current_platform's
    own = PLUGIN_PLATFORM_BASE.replace(
        "(NPUPlatformBase):\n        pass",
        "(NPUPlatformBase):\n        @classmethod\n        def get_attn_backend_cls(cls, *args):\n"
        "            return 'vllm_ascend.attention.AscendBackend'")
    assert own.count("*args") == 2
    assert all(f.severity != "error" for f in overrides(own, "p2"))


@pytest.mark.parametrize("returns, found", [("vllm_ascend.platform.NPUPlatform", True),
                                            ("vllm_ascend.platform.OtherPlatform", False)])
def test_core_calls_through_current_platform_reach_the_plugins_platform_class(tmp_path, returns, found):
    """The class the platform entry point names is vLLM's `current_platform`: core's
    `current_platform.get_attn_backend_cls(...)` calls its override, here with one more
    positional than it takes. A class the entry point does not name gets no such call."""
    core = {"vllm/platforms/__init__.py": PLATFORMS, "vllm/attention/__init__.py": "",
            "vllm/attention/selector.py": SELECTOR, "vllm/v1/worker/gpu_model_runner.py": RUNNER_USING_SELECTOR}
    files = {**PKGS, **core, "vllm/_version.py": "__version__ = version = '0.11.0'\n"}
    core_dir = gatekit.tree(tmp_path / "core", files)
    init = f'def register():\n    import vllm_ascend.platform  # noqa\n    return "{returns}"\n'
    plugin_dir = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": init,
                                                    "vllm_ascend/utils.py": UTILS,
                                                    "vllm_ascend/platform.py": PLUGIN_PLATFORM})
    report = run_gate(core_dir, plugin_dir)
    overrides = [f for f in of_kind(report, "override") if f.symbol.endswith("NPUPlatform.get_attn_backend_cls")]
    if found:
        [f] = overrides
        assert f.severity == "error" and "current_platform.get_attn_backend_cls" in f.message, (f.summary, f.reason)
    else:
        assert all(f.severity != "error" for f in overrides), [f.summary for f in overrides]


CUSTOM_OP = gatekit.CUSTOM_OP_REGISTRY

FUSED_MOE = """
    from vllm.model_executor.custom_op import CustomOp


    class FusedMoE(CustomOp):
        def __init__(self, num_experts, top_k, hidden_size, routed_scaling_factor=1.0):
            super().__init__()
"""

MOE_MODEL = """
    from vllm.model_executor.layers.fused_moe import FusedMoE


    class Glm4MoE:
        def __init__(self, config):
            self.experts = FusedMoE(num_experts=8, top_k=2, hidden_size=64, routed_scaling_factor=1.0)


    class Glm4Model:
        def __init__(self, config):
            self.layers = [Glm4MoE(config)]
"""

PLUGIN_FUSED_MOE = """
    from vllm.model_executor.layers.fused_moe import FusedMoE


    class AscendFusedMoE(FusedMoE):
        def __init__(self, num_experts, top_k, hidden_size, routed_scaling_fator=1.0):
            super().__init__(num_experts, top_k, hidden_size)
"""

PLUGIN_REGISTER_DIRECT = """
    def register_ascend_customop():
        from vllm.model_executor.custom_op import CustomOp

        from vllm_ascend.ops.fused_moe import AscendFusedMoE
        CustomOp.register_oot(_decorated_op_cls=AscendFusedMoE, name="FusedMoE")


    register_ascend_customop()
"""

PLUGIN_REGISTER_TABLE = """
    from vllm.model_executor.custom_op import CustomOp

    from vllm_ascend.ops.fused_moe import AscendFusedMoE

    REGISTERED_ASCEND_OPS = {}


    def register_ascend_customop():
        global REGISTERED_ASCEND_OPS
        REGISTERED_ASCEND_OPS = {"FusedMoE": AscendFusedMoE}
        for name, op_cls in REGISTERED_ASCEND_OPS.items():
            CustomOp.register_oot(_decorated_op_cls=op_cls, name=name)


    register_ascend_customop()
"""


@pytest.mark.parametrize("register", [PLUGIN_REGISTER_DIRECT, PLUGIN_REGISTER_TABLE])
def test_a_class_registered_for_a_core_op_must_take_what_core_builds_the_op_with(tmp_path, register):
    """`CustomOp.register_oot(_decorated_op_cls=AscendFusedMoE, name="FusedMoE")` (or a
    table of them) makes core's `FusedMoE(...)` build the plugin's class: its __init__
    (with vllm-ascend 0.10.1rc1's `routed_scaling_fator` typo) meets core's keywords."""
    core = {"vllm/model_executor/custom_op.py": CUSTOM_OP, "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/layers/fused_moe.py": FUSED_MOE, "vllm/model_executor/models/glm4_moe.py": MOE_MODEL}
    plugin = {"vllm_ascend/ops/__init__.py": "", "vllm_ascend/ops/fused_moe.py": PLUGIN_FUSED_MOE,
              "vllm_ascend/register.py": register}
    report = gate(tmp_path, core, plugin, "0.10.2", loaded=("vllm_ascend.register",))
    found = [f for f in of_kind(report, "override") if f.symbol.endswith("AscendFusedMoE.__init__")]
    assert len(found) == 1, [f.message for f in report.findings]
    assert "unexpected keyword argument 'routed_scaling_factor'" in found[0].message
    assert found[0].core_path == "vllm/model_executor/models/glm4_moe.py"
    # the plugin's own FusedMoE(...) builds its class too: no call of core's constructor
    user = {**plugin, "vllm_ascend/model.py": "from vllm.model_executor.layers.fused_moe import FusedMoE\n\n\n"
                                              "def build():\n    return FusedMoE(8, 2, 64, routed_scaling_fator=1.0)\n"}
    report = gate(tmp_path / "user", core, user, "0.10.2", loaded=("vllm_ascend.register", "vllm_ascend.model"))
    assert of_kind(report, "constructor") == [], [f.message for f in of_kind(report, "constructor")]
    fixed = {**plugin, "vllm_ascend/ops/fused_moe.py": PLUGIN_FUSED_MOE.replace("fator", "factor")}
    report = gate(tmp_path / "fixed", core, fixed, "0.10.2", loaded=("vllm_ascend.register",))
    assert not [f for f in of_kind(report, "override") if f.symbol.endswith("AscendFusedMoE.__init__")]


def test_a_core_op_built_from_a_keyword_dictionary_proves_nothing_about_the_registered_class(tmp_path):
    """`YaRNScalingRotaryEmbedding(..., **extra_kwargs)`: what the dictionary holds is not
    read, so the registered class's __init__ is not judged against it."""
    core = {"vllm/model_executor/custom_op.py": CUSTOM_OP, "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/layers/fused_moe.py": FUSED_MOE,
            "vllm/model_executor/models/glm4_moe.py": MOE_MODEL.replace(
                "FusedMoE(num_experts=8, top_k=2, hidden_size=64, routed_scaling_factor=1.0)",
                "FusedMoE(num_experts=8, top_k=2, hidden_size=64, **config.extra)")}
    plugin = {"vllm_ascend/ops/__init__.py": "", "vllm_ascend/ops/fused_moe.py": PLUGIN_FUSED_MOE,
              "vllm_ascend/register.py": PLUGIN_REGISTER_DIRECT}
    report = gate(tmp_path, core, plugin, "0.10.2", loaded=("vllm_ascend.register",))
    assert not [f for f in of_kind(report, "override") if f.symbol.endswith("AscendFusedMoE.__init__")], \
        [f.message for f in report.findings]


def test_a_core_class_of_the_op_s_name_that_the_registry_does_not_swap_is_built_as_written(tmp_path):
    """(Tuned on the sixth set's false alarms, 2026-12-03: vLLM 0.28.0 defines a local
    `class RotaryEmbedding(nn.Module)` in an audio encoder and builds it there; only a class
    under CustomOp's `__new__` is swapped for the plugin's registered one.)"""
    local = """
    import torch


    class FusedMoE(torch.nn.Module):
        def __init__(self, width):
            super().__init__()


    class Encoder:
        def __init__(self, config):
            self.moe = FusedMoE(width=4)
    """
    core = {"vllm/model_executor/custom_op.py": CUSTOM_OP, "vllm/model_executor/layers/__init__.py": "",
            "vllm/model_executor/layers/fused_moe.py": FUSED_MOE,
            "vllm/model_executor/models/glm4_moe.py": MOE_MODEL.replace("routed_scaling_factor=1.0", "routed_scaling_fator=1.0"),
            "vllm/model_executor/models/encoder.py": local}
    plugin = {"vllm_ascend/ops/__init__.py": "", "vllm_ascend/ops/fused_moe.py": PLUGIN_FUSED_MOE,
              "vllm_ascend/register.py": PLUGIN_REGISTER_DIRECT}
    report = gate(tmp_path, core, plugin, "0.10.2", loaded=("vllm_ascend.register",))
    found = [f for f in of_kind(report, "override") if f.symbol.endswith("AscendFusedMoE.__init__")]
    assert found == [], [f.message for f in found]
    # the op itself, built with what the plugin's class lacks, still is one
    core["vllm/model_executor/models/glm4_moe.py"] = MOE_MODEL.replace("routed_scaling_factor=1.0", "width=4")
    core["vllm/model_executor/layers/fused_moe.py"] = FUSED_MOE.replace("routed_scaling_factor=1.0", "routed_scaling_factor=1.0, width=0")
    report = gate(tmp_path / "op", core, plugin, "0.10.2", loaded=("vllm_ascend.register",))
    found = [f for f in of_kind(report, "override") if f.symbol.endswith("AscendFusedMoE.__init__")]
    assert len(found) == 1 and found[0].core_path == "vllm/model_executor/models/glm4_moe.py", \
        [(f.core_path, f.message) for f in found]
