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
