"""A method whose name is too common to follow, on a class nothing that runs touches.

vLLM 0.9.2/0.10.0's `DeepseekV2ForCausalLM.set_eplb_state` reads `self.expert_weights`, which
only its `__init__` sets; vllm-ascend 0.9.x's model classes skip that `__init__`. The only core
caller of `set_eplb_state` is the classmethod `EplbState.build`, and the only caller of that
is `GPUModelRunner.load_model`, a runner the plugin never builds. But `build` is called in
32 core files, so the gate stopped there ("build is called in 32 files": reachable) and
called each read an error (8 false keys over two pairings). A method runs on an instance
or through its class; where every place that names the class sits in code that cannot run
(an annotation, the class's own methods and a static method that does not name the class
aside), it cannot run. Anything that could touch the class from live code keeps the error.
Synthetic trees written anew, in the shape of those files."""

from __future__ import annotations

import ast
import textwrap

import gatekit
import pytest

from overlay.gate import run_gate

# the platform plugin's entry point and core's worker base, as the instance-reachability tests have them
from test_gate_reachability_instances import ENTRY, WORKER_BASE

GPU_WORKER = """
    from vllm.v1.worker.worker_base import WorkerBase
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner


    class Worker(WorkerBase):
        def init_device(self):
            self.model_runner = GPUModelRunner()
"""

GPU_RUNNER = """
    from typing import Optional

    from vllm.distributed.eplb.eplb_state import EplbState


    class GPUModelRunner:
        def __init__(self):
            self.eplb_state: Optional[EplbState] = None

        def load_model(self, model):
            self.model = model
            self.eplb_state = EplbState.build(self.model)
"""

EPLB_STATE = """
    from dataclasses import dataclass


    @dataclass
    class EplbState:
        physical_to_logical_map: list

        @staticmethod
        def build_initial_map(num_experts):
            return list(range(num_experts))

        @classmethod
        def build(cls, model) -> "EplbState":
            mapping = cls.build_initial_map(8)
            model.set_eplb_state(mapping)
            return cls(mapping)
"""

LAYER = """
    from vllm.distributed.eplb.eplb_state import EplbState


    class FusedMoE:
        def make_expert_map(self, num_experts):
            self.expert_map = EplbState.build_initial_map(num_experts)
            return self.expert_map
"""

MODEL = """
    class DeepseekV2ForCausalLM:
        def __init__(self, config):
            self.config = config
            self.expert_weights = []

        def set_eplb_state(self, mapping):
            for weights in self.expert_weights:
                weights.clear()
            self.mapping = mapping
"""

PLUGIN_MODEL = """
    from vllm.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM


    class CustomDeepseekV2ForCausalLM(DeepseekV2ForCausalLM):
        def __init__(self, config):
            self.config = config
"""

PLUGIN_WORKER = """
    from vllm.v1.worker.worker_base import WorkerBase


    class NPUModelRunner:
        def load_model(self, model):
            self.model = model


    class NPUWorker(WorkerBase):
        def init_device(self):
            self.model_runner = NPUModelRunner()
"""

READ = "attribute:vllm.model_executor.models.deepseek_v2.DeepseekV2ForCausalLM.expert_weights"

# `build` is called in more core files than the gate follows by name (vLLM 0.9.2: 32)
FILLER = {f"vllm/misc/builder_{i}.py": f"def make_{i}(x):\n    return x.build()\n" for i in range(30)}


