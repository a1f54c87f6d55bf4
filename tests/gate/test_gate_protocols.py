"""A plugin class that implements a core protocol by shape (a model class registered by name,
never a subclass of a core model) is held to the protocol where core calls it: vLLM 0.11.0's
`VllmModelForTextGeneration.compute_logits(hidden_states)` dropped `sampling_metadata`, and the
model runner calls `self.model.compute_logits(hidden)`; vllm-kunlun 0.10.1.1's models still
required it. Synthetic trees; shapes from core's models/interfaces_base.py."""

from __future__ import annotations

import gatekit
import pytest

from overlay.gate import run_gate

INTERFACES = """
    from typing import Protocol, TypeVar, runtime_checkable

    T = TypeVar("T")


    @runtime_checkable
    class VllmModel(Protocol[T]):
        def __init__(self, vllm_config, prefix: str = "") -> None: ...

        def forward(self, input_ids, positions) -> T: ...


    @runtime_checkable
    class VllmModelForTextGeneration(VllmModel[T], Protocol[T]):
        def compute_logits(self, hidden_states: T) -> T: ...
"""

RUNNER = """
    class GPUModelRunner:
        def __init__(self, model):
            self.model = model

        def execute_model(self, hidden):
            return self.model.compute_logits(hidden)
"""

MODEL = """
    from vllm.models.interfaces_base import T


    class Qwen3ForCausalLM:
        def forward(self, input_ids, positions):
            return input_ids

        def compute_logits(self, hidden_states, sampling_metadata):
            return hidden_states
"""

ENTRY = """
    from setuptools import setup
    setup(name="vllm-ascend", entry_points={"vllm.general_plugins": ["models = vllm_ascend:register"]})
"""


def _gate(tmp_path, model=MODEL, runner=RUNNER, registered=True, interfaces=INTERFACES):
    core = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.11.0'\n",
            "vllm/models/__init__.py": "", "vllm/models/interfaces_base.py": interfaces,
            "vllm/v1/__init__.py": "", "vllm/v1/runner.py": runner,
            "vllm/v1/engine.py": "from vllm.v1.runner import GPUModelRunner\n\n\ndef step(m, h):\n"
                                 "    return GPUModelRunner(m).execute_model(h)\n"}
    init = "def register():\n    import vllm_ascend.qwen3  # noqa\n"
    if registered:  # a registry entry names the class, as a plugin's register_model does
        init += '\n\nMODELS = {"Qwen3ForCausalLM": "vllm_ascend.qwen3:Qwen3ForCausalLM"}\n'
    core_dir = gatekit.tree(tmp_path / "core", core)
    plugin_dir = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": init,
                                                    "vllm_ascend/qwen3.py": model})
    return [f for f in run_gate(core_dir, plugin_dir).findings if f.kind == "override"]


def test_a_model_implementing_the_protocol_by_shape_is_held_to_it(tmp_path):
    (f,) = _gate(tmp_path)
    assert f.symbol == "override:vllm_ascend.qwen3.Qwen3ForCausalLM.compute_logits" and f.severity == "error"
    assert "self.model.compute_logits(...)" in f.message and "VllmModelForTextGeneration" in f.message
    # negative twin: no string names the class: the plugin builds it itself (vllm-ascend's
    # drafter DeepseekV4DSparkModel), never core's runner's model
    assert _gate(tmp_path / "unregistered", registered=False) == []


@pytest.mark.parametrize("model", [
    MODEL.replace(", sampling_metadata)", ", sampling_metadata=None)"),  # accepts core's call
    MODEL.replace("def forward(self, input_ids, positions):\n            return input_ids\n", ""),  # not a model
    MODEL.replace("compute_logits", "compute_scores"),  # implements nothing of the protocol
])
def test_a_class_that_accepts_the_call_or_does_not_claim_the_protocol_is_fine(tmp_path, model):
    assert _gate(tmp_path, model=model) == []


