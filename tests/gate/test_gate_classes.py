"""Issue 27's miss and false-alarm classes of the hand engine, on synthetic trees.

The fake cores are cut from the shapes of the real releases (read in the release source
archives; only what matters is kept):
- `KVCacheTensor`/`KVCacheConfig` as in vLLM 0.29.0 `vllm/v1/kv_cache_interface.py`:
  `KVCacheTensor` dropped `shared_by` for `layers`, and `KVCacheConfig.kv_cache_tensors`
  is annotated `list[KVCacheTensor]`;
- `VllmConfig.speculative_config: SpeculativeConfig | None` as in `vllm/config/vllm.py`,
  with a `SpeculativeConfig` that has no `use_dspark()` (a core before it was added);
- `SchedulerOutput`, a core dataclass without `partial_tail_offloads`, that the plugin
  builds with keywords it adds only after probing `__dataclass_fields__`, `hasattr`,
  `inspect.signature` (as vllm-ascend 182b75ea84 `core/dyntra_lb_scheduler.py` does).
"""

from __future__ import annotations


import gatekit
import pytest

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/core/__init__.py": "",
        "vllm/config/__init__.py": "from vllm.config.vllm import VllmConfig\n"}

def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], loaded: tuple[str, ...]):
    return gatekit.gate_loaded(tmp_path, PKGS, core, plugin, loaded)


def errors(report):
    return [f for f in report.findings if f.severity == "error"]


# ----------------------------------------------------------------------------- miss: typed reads

KV_INTERFACE = """
    from dataclasses import dataclass


    @dataclass
    class KVCacheTensor:
        size: int
        layers: list[str]
        offset: int = 0


    @dataclass
    class KVCacheConfig:
        num_blocks: int
        kv_cache_tensors: list[KVCacheTensor]
"""

RUNNER_SHARED_BY = """
    from vllm.v1.kv_cache_interface import KVCacheConfig


    class NPUModelRunner:
        def initialize_kv_cache_tensors(self, kv_cache_config: KVCacheConfig):
            out = {}
            for kv_cache_tensor in kv_cache_config.kv_cache_tensors:
                for layer_name in kv_cache_tensor.shared_by:
                    out[layer_name] = kv_cache_tensor.size
            return out
"""


def test_a_read_of_a_field_core_dropped_is_found_through_the_annotations(tmp_path):
    core = {"vllm/v1/kv_cache_interface.py": KV_INTERFACE}
    plugin = {"vllm_ascend/runner.py": RUNNER_SHARED_BY}
    report = gate(tmp_path, core, plugin, ("vllm_ascend.runner",))
    found = [f for f in report.findings if f.symbol == "attribute:vllm.v1.kv_cache_interface.KVCacheTensor.shared_by"]
    assert [(f.severity, f.plugin_path, f.plugin_line) for f in found] == [("error", "vllm_ascend/runner.py", 8)]
    assert "kv_cache_config.kv_cache_tensors" in found[0].message
    # the fields core still has are no finding
    assert not [f for f in report.findings if f.symbol.endswith((".size", ".kv_cache_tensors", ".layers"))]


SPECS = """
    from dataclasses import dataclass


    @dataclass
    class KVCacheSpec:
        block_size: int


    @dataclass
    class AttentionSpec(KVCacheSpec):
        num_kv_heads: int


    @dataclass
    class UniformTypeKVCacheSpecs(KVCacheSpec):
        kv_cache_specs: dict
"""


def test_a_read_narrowed_by_an_isinstance_in_the_expression_is_read_as_that_class(tmp_path):
    """vllm-metax's FlashInfer builder: `kv_cache_spec: AttentionSpec`, then
    `kv_cache_spec.kv_cache_specs.values() if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs)
    else [kv_cache_spec]` (and the `and` form): the read runs only on the subclass that has
    the field. Outside the narrowed part the annotation still holds."""
    plugin = {"vllm_ascend/builder.py": """
        from vllm.v1.kv_cache_interface import AttentionSpec, UniformTypeKVCacheSpecs


        def support(kv_cache_spec: AttentionSpec):
            specs = (kv_cache_spec.kv_cache_specs.values()
                     if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs) else [kv_cache_spec])
            both = isinstance(kv_cache_spec, UniformTypeKVCacheSpecs) and kv_cache_spec.kv_cache_specs
            return specs, both, kv_cache_spec.gone
    """}
    report = gate(tmp_path, {"vllm/v1/kv_cache_interface.py": SPECS}, plugin, ("vllm_ascend.builder",))
    assert [(f.symbol, f.plugin_line) for f in errors(report)] == [
        ("attribute:vllm.v1.kv_cache_interface.AttentionSpec.gone", 8)]


