"""Issue 10: a gate maintainers trust. Reachability decides severity, recall of
constructor calls and import-time attribute reads, one finding per missing module,
messages that name what changed. Synthetic trees shaped like the real cases
(vllm-ascend 15818534ec / fe7bfc4746 / 801a6b41 against vLLM 0.24.0 / 0.25.0, read from
the release sources and the plugin history; no upstream code is copied)."""

from __future__ import annotations

import json

import gatekit

from overlay.gate import run_gate

SETUP = """
    from setuptools import setup

    setup(name="vllm_ascend",
          entry_points={"vllm.platform_plugins": ["ascend = vllm_ascend:register"]})
"""


def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], version: str | None = "0.25.0"):
    files = {"vllm/__init__.py": ""}
    if version:
        files["vllm/_version.py"] = f"__version__ = version = '{version}'\n"
    c = gatekit.tree(tmp_path / "core", {**files, **core})
    p = gatekit.tree(tmp_path / "plugin", {"vllm_ascend/__init__.py": "", **plugin})
    return run_gate(c, p)


def only(report):
    return [(f.severity, f.kind, f.symbol) for f in report.findings]


# ----------------------------------------------------------------------------- reachability

SAMPLER_CORE = {
    "vllm/sample.py": """
        def apply_sampling_constraints(logits, cu_num_draft_tokens, sampling_metadata):
            return logits


        class RejectionSampler:
            def forward(self, logits, cu, meta):
                return apply_sampling_constraints(logits, cu, meta)
    """,
}


def test_core_call_site_in_a_method_the_plugin_overrides_does_not_count(tmp_path):
    plugin = {"vllm_ascend/patch.py": """
        import vllm.sample as rs
        from vllm.sample import RejectionSampler


        def apply_sampling_constraints(logits, cu_num_draft_tokens, sampling_metadata, top_k):
            return logits


        rs.apply_sampling_constraints = apply_sampling_constraints


        class AscendRejectionSampler(RejectionSampler):
            def forward(self, logits, cu, meta):
                return apply_sampling_constraints(logits, cu, meta, None)
    """}
    assert only(gate(tmp_path, SAMPLER_CORE, plugin)) == []
    # negative twin: without the overriding subclass core's forward runs the replacement
    plugin["vllm_ascend/patch.py"] = plugin["vllm_ascend/patch.py"].split("class AscendRejectionSampler")[0]
    (f,) = gate(tmp_path / "b", SAMPLER_CORE, plugin).findings
    assert (f.severity, f.kind) == ("error", "replacement")
    assert "missing required argument(s) 'top_k'" in f.message and "RejectionSampler.forward" in f.reason


def test_core_callers_all_in_overridden_code_make_a_self_call_unreachable(tmp_path):
    core = {"vllm/parser.py": """
        class V32Parser:
            @staticmethod
            def _repair(param_dict, config):
                return param_dict

            def _convert(self, d, config):
                return self._repair(d, config)

            def extract(self, text):
                return self._convert({}, {})


        class V4Parser(V32Parser):
            pass


        def serve(parser: V4Parser):
            return parser.extract("text")
    """}
    plugin = {"vllm_ascend/p.py": """
        from vllm.parser import V4Parser


        def _repair(param_dict, config):
            return param_dict


        def extract(self, text):
            return _repair({}, {})


        V4Parser._repair = _repair
        V4Parser.extract = extract
    """}
    assert only(gate(tmp_path, core, plugin)) == []
    # negative twin: the plugin keeps core's extract(), which calls _convert -> self._repair
    plugin["vllm_ascend/p.py"] = plugin["vllm_ascend/p.py"].replace("V4Parser.extract = extract\n", "")
    (f,) = gate(tmp_path / "b", core, plugin).findings
    assert f.severity == "error" and "takes 1 positional argument(s) but the call passes 2" in f.message


def test_no_visible_core_caller_is_a_warning_and_does_not_fail(tmp_path, run):
    core = {"vllm/punica.py": """
        class PunicaWrapperBase:
            def add_lora_fused_moe(self, y, x, lora_a, lora_b, topk_weights):
                raise NotImplementedError
    """}
    plugin = {"vllm_ascend/punica.py": """
        from vllm.punica import PunicaWrapperBase


        class PunicaWrapperNPU(PunicaWrapperBase):
            def add_lora_fused_moe(self, y, x, lora_a, lora_b):
                pass
    """}
    report = gate(tmp_path / "interface", core, plugin)
    (f,) = report.findings
    assert f.severity == "info" and report.ok and "NotImplementedError" in f.reason
    core["vllm/punica.py"] = core["vllm/punica.py"].replace("raise NotImplementedError", "return y")
    report = gate(tmp_path, core, plugin)
    (f,) = report.findings
    assert f.severity == "warning" and report.ok
    assert "no core call site is visible" in f.reason
    code, out, _ = run("gate", "--core", tmp_path / "core", "--plugin", tmp_path / "plugin")
    assert code == 0 and out.splitlines()[2].startswith("warning: vllm_ascend/punica.py:5:")
    code, _, _ = run("gate", "--core", tmp_path / "core", "--plugin", tmp_path / "plugin", "--fail-on", "warning")
    assert code == 1


SCHED_CORE = {
    "vllm/sched.py": """
        class SchedulerInterface:
            def schedule(self, throttle_prefills=False):
                raise NotImplementedError


        class Scheduler(SchedulerInterface):
            def schedule(self, throttle_prefills=False):
                return 1
    """,
    "vllm/engine.py": """
        from vllm.sched import SchedulerInterface


        class EngineCore:
            def __init__(self, cls):
                self.scheduler: SchedulerInterface = cls()

            def step(self):
                return self.scheduler.schedule(self._throttle())

            def _throttle(self):
                return False
    """,
}