def _severity(tmp_path, *, state=EPLB_STATE, runner=GPU_RUNNER, layer=LAYER, plugin_worker=PLUGIN_WORKER,
              extra_core=None, filler=FILLER):
    extra_core = extra_core or {}
    for text in (state, runner, layer, plugin_worker, *extra_core.values()):
        ast.parse(textwrap.dedent(text))  # a variant that does not parse would pass for nothing
    core = gatekit.tree(tmp_path / "core", {
        "vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.10.0'\n",
        "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "", "vllm/misc/__init__.py": "",
        "vllm/distributed/__init__.py": "", "vllm/distributed/eplb/__init__.py": "",
        "vllm/model_executor/__init__.py": "", "vllm/model_executor/models/__init__.py": "",
        "vllm/model_executor/layers/__init__.py": "",
        "vllm/v1/worker/worker_base.py": WORKER_BASE, "vllm/v1/worker/gpu_worker.py": GPU_WORKER,
        "vllm/v1/worker/gpu_model_runner.py": runner, "vllm/distributed/eplb/eplb_state.py": state,
        "vllm/model_executor/layers/fused_moe.py": layer, "vllm/model_executor/models/deepseek_v2.py": MODEL,
        **filler, **extra_core})
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY,
        "vllm_ascend/__init__.py": "def register():\n    import vllm_ascend.worker  # noqa\n"
                                   "    import vllm_ascend.models  # noqa\n",
        "vllm_ascend/worker.py": plugin_worker, "vllm_ascend/models.py": PLUGIN_MODEL})
    found = [f for f in run_gate(core, plugin).findings if f.symbol == READ]
    assert found, "the skipped-__init__ read was not reported at all"
    return found[0]


@pytest.mark.parametrize("variant", [
    {},
    # a live annotation names the class: a type, nothing passed
    {"layer": LAYER.replace("    class FusedMoE:\n",
                            "    from typing import Optional\n\n\n    class FusedMoE:\n"
                            "        state: Optional[EplbState] = None\n\n")},
    # a plain class attribute read from live code: no instance, no class object passed on
    {"state": EPLB_STATE.replace("        physical_to_logical_map: list\n",
                                 "        physical_to_logical_map: list\n        VERSION = 2\n"),
     "layer": LAYER.replace("return self.expert_map", "return self.expert_map, EplbState.VERSION")},
    # no live use at all
    {"layer": LAYER.replace("EplbState.build_initial_map(num_experts)", "list(range(num_experts))")},
    # the class's own methods name it: they run only if something else runs them
    {"state": EPLB_STATE.replace("return cls(mapping)", "return EplbState(mapping)")},
    # another module's class of the same name, used live, is another class
    {"extra_core": {"vllm/other/__init__.py": "", "vllm/other/state.py":
                    "class EplbState:\n    pass\n\n\ndef make():\n    return EplbState()\n"}},
])
def test_a_common_named_method_of_a_class_only_dead_code_touches_is_no_error(tmp_path, variant):
    finding = _severity(tmp_path, **variant)
    assert finding.severity != "error", finding
    assert "EplbState.build runs only through EplbState" in finding.reason + finding.message, finding


def test_the_reason_names_the_dead_code_that_touches_the_class(tmp_path):
    finding = _severity(tmp_path)
    text = finding.reason + finding.message
    assert "vllm/v1/worker/gpu_model_runner.py:" in text and "GPUModelRunner is built only at" in text, text
    # the read's evidence names the caller that cannot run, not "nothing calls it"
    assert "no call of it can run (vllm/distributed/eplb/eplb_state.py:" in finding.reason, finding.reason


LIVE = """
    from vllm.distributed.eplb.eplb_state import EplbState


    class Elastic:
        def scale(self, model):
            {body}
"""


@pytest.mark.parametrize("body", [
    "return EplbState.build(model)",  # a live call through the class
    "factory = EplbState\n            return factory.build(model)",  # the class passed on
    "return [EplbState][0].build(model)",
    "return getattr(EplbState, 'build')(model)",
    "return EplbState(model).physical_to_logical_map",  # an instance made
    "return EplbState.other(model)",  # another classmethod: it may reach build
])
def test_a_live_use_of_the_class_keeps_the_error(tmp_path, body):
    state = EPLB_STATE + "\n        @classmethod\n        def other(cls, model):\n            return cls.build(model)\n"
    live = LIVE.replace("{body}", body)
    finding = _severity(tmp_path, state=state, extra_core={"vllm/distributed/elastic.py": live})
    assert finding.severity == "error", finding


def test_the_same_call_in_code_that_cannot_run_is_no_error(tmp_path):
    # the twin of the live calls above: the caller sits in a class only dead code builds
    live = LIVE.replace("{body}", "return EplbState.build(model)")
    runner = GPU_RUNNER.replace("self.eplb_state: Optional[EplbState] = None",
                                "self.eplb_state: Optional[EplbState] = None\n"
                                "            from vllm.distributed.elastic import Elastic\n"
                                "            self.elastic = Elastic()")
    finding = _severity(tmp_path, runner=runner, extra_core={"vllm/distributed/elastic.py": live})
    assert finding.severity != "error", finding


