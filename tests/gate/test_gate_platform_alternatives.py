"""False negatives, "another platform's class" (issue 27, twenty-sixth/seventh sessions).

`checks.platform_alternatives` calls a core class dead when it derives directly from a core
base a plugin class also derives from, and nothing imports or calls it by name: core's GPU
`Worker(WorkerBase)` beside the plugin's `NPUWorker(WorkerBase)`. Platforms choose their
worker by its full dotted name. But models, LoRA layers and KV connectors share bases with
the plugin's too (`SupportsPP`, `BaseLayerWithLoRA`), and those are picked by the user's
configuration through registries: a bare name in a table (`"SarvamMLAForCausalLM":
("sarvam", "SarvamMLAForCausalLM")`) or the class itself in a set (`_all_lora_classes`).
Over vLLM 0.30.0 with vllm-ascend 0.29.0rc1 the rule called 259 such classes dead, and two
real-break families went unreported: core's `SarvamMLAAttention.forward` passes
`llama_4_scaling=` to the MLA wrapper the plugin registers out of tree, and core's fully
sharded LoRA layers call `add_expand` with arguments `PunicaWrapperNPU` does not take.

The fixtures are synthetic; their shapes follow vLLM 0.30.0's
`model_executor/models/registry.py` (`_TEXT_GENERATION_MODELS`), `models/sarvam.py`
(`self.mla_attn(positions, hidden_states, llama_4_scaling=None)`), `lora/utils.py`
(`_all_lora_classes`), and V0's `MultiStepWorker(Worker)` / `XPUWorker(Worker)`.
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/model_executor/__init__.py": "", "vllm/model_executor/models/__init__.py": "",
        "vllm/model_executor/layers/__init__.py": "", "vllm/platforms/__init__.py": "",
        "vllm/worker/__init__.py": ""}


INTERFACES = """
    class SupportsPP:
        supports_pp = True
"""

MLA = """
    class MLAWrapper:
        def forward_mla(self, positions, hidden_states, llama_4_scaling=None):
            return hidden_states
"""

SARVAM = """
    from vllm.model_executor.models.interfaces import SupportsPP


    class SarvamAttention:
        def run(self, layer, positions, hidden_states):
            return layer.forward_mla(positions, hidden_states, llama_4_scaling=None)


    class SarvamForCausalLM(SupportsPP):
        def __init__(self, layer):
            self.layer = layer

        def forward(self, positions, hidden_states):
            return self.attn.run(self.layer, positions, hidden_states)
"""

# the registry, as vLLM's: the architecture name and a (module, class) pair of bare strings
REGISTRY = """
    _TEXT_GENERATION_MODELS = {
        "SarvamForCausalLM": ("sarvam", "SarvamForCausalLM"),
    }
"""

PLUGIN = """
    from vllm.model_executor.layers.mla import MLAWrapper
    from vllm.model_executor.models.interfaces import SupportsPP


    class AscendMLA(MLAWrapper):
        def forward_mla(self, positions, hidden_states):
            return hidden_states


    class AscendModel(SupportsPP):
        def forward(self, positions, hidden_states):
            return AscendMLA().forward_mla(positions, hidden_states)