def test_a_call_through_a_typed_receiver_is_a_visible_caller(tmp_path):
    plugin = {"vllm_ascend/sched.py": """
        from vllm.sched import Scheduler


        class RecomputeScheduler(Scheduler):
            def schedule(self):
                return 2
    """}
    (f,) = gate(tmp_path, SCHED_CORE, plugin).findings
    assert f.severity == "error" and f.core_path == "vllm/engine.py"
    assert "self.scheduler.schedule(...)" in f.reason and "EngineCore.step" in f.reason
    assert "lacks core parameter(s) 'throttle_prefills'" in f.summary
    # negative twin: the receiver's type is not stated and another core class could
    # answer the call by its name: a warning at most
    core = dict(SCHED_CORE)
    core["vllm/engine.py"] = core["vllm/engine.py"].replace("self.scheduler: SchedulerInterface = cls()",
                                                            "self.scheduler = cls()")
    core["vllm/timer.py"] = """
        class Timer:
            def schedule(self, delay):
                return delay
    """
    assert [f.severity for f in gate(tmp_path / "b", core, plugin).findings] == ["warning"]


def test_an_untyped_receiver_is_matched_by_a_name_only_the_hierarchy_answers(tmp_path):
    """vLLM 0.21.0's ModelConfig takes each registered quantization class from a registry
    and calls `method.override_quantization_method(cfg, user, hf_config=...)`: nothing types
    `method`, but only QuantizationConfig's hierarchy defines that name, so the call is a
    visible caller of the plugin's override (vllm-gaudi, vllm-metax)."""
    core = {
        "vllm/quant.py": """
            class QuantizationConfig:
                @classmethod
                def override_quantization_method(cls, hf_quant_cfg, user_quant, hf_config=None):
                    return None


            class AWQConfig(QuantizationConfig):
                @classmethod
                def override_quantization_method(cls, hf_quant_cfg, user_quant, hf_config=None):
                    return "awq"


            _REGISTRY = {"awq": AWQConfig}


            def get_quantization_config(name):
                return _REGISTRY[name]


            def register(name, cls):
                _REGISTRY[name] = cls
        """,
        "vllm/config.py": """
            from vllm import quant


            class ModelConfig:
                def __init__(self, hf_config):
                    self.hf_config = hf_config
                    self._verify_quantization()

                def _verify_quantization(self):
                    for name in list(quant._REGISTRY):
                        method = quant.get_quantization_config(name)
                        found = method.override_quantization_method({}, None, hf_config=self.hf_config)
                        if found:
                            return found
        """,
    }
    plugin = {
        "setup.py": SETUP,
        "vllm_ascend/__init__.py": """
            def register():
                from vllm_ascend import quant
                return "vllm_ascend.platform.NPUPlatform"
        """,
        "vllm_ascend/platform.py": "class NPUPlatform:\n    pass\n",
        "vllm_ascend/quant.py": """
            from vllm.quant import QuantizationConfig, register


            class NPUQuantConfig(QuantizationConfig):
                @classmethod
                def override_quantization_method(cls, hf_quant_cfg, user_quant):
                    return None


            register("npu", NPUQuantConfig)
        """,
    }
    (f,) = gate(tmp_path, core, plugin).findings
    assert f.severity == "error" and f.core_path == "vllm/config.py", f
    assert "method.override_quantization_method(...)" in f.reason and "ModelConfig._verify_quantization" in f.reason
    assert "unexpected keyword argument 'hf_config'" in f.message
    # a class outside the hierarchy with the name but a signature the call does not fit
    # (no hf_config) does not make the call ambiguous
    refuses = dict(core, **{"vllm/other.py": """
        class Loader:
            def override_quantization_method(self, cfg):
                return cfg
    """})
    assert [f.severity for f in gate(tmp_path / "b", refuses, plugin).findings] == ["error"]
    # negative twins: another class could answer this call, or binds the name without a
    # def, or a module function of that name exists: no visible caller (a warning)
    for i, other in enumerate((
            "class Loader:\n    def override_quantization_method(self, cfg, user, **kw):\n        return cfg\n",
            "class Loader:\n    override_quantization_method = staticmethod(print)\n",
            "def override_quantization_method(cfg, user, hf_config=None):\n    return cfg\n")):
        twin = dict(core, **{"vllm/other.py": other})
        (f,) = gate(tmp_path / f"t{i}", twin, plugin).findings
        assert f.severity == "warning" and "no core call site is visible" in f.reason, (i, f)
    # a core file the gate cannot parse that names the method may define it for another
    # class: the call is not proven to be the hierarchy's (fail closed)
    unreadable = dict(core, **{"vllm/other.py": "class Loader:\n    def override_quantization_method(self, cfg\n"})
    (f,) = gate(tmp_path / "u", unreadable, plugin).findings
    assert f.severity == "warning" and "no core call site is visible" in f.reason, f
    # nor is a call through a class by its name one on the plugin's subclass: core's
    # `AWQConfig.override_quantization_method(...)` runs AWQConfig's own method
    by_class = dict(core, **{"vllm/config.py": core["vllm/config.py"].replace(
        "method.override_quantization_method", "quant.AWQConfig.override_quantization_method")})
    (f,) = gate(tmp_path / "c", by_class, plugin).findings
    assert f.severity == "warning" and "no core call site is visible" in f.reason, f