VLLM_CONFIG = """
    from dataclasses import dataclass, field

    from vllm.config.speculative import SpeculativeConfig


    @dataclass
    class VllmConfig:
        speculative_config: SpeculativeConfig | None = None
        model_config: object = None
"""

SPECULATIVE = """
    from dataclasses import dataclass


    @dataclass
    class SpeculativeConfig:
        method: str | None = None
        num_speculative_tokens: int = 0

        def use_eagle(self) -> bool:
            return self.method == "eagle"
"""

PROPOSER = """
    from vllm.config import VllmConfig


    class AscendProposer:
        def __init__(self, vllm_config: VllmConfig, device):
            self.speculative_config = vllm_config.speculative_config
            self.dspark = vllm_config.speculative_config.use_dspark()

        def propose(self):
            if self.speculative_config.use_eagle():
                return self.speculative_config.num_speculative_tokens
            return self.speculative_config.use_dspark()
"""


def test_a_method_core_lacks_on_a_config_reached_through_vllm_config_fields(tmp_path):
    core = {"vllm/config/vllm.py": VLLM_CONFIG, "vllm/config/speculative.py": SPECULATIVE}
    plugin = {"vllm_ascend/proposer.py": PROPOSER}
    report = gate(tmp_path, core, plugin, ("vllm_ascend.proposer",))
    found = [f for f in report.findings if f.symbol == "attribute:vllm.config.speculative.SpeculativeConfig.use_dspark"]
    # through the parameter's annotation (line 7), and through `self.x = vllm_config.y` (line 12):
    # one finding per attribute and plugin file, naming both lines
    assert [(f.plugin_line, f.severity) for f in found] == [(7, "error")]
    assert "also at line(s) 12" in found[0].message
    assert not [f for f in report.findings if f.symbol.endswith((".use_eagle", ".num_speculative_tokens"))]


@pytest.mark.parametrize("elsewhere,found", [
    # the name lives on as another class's field and is read there: nothing sets it on this one
    ("@dataclass\nclass AuxConfig:\n    use_dspark: bool = False\n\n\ndef on(aux):\n    return aux.use_dspark\n", True),
    # core stores the name on some object, or names it as a string: it may be set on this one
    ("def on(cfg):\n    cfg.use_dspark = True\n", False),
    ("def on(cfg):\n    return getattr(cfg, 'use_dspark', None)\n", False),
    ("def on(cfg):\n    cfg.__dict__['use_dspark'] = 1\n", False),
    # a dictionary key of that name (a hash factor, keyword arguments for another class) sets nothing
    ("def on(aux):\n    return {'use_dspark': aux}\n", True),
])
def test_a_dropped_name_core_still_mentions_is_found_unless_core_may_set_it(tmp_path, elsewhere, found):
    """vLLM 0.32.0 moved `enable_return_routed_experts` from ModelConfig to AuxOutputConfig:
    core still mentions the name (a field and reads of the other class), yet nothing sets it
    on a ModelConfig, so tpu-inference's `model_config.enable_return_routed_experts` raises."""
    core = {"vllm/config/vllm.py": VLLM_CONFIG, "vllm/config/speculative.py": SPECULATIVE,
            "vllm/config/aux.py": "from dataclasses import dataclass\n\n\n" + elsewhere}
    # the plugin keeps the value on its own object under the same name: that sets nothing on core's
    plugin = {"vllm_ascend/proposer.py": PROPOSER.replace(
        "self.dspark = vllm_config.speculative_config.use_dspark()",
        "self.use_dspark = vllm_config.speculative_config.use_dspark()")}
    report = gate(tmp_path, core, plugin, ("vllm_ascend.proposer",))
    hits = [f for f in report.findings if f.symbol == "attribute:vllm.config.speculative.SpeculativeConfig.use_dspark"]
    assert bool(hits) == found, [f.message for f in hits]
    if found:
        assert "no core file sets the name" in hits[0].message


