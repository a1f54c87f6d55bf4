"""Issue 27's remaining miss classes of the hand engine, on synthetic trees (written
here, never copied upstream code):

- `super().__init__(...)` / `super().m(...)` through a core base reached past a plugin
  intermediate class that does not define the method, or one that only forwards
  `*args, **kwargs`;
- import-time reads the scan did not see: decorators, default values, class bases and
  class keywords of module-level definitions (`@core_mod.gone`, `def f(x=core_mod.GONE)`,
  `class A(core_mod.Gone)`);
- core calling a plugin override with a keyword or more positions than it accepts,
  from a core base class's method that the plugin class inherits through a plugin
  intermediate;
- a core function the plugin replaces (`mod.f = ours`) that another core module bound
  by name (`from mod import f`) when the plugin imported it before the patch ran.
"""

from __future__ import annotations


import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": ""}

def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], loaded: tuple[str, ...]):
    return gatekit.gate_loaded(tmp_path, PKGS, core, plugin, loaded)


by_symbol = gatekit.by_symbol


# ----------------------------------------------------------------------------- (a) super() through core bases

# A core base whose constructor gained a required `rank` (the new release).
WORKER_BASE = """
    class WorkerBase:
        def __init__(self, vllm_config, local_rank, rank, distributed_init_method):
            self.rank = rank

        def init_device(self, device_id):
            pass
"""

PLUGIN_THROUGH_MIDDLE = """
    from vllm.v1.worker.worker_base import WorkerBase


    class NPUWorkerMixinBase(WorkerBase):
        def helper(self):
            return 1


    class NPUWorker(NPUWorkerMixinBase):
        def __init__(self, vllm_config, local_rank, distributed_init_method):
            super().__init__(vllm_config, local_rank, distributed_init_method)

        def init_device(self):
            super().init_device(0, "npu")
"""

PLUGIN_FORWARDING_MIDDLE = """
    import vllm.v1.worker.worker_base as wb


    class Forwarding(wb.WorkerBase):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.extra = 1


    class NPUWorker(Forwarding):
        def __init__(self, vllm_config, local_rank, distributed_init_method):
            super().__init__(vllm_config, local_rank, distributed_init_method=distributed_init_method)
"""

PLUGIN_OWN_MIDDLE = """
    from vllm.v1.worker.worker_base import WorkerBase


    class OwnInit(WorkerBase):
        def __init__(self, vllm_config, local_rank, distributed_init_method):
            super().__init__(vllm_config, local_rank, 0, distributed_init_method)


    class NPUWorker(OwnInit):
        def __init__(self, vllm_config, local_rank, distributed_init_method):
            super().__init__(vllm_config, local_rank, distributed_init_method)
"""


def test_super_init_past_a_plugin_class_without_its_own_constructor(tmp_path):
    core = {"vllm/v1/worker/worker_base.py": WORKER_BASE}
    report = gate(tmp_path, core, {"vllm_ascend/worker.py": PLUGIN_THROUGH_MIDDLE}, ("vllm_ascend.worker",))
    init = by_symbol(report, "call:vllm.v1.worker.worker_base.WorkerBase.__init__")
    assert [(f.severity, f.plugin_line) for f in init] == [("error", 11)]
    assert "missing required argument(s) 'distributed_init_method'" in init[0].message
    assert "NPUWorkerMixinBase" in init[0].message  # the message names the way it went
    meth = by_symbol(report, "call:vllm.v1.worker.worker_base.WorkerBase.init_device")
    assert [(f.severity, f.plugin_line) for f in meth] == [("error", 14)]


def test_super_init_through_a_plugin_class_that_only_forwards_args_and_kwargs(tmp_path):
    core = {"vllm/v1/worker/worker_base.py": WORKER_BASE}
    report = gate(tmp_path, core, {"vllm_ascend/worker.py": PLUGIN_FORWARDING_MIDDLE}, ("vllm_ascend.worker",))
    init = by_symbol(report, "call:vllm.v1.worker.worker_base.WorkerBase.__init__")
    # the forwarder's own `super().__init__(*args, **kwargs)` is no finding: the caller's is
    assert [(f.severity, f.plugin_line) for f in init] == [("error", 12)]
    assert "missing required argument(s) 'rank'" in init[0].message
    assert "Forwarding" in init[0].message