def test_isinstance_narrowing_keeps_a_call_from_other_classes(tmp_path):
    core = {"vllm/prop.py": """
        class BaseProposer:
            def propose(self, a, b):
                return self.first_pass(a, b)

            def first_pass(self, a, b):
                return a
    """}
    plugin = {
        "vllm_ascend/prop.py": """
            from vllm.prop import BaseProposer


            class NgramProposer(BaseProposer):
                pass


            class DflashProposer(BaseProposer):
                def first_pass(self, a):
                    return a
        """,
        "vllm_ascend/runner.py": """
            from vllm_ascend.prop import DflashProposer, NgramProposer


            class Runner:
                def __init__(self):
                    self.drafter: NgramProposer = NgramProposer()

                def step(self):
                    if isinstance(self.drafter, NgramProposer):
                        return self.drafter.propose(1, 2)
        """,
    }
    assert only(gate(tmp_path, core, plugin)) == []
    plugin["vllm_ascend/runner.py"] = plugin["vllm_ascend/runner.py"].replace(
        "isinstance(self.drafter, NgramProposer)", "isinstance(self.drafter, DflashProposer)")
    assert [f.severity for f in gate(tmp_path / "b", core, plugin).findings] == ["error"]


def test_plugin_methods_that_only_raise_are_skipped(tmp_path):
    core = {"vllm/mla.py": """
        class MLAImpl:
            def forward_mha(self, q, kv, k_pe, cache, meta, k_scale, output, output_scale=None):
                raise NotImplementedError

            def forward(self, *a):
                return self.forward_mha(*a)
    """}
    plugin = {"vllm_ascend/sfa.py": """
        from vllm.mla import MLAImpl


        class SFAImpl(MLAImpl):
            def forward_mha(self, q, kv, k_pe, cache, meta, k_scale, output):
                raise NotImplementedError("SFA does not use forward_mha. Use forward() instead.")
    """}
    assert only(gate(tmp_path, core, plugin)) == []
    plugin["vllm_ascend/sfa.py"] = plugin["vllm_ascend/sfa.py"].replace(
        'raise NotImplementedError("SFA does not use forward_mha. Use forward() instead.")', "return q")
    assert [f.kind for f in gate(tmp_path / "b", core, plugin).findings] == ["override"]


def test_module_level_version_flags_are_followed(tmp_path):
    core = {"vllm/v2.py": "class Runner:\n    pass\n"}
    plugin = {
        "vllm_ascend/utils.py": """
            def vllm_version_is(v):
                return False
        """,
        "vllm_ascend/flags.py": """
            from vllm_ascend.utils import vllm_version_is

            V2_SUPPORTED = not vllm_version_is("0.24.0")
        """,
        "vllm_ascend/worker.py": """
            from vllm_ascend.utils import vllm_version_is
            from vllm_ascend.flags import V2_SUPPORTED

            from vllm.v2 import Runner

            _LOCAL = not vllm_version_is("0.24.0")

            if _LOCAL:
                from vllm.v2 import NewRunner
            if V2_SUPPORTED:
                from vllm.v2 import OtherRunner
        """,
    }
    assert only(gate(tmp_path, core, plugin, version="0.24.0")) == []
    names = sorted(f.symbol for f in gate(tmp_path / "b", core, plugin, version="0.25.0").findings)
    assert names == ["import:vllm.v2:NewRunner", "import:vllm.v2:OtherRunner"]


def test_an_instance_flag_core_turns_off_is_followed(tmp_path):
    core = {"vllm/v2.py": "class Runner:\n    pass\n"}
    plugin = {
        "vllm_ascend/utils.py": "def vllm_version_is(v):\n    return False\n",
        "vllm_ascend/worker.py": """
            from vllm_ascend.utils import vllm_version_is


            from vllm.v2 import Runner


            class NPUWorker:
                def __init__(self, config):
                    self.use_v2 = config.use_v2
                    if self.use_v2 and vllm_version_is("0.24.0"):
                        print("falling back")
                        self.use_v2 = False

                def init_device(self):
                    if self.use_v2:
                        from vllm.v2 import Missing
        """,
    }
    assert only(gate(tmp_path, core, plugin, version="0.24.0")) == []
    assert [f.symbol for f in gate(tmp_path / "b", core, plugin, version="0.25.0").findings] == [
        "import:vllm.v2:Missing"]


def _platform_plugin(platform: str, **modules: str) -> dict[str, str]:
    """A plugin whose platform entry point returns vllm_ascend.platform.NPUPlatform (the
    module `platform`), a worker module that imports a name core lacks, and `modules`."""
    return {
        "setup.py": SETUP,
        "vllm_ascend/__init__.py": """
            def register():
                return "vllm_ascend.platform.NPUPlatform"
        """,
        "vllm_ascend/platform.py": platform,
        "vllm_ascend/worker.py": "from vllm.kv import Gone\n",
        **modules,
    }


def test_start_up_chain_decides_error_or_warning_and_is_the_reason(tmp_path):
    core = {"vllm/kv.py": "X = 1\n"}
    plugin = _platform_plugin("""
            class NPUPlatform:
                worker_cls = "vllm_ascend.worker.NPUWorker"
        """, **{"vllm_ascend/kv_offload/__init__.py": "",
                "vllm_ascend/kv_offload/npu.py": "from vllm.kv.mediums import A, B\n"})
    report = gate(tmp_path, core, plugin)
    by_path = {f.plugin_path: f for f in report.findings}
    err = by_path["vllm_ascend/worker.py"]
    assert err.severity == "error"
    assert "vllm_ascend:register -> vllm_ascend -> vllm_ascend.platform -> vllm_ascend.worker" in err.reason
    warn = by_path["vllm_ascend/kv_offload/npu.py"]
    assert warn.severity == "warning" and "opt-in" in warn.reason


