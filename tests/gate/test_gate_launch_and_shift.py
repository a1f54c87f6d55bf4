"""Three more miss classes of the hand engine (issue 27), on synthetic trees written here
(never copied upstream code; shapes cut from the vLLM releases named):

- a Triton launch `kernel[grid](...)` of a core kernel that leaves out a required
  parameter (0.26.0's `_compute_slot_mapping_kernel` gained the constexprs
  `KV_CACHE_BLOCK_SIZE` and `BLOCKS_PER_KV_BLOCK`), unless a decorator fills it;
- a positional argument named like a later parameter of core's signature: core inserted
  a parameter before it (0.26.0's `resolve_cudagraph_mode_and_sizes` gained
  `use_v2_model_runner` fourth), reached through `self.compilation_config`, which only
  core's base `__init__` assigns;
- a module-level read of a core class attribute the class lacks when its only unreadable
  base is torch's `nn.Module` (0.23.0's `DFlashQwen3Model` has no `_init`).
"""

from __future__ import annotations

from hypothesis import given, strategies as st

from overlay.gate.shifts import shifted_positions
from overlay.gate.signature import CallShape, Param, Signature

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "",
        "vllm/config/__init__.py": "", "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/models/__init__.py": "",
        "vllm/triton_utils.py": "import triton\nimport triton.language as tl\n"}


def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], loaded: tuple[str, ...]):
    return gatekit.gate_loaded(tmp_path, PKGS, core, plugin, loaded)


by_symbol = gatekit.by_symbol

# ----------------------------------------------------------------------------- (C) kernel launches

KERNEL = """
    from vllm.triton_utils import tl, triton


    {decorators}
    def _compute_slot_mapping_kernel(
        num_tokens,
        max_num_tokens,
        slot_mapping_ptr,
        KV_CACHE_BLOCK_SIZE: tl.constexpr,
        BLOCKS_PER_KV_BLOCK: tl.constexpr,
        PAD_ID: tl.constexpr,
        BLOCK_SIZE: tl.constexpr = 1024,
    ):
        pass
"""

JIT = '@triton.jit(do_not_specialize=["num_tokens", "max_num_tokens"])'

PLUGIN_LAUNCH = """
    from vllm.v1.worker.block_table import _compute_slot_mapping_kernel


    class BlockTable:
        def compute_slot_mapping(self, num_reqs, num_tokens, positions):
            _compute_slot_mapping_kernel[(num_reqs + 1,)](
                num_tokens,
                self.max_num_batched_tokens,
                self.slot_mapping,
                PAD_ID=-1,
                num_warps=4,
            )
"""

KERNEL_SYMBOL = "call:vllm.v1.worker.block_table._compute_slot_mapping_kernel"


def launch_report(tmp_path, decorators: str):
    core = {"vllm/v1/worker/block_table.py": KERNEL.replace("{decorators}", decorators)}
    return gate(tmp_path, core, {"vllm_ascend/block_table.py": PLUGIN_LAUNCH}, ("vllm_ascend.block_table",))


def test_launch_that_leaves_out_required_constexprs_is_an_error(tmp_path):
    (f,) = by_symbol(launch_report(tmp_path, JIT), KERNEL_SYMBOL)
    assert f.severity == "error"
    assert "missing required argument(s) 'KV_CACHE_BLOCK_SIZE', 'BLOCKS_PER_KV_BLOCK'" in f.message
    assert "BLOCK_SIZE'" not in f.message.split("missing required")[1].replace("KV_CACHE_BLOCK_SIZE'", "")
    assert "num_warps" not in f.message  # a launcher option, not a kernel parameter
    assert f.plugin_line == 6 and f.core_path == "vllm/v1/worker/block_table.py"


def test_parameters_a_decorator_fills_are_not_missing(tmp_path):
    heuristics = ("@triton.heuristics({'KV_CACHE_BLOCK_SIZE': lambda a: 16, 'BLOCKS_PER_KV_BLOCK': lambda a: 1})"
                  "\n    " + JIT)
    assert by_symbol(launch_report(tmp_path / "h", heuristics), KERNEL_SYMBOL) == []
    autotune = ("@triton.autotune(configs=[triton.Config({'KV_CACHE_BLOCK_SIZE': b, 'BLOCKS_PER_KV_BLOCK': 1},"
                " num_warps=w) for b in (16, 32) for w in (4, 8)], key=['num_tokens'])\n    " + JIT)
    assert by_symbol(launch_report(tmp_path / "a", autotune), KERNEL_SYMBOL) == []
    # only some of them filled: the other one is still missing
    partial = "@triton.heuristics({'KV_CACHE_BLOCK_SIZE': lambda a: 16})\n    " + JIT
    (f,) = by_symbol(launch_report(tmp_path / "p", partial), KERNEL_SYMBOL)
    assert "missing required argument(s) 'BLOCKS_PER_KV_BLOCK'" in f.message