def test_super_init_into_a_plugin_constructor_is_not_judged_against_core(tmp_path):
    core = {"vllm/v1/worker/worker_base.py": WORKER_BASE}
    report = gate(tmp_path, core, {"vllm_ascend/worker.py": PLUGIN_OWN_MIDDLE}, ("vllm_ascend.worker",))
    assert not by_symbol(report, "call:vllm.v1.worker.worker_base.WorkerBase.__init__")


# ----------------------------------------------------------------------------- (b) module-level reads

# The new release dropped `maybe_compile`, `DEFAULT_BLOCK` and `LegacyLayer` from the module
# (`support_torch_compile` and `CURRENT_BLOCK` stay); `lazy` answers any name through
# a module `__getattr__`.
CORE_COMPILE = """
    CURRENT_BLOCK = 128


    def support_torch_compile(cls=None, *, dynamic_arg_dims=None):
        return cls


    class LinearBase:
        pass
"""

CORE_LAZY = """
    def __getattr__(name):
        return name
"""

PLUGIN_DEFINITIONS = """
    import vllm.compilation.decorators as decorators
    from vllm.compilation import lazy


    @decorators.maybe_compile
    def forward(x):
        return x


    def pad(x, block=decorators.DEFAULT_BLOCK, current=decorators.CURRENT_BLOCK):
        return x


    class AscendLayer(decorators.LegacyLayer):
        pass


    @decorators.support_torch_compile(dynamic_arg_dims={"x": 0}, mark_unbacked_dims={"x": 0})
    class AscendModel(decorators.LinearBase, metaclass=lazy.Meta):
        def step(self, n=decorators.CURRENT_BLOCK):
            return n
"""


def test_reads_in_decorators_defaults_and_bases_of_module_level_definitions(tmp_path):
    core = {"vllm/compilation/__init__.py": "", "vllm/compilation/decorators.py": CORE_COMPILE,
            "vllm/compilation/lazy.py": CORE_LAZY}
    report = gate(tmp_path, core, {"vllm_ascend/models.py": PLUGIN_DEFINITIONS}, ("vllm_ascend.models",))
    reads = {f.symbol: f for f in report.findings if f.kind == "attribute"}
    assert sorted(reads) == ["attribute:vllm.compilation.decorators.DEFAULT_BLOCK",
                             "attribute:vllm.compilation.decorators.LegacyLayer",
                             "attribute:vllm.compilation.decorators.maybe_compile"]
    assert {(f.plugin_line, f.severity) for f in reads.values()} == {(5, "error"), (10, "error"), (14, "error")}
    assert "when the module is imported" in reads["attribute:vllm.compilation.decorators.maybe_compile"].message
    # a decorator's own call is checked like any call
    calls = by_symbol(report, "call:vllm.compilation.decorators.support_torch_compile")
    assert [(f.plugin_line, f.severity) for f in calls] == [(18, "error")]
    assert "unexpected keyword argument 'mark_unbacked_dims'" in calls[0].message


# ----------------------------------------------------------------------------- (c) core calls an override

# The new release's WorkerBase.execute_model calls self.prepare(..., is_dummy=False) and
# self.run_model(..., num_tokens=3); EngineCore.step calls execute_model on the worker.
CORE_WORKER = """
    class WorkerBase:
        def execute_model(self, scheduler_output):
            self.prepare(scheduler_output, 1, is_dummy=False)
            return self.run_model(scheduler_output, num_tokens=3)

        def prepare(self, scheduler_output, step, is_dummy=False):
            pass

        def run_model(self, scheduler_output, num_tokens=0):
            pass
"""

CORE_ENGINE = """
    from vllm.v1.worker.gpu_worker import WorkerBase


    class EngineCore:
        def __init__(self):
            self.worker: WorkerBase = WorkerBase()

        def step(self):
            return self.worker.execute_model(None)
"""

