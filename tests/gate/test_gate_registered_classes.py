"""Misses, "a method core turned into a property, called in a class core builds from a
registration" (issue 27, twenty-ninth session).

The twenty-sixth held-out set (vllm-mblt 0.8.0 against vLLM 0.13.0) missed
`p.get_num_embeds()` in the plugin's Qwen3-ASR processor: 0.13.0 made
`PlaceholderRange.get_num_embeds` a `cached_property` (an int), so the call raises TypeError.
The checker forecast it (`"int" not callable`) but the forecast stayed a warning twice over:
calling a value of a builtin type that is never callable was not among the diagnostics that
raise whenever their line runs, and nothing showed the processor class built, because the
plugin hands the class to core's registry (`@MULTIMODAL_REGISTRY.register_processor(Proc,
info=..., dummy_inputs=...)` on its model class) and core builds it from there. Now such a
diagnostic raises, and a plugin class passed to a core `register*` call in code that runs is
built by core (the out-of-tree op registry, `register_oot`, keeps its own stricter rule).

Synthetic trees cut from vLLM 0.12.0/0.13.0's `vllm/multimodal/inputs.py` (`PlaceholderRange`)
and `vllm/multimodal/registry.py` (`MultiModalRegistry.register_processor`, which stores the
processor class for `create_processor` to build).
"""

from __future__ import annotations

import json

import pytest

from gatekit import tree
from overlay.gate import checker
from overlay.gate.callers import COMMON
from overlay.gate.engines import raises
from overlay.gate.findings import Finding

INPUTS = {
    "1.0": """
        class PlaceholderRange:
            def __init__(self, offset: int, length: int) -> None:
                self.offset = offset
                self.length = length

            def get_num_embeds(self) -> int:
                return self.length
    """,
    "2.0": """
        from functools import cached_property


        class PlaceholderRange:
            def __init__(self, offset: int, length: int) -> None:
                self.offset = offset
                self.length = length

            @cached_property
            def get_num_embeds(self) -> int:
                return self.length
    """,
}

PROCESSING = """
    from vllm.multimodal.inputs import PlaceholderRange


    class BaseMultiModalProcessor:
        def __init__(self, info: object) -> None:
            self.info = info

        def apply(self, prompt: str) -> list[PlaceholderRange]:
            return [PlaceholderRange(0, len(prompt))]
"""

REGISTRY = """
    class MultiModalRegistry:
        def __init__(self) -> None:
            self.factories: dict = {}

        def register_processor(self, processor, *, info):
            def wrapper(model_cls):
                self.factories[model_cls] = (processor, info)
                return model_cls
            return wrapper

        def create_processor(self, model_cls):
            processor, info = self.factories[model_cls]
            return processor(info())


    MULTIMODAL_REGISTRY = MultiModalRegistry()
"""

PREPROCESS = """
    from vllm.multimodal.registry import MULTIMODAL_REGISTRY


    def preprocess(model_cls, prompt):
        return MULTIMODAL_REGISTRY.create_processor(model_cls).apply(prompt)
"""

PLUGIN = """
    from vllm.multimodal.processing import BaseMultiModalProcessor
    from vllm.multimodal.registry import MULTIMODAL_REGISTRY
    from vllm_ascend.own_registry import OWN_REGISTRY


    class AsrInfo:
        pass


    class AsrProcessor(BaseMultiModalProcessor):
        def apply(self, prompt: str):
            out = super().apply(prompt)
            return sum(p.get_num_embeds() for p in out)  # CALLED: a property's value called


    @{registry}.register_processor(AsrProcessor, info=AsrInfo)
    class AsrModel:
        pass
"""

OWN_REGISTRY = """
    class OwnRegistry:
        def register_processor(self, processor, *, info):
            return lambda model_cls: model_cls


    OWN_REGISTRY = OwnRegistry()
"""

ENTRY = """
    from setuptools import setup
    setup(name="vllm-ascend", entry_points={"vllm.platform_plugins": ["ascend = vllm_ascend:register"]})
"""


def _trees(root, registry: str):
    def core(version):
        return tree(root / f"core-{version}", {
            "vllm/__init__.py": "", "vllm/_version.py": f"__version__ = version = '{version}'\n",
            "vllm/multimodal/__init__.py": "", "vllm/multimodal/inputs.py": INPUTS[version],
            "vllm/multimodal/processing.py": PROCESSING, "vllm/multimodal/registry.py": REGISTRY,
            "vllm/inputs/__init__.py": "", "vllm/inputs/preprocess.py": PREPROCESS,
            # `apply` is a name core calls everywhere (vLLM 0.13.0: 99 files), too common to follow
            "vllm/misc/__init__.py": "",
            **{f"vllm/misc/user{i}.py": "def use(x):\n    return x.apply(1)\n" for i in range(COMMON + 1)}})
    plugin = tree(root / "plugin", {"setup.py": ENTRY,
                                    "vllm_ascend/__init__.py": "def register():\n    import vllm_ascend.asr\n",
                                    "vllm_ascend/own_registry.py": OWN_REGISTRY,
                                    "vllm_ascend/asr.py": PLUGIN.format(registry=registry)})
    return core("1.0"), core("2.0"), plugin