def test_a_decorator_the_gate_cannot_read_leaves_missing_parameters_unjudged(tmp_path):
    built_elsewhere = "@triton.autotune(configs=CONFIGS, key=['num_tokens'])\n    " + JIT
    assert by_symbol(launch_report(tmp_path / "a", built_elsewhere), KERNEL_SYMBOL) == []
    mapping = "@triton.heuristics(HEURISTICS)\n    " + JIT
    assert by_symbol(launch_report(tmp_path / "h", mapping), KERNEL_SYMBOL) == []
    wrapped = "@libentry()\n    " + JIT
    assert by_symbol(launch_report(tmp_path / "w", wrapped), KERNEL_SYMBOL) == []


# ----------------------------------------------------------------------------- (F) positional shift

COMPILATION = """
    class CompilationConfig:
        def resolve_cudagraph_mode_and_sizes(
            self,
            min_cg_support,
            min_cg_attn_backend,
            uniform_decode_query_len=1,
            use_v2_model_runner=False,
            tensor_parallel_size=1,
            kv_cache_config=None,
            max_num_reqs=None,
            is_profiling=False,
        ):
            return None
"""

VLLM_CONFIG = """
    from dataclasses import dataclass

    from vllm.config.compilation import CompilationConfig


    @dataclass
    class VllmConfig:
        compilation_config: CompilationConfig
"""

GPU_RUNNER = """
    from vllm.config.vllm import VllmConfig


    class GPUModelRunner:
        def __init__(self, vllm_config: VllmConfig, device):
            self.compilation_config = vllm_config.compilation_config
"""

PLUGIN_RUNNER = """
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner


    class NPUModelRunner(GPUModelRunner):
        def __init__(self, vllm_config, device):
            super().__init__(vllm_config, device)

        def initialize_cudagraph(self, min_cg_support, min_cg_attn_backend):
            return self.compilation_config.resolve_cudagraph_mode_and_sizes(
                min_cg_support,
                min_cg_attn_backend,
                {args}
            )
"""

SHIFT_CORE = {"vllm/config/compilation.py": COMPILATION, "vllm/config/vllm.py": VLLM_CONFIG,
              "vllm/v1/worker/gpu_model_runner.py": GPU_RUNNER}
SHIFT_SYMBOL = "call:vllm.config.compilation.CompilationConfig.resolve_cudagraph_mode_and_sizes"
SHIFTED = ("self.uniform_decode_query_len, self.parallel_config.tensor_parallel_size, self.kv_cache_config, "
           "self.max_num_reqs,")


def shift_report(tmp_path, args: str, core: dict[str, str] = SHIFT_CORE):
    return gate(tmp_path, core, {"vllm_ascend/runner.py": PLUGIN_RUNNER.replace("{args}", args)},
                ("vllm_ascend.runner",))


def test_positions_shifted_by_an_inserted_parameter_through_an_inherited_receiver(tmp_path):
    (f,) = by_symbol(shift_report(tmp_path, SHIFTED), SHIFT_SYMBOL)
    assert f.severity == "error"
    assert "'use_v2_model_runner'" in f.message and "'tensor_parallel_size'" in f.message
    assert "'kv_cache_config', 'max_num_reqs'" in f.message
    assert "GPUModelRunner" in f.message  # how the receiver was typed
    # the same call by keyword, or with the parameter it skips passed, is fine
    fixed = ("uniform_decode_query_len=self.uniform_decode_query_len, "
             "tensor_parallel_size=self.parallel_config.tensor_parallel_size, kv_cache_config=self.kv_cache_config, "
             "max_num_reqs=self.max_num_reqs,")
    assert by_symbol(shift_report(tmp_path / "k", fixed), SHIFT_SYMBOL) == []
    passed = ("self.uniform_decode_query_len, False, self.parallel_config.tensor_parallel_size, "
              "self.kv_cache_config, self.max_num_reqs,")
    assert by_symbol(shift_report(tmp_path / "p", passed), SHIFT_SYMBOL) == []