# NPUWorkerBase (the plugin's) already adapted run_model; its subclass overrides it again,
# the old way: core's call reaches the subclass's method.
PLUGIN_WORKERS = """
    from vllm.v1.worker.gpu_worker import WorkerBase


    class NPUWorkerBase(WorkerBase):
        def run_model(self, scheduler_output, num_tokens=0):
            pass

        def prepare(self, scheduler_output, step, is_dummy=False):
            pass


    class NPUWorker(NPUWorkerBase):
        def run_model(self, scheduler_output):
            pass

        def prepare(self, scheduler_output, step, is_dummy=False, extra=None):
            pass


    class A3Worker(NPUWorker):
        def prepare(self, scheduler_output):
            pass
"""


def test_core_calls_reach_an_override_below_a_plugin_class_that_defines_the_method(tmp_path):
    core = {"vllm/v1/worker/gpu_worker.py": CORE_WORKER, "vllm/v1/engine/__init__.py": "",
            "vllm/v1/engine/core.py": CORE_ENGINE}
    report = gate(tmp_path, core, {"vllm_ascend/worker.py": PLUGIN_WORKERS}, ("vllm_ascend.worker",))
    overrides = {f.symbol: f for f in report.findings if f.kind == "override"}
    assert sorted(overrides) == ["override:vllm_ascend.worker.A3Worker.prepare",
                                 "override:vllm_ascend.worker.NPUWorker.run_model"]
    run_model = overrides["override:vllm_ascend.worker.NPUWorker.run_model"]
    assert (run_model.plugin_line, run_model.severity) == (13, "error")
    assert "unexpected keyword argument 'num_tokens'" in run_model.message
    assert "vllm/v1/worker/gpu_worker.py:4" in run_model.message
    assert "below NPUWorkerBase.run_model" in run_model.message
    prepare = overrides["override:vllm_ascend.worker.A3Worker.prepare"]
    assert prepare.plugin_line == 21
    assert "takes 1 positional argument(s) but the call passes 2" in prepare.message


# ----------------------------------------------------------------------------- (d) import-order binding

CORE_SAMPLING = {
    "vllm/v1/worker/gpu/__init__.py": "",
    "vllm/v1/worker/gpu/sample/__init__.py": "",
    "vllm/v1/worker/gpu/sample/gumbel.py": """
        def gumbel_sample(logits, temperature):
            return logits
    """,
    # binds the function by name when it is imported: a later `gumbel.gumbel_sample = ...`
    # does not reach its calls
    "vllm/v1/worker/gpu/sample/sampler.py": """
        from vllm.v1.worker.gpu.sample.gumbel import gumbel_sample


        class Sampler:
            def sample(self, logits):
                return gumbel_sample(logits, 1.0)
    """,
    "vllm/v1/worker/gpu/model_runner.py": """
        from vllm.v1.worker.gpu.sample.sampler import Sampler


        class GPUModelRunner:
            def __init__(self):
                self.sampler = Sampler()
    """,
}

PLUGIN_RUNNER = """
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner


    class NPUModelRunner(GPUModelRunner):
        pass
"""

PLUGIN_PATCH_AT_IMPORT = """
    import vllm.v1.worker.gpu.sample.gumbel as gumbel_mod


    def gumbel_sample_npu(logits, temperature):
        return logits


    gumbel_mod.gumbel_sample = gumbel_sample_npu
"""

PLUGIN_PATCH_IN_FUNCTION = """
    import vllm.v1.worker.gpu.sample.gumbel as gumbel_mod


    def gumbel_sample_npu(logits, temperature):
        return logits


    def apply_patch():
        gumbel_mod.gumbel_sample = gumbel_sample_npu
"""

BOUND = "replacement:vllm.v1.worker.gpu.sample.gumbel.gumbel_sample@vllm.v1.worker.gpu.sample.sampler"


def _sampling_gate(tmp_path, patch: str, loaded: tuple[str, ...]):
    plugin = {"vllm_ascend/worker/__init__.py": "", "vllm_ascend/worker/model_runner.py": PLUGIN_RUNNER,
              "vllm_ascend/patch/__init__.py": "", "vllm_ascend/patch/patch_triton.py": patch}
    return gate(tmp_path, CORE_SAMPLING, plugin, loaded)