def test_a_worker_named_by_an_f_string_with_a_conditional_part_is_on_the_start_up_chain(tmp_path):
    """vllm-spyre 0.4.1 names its worker for core to build with
    f'vllm_spyre{".v1" if envs.VLLM_USE_V1 else ""}.worker.spyre_worker.SpyreWorker': each
    string the parts can make names a module start-up loads (both, the switch is not core's)."""
    core = {"vllm/kv.py": "X = 1\n"}
    plugin = _platform_plugin("""
            import os


            class NPUPlatform:
                @classmethod
                def check_and_update_config(cls, config):
                    v1 = os.environ.get("V1") == "1"
                    config.worker_cls = f'vllm_ascend{".v1" if v1 else ""}.worker.NPUWorker'
        """, **{
        "vllm_ascend/v1/__init__.py": "",
        "vllm_ascend/v1/worker.py": "from vllm.kv import AlsoGone\n",
        "vllm_ascend/other.py": "from vllm.kv import Elsewhere\n"})
    by_path = {f.plugin_path: f for f in gate(tmp_path, core, plugin).findings}
    assert by_path["vllm_ascend/worker.py"].severity == "error", by_path["vllm_ascend/worker.py"].reason
    assert by_path["vllm_ascend/v1/worker.py"].severity == "error", by_path["vllm_ascend/v1/worker.py"].reason
    assert by_path["vllm_ascend/other.py"].severity == "warning"  # nothing names it


def test_plugin_modules_core_imports_itself_are_on_the_start_up_chain(tmp_path):
    """tpu-inference declares no platform entry point: vLLM's own vllm/platforms/tpu.py binds
    `TpuPlatform` from `tpu_inference.platforms`, and usage_lib imports `tpu_info` from the
    package. What those name is loaded at start-up; a module nothing names stays opt-in."""
    core = {"vllm/kv.py": "X = 1\n",
            "vllm/platforms/__init__.py": "",
            "vllm/platforms/tpu.py": """
                try:
                    from vllm_ascend.platforms import NPUPlatform as Inner
                    TpuPlatform = Inner
                except ImportError:
                    pass
            """,
            "vllm/usage.py": """
                def report():
                    from vllm_ascend import tpu_info
            """}
    plugin = {
        "setup.py": SETUP.replace('"vllm.platform_plugins": ["ascend = vllm_ascend:register"]',
                                  '"vllm.general_plugins": ["layers = vllm_ascend.layers:register"]'),
        "vllm_ascend/layers.py": "def register():\n    pass\n",
        "vllm_ascend/platforms/__init__.py": "from vllm_ascend.platforms.npu import NPUPlatform\n",
        "vllm_ascend/platforms/npu.py": """
            class NPUPlatform:
                worker_cls = "vllm_ascend.worker.NPUWorker"
        """,
        "vllm_ascend/worker.py": "from vllm.kv import Gone\n",
        "vllm_ascend/tpu_info.py": "from vllm.kv import AlsoGone\n",
        "vllm_ascend/other.py": "from vllm.kv import Elsewhere\n",
    }
    by_path = {f.plugin_path: f for f in gate(tmp_path, core, plugin).findings}
    worker = by_path["vllm_ascend/worker.py"]
    assert worker.severity == "error", worker.reason
    assert "core's vllm.platforms.tpu imports vllm_ascend.platforms" in worker.reason
    assert by_path["vllm_ascend/tpu_info.py"].severity == "error", by_path["vllm_ascend/tpu_info.py"].reason
    assert by_path["vllm_ascend/other.py"].severity == "warning"  # nothing names it


def test_core_imports_are_read_as_data_and_name_platform_classes(tmp_path):
    from overlay.gate.source import DirSource
    from overlay.gate.startup import CORE_IMPORT, core_imports, platform_classes

    core = gatekit.tree(tmp_path / "core", {
        "vllm/__init__.py": "",
        "vllm/platforms/__init__.py": "",
        "vllm/platforms/tpu.py": "from vllm_ascend.platforms import NPUPlatform\nimport vllm_ascend.x\n",
        "vllm/broken.py": "from vllm_ascend import (\n",  # does not parse: nothing read
        "vllm/rel.py": "from .vllm_ascend import Y\nfrom vllm_ascendx import Z\n",  # not the plugin
        "vllm/other.py": "from vllm_ascend.layers import Helper\n"})
    points = core_imports(DirSource(core), frozenset({"vllm"}), frozenset({"vllm_ascend"}))
    assert {(p.group, p.name, p.module, p.attr) for p in points} == {
        (CORE_IMPORT, "vllm.platforms.tpu", "vllm_ascend.platforms.NPUPlatform", None),
        (CORE_IMPORT, "vllm.platforms.tpu", "vllm_ascend.platforms", "NPUPlatform"),
        (CORE_IMPORT, "vllm.platforms.tpu", "vllm_ascend.x", None),
        (CORE_IMPORT, "vllm.other", "vllm_ascend.layers.Helper", None),
        (CORE_IMPORT, "vllm.other", "vllm_ascend.layers", "Helper")}
    assert platform_classes(points, lambda name: None) == frozenset({"NPUPlatform"})