def test_a_read_through_a_protocol_typed_field_is_no_finding(tmp_path):
    """vLLM 0.8.5 types `VllmConfig.additional_config` as the Protocol `SupportsHash`; the
    object is the user's dict, so `additional_config.get(...)` is fine."""
    core = {"vllm/config/vllm.py": """
        from dataclasses import dataclass
        from typing import Protocol


        class SupportsHash(Protocol):
            def compute_hash(self) -> str:
                ...


        @dataclass
        class VllmConfig:
            additional_config: SupportsHash = None
    """}
    plugin = {"vllm_ascend/proposer.py": """
        from vllm.config import VllmConfig


        def read(vllm_config: VllmConfig):
            return vllm_config.additional_config.get("x")
    """}
    report = gate(tmp_path, core, plugin, ("vllm_ascend.proposer",))
    assert not [f for f in report.findings if f.symbol.endswith(".get")], [f.symbol for f in report.findings]


def test_a_class_that_sets_attributes_by_computed_name_keeps_the_mention_rule(tmp_path):
    dynamic = SPECULATIVE + """
        def update(self, **kw):
            for k, v in kw.items():
                setattr(self, k, v)
"""
    core = {"vllm/config/vllm.py": VLLM_CONFIG, "vllm/config/speculative.py": dynamic,
            "vllm/config/aux.py": "def on(aux):\n    return aux.use_dspark\n"}
    report = gate(tmp_path, core, {"vllm_ascend/proposer.py": PROPOSER}, ("vllm_ascend.proposer",))
    assert not [f for f in report.findings if f.symbol.endswith(".use_dspark")]


PLUGIN_SUBCLASS = """
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheTensor


    class AscendKVCacheTensor(KVCacheTensor):
        shared_by: list = None


    class NPUModelRunner:
        def initialize_kv_cache_tensors(self, kv_cache_config: KVCacheConfig):
            for kv_cache_tensor in kv_cache_config.kv_cache_tensors:
                print(kv_cache_tensor.shared_by)
"""


def test_no_typed_read_finding_where_the_plugin_s_own_subclass_has_the_name(tmp_path):
    core = {"vllm/v1/kv_cache_interface.py": KV_INTERFACE}
    report = gate(tmp_path, core, {"vllm_ascend/runner.py": PLUGIN_SUBCLASS}, ("vllm_ascend.runner",))
    assert not [f for f in report.findings if f.symbol.endswith(".shared_by")]


# ----------------------------------------------------------------------------- false alarms: guards

SCHED_OUTPUT = """
    from dataclasses import dataclass


    @dataclass
    class SchedulerOutput:
        scheduled: list
        num_spec_tokens_to_schedule: int = 0
"""

GUARDED = """
    import inspect

    from vllm.v1.core.sched_output import SchedulerOutput


    class Scheduler:
        @staticmethod
        def _supports(name: str) -> bool:
            return name in getattr(SchedulerOutput, "__dataclass_fields__", {})

        def schedule(self, tails, meta):
            kwargs = dict(scheduled=[], num_spec_tokens_to_schedule=1)
            if self._supports("partial_tail_offloads"):
                kwargs["partial_tail_offloads"] = tails
            if "ec_manager_metadata" in SchedulerOutput.__dataclass_fields__:
                kwargs.update(ec_manager_metadata=meta)
            return SchedulerOutput(**kwargs)

        def direct(self, tails):
            if "partial_tail_offloads" in inspect.signature(SchedulerOutput).parameters:
                return SchedulerOutput([], partial_tail_offloads=tails)
            return SchedulerOutput([])

        def read(self, out: SchedulerOutput):
            if not hasattr(out, "partial_tail_offloads"):
                return None
            return out.partial_tail_offloads
"""

UNGUARDED = """
    from vllm.v1.core.sched_output import SchedulerOutput


    class Scheduler:
        def schedule(self, tails):
            kwargs = dict(scheduled=[])
            kwargs["partial_tail_offloads"] = tails
            return SchedulerOutput(**kwargs)

        def read(self, out: SchedulerOutput):
            return out.partial_tail_offloads
"""