def test_a_core_module_that_bound_the_function_before_the_patch_ran_keeps_the_original(tmp_path):
    report = _sampling_gate(tmp_path, PLUGIN_PATCH_AT_IMPORT,
                            ("vllm_ascend.worker.model_runner", "vllm_ascend.patch.patch_triton"))
    found = by_symbol(report, BOUND)
    assert [(f.kind, f.severity, f.plugin_path, f.plugin_line) for f in found] == [
        ("replacement", "warning", "vllm_ascend/patch/patch_triton.py", 8)]
    assert found[0].core_path == "vllm/v1/worker/gpu/sample/sampler.py"
    assert "vllm_ascend.worker.model_runner" in found[0].message  # the import that bound it first
    assert "sampler.py:6" in found[0].message  # the core call that keeps calling the original


def test_a_core_module_imported_after_the_patch_binds_the_replacement(tmp_path):
    report = _sampling_gate(tmp_path, PLUGIN_PATCH_AT_IMPORT,
                            ("vllm_ascend.patch.patch_triton", "vllm_ascend.worker.model_runner"))
    assert not by_symbol(report, BOUND)


def test_a_patch_in_a_function_is_ordered_only_when_the_binding_came_first(tmp_path):
    # the patch module (and so its function) exists only after the sampler bound the name
    first = _sampling_gate(tmp_path / "a", PLUGIN_PATCH_IN_FUNCTION,
                           ("vllm_ascend.worker.model_runner", "vllm_ascend.patch.patch_triton"))
    ordered = by_symbol(first, BOUND)
    assert [(f.severity, f.plugin_line) for f in ordered] == [("warning", 9)]
    assert "does not reach" in ordered[0].summary
    # the function exists before the sampler is imported: when it runs is not known
    unknown = _sampling_gate(tmp_path / "b", PLUGIN_PATCH_IN_FUNCTION,
                             ("vllm_ascend.patch.patch_triton", "vllm_ascend.worker.model_runner"))
    found = by_symbol(unknown, BOUND)
    assert [(f.severity, f.plugin_line) for f in found] == [("warning", 9)]
    assert "cannot be ordered" in found[0].message and "may not reach" in found[0].summary
    # nothing the plugin imports at start-up binds the name: nothing to say
    neither = _sampling_gate(tmp_path / "c", PLUGIN_PATCH_IN_FUNCTION, ("vllm_ascend.patch.patch_triton",))
    assert not by_symbol(neither, BOUND)


def test_a_binding_the_plugin_patches_too_is_reached(tmp_path):
    # the plugin knows the sampler holds its own name and replaces that one as well
    patch = PLUGIN_PATCH_AT_IMPORT + (
        "\n    import vllm.v1.worker.gpu.sample.sampler as sampler_mod\n"
        "    sampler_mod.gumbel_sample = gumbel_sample_npu\n")
    report = _sampling_gate(tmp_path, patch, ("vllm_ascend.worker.model_runner", "vllm_ascend.patch.patch_triton"))
    assert not by_symbol(report, BOUND)


def test_a_patch_module_whose_own_imports_bind_the_name_first(tmp_path):
    # whoever imports it, the patch module itself imports the model runner (and so the
    # sampler's binding) before its patch line runs
    patch = "    import vllm.v1.worker.gpu.model_runner  # noqa\n" + PLUGIN_PATCH_AT_IMPORT
    report = _sampling_gate(tmp_path, patch, ("vllm_ascend.patch.patch_triton",))
    found = by_symbol(report, BOUND)
    assert [(f.severity, f.plugin_line) for f in found] == [("warning", 10)]
    assert "the patch module itself imports it first" in found[0].message


PLUGIN_MODULE_ALIAS = """
    import vllm.compilation.decorators as decorators

    compile_mod = decorators
    BLOCK = compile_mod.DEFAULT_BLOCK


    def current():
        return compile_mod.CURRENT_BLOCK + compile_mod.GONE_IN_FUNCTION


    def shadowed(shadow=None):
        return shadow.GONE_BUT_SHADOWED


    shadow = decorators
"""