@pytest.mark.parametrize("registry", ["MULTIMODAL_REGISTRY", "OWN_REGISTRY"])
def test_a_property_called_in_a_class_handed_to_core_s_registry_is_a_confirmed_break(run, tmp_path, registry):
    if checker.installed() is None:
        pytest.skip("mypy (the `gate` extra) is not installed")
    old, new, plugin = _trees(tmp_path, registry)
    code, out, err = run("gate", "--core", new, "--plugin", plugin, "--declared-core", old,
                         "--engine", "both", "--json", root=tmp_path)
    assert code in (0, 1), err
    doc = json.loads(out)
    lines = (plugin / "vllm_ascend/asr.py").read_text().splitlines()
    called = [f for f in doc["findings"] if f["plugin"]["path"] == "vllm_ascend/asr.py"
              and "CALLED" in lines[f["plugin"]["line"] - 1]]
    assert [f["symbol"] for f in called] == ['type:operator:"int" not callable'], doc["findings"]
    [f] = called
    if registry == "MULTIMODAL_REGISTRY":
        # core's registry builds the class: the line runs, and calling an int always raises
        assert (f["severity"], f["engine"]) == ("error", "checker"), f["reason"]
        assert "register_processor" in f["reason"], f["reason"]
    else:
        # the plugin's own registry proves nothing about core building it
        assert f["severity"] == "warning" and "not confirmed" in f["reason"], f["reason"]


@pytest.mark.parametrize("shown, raising", [
    ('"int" not callable', True), ('"None" not callable', True), ('"str" not callable', True),
    ('"list[int]" not callable', True), ('"dict[str, Any]" not callable', True),
    # an instance of a class may be callable through a subclass's __call__; a union may hold a callable
    ('"Foo" not callable', False), ('"int | Callable[[], int]" not callable', False),
    ('"Module" not callable', False)])
def test_only_a_builtin_value_that_is_never_callable_raises(shown, raising):
    f = Finding("type", f"type:operator:{shown}", "vllm_ascend/asr.py", 5, "", 0, shown, severity="warning",
                engine="checker", confidence="medium")
    assert raises(f) is raising


def test_a_class_imported_relatively_and_handed_to_core_s_registry_is_built(run, tmp_path):
    # the processor in a module of its own, imported with a relative import where the model
    # class registers it (the import is resolved as Python does: `from .asr_proc import ...`)
    if checker.installed() is None:
        pytest.skip("mypy (the `gate` extra) is not installed")
    old, new, _ = _trees(tmp_path, "MULTIMODAL_REGISTRY")
    processor, model = PLUGIN.format(registry="MULTIMODAL_REGISTRY").split("\n\n\n    @")
    model = ("\n    from vllm.multimodal.registry import MULTIMODAL_REGISTRY\n"
             "    from .asr_proc import AsrInfo, AsrProcessor\n\n\n    @" + model)
    plugin = tree(tmp_path / "plugin2", {
        "setup.py": ENTRY, "vllm_ascend/__init__.py": "def register():\n    import vllm_ascend.procs.models\n",
        "vllm_ascend/own_registry.py": OWN_REGISTRY, "vllm_ascend/procs/__init__.py": "",
        "vllm_ascend/procs/asr_proc.py": processor + "\n", "vllm_ascend/procs/models.py": model})
    code, out, err = run("gate", "--core", new, "--plugin", plugin, "--declared-core", old,
                         "--engine", "both", "--json", root=tmp_path)
    assert code in (0, 1), err
    lines = (plugin / "vllm_ascend/procs/asr_proc.py").read_text().splitlines()
    called = [f for f in json.loads(out)["findings"] if f["plugin"]["path"] == "vllm_ascend/procs/asr_proc.py"
              and "CALLED" in lines[f["plugin"]["line"] - 1]]
    assert [(f["symbol"], f["severity"]) for f in called] == [('type:operator:"int" not callable', "error")], called
    assert "vllm_ascend/procs/models.py" in called[0]["reason"], called[0]["reason"]


def test_code_in_a_hostile_class_attribute_is_never_run(tmp_path):
    # upstream material is data: a class attribute whose value is a program is no literal,
    # so nothing is evaluated (and nothing is judged)
    from test_gate_refused_attributes import findings

    marker = tmp_path / "ran"
    body = f'multimodal_cpu_fields = __import__("os").system("touch {marker}")'
    assert findings(tmp_path / "gate", body) == []
    assert not marker.exists()