def test_unpacking_a_core_result_into_another_count_of_names_is_a_call_problem(tmp_path):
    """vllm-rbln's schedulers unpack `KVCacheManager.get_computed_blocks` into two names; in
    0.26.0 every return of it is a three-tuple display. A generator, a return of another
    shape or of mixed lengths, or a starred target says nothing."""
    core = {"vllm/kv.py": """
        class KVCacheManager:
            def get_computed_blocks(self, request):
                if request:
                    return (), 0, None
                return [], 0, 1

            def mixed(self, request):
                if request:
                    return 1, 2
                return request

            def gen(self):
                yield 1, 2, 3


        class Scheduler:
            def __init__(self):
                self.kv_cache_manager = KVCacheManager()
    """}
    plugin = {"vllm_ascend/sched.py": """
        from vllm.kv import Scheduler


        class NPUScheduler(Scheduler):
            def schedule(self, request):
                manager = self.kv_cache_manager
                blocks, hits = self.kv_cache_manager.get_computed_blocks(request)
                a, b, c = self.kv_cache_manager.get_computed_blocks(request)
                head, *rest = self.kv_cache_manager.get_computed_blocks(request)
                x, y, z = self.kv_cache_manager.mixed(request)
                for p, q in self.kv_cache_manager.gen():
                    pass
                return manager, blocks, hits, a, b, c, head, rest, x, y, z
    """}
    findings = gate(tmp_path, core, plugin).findings
    assert [(f.symbol, f.plugin_line) for f in findings] == [("call:vllm.kv.KVCacheManager.get_computed_blocks", 7)]
    assert "returns 3 values, which the plugin unpacks into 2 names" in findings[0].message


# ----------------------------------------------------------------------------- missing modules


def test_a_missing_module_is_one_finding_at_the_importing_line(tmp_path):
    core = {"vllm/kv/__init__.py": ""}
    plugin = {"vllm_ascend/npu.py": """
        import os
        from vllm.kv.mediums import CPULoadStoreSpec, GPULoadStoreSpec
    """}
    (f,) = gate(tmp_path, core, plugin).findings
    assert (f.symbol, f.plugin_path, f.plugin_line) == ("import:vllm.kv.mediums", "vllm_ascend/npu.py", 2)
    assert f.to_dict()["core"] == {"path": None, "line": None}
    assert "CPULoadStoreSpec, GPULoadStoreSpec" in f.message


# ----------------------------------------------------------------------------- recall


INPUT_BATCH_CORE = {"vllm/batch.py": """
    from dataclasses import dataclass, field


    @dataclass
    class InputBatch:
        req_ids: list
        num_reqs: int
        is_padding: object
        prompt_lens: object
        extra: list = field(default_factory=list)
"""}


def test_constructor_of_a_plugin_dataclass_extending_core_fields(tmp_path):
    plugin = {
        "vllm_ascend/batch.py": """
            from dataclasses import dataclass

            from vllm.batch import InputBatch


            @dataclass
            class AscendInputBatch(InputBatch):
                # defaulted: after core's defaulted `extra` a field without one fails at class
                # creation (the field-order check says so)
                seq_lens_np: object = None
                attn_state: object = None
        """,
        "vllm_ascend/runner.py": """
            from vllm_ascend.batch import AscendInputBatch


            def prepare():
                return AscendInputBatch(req_ids=[], num_reqs=0, seq_lens_np=None)
        """,
    }
    (f,) = gate(tmp_path, INPUT_BATCH_CORE, plugin).findings
    assert (f.severity, f.kind, f.plugin_path, f.plugin_line) == ("error", "constructor", "vllm_ascend/runner.py", 5)
    assert "missing required argument(s) 'is_padding', 'prompt_lens'" in f.message
    plugin["vllm_ascend/runner.py"] = plugin["vllm_ascend/runner.py"].replace(
        "seq_lens_np=None", "seq_lens_np=None, is_padding=None, prompt_lens=None")
    assert only(gate(tmp_path / "ok", INPUT_BATCH_CORE, plugin)) == []
    plugin["vllm_ascend/runner.py"] = plugin["vllm_ascend/runner.py"].replace("prompt_lens=None", "prompt_lens=None, spec=1")
    (f,) = gate(tmp_path / "kw", INPUT_BATCH_CORE, plugin).findings
    assert "unexpected keyword argument 'spec'" in f.message


def test_constructor_with_an_init_the_plugin_installs_is_not_judged_by_core_fields(tmp_path):
    plugin = {"vllm_ascend/out.py": """
        from vllm import batch


        def _patch():
            cls = batch.InputBatch

            def _init(self, *args, spec=None, **kwargs):
                pass

            cls.__init__ = _init


        def build():
            return batch.InputBatch(req_ids=[], spec=1)
    """}
    assert [f.kind for f in gate(tmp_path, INPUT_BATCH_CORE, plugin).findings if f.kind == "constructor"] == []


def test_import_time_read_of_a_core_attribute(tmp_path):
    core = {
        "vllm/adapters.py": """
            def make(parser):
                class Adapter(parser):
                    pass
                return Adapter


            class Glm47Parser:
                pass


            Glm47Adapter = make(Glm47Parser)
        """,
        "vllm/glm47.py": """
            from vllm.adapters import Glm47Adapter


            class Glm47ToolParser(Glm47Adapter):
                structural_tag = "glm"
        """,
    }
    plugin = {"vllm_ascend/patch_glm47.py": """
        from vllm.glm47 import Glm47ToolParser

        if not hasattr(Glm47ToolParser, "_ascend_original"):
            Glm47ToolParser._ascend_original = Glm47ToolParser._extract_tool_call_regions


        def later():
            return Glm47ToolParser._not_at_import_time
    """}
    (f,) = gate(tmp_path, core, plugin).findings
    assert (f.severity, f.kind, f.plugin_line) == ("error", "attribute", 4)
    assert f.symbol == "attribute:vllm.glm47.Glm47ToolParser._extract_tool_call_regions"
    core["vllm/glm47.py"] = core["vllm/glm47.py"].replace(
        'structural_tag = "glm"', 'structural_tag = "glm"\n\n            def _extract_tool_call_regions(self, text):\n'
                                  '                return []')
    assert only(gate(tmp_path / "ok", core, plugin)) == []


# ----------------------------------------------------------------------------- messages