def test_reads_through_a_module_level_alias_of_a_core_module(tmp_path):
    core = {"vllm/compilation/__init__.py": "", "vllm/compilation/decorators.py": CORE_COMPILE}
    report = gate(tmp_path, core, {"vllm_ascend/alias.py": PLUGIN_MODULE_ALIAS}, ("vllm_ascend.alias",))
    reads = {f.symbol: (f.plugin_line, f.severity) for f in report.findings if f.kind == "attribute"}
    # `shadow` is also a parameter name: the read may be of the argument, not judged
    assert reads == {"attribute:vllm.compilation.decorators.DEFAULT_BLOCK": (4, "error"),
                     "attribute:vllm.compilation.decorators.GONE_IN_FUNCTION": (8, "error")}


# ----------------------------------------------------------------------------- (e) a module called runs forward

# (tuned on the twelfth held-out set's misses, 2026-12-03, seventh session: vLLM 0.8.4 calls
# `self.model(input_ids, positions, intermediate_tensors, inputs_embeds)` and
# `self.self_attn(positions=, hidden_states=)`, so a plugin override or replacement of
# `forward` that still takes `kv_caches, attn_metadata` fails; and CustomOp's generic
# `forward(*args, **kwargs)` runs `forward_oot` on an out-of-tree platform.)

CORE_MODEL = """
    import torch

    from vllm.custom_op import CustomOp


    class Inner(torch.nn.Module):
        def forward(self, input_ids, positions):
            return input_ids


    class Attention(torch.nn.Module):
        def forward(self, positions, hidden_states):
            return hidden_states


    class MoEMethod(CustomOp):
        def forward_native(self, x, top_k, expert_map=None):
            return x

        def apply(self, x, top_k):
            return self.forward(x=x, top_k=top_k, expert_map=None)


    class ForCausalLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Inner()
            self.self_attn = Attention()

        def forward(self, input_ids, positions):
            hidden = self.model(input_ids, positions)
            return self.self_attn(positions=positions, hidden_states=hidden)


    def run_moe(method: MoEMethod, x):
        return method.apply(x, 1)


    class Conv(CustomOp):
        def forward_native(self, x):
            return x


    def make_conv(size):
        # a variable holding the class itself: calling it builds one, no forward runs
        conv_cls = {1: Conv}.get(size)
        return conv_cls(in_channels=size)
"""

CUSTOM_OP = """
    class CustomOp:
        def forward(self, *args, **kwargs):
            return self._forward_method(*args, **kwargs)

        def forward_native(self, *args, **kwargs):
            raise NotImplementedError

        def forward_oot(self, *args, **kwargs):
            return self.forward_native(*args, **kwargs)
"""

PLUGIN_MODEL = """
    from vllm.model import Attention, Conv, ForCausalLM, Inner, MoEMethod


    class AscendConv(Conv):
        def forward_oot(self, x):
            return x


    class CustomInner(Inner):
        def forward(self, input_ids, positions{inner}):
            return input_ids


    class CustomForCausalLM(ForCausalLM):
        def __init__(self):
            super().__init__()
            self.model = CustomInner()


    def attention_forward(self, positions, hidden_states{attn}):
        return hidden_states


    def moe_forward_oot(self, x, top_k{moe}):
        return x


    Attention.forward = attention_forward
    MoEMethod.forward_oot = moe_forward_oot
"""

MODULE_SYMBOLS = ("override:vllm_ascend.model.CustomInner.forward",
                  "replacement:vllm.model.Attention.forward",
                  "replacement:vllm.model.MoEMethod.forward_oot")


# core calls forward in many files: a method of that name is called somewhere
FORWARD_CALLERS = {f"vllm/use{i}.py": f"def run(m):\n    return m.forward(1, 2)\n" for i in range(30)}


def _module_gate(tmp_path, inner: str, attn: str, moe: str):
    core = {"vllm/custom_op.py": CUSTOM_OP, "vllm/model.py": CORE_MODEL,
            **FORWARD_CALLERS}
    plugin = {"vllm_ascend/model.py": PLUGIN_MODEL.format(inner=inner, attn=attn, moe=moe)}
    return gate(tmp_path, core, plugin, ("vllm_ascend.model",))