def test_names_out_of_core_order_or_a_plugin_override_are_no_shift(tmp_path):
    swapped = "self.uniform_decode_query_len, self.max_num_reqs, self.kv_cache_config,"
    assert by_symbol(shift_report(tmp_path / "s", swapped), SHIFT_SYMBOL) == []
    # a plugin subclass of the config class defines the method: the object may be that one
    core = {**SHIFT_CORE}
    report = gate(tmp_path / "o", core, {
        "vllm_ascend/runner.py": PLUGIN_RUNNER.replace("{args}", SHIFTED),
        "vllm_ascend/config.py": """
            from vllm.config.compilation import CompilationConfig


            class AscendCompilationConfig(CompilationConfig):
                def resolve_cudagraph_mode_and_sizes(self, *args, **kwargs):
                    return None
        """}, ("vllm_ascend.runner",))
    assert by_symbol(report, SHIFT_SYMBOL) == []
    # a core base that assigns the attribute from something untyped leaves the receiver open
    untyped = {**SHIFT_CORE, "vllm/v1/worker/gpu_model_runner.py": GPU_RUNNER.replace(
        "vllm_config.compilation_config", "make_config()")}
    assert by_symbol(shift_report(tmp_path / "u", SHIFTED, untyped), SHIFT_SYMBOL) == []


NAMES = st.lists(st.from_regex(r"[a-z]{1,6}_[a-z]{1,6}", fullmatch=True), min_size=2, max_size=8, unique=True)


def _sig(names: list[str]) -> Signature:
    return Signature(name="f", line=1, posonly=(), args=tuple(Param(n, False) for n in names), vararg=None,
                     kwonly=(), kwarg=None)


def _shape(names: list[str | None]) -> CallShape:
    return CallShape(line=1, npos=len(names), keywords=(), star=False, dstar=False, pos_names=tuple(names))


@given(NAMES, st.data())
def test_a_call_named_as_core_declares_is_no_shift_and_an_insertion_before_named_arguments_is(names, data):
    n = data.draw(st.integers(1, len(names)), label="positions passed")
    passed = names[:n]
    assert shifted_positions(_sig(names), _shape(passed)) == []
    k = data.draw(st.integers(0, n - 1), label="where core inserts")
    new = names[:k] + ["inserted_param"] + names[k:]
    (problem,) = shifted_positions(_sig(new), _shape(passed))
    assert "'inserted_param'" in problem and f"'{names[k]}'" in problem
    # an argument that is no parameter's name, where core inserted, says nothing
    assert shifted_positions(_sig(new), _shape(passed[:k] + [None] * (n - k))) == []


# ----------------------------------------------------------------------------- (E) nn.Module bases

DFLASH_MODEL = """
    import torch
    from torch import nn


    class DFlashQwen3Model(nn.Module):
        def __init__(self, *, vllm_config, prefix=""):
            super().__init__()
            self.layers = []
"""

PLUGIN_DSPARK = """
    from vllm.model_executor.models.qwen3_dflash import DFlashQwen3Model

    ori_init = DFlashQwen3Model.{attr}


    def new_init(self, *args, **kwargs):
        ori_init(self, *args, **kwargs)


    DFlashQwen3Model.{attr} = new_init
"""


def dspark_report(tmp_path, attr: str, extra: dict[str, str] | None = None):
    core = {"vllm/model_executor/models/qwen3_dflash.py": DFLASH_MODEL, **(extra or {})}
    return gate(tmp_path, core, {"vllm_ascend/patch_dspark.py": PLUGIN_DSPARK.replace("{attr}", attr)},
                ("vllm_ascend.patch_dspark",))


def test_import_time_read_of_a_name_a_torch_module_class_lacks_is_an_error(tmp_path):
    symbol = "attribute:vllm.model_executor.models.qwen3_dflash.DFlashQwen3Model._init"
    (f,) = by_symbol(dspark_report(tmp_path, "_init"), symbol)
    assert f.severity == "error" and f.plugin_line == 3
    assert "no attribute '_init'" in f.message


def test_names_torch_s_module_defines_or_core_mentions_stay_unjudged(tmp_path):
    for attr in ("load_state_dict", "_load_from_state_dict", "__init__"):
        assert [f for f in dspark_report(tmp_path / attr, attr).findings if f.kind == "attribute"] == []
    # a core file that mentions the name: it may be set at run time
    mentioned = {"vllm/model_executor/models/setup.py": "def build(m):\n    m._init = None\n"}
    assert [f for f in dspark_report(tmp_path / "m", "_init", mentioned).findings if f.kind == "attribute"] == []