def test_message_names_the_parameter_core_inserted(tmp_path):
    core = {"vllm/ngram.py": """
        class NgramProposerGPU:
            def propose(self, num_speculative_tokens, num_tokens_no_spec, token_ids, sampled, count):
                return 0
    """}
    plugin = {"vllm_ascend/ngram.py": """
        from vllm.ngram import NgramProposerGPU


        class AscendNgramProposerNPU(NgramProposerGPU):
            def propose(self, num_tokens_no_spec, token_ids, sampled, count):
                return 0
    """}
    (f,) = gate(tmp_path, core, plugin).findings
    assert "lacks core parameter 'num_speculative_tokens' (position 1)" in f.message
    assert "'count'" not in f.message


def test_multiple_values_for_an_argument_is_detected(tmp_path):
    core = {"vllm/cap.py": """
        class EncoderGraphs:
            def capture_budget(self, budget, path=None):
                pass

            def run(self):
                self.capture_budget(1, 2, budget=3)


        def drive(graphs: EncoderGraphs):
            graphs.run()
    """}
    plugin = {"vllm_ascend/cap.py": """
        from vllm.cap import EncoderGraphs


        class AclGraphs(EncoderGraphs):
            def capture_budget(self, budget, path, extra=None):
                pass
    """}
    (f,) = gate(tmp_path, core, plugin).findings
    assert "gets multiple values for argument 'budget'" in f.message


def test_kernel_launch_shows_the_call_line_and_ignores_launch_options(tmp_path):
    core = {"vllm/mamba.py": """
        import triton


        @triton.jit
        def postprocess_kernel(a, b, BLOCK: tl.constexpr):
            pass


        def run(a, b):
            grid = (1,)
            postprocess_kernel[grid](
                a,
                b,
                BLOCK=16,
                num_warps=4,
            )
    """}
    plugin = {"vllm_ascend/mamba.py": """
        import vllm.mamba as mamba_utils


        def postprocess_kernel(a, BLOCK):
            pass


        mamba_utils.postprocess_kernel = postprocess_kernel
    """}
    (f,) = gate(tmp_path, core, plugin).findings
    assert (f.core_path, f.core_line) == ("vllm/mamba.py", 11)
    assert "gets multiple values for argument 'BLOCK'" in f.message
    assert "num_warps" not in f.message


def test_json_carries_severity_reason_and_a_short_summary(tmp_path, run):
    gate(tmp_path, SCHED_CORE, {"vllm_ascend/sched.py": """
        from vllm.sched import Scheduler


        class RecomputeScheduler(Scheduler):
            def schedule(self):
                return 2
    """})
    code, out, _ = run("gate", "--core", tmp_path / "core", "--plugin", tmp_path / "plugin", "--json")
    assert code == 1
    doc = json.loads(out)
    (f,) = doc["findings"]
    assert f["severity"] == "error" and f["reason"].startswith("core calls it as self.scheduler.schedule(...)")
    assert len(f["summary"]) <= 160 and doc["severity_counts"] == {"error": 1, "warning": 0, "info": 0}


# ----------------------------------------------------------------------------- allowlist


def test_the_default_allowlist_is_found_from_the_project_root_not_the_cwd(tmp_path, run, monkeypatch):
    """Same command, different folders, same answer: the committed allowlist accepts
    NPUWorker.load_model (see gate-allowlist.yaml) wherever the command runs."""
    core = gatekit.tree(tmp_path / "core", {"vllm/__init__.py": "", "vllm/worker_base.py": """
        class WorkerBase:
            def load_model(self, *, load_dummy_weights=False):
                pass
    """})
    plugin = gatekit.tree(tmp_path / "plugin", {"vllm_ascend/__init__.py": "", "vllm_ascend/worker/__init__.py": "",
                                                "vllm_ascend/worker/worker.py": """
        from vllm.worker_base import WorkerBase


        class NPUWorker(WorkerBase):
            def load_model(self):
                pass
    """})
    outputs = []
    for cwd in (tmp_path, gatekit.Path(__file__).resolve().parents[2] / "docs"):
        monkeypatch.chdir(cwd)
        code, out, _ = run("gate", "--core", core, "--plugin", plugin, "-v")
        outputs.append((code, [ln for ln in out.splitlines() if ln.startswith(("accepted", "warning", "error"))]))
    assert outputs[0] == outputs[1]
    assert any(ln.startswith("accepted:") and "NPUWorker.load_model" in ln for ln in outputs[0][1])


def test_entry_points_from_setup_py_pyproject_and_setup_cfg(tmp_path):
    from overlay.gate.source import DirSource
    from overlay.gate.startup import entry_points

    root = gatekit.tree(tmp_path / "a", {"setup.py": SETUP})
    assert [(e.group, e.module, e.attr) for e in entry_points(DirSource(root))] == [
        ("vllm.platform_plugins", "vllm_ascend", "register")]
    root = gatekit.tree(tmp_path / "b", {"pyproject.toml": """
        [project.entry-points."vllm.general_plugins"]
        ascend_model = "vllm_ascend:register_model"
    """})
    assert [(e.module, e.attr) for e in entry_points(DirSource(root))] == [("vllm_ascend", "register_model")]
    root = gatekit.tree(tmp_path / "c", {"setup.cfg": """
        [options.entry_points]
        vllm.platform_plugins =
            ascend = vllm_ascend.plugin:register
    """})
    assert [(e.module, e.attr) for e in entry_points(DirSource(root))] == [("vllm_ascend.plugin", "register")]