def test_keywords_and_reads_behind_a_probe_of_that_name_are_no_finding(tmp_path):
    core = {"vllm/v1/core/sched_output.py": SCHED_OUTPUT}
    guarded = gate(tmp_path / "g", core, {"vllm_ascend/sched.py": GUARDED}, ("vllm_ascend.sched",))
    assert [f.short() for f in guarded.findings if "partial_tail_offloads" in f.message
            or "ec_manager_metadata" in f.message] == []
    # the same keyword and read without the probe are breaks
    bare = gate(tmp_path / "b", core, {"vllm_ascend/sched.py": UNGUARDED}, ("vllm_ascend.sched",))
    assert sorted(f.symbol for f in errors(bare)) == [
        "attribute:vllm.v1.core.sched_output.SchedulerOutput.partial_tail_offloads",
        "constructor:vllm_ascend.sched:vllm.v1.core.sched_output.SchedulerOutput"]


# A core that made the field required (as vLLM 0.13.0's `PoolingMetadata.pooling_states`,
# 0.16.0's `BlockPool.hash_block_size`): the plugin adds it only where its probe finds it, through
# helpers of its own (as vllm-spyre's `compat_utils.has_argument`, an `inspect.signature` walk, and
# `dataclass_fields`), into a keyword dictionary it spreads, or in a branch of its own.
SCHED_OUTPUT_REQUIRED = """
    from dataclasses import dataclass


    @dataclass
    class SchedulerOutput:
        scheduled: list
        partial_tail_offloads: list
        num_spec_tokens_to_schedule: int = 0
"""

GUARDED_HELPERS = """
    import inspect
    from dataclasses import fields

    from vllm.v1.core.sched_output import SchedulerOutput


    def has_argument(func, name):
        return name in inspect.signature(func).parameters


    def dataclass_fields(cls):
        return [f.name for f in fields(cls)]


    class Scheduler:
        def schedule(self, tails):
            kwargs = {"scheduled": []}
            if has_argument(SchedulerOutput, "partial_tail_offloads"):
                kwargs["partial_tail_offloads"] = tails
            return SchedulerOutput(**kwargs)

        def listed(self, tails):
            kwargs = dict(scheduled=[])
            if "partial_tail_offloads" in dataclass_fields(SchedulerOutput):
                kwargs.update(partial_tail_offloads=tails)
            return SchedulerOutput(**kwargs)

        def branch(self, tails):
            if has_argument(SchedulerOutput, "partial_tail_offloads"):
                return SchedulerOutput([], partial_tail_offloads=tails)
            return SchedulerOutput([])
"""

UNGUARDED_REQUIRED = """
    from vllm.v1.core.sched_output import SchedulerOutput


    class Scheduler:
        def schedule(self, tails):
            kwargs = {"scheduled": []}
            if tails:
                kwargs["other"] = tails
            return SchedulerOutput(**kwargs)
"""


def test_a_required_keyword_the_plugin_passes_where_its_probe_finds_it_is_no_finding(tmp_path):
    core = {"vllm/v1/core/sched_output.py": SCHED_OUTPUT_REQUIRED}
    guarded = gate(tmp_path / "g", core, {"vllm_ascend/sched.py": GUARDED_HELPERS}, ("vllm_ascend.sched",))
    assert [f.short() for f in guarded.findings if "SchedulerOutput" in f.symbol] == []
    # without the probe the dictionary misses the required field: a break
    bare = gate(tmp_path / "b", core, {"vllm_ascend/sched.py": UNGUARDED_REQUIRED}, ("vllm_ascend.sched",))
    assert [(f.symbol, "'partial_tail_offloads'" in f.message) for f in errors(bare)] == [
        ("constructor:vllm_ascend.sched:vllm.v1.core.sched_output.SchedulerOutput", True)]


# vLLM 0.16.0 dropped the VLLM_TORCH_PROFILER_* variables from `vllm/envs.py` (served by its
# module `__getattr__` from `environment_variables`) for `vllm/profiler/wrapper.py`; vllm-spyre
# 1.9.1 keeps its legacy profiler for older cores in a private helper it calls only behind
# tests of core that are decided against a core with the wrapper.
ENVS = """
    import os

    environment_variables = {
        "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    }


    def __getattr__(name):
        if name in environment_variables:
            return environment_variables[name]()
        raise AttributeError(name)
"""

PROFILER_WRAPPER = """
    class TorchProfilerWrapper:
        def __init__(self, config):
            self.config = config
"""