def test_a_call_the_protocol_itself_rejects_is_meant_for_another_class(tmp_path):
    runner = RUNNER.replace("self.model.compute_logits(hidden)", "self.model.compute_logits(hidden, None, 1)")
    assert _gate(tmp_path, runner=runner) == []


HASH_INTERFACES = INTERFACES + """

    @runtime_checkable
    class SupportsHash(Protocol):
        def compute_hash(self) -> str: ...
"""

HASH_CALLER = """
    from vllm.config import VllmConfig


    def cache_key(vllm_config: VllmConfig):
        return vllm_config.compute_hash()
"""


def test_a_one_method_protocol_binds_nothing(tmp_path):
    """vLLM 0.24.0's `SupportsHash` declares only `compute_hash(self)`: every class with a
    `compute_hash` method would claim it, and core's `vllm_config.compute_hash()` calls a
    `VllmConfig`, never vllm-ascend's `AscendCompiler.compute_hash(self, vllm_config)`."""
    model = MODEL + """

    class AscendCompiler:
        def compute_hash(self, vllm_config):
            return ""

        def describe(self):
            return ""
    """
    interfaces = HASH_INTERFACES
    core = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.24.0'\n",
            "vllm/models/__init__.py": "", "vllm/models/interfaces_base.py": interfaces,
            "vllm/config.py": "class VllmConfig:\n    def compute_hash(self):\n        return ''\n",
            "vllm/cache.py": HASH_CALLER,
            "vllm/v1/__init__.py": "", "vllm/v1/runner.py": RUNNER.replace("self.model.compute_logits(hidden)",
                                                                           "self.model.compute_logits(hidden, None)"),
            "vllm/v1/engine.py": "from vllm.v1.runner import GPUModelRunner\nfrom vllm.cache import cache_key\n\n\n"
                                 "def step(m, h, c):\n    cache_key(c)\n    return GPUModelRunner(m).execute_model(h)\n"}
    init = "def register():\n    import vllm_ascend.qwen3  # noqa\n"
    core_dir = gatekit.tree(tmp_path / "core", core)
    plugin_dir = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": init,
                                                    "vllm_ascend/qwen3.py": model})
    assert [f.symbol for f in run_gate(core_dir, plugin_dir).findings if f.kind == "override"] == []


def test_a_call_on_a_receiver_not_named_as_the_protocols_object_is_not_meant_for_it(tmp_path):
    """vLLM's transformers MoE layer calls `self.runner.forward(hidden, router_logits)`: two
    positional arguments, which `VllmModel.forward(input_ids, positions)` would accept, but the
    receiver is a MoE runner, not a model. vllm-omni's pipelines whose `forward` takes keywords
    only were held to it (six false keys on the twenty-second held-out set). A receiver whose
    name says model (`self.model`) still counts."""
    model = MODEL.replace("def forward(self, input_ids, positions):", "def embed_input_ids(self, input_ids):\n"
                          "            return input_ids\n\n        def forward(self, *, inputs_embeds=None, **kwargs):") \
                 .replace("return input_ids\n\n        def compute", "return inputs_embeds\n\n        def compute") \
                 .replace(", sampling_metadata)", ", sampling_metadata=None)")
    interfaces = INTERFACES.replace("def forward(self, input_ids, positions) -> T: ...",
                                    "def embed_input_ids(self, input_ids) -> T: ...\n\n"
                                    "        def forward(self, input_ids, positions) -> T: ...")
    moe = RUNNER.replace("self.model.compute_logits(hidden)", "self.runner.forward(hidden, hidden)")
    assert _gate(tmp_path / "runner", model=model, runner=moe, interfaces=interfaces) == []
    by_model = RUNNER.replace("self.model.compute_logits(hidden)", "self.model.forward(hidden, hidden)")
    assert [f.symbol for f in _gate(tmp_path / "model", model=model, runner=by_model, interfaces=interfaces)] == [
        "override:vllm_ascend.qwen3.Qwen3ForCausalLM.forward"]