def test_entry_points_from_the_egg_info_an_archive_carries(tmp_path):
    """An archive without setup.py, pyproject or setup.cfg entry points (one made from a
    wheel) names them in `<Name>.egg-info/entry_points.txt`, the Name from PKG-INFO; names
    keep their case, and a broken file or a Name that is a path reads as none."""
    from overlay.gate.source import DirSource
    from overlay.gate.startup import entry_points

    eps = """
        [vllm.general_plugins]
        rbln_Ops = vllm_rbln:register_ops

        [vllm.platform_plugins]
        rbln = vllm_rbln:register
    """
    root = gatekit.tree(tmp_path / "a", {"PKG-INFO": "Metadata-Version: 2.4\nName: vllm-rbln\nVersion: 1\n",
                                         "vllm_rbln.egg-info/entry_points.txt": eps})
    assert [(e.group, e.name, e.module, e.attr) for e in entry_points(DirSource(root))] == [
        ("vllm.general_plugins", "rbln_Ops", "vllm_rbln", "register_ops"),
        ("vllm.platform_plugins", "rbln", "vllm_rbln", "register")]
    for i, (pkg_info, text) in enumerate((("Name: ../vllm-rbln\n", eps), ("Name: vllm-rbln\n", "[x\n= y"),
                                          ("Name: vllm-rbln\n", "[a]\nx = m:f\n[a]\ny = m:g\n"))):
        root = gatekit.tree(tmp_path / f"h{i}", {"PKG-INFO": pkg_info, "vllm_rbln.egg-info/entry_points.txt": text,
                                                 "../vllm_rbln.egg-info/entry_points.txt": eps} if i == 0 else
                            {"PKG-INFO": pkg_info, "vllm_rbln.egg-info/entry_points.txt": text})
        assert entry_points(DirSource(root)) == (), pkg_info


def test_entry_points_from_a_wheels_dist_info(tmp_path):
    """A wheel names its entry points in `<name>-<version>.dist-info/entry_points.txt` at its top;
    a file of that name anywhere else (inside the package, a folder not named as a dist-info) names
    none."""
    from overlay.gate.source import DirSource
    from overlay.gate.startup import entry_points

    eps = "[console_scripts]\nvllm-omni = vllm_omni.entrypoints.cli.main:main\n"
    root = gatekit.tree(tmp_path / "w", {"vllm_omni/__init__.py": "",
                                         "vllm_omni-0.28.0.dist-info/METADATA": "Name: vllm-omni\n",
                                         "vllm_omni-0.28.0.dist-info/entry_points.txt": eps})
    assert [(e.group, e.name, e.module, e.attr) for e in entry_points(DirSource(root))] == [
        ("console_scripts", "vllm-omni", "vllm_omni.entrypoints.cli.main", "main")]
    for i, path in enumerate(("vllm_omni/entry_points.txt", "vllm_omni.dist-info/entry_points.txt",
                              "x/vllm_omni-0.28.0.dist-info/entry_points.txt")):
        root = gatekit.tree(tmp_path / f"n{i}", {"vllm_omni/__init__.py": "", path: eps})
        assert entry_points(DirSource(root)) == (), path


def test_a_typed_call_core_itself_could_not_take_is_meant_for_another_class(tmp_path):
    core = {"vllm/quant.py": """
        class QuantizeMethodBase:
            def create_weights(self, layer, *args, **kwargs):
                raise NotImplementedError


        class BaseKVCacheMethod(QuantizeMethodBase):
            def create_weights(self, layer):
                pass


        class LinearBase:
            def __init__(self, method):
                self.quant_method: QuantizeMethodBase = method

            def build(self):
                self.quant_method.create_weights(self, 1, 2, 3)


        def make(method: QuantizeMethodBase):
            return LinearBase(method).build()
    """}
    plugin = {"vllm_ascend/quant.py": """
        from vllm.quant import BaseKVCacheMethod


        class AscendKVCacheMethod(BaseKVCacheMethod):
            def create_weights(self):
                pass
    """}
    # core's own BaseKVCacheMethod.create_weights(layer) could not take (self, 1, 2, 3):
    # that call is for linear methods; the override is judged by its declaration (warning)
    assert [f.severity for f in gate(tmp_path, core, plugin).findings] == ["warning"]
    core["vllm/quant.py"] = core["vllm/quant.py"].replace("create_weights(self, 1, 2, 3)", "create_weights(self)")
    (f,) = gate(tmp_path / "b", core, plugin).findings
    assert f.severity == "error" and "self.quant_method.create_weights(...)" in f.reason


def test_capability_flags_with_find_spec_and_hasattr_are_followed(tmp_path):
    # The parser-patch idiom: flags in one plugin module, imports guarded in another.
    core = {"vllm/parsers/glm.py": "class Glm:\n    def _regions(self):\n        pass\n",
            "vllm/parsers/old_ds.py": "class OldDs:\n    pass\n"}
    plugin = {
        "vllm_ascend/targets.py": """
            import importlib.util

            from vllm.parsers import glm

            GLM_PATCHABLE = hasattr(glm.Glm, "_regions")
            GLM_NEW = hasattr(glm.Glm, "_new_regions")
            OLD_DS_PATCHABLE = importlib.util.find_spec("vllm.parsers.old_ds") is not None
            NEW_DS_PATCHABLE = importlib.util.find_spec("vllm.parsers.new_ds") is not None
        """,
        "vllm_ascend/patches.py": """
            from vllm_ascend.targets import GLM_NEW, GLM_PATCHABLE, NEW_DS_PATCHABLE, OLD_DS_PATCHABLE

            if GLM_PATCHABLE:
                from vllm.parsers.glm import Missing1
            if GLM_NEW:
                from vllm.parsers.glm import Skipped1
            if OLD_DS_PATCHABLE:
                from vllm.parsers.old_ds import Missing2
            if NEW_DS_PATCHABLE:
                from vllm.parsers.new_ds import Skipped2
        """,
    }
    names = sorted(f.symbol for f in gate(tmp_path, core, plugin).findings)
    assert names == ["import:vllm.parsers.glm:Missing1", "import:vllm.parsers.old_ds:Missing2"]