LEGACY_PROFILER = """
    import importlib.util

    import vllm.envs as envs


    class Worker:
        def __init__(self):
            self.profiler = self._setup_profiler()

        def _setup_profiler(self):
            if importlib.util.find_spec("vllm.profiler.wrapper") is None:
                return self._setup_legacy_profiler()
            if getattr(envs, "VLLM_TORCH_PROFILER_DIR", None) is not None:
                return self._setup_legacy_profiler()
            return None

        def _setup_legacy_profiler(self):
            trace_dir = envs.VLLM_TORCH_PROFILER_DIR
            return trace_dir, envs.VLLM_TORCH_PROFILER_WITH_STACK
"""


def test_reads_inside_a_helper_called_only_in_branches_this_core_does_not_take_are_no_error(tmp_path):
    core = {"vllm/envs.py": ENVS, "vllm/profiler/__init__.py": "", "vllm/profiler/wrapper.py": PROFILER_WRAPPER}
    dead = gate(tmp_path / "d", core, {"vllm_ascend/worker.py": LEGACY_PROFILER}, ("vllm_ascend.worker",))
    profiler = [f for f in dead.findings if "VLLM_TORCH_PROFILER" in f.symbol]
    assert profiler and {f.severity for f in profiler} == {"warning"}, [f.short() for f in dead.findings]
    assert all("_setup_legacy_profiler, which the plugin calls only in branches" in f.reason for f in profiler)
    # one call this core does run (an option of the plugin's own) makes the helper live: errors
    live = LEGACY_PROFILER.replace("            return None\n", "            if self.profiler is None:\n"
                                   "                return self._setup_legacy_profiler()\n            return None\n", 1)
    assert live != LEGACY_PROFILER
    report = gate(tmp_path / "l", core, {"vllm_ascend/worker.py": live}, ("vllm_ascend.worker",))
    assert sorted(f.symbol for f in errors(report)) == ["attribute:vllm.envs.VLLM_TORCH_PROFILER_DIR",
                                                        "attribute:vllm.envs.VLLM_TORCH_PROFILER_WITH_STACK"]
    # and a core without the wrapper takes the first branch: errors too
    old = gate(tmp_path / "o", {"vllm/envs.py": ENVS}, {"vllm_ascend/worker.py": LEGACY_PROFILER},
               ("vllm_ascend.worker",))
    assert sorted(f.symbol for f in errors(old)) == ["attribute:vllm.envs.VLLM_TORCH_PROFILER_DIR",
                                                     "attribute:vllm.envs.VLLM_TORCH_PROFILER_WITH_STACK"]


# ----------------------------------------------------------------------------- false alarms: dead patches

SAMPLER = """
    def gather(x, k):
        return x
"""

DEAD_PATCH = """
    import vllm.v1.sampler as sampler_mod
    from vllm.v1.sampler import gather


    def compute_topk_logprobs_npu(x):
        top = gather(x, 1, 2)
        return sampler_mod.removed_helper(top)


    sampler_mod.compute_topk_logprobs = compute_topk_logprobs_npu
"""

LIVE_TOO = DEAD_PATCH + """

    def run(x):
        return compute_topk_logprobs_npu(x)
"""


def test_code_behind_a_patch_whose_target_is_gone_is_one_finding(tmp_path):
    core = {"vllm/v1/sampler.py": SAMPLER}
    report = gate(tmp_path / "d", core, {"vllm_ascend/patch_sampler.py": DEAD_PATCH}, ("vllm_ascend.patch_sampler",))
    assert [f.symbol for f in report.findings] == ["patch-target:vllm.v1.sampler.compute_topk_logprobs"]
    assert "2 finding(s) inside compute_topk_logprobs_npu" in report.findings[0].message
    assert "call:vllm.v1.sampler.gather" in report.findings[0].message
    # a function the plugin also calls elsewhere keeps its own findings
    live = gate(tmp_path / "l", core, {"vllm_ascend/patch_sampler.py": LIVE_TOO}, ("vllm_ascend.patch_sampler",))
    assert sorted(f.symbol for f in errors(live)) == ["attribute:vllm.v1.sampler.removed_helper",
                                                       "call:vllm.v1.sampler.gather"]


# ----------------------------------------------------------------------------- false alarms: reachability

WORKER_BASE = """
    class WorkerBase:
        def determine_available_memory(self):
            raise NotImplementedError
"""