"""

CORE = {"vllm/model_executor/models/interfaces.py": INTERFACES, "vllm/model_executor/layers/mla.py": MLA,
        "vllm/model_executor/models/sarvam.py": SARVAM}
OVERRIDE = "AscendMLA.forward_mla"


def gate(tmp_path, core: dict[str, str], plugin: str = PLUGIN, extra: dict[str, str] | None = None):
    return gatekit.gate_loaded(tmp_path, PKGS, core, {"vllm_ascend/models.py": plugin, **(extra or {})},
                               ("vllm_ascend.models",))


def severities(report, suffix: str = OVERRIDE) -> list[str]:
    return sorted(f.severity for f in report.findings if f.symbol.endswith(suffix))


def assert_not_error(report, suffix: str = OVERRIDE) -> None:
    found = [f for f in report.findings if f.symbol.endswith(suffix)]
    assert found and all(f.severity != "error" for f in found), [(f.severity, f.message) for f in found]


def with_registry(registry: str) -> dict[str, str]:
    return {**CORE, "vllm/model_executor/models/registry.py": registry}


def test_a_model_nothing_registers_is_another_platform_s_and_its_break_no_error(tmp_path):
    # the premise: without a registry entry the model counts as another platform's class
    assert_not_error(gate(tmp_path / "a", CORE))


def test_a_model_registered_by_bare_name_is_picked_by_the_configuration(tmp_path):
    assert severities(gate(tmp_path / "a", with_registry(REGISTRY))) == ["error"]


def test_a_class_in_a_module_level_set_is_picked(tmp_path):
    # `_all_lora_classes = {..., ColumnParallelLinearWithShardedLoRA, ...}`
    registry = ("from vllm.model_executor.models.sarvam import SarvamForCausalLM\n\n"
                "_ALL = {SarvamForCausalLM}\n")
    assert severities(gate(tmp_path / "a", with_registry(registry))) == ["error"]


def test_the_full_dotted_name_is_how_a_platform_chooses_not_a_pick(tmp_path):
    # `worker_cls = "vllm.v1.worker.gpu_worker.Worker"`, the attention-backend enum's values
    registry = "_BACKENDS = ['vllm.model_executor.models.sarvam.SarvamForCausalLM']\n"
    assert_not_error(gate(tmp_path / "a", with_registry(registry)))


def test_a_label_equal_to_the_name_is_no_pick(tmp_path):
    # `process_name = "Worker"`: a string alone, in no table
    assert_not_error(gate(tmp_path / "a", with_registry('process_name = "SarvamForCausalLM"\n')))


def test_names_that_pass_no_class_are_no_picks(tmp_path):
    registry = ("from vllm.model_executor.models.sarvam import SarvamForCausalLM\n\n"
                "__all__ = ['SarvamForCausalLM']\n\n\n"
                "def describe(model, table):\n"
                "    if isinstance(model, (SarvamForCausalLM, int)) or type(model) is SarvamForCausalLM:\n"
                "        return table[SarvamForCausalLM], SarvamForCausalLM.supports_pp\n"
                "    return None\n\n\n"
                "class Other(SarvamForCausalLM):\n"
                "    pass\n")
    core = with_registry(registry)
    assert_not_error(gate(tmp_path / "a", core))


def test_a_registry_in_code_that_cannot_run_picks_nothing(tmp_path):
    # the table sits in a method of a class only the (dead) model itself uses
    sarvam = SARVAM + ("\n        def _register(self):\n"
                       "            return {'SarvamForCausalLM': ('sarvam', 'SarvamForCausalLM')}\n")
    assert_not_error(gate(tmp_path / "a", {**CORE, "vllm/model_executor/models/sarvam.py": sarvam}))
    # or in a method of another class the plugin never runs (another platform's too)
    other = ("from vllm.model_executor.models.interfaces import SupportsPP\n\n\n"
             "class OtherModel(SupportsPP):\n"
             "    def _register(self):\n"
             "        return {'SarvamForCausalLM': ('sarvam', 'SarvamForCausalLM')}\n")
    assert_not_error(gate(tmp_path / "c", with_registry(other)))
    # the same table in a module-level function that runs on import picks it
    registry = ("def _register():\n"
                "    return {'SarvamForCausalLM': ('sarvam', 'SarvamForCausalLM')}\n\n\n"
                "TABLE = _register()\n")
    assert severities(gate(tmp_path / "b", with_registry(registry))) == ["error"]


def test_a_plugin_string_naming_the_class_picks_it(tmp_path):
    # the plugin registers or configures it by name (a model's architecture in its own table)
    extra = {"vllm_ascend/table.py": "ARCHS = 'SarvamForCausalLM'\n"}
    assert severities(gate(tmp_path / "a", CORE, extra=extra)) == ["error"]


def test_a_picked_module_level_alias_picks_the_class(tmp_path):
    registry = ("from vllm.model_executor.models.sarvam import SarvamForCausalLM\n\n"
                "Sarvam = SarvamForCausalLM\n")
    # the alias alone picks nothing
    assert_not_error(gate(tmp_path / "a", with_registry(registry)))
    # the alias in a table picks the class
    assert severities(gate(tmp_path / "b", with_registry(registry + "\n_ALL = [Sarvam]\n"))) == ["error"]


def test_a_picked_subclass_keeps_its_base_live(tmp_path):
    # a registered specialisation runs the base's methods
    sarvam = SARVAM + "\n\n    class SarvamV2ForCausalLM(SarvamForCausalLM):\n        pass\n"
    core = {**CORE, "vllm/model_executor/models/sarvam.py": sarvam,
            "vllm/model_executor/models/registry.py": "_MODELS = {'SarvamV2ForCausalLM': ('sarvam', 'SarvamV2ForCausalLM')}\n"}
    assert severities(gate(tmp_path / "a", core)) == ["error"]
    # a subclass of another module's class of the same name keeps nothing live
    other = ("from vllm.model_executor.models.interfaces import SupportsPP\n\n\n"
             "class SarvamForCausalLM(SupportsPP):\n    pass\n\n\n"
             "class SarvamV2ForCausalLM(SarvamForCausalLM):\n    pass\n")
    core = {**CORE, "vllm/model_executor/models/sarvam_v0.py": other,
            "vllm/model_executor/models/registry.py": "_MODELS = {'SarvamV2ForCausalLM': ('sarvam_v0', 'SarvamV2ForCausalLM')}\n"}
    assert_not_error(gate(tmp_path / "b", core))


# V0's shape: the plugin builds core's `MultiStepWorker(Worker)`, which keeps V0's `Worker`
# live; `XPUWorker(Worker)` stays another platform's worker, judged on its own
WORKERS = """
    class WorkerBase:
        def execute_model(self, layer, positions, hidden_states):
            return hidden_states


    class Worker(WorkerBase):
        pass


    class MultiStepWorker(Worker):
        pass


    class XPUWorker(Worker):
        def execute_model(self, layer, positions, hidden_states):
            return layer.forward_mla(positions, hidden_states, llama_4_scaling=None)
"""

NPU_WORKER = PLUGIN + """

    from vllm.worker.worker import WorkerBase, MultiStepWorker


    class NPUWorker(WorkerBase):
        def proposer(self):
            return MultiStepWorker()
"""


def test_a_specialisation_is_judged_on_its_own(tmp_path):
    core = {**CORE, "vllm/worker/worker.py": WORKERS}
    # the premise: core's only caller sits in XPUWorker, another platform's worker
    assert_not_error(gate(tmp_path / "a", core, NPU_WORKER.replace("return MultiStepWorker()", "return None")))
    # MultiStepWorker built by the plugin keeps Worker live, not its other specialisation
    assert_not_error(gate(tmp_path / "b", core, NPU_WORKER))
    # XPUWorker picked by name is live
    core["vllm/platforms/table.py"] = "WORKERS = ['XPUWorker']\n"
    assert severities(gate(tmp_path / "c", core, NPU_WORKER)) == ["error"]