@pytest.mark.parametrize("variant", [
    # a static method reached from live code that names the class may make an instance
    {"state": EPLB_STATE.replace("return list(range(num_experts))",
                                 "return EplbState(list(range(num_experts))).physical_to_logical_map")},
    # a decorator other than dataclass may register the class for someone to build
    {"state": EPLB_STATE.replace("@dataclass\n", "@dataclass\n    @register('eplb')\n")
     .replace("from dataclasses import dataclass\n",
              "from dataclasses import dataclass\n\n\n    def register(name):\n        return lambda c: c\n")},
    # a metaclass may do the same
    {"state": EPLB_STATE.replace("class EplbState:", "class EplbState(metaclass=type):")},
    # the class body itself uses it at import
    {"state": EPLB_STATE + "\n        DEFAULT = None\n    EplbState.DEFAULT = EplbState.build\n"},
    # a core subclass that live code builds
    {"extra_core": {"vllm/distributed/eplb/sub.py": "from vllm.distributed.eplb.eplb_state import EplbState\n\n\n"
                    "class SubState(EplbState):\n    pass\n\n\n"
                    "def make():\n    return SubState([])\n"}},
    # imported under another name
    {"extra_core": {"vllm/distributed/alias.py": "from vllm.distributed.eplb.eplb_state import EplbState as ES\n\n\n"
                    "def make(model):\n    return ES.build(model)\n"}},
    # reached as a module attribute from live code
    {"extra_core": {"vllm/distributed/modattr.py": "import vllm.distributed.eplb.eplb_state as es\n\n\n"
                    "def make(model):\n    return es.EplbState.build(model)\n"}},
    # named in full as a string in live code
    {"extra_core": {"vllm/distributed/named.py":
                    "def make():\n    return 'vllm.distributed.eplb.eplb_state.EplbState'\n"}},
    # the plugin names the class itself
    {"plugin_worker": PLUGIN_WORKER.replace(
        "            self.model = model\n",
        "            self.model = model\n"
        "            from vllm.distributed.eplb.eplb_state import EplbState\n"
        "            self.state = EplbState.build(model)\n")},
    # the plugin reaches it through its module, importing no name of it
    {"plugin_worker": PLUGIN_WORKER.replace(
        "            self.model = model\n",
        "            self.model = model\n"
        "            import vllm.distributed.eplb.eplb_state as es\n"
        "            self.state = es.EplbState.build(model)\n")},
])
def test_what_the_gate_cannot_rule_out_keeps_the_error(tmp_path, variant):
    finding = _severity(tmp_path, **variant)
    assert finding.severity == "error", finding


def test_a_name_called_in_few_files_is_followed_as_before(tmp_path):
    # below the common-name limit the callers are followed by name: the same chain ends in
    # the dead runner without the new rule, and the finding says so
    finding = _severity(tmp_path, filler={})
    assert finding.severity != "error", finding
    assert "runs only through" not in finding.reason + finding.message, finding


def test_a_live_call_of_the_method_itself_keeps_the_error_when_it_is_static(tmp_path):
    # a static method's live calls through the class are calls of it, not a benign use
    state = EPLB_STATE.replace("        @classmethod\n        def build(cls, model) -> \"EplbState\":\n"
                               "            mapping = cls.build_initial_map(8)\n",
                               "        @staticmethod\n        def build(model):\n"
                               "            mapping = list(range(8))\n").replace("return cls(mapping)", "return mapping")
    assert state != EPLB_STATE
    live = LIVE.replace("{body}", "return EplbState.build(model)")
    finding = _severity(tmp_path, state=state, extra_core={"vllm/distributed/elastic.py": live})
    assert finding.severity == "error", finding
    # and its twin: the same static method called only from the dead runner
    finding = _severity(tmp_path / "twin", state=state)
    assert finding.severity != "error", finding