GPU_RUNNER = """
    def _init_minimal_kv_cache_for_profiling(runner: "GPUModelRunner") -> None:
        runner.initialize_kv_cache(None, is_profiling=True)


    class GPUModelRunner:
        def initialize_kv_cache(self, kv_cache_config, is_profiling=False):
            pass

        def profile_cudagraph_memory(self):
            _init_minimal_kv_cache_for_profiling(self)
"""

GPU_WORKER = """
    from vllm.v1.worker.worker_base import WorkerBase


    class Worker(WorkerBase):
        def determine_available_memory(self):
            return self.model_runner.profile_cudagraph_memory()
"""

NPU = """
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    from vllm.v1.worker.worker_base import WorkerBase


    class NPUModelRunner(GPUModelRunner):
        def initialize_kv_cache(self, kv_cache_config):
            pass


    class NPUWorker(WorkerBase):
        def determine_available_memory(self):
            return 0
"""


def test_a_core_call_whose_only_callers_sit_in_another_platform_s_class_is_no_error(tmp_path):
    core = {"vllm/v1/worker/__init__.py": "", "vllm/v1/worker/worker_base.py": WORKER_BASE,
            "vllm/v1/worker/gpu_model_runner.py": GPU_RUNNER, "vllm/v1/worker/gpu_worker.py": GPU_WORKER}
    report = gate(tmp_path / "a", core, {"vllm_ascend/worker.py": NPU}, ("vllm_ascend.worker",))
    found = [f for f in report.findings if f.symbol.endswith("NPUModelRunner.initialize_kv_cache")]
    assert found and all(f.severity != "error" for f in found)
    # the same call reached from a core class the plugin does use stays an error
    live = NPU.replace("class NPUWorker(WorkerBase):", "class NPUWorker(WorkerBase):\n"
                       "        def load(self):\n            return self.model_runner.profile_cudagraph_memory()\n")
    report = gate(tmp_path / "b", core, {"vllm_ascend/worker.py": live}, ("vllm_ascend.worker",))
    assert [f.severity for f in report.findings if f.symbol.endswith("NPUModelRunner.initialize_kv_cache")] == ["error"]


CUDAGRAPH_UTILS = """
    def _init_minimal_kv_cache_for_profiling(runner: "GPUModelRunner") -> None:
        runner.initialize_kv_cache(None, is_profiling=True)


    def profile_cudagraph_memory(runner: "GPUModelRunner") -> int:
        _init_minimal_kv_cache_for_profiling(runner)
        return 0
"""

GPU_RUNNER_ALIASED = """
    from vllm.v1.worker.cudagraph_utils import (
        profile_cudagraph_memory as _profile_cudagraph_memory,
    )


    class GPUModelRunner:
        def initialize_kv_cache(self, kv_cache_config, is_profiling=False):
            pass

        def profile_cudagraph_memory(self):
            return _profile_cudagraph_memory(self)
"""


def test_a_caller_through_an_import_alias_is_followed_and_an_import_is_not_a_value(tmp_path):
    # as vLLM 0.29.0's v2 runner: the module function is imported under another name
    core = {"vllm/v1/worker/__init__.py": "", "vllm/v1/worker/worker_base.py": WORKER_BASE,
            "vllm/v1/worker/cudagraph_utils.py": CUDAGRAPH_UTILS,
            "vllm/v1/worker/gpu_model_runner.py": GPU_RUNNER_ALIASED, "vllm/v1/worker/gpu_worker.py": GPU_WORKER}
    report = gate(tmp_path / "a", core, {"vllm_ascend/worker.py": NPU}, ("vllm_ascend.worker",))
    found = [f for f in report.findings if f.symbol.endswith("NPUModelRunner.initialize_kv_cache")]
    assert found and all(f.severity != "error" for f in found)
    live = NPU.replace("class NPUWorker(WorkerBase):", "class NPUWorker(WorkerBase):\n"
                       "        def load(self):\n            return self.model_runner.profile_cudagraph_memory()\n")
    report = gate(tmp_path / "b", core, {"vllm_ascend/worker.py": live}, ("vllm_ascend.worker",))
    assert [f.severity for f in report.findings if f.symbol.endswith("NPUModelRunner.initialize_kv_cache")] == ["error"]