def test_core_calling_a_module_object_is_a_call_of_its_forward(tmp_path):
    report = _module_gate(tmp_path / "old", ", kv_caches, attn_metadata", ", kv_cache, attn_metadata",
                          ", renormalize")
    found = {s: by_symbol(report, s) for s in MODULE_SYMBOLS}
    assert all(len(f) == 1 and f[0].severity == "error" for f in found.values()), report.findings
    # the plugin's CustomForCausalLM builds self.model = CustomInner() and inherits core's forward
    assert "calls self.model(...)" in found[MODULE_SYMBOLS[0]][0].message
    assert "CustomForCausalLM builds self.model = CustomInner(...)" in found[MODULE_SYMBOLS[0]][0].message
    assert "core calls it as self.self_attn(...)" in found[MODULE_SYMBOLS[1]][0].message
    assert "unexpected keyword argument 'expert_map'" in found[MODULE_SYMBOLS[2]][0].message
    # signatures that take what core passes: nothing
    report = _module_gate(tmp_path / "new", "", "", ", expert_map=None")
    assert not [f for s in MODULE_SYMBOLS for f in by_symbol(report, s)], report.findings
    # calling a variable that holds the class itself builds one: no forward_oot runs there
    assert not by_symbol(report, "override:vllm_ascend.model.AscendConv.forward_oot"), report.findings


# A core file's own class of the same name is another class: vLLM 0.15.0's deepseek_eagle.py
# defines its own DeepseekV2Model and calls self.model(input_ids, positions, hidden_states), no
# call of deepseek_v2.DeepseekV2Model.forward, which plugin 0.14.0rc1 replaces with a forward
# that requires inputs_embeds (a false error on the tuned ninth set, found after 235bfa5).
CORE_BACKBONE = """
    import torch


    class Backbone(torch.nn.Module):
        def forward(self, input_ids, positions, intermediate_tensors, inputs_embeds=None):
            return input_ids


    class CausalLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Backbone()

        def forward(self, input_ids, positions):
            return self.model(input_ids, positions, None, None)


    def load():
        return CausalLM()
"""

CORE_EAGLE = """
    import torch


    class Backbone(torch.nn.Module):
        def forward(self, input_ids, positions, hidden_states):
            return hidden_states


    class EagleCausalLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Backbone()

        def forward(self, input_ids, positions, hidden_states):
            return self.model(input_ids, positions, hidden_states)


    def load():
        return EagleCausalLM()
"""

PLUGIN_BACKBONE = """
    from vllm.model import Backbone


    def forward(self, input_ids, positions{params}):
        return input_ids


    Backbone.forward = forward
"""


def test_a_core_file_s_own_class_of_that_name_is_another_class(tmp_path):
    def run(where, params):
        core = {"vllm/model.py": CORE_BACKBONE, "vllm/eagle.py": CORE_EAGLE}
        plugin = {"vllm_ascend/model.py": PLUGIN_BACKBONE.format(params=params)}
        return by_symbol(gate(where, core, plugin, ("vllm_ascend.model",)), "replacement:vllm.model.Backbone.forward")

    # takes what vllm/model.py passes; only the eagle file's own Backbone is called with three
    assert not [f for f in run(tmp_path / "a", ", intermediate_tensors, inputs_embeds") if f.severity == "error"]
    # a forward that does not take what vllm/model.py passes is still held to it
    [found] = run(tmp_path / "b", "")
    assert found.severity == "error" and "vllm/model.py" in found.message, found


# An override of a core module's forward runs only where core's construction builds the
# plugin's class. (After 235bfa5, found re-running the tuned set: vLLM 0.12.0's Qwen3-Omni vision
# block builds core's own Qwen2_5_VisionAttention, and MiniMax core's own FusedMoE; the plugin's
# subclasses' forwards were held to those calls, three false keys.)
CORE_OP = gatekit.CUSTOM_OP_REGISTRY + """

    class FusedMoE(CustomOp):
        def forward(self, hidden_states, router_logits):
            return hidden_states


    class MiniMaxMoE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = FusedMoE()

        def forward(self, hidden_states, router_logits):
            return self.experts(hidden_states=hidden_states, router_logits=router_logits)


    def load():
        return MiniMaxMoE()
"""