def test_a_receiver_held_from_an_annotated_parameter_is_typed(tmp_path):
    """vLLM 0.22.0's MoERunner keeps `self._quant_method = quant_method` from a parameter
    typed `quant_method: FusedMoEMethodBase` and calls `self._quant_method.apply(...,
    shared_experts=...)`: a plugin method class whose `apply` lacks the keyword breaks on
    every MoE forward (vllm-metax 0.21.0). The receiver is typed through the parameter."""
    core = {
        "vllm/moe/base.py": """
            class FusedMoEMethodBase:
                def apply(self, layer, x, topk_ids, shared_experts, shared_input):
                    raise NotImplementedError
        """,
        "vllm/moe/runner.py": """
            from vllm.moe.base import FusedMoEMethodBase


            class MoERunner:
                def __init__(self, quant_method: FusedMoEMethodBase):
                    self._quant_method = quant_method

                def forward(self, layer, x):
                    return self._quant_method.apply(layer=layer, x=x, topk_ids=None,
                                                    shared_experts=None, shared_input=x)
        """,
    }
    plugin = {"vllm_ascend/quant.py": """
        from vllm.moe.base import FusedMoEMethodBase


        class NpuMoEMethod(FusedMoEMethodBase):
            def apply(self, layer, x, topk_ids, shared_input):
                return x
    """}
    (f,) = gate(tmp_path, core, plugin).findings
    assert f.severity == "error" and f.core_path == "vllm/moe/runner.py", (f.severity, f.reason)
    assert "self._quant_method.apply(...)" in f.reason and "MoERunner.forward" in f.reason
    # negative twin: the parameter is not annotated, and another class answers `apply`
    # with these arguments: nothing states the receiver's type
    core["vllm/moe/runner.py"] = core["vllm/moe/runner.py"].replace("quant_method: FusedMoEMethodBase",
                                                                    "quant_method")
    core["vllm/lora.py"] = "class LoRALayer:\n    def apply(self, layer, x, **kwargs):\n        return x\n"
    assert [f.severity for f in gate(tmp_path / "b", core, plugin).findings] != ["error"]


def test_a_common_method_name_defined_in_many_files_still_has_typed_callers(tmp_path):
    """`apply` is defined in every quantization method's file and called in more files than
    the gate follows by name; only the files calling it on a receiver (`x.apply(`) can type
    that receiver, so a `def apply(` of their own does not count them (vLLM 0.22.0: 26
    files name the base and call or define `apply`, 11 call it on a receiver)."""
    from overlay.gate.callers import COMMON
    core = {
        "vllm/moe/base.py": """
            class FusedMoEMethodBase:
                def apply(self, layer, x, shared_experts):
                    raise NotImplementedError
        """,
        "vllm/moe/runner.py": """
            from vllm.moe.base import FusedMoEMethodBase


            class MoERunner:
                def __init__(self, quant_method: FusedMoEMethodBase):
                    self._quant_method = quant_method

                def forward(self, layer, x):
                    return self._quant_method.apply(layer=layer, x=x, shared_experts=None)
        """,
    }
    for i in range(COMMON + 2):
        core[f"vllm/quant/method{i}.py"] = f"""
            from vllm.moe.base import FusedMoEMethodBase


            class Method{i}(FusedMoEMethodBase):
                def apply(self, layer, x, shared_experts):
                    return x
        """
    plugin = {"vllm_ascend/quant.py": """
        from vllm.moe.base import FusedMoEMethodBase


        class NpuMoEMethod(FusedMoEMethodBase):
            def apply(self, layer, x):
                return x
    """}
    (f,) = gate(tmp_path, core, plugin).findings
    assert f.severity == "error" and "self._quant_method.apply(...)" in f.reason, (f.severity, f.reason)
    # negative twin: the only typed caller sits in one architecture's model file (vLLM 0.24.0's
    # whisper_causal.py calls its underlying attention backend): a common name there binds nothing
    core["vllm/models/whisper.py"] = core.pop("vllm/moe/runner.py")
    assert [f.severity for f in gate(tmp_path / "b", core, plugin).findings] != ["error"]


def test_a_typed_caller_of_forward_past_the_common_limit_binds_nothing(tmp_path):
    """`forward` is every torch module's: past the common-name limit its typed callers are not
    followed (vLLM 0.17.0's `FusedMoE.forward_native` calls `self.runner.forward(...)`, core's own
    MoE runner, and matched 31 vllm-metax and vllm-gaudi model `forward`s)."""
    from overlay.gate.callers import COMMON
    core = {
        "vllm/moe/base.py": "class Runner:\n    def forward(self, x, logits):\n        return x\n",
        "vllm/moe/layer.py": """
            from vllm.moe.base import Runner


            class FusedMoE:
                def __init__(self, runner: Runner):
                    self.runner = runner

                def forward_native(self, x, logits):
                    return self.runner.forward(x, logits)
        """,
    }
    for i in range(COMMON + 2):
        core[f"vllm/models/m{i}.py"] = f"""
            from vllm.moe.base import Runner


            class Model{i}(Runner):
                def forward(self, x, logits):
                    return x.forward(logits)
        """
    plugin = {"vllm_ascend/model.py": """
        from vllm.moe.base import Runner


        class NpuModel(Runner):
            def forward(self, x):
                return x
    """}
    assert [f.severity for f in gate(tmp_path, core, plugin).findings] != ["error"]
