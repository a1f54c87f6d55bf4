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