PLUGIN_OP = """
    from vllm.op import CustomOp, FusedMoE


    class AscendFusedMoE(FusedMoE):
        def forward(self, hidden_states, router_logits, is_prefill):
            return hidden_states
{register}"""

REGISTER_OP = """

    CustomOp.register_oot(_decorated_op_cls=AscendFusedMoE, name="FusedMoE")
"""


def test_an_override_of_a_module_s_forward_runs_where_core_builds_the_plugin_s_class(tmp_path):
    def run(where, register):
        core = {"vllm/op.py": CORE_OP,
                **FORWARD_CALLERS}
        plugin = {"vllm_ascend/op.py": PLUGIN_OP.format(register=register)}
        return [f for f in by_symbol(gate(where, core, plugin, ("vllm_ascend.op",)),
                                     "override:vllm_ascend.op.AscendFusedMoE.forward") if f.severity == "error"]

    # core's FusedMoE() builds core's own class: the plugin's forward never runs there
    assert not run(tmp_path / "own", "")
    # registered out of tree, core's FusedMoE() builds the plugin's class, called without is_prefill
    [found] = run(tmp_path / "oot", REGISTER_OP)
    assert "self.experts(...)" in found.message and "is_prefill" in found.message, found


# ----------------------------------------------------------------------------- (f) a module the plugin's object holds

# (tuned on the twelfth held-out set's misses, 2026-12-03, seventh session: plugin 0.7.3rc2's
# CustomDeepseekV2ForCausalLM builds self.model = CustomDeepseekV2Model(...), an nn.Module of
# its own, and inherits core 0.8.4's forward, which calls self.model with four arguments.)

CORE_CAUSAL = """
    import torch


    class Backbone(torch.nn.Module):
        def forward(self, input_ids, positions):
            return input_ids


    class ForCausalLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Backbone()

        def forward(self, input_ids, positions, intermediate_tensors=None):
            return self.model(input_ids, positions, intermediate_tensors)
"""

PLUGIN_CAUSAL = """
    import torch

    from vllm.causal import ForCausalLM


    class CustomBackbone(torch.nn.Module):
        def forward(self, input_ids, positions{params}):
            return input_ids


    class CustomForCausalLM(ForCausalLM):
        def __init__(self):
            super().__init__()
            self.model = CustomBackbone()
{own_forward}"""

OWN_FORWARD = """
        def forward(self, input_ids, positions, intermediate_tensors=None):
            return self.model(input_ids, positions, None, None)
"""

HELD = "override:vllm_ascend.causal.CustomBackbone.forward"


def _held_gate(tmp_path, params: str, own_forward: str = ""):
    core = {"vllm/causal.py": CORE_CAUSAL,
            **FORWARD_CALLERS}
    plugin = {"vllm_ascend/causal.py": PLUGIN_CAUSAL.format(params=params, own_forward=own_forward)}
    return gate(tmp_path, core, plugin, ("vllm_ascend.causal",))


def test_core_calling_a_module_the_plugin_s_object_holds_runs_the_plugin_s_forward(tmp_path):
    [found] = by_symbol(_held_gate(tmp_path / "a", ", kv_caches, attn_metadata"), HELD)
    assert found.severity == "error" and found.plugin_line == 7, found
    assert "ForCausalLM.forward calls self.model(...) at vllm/causal.py:15" in found.message
    assert "CustomForCausalLM builds self.model = CustomBackbone(...)" in found.message
    # a forward that takes what core passes, or a subclass that runs its own forward: nothing
    assert not by_symbol(_held_gate(tmp_path / "b", ", intermediate_tensors=None"), HELD)
    assert not by_symbol(_held_gate(tmp_path / "c", ", kv_caches, attn_metadata", OWN_FORWARD), HELD)
