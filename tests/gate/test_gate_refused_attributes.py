"""Misses, "a class attribute core now refuses" (issue 27, twenty-ninth session).

The twenty-sixth held-out set (vllm-mblt 0.8.0 against vLLM 0.13.0) missed two model
classes that set `multimodal_cpu_fields = {"image_grid_thw", "video_grid_thw"}`: 0.13.0's
`supports_multimodal(model)` reads the attribute with `getattr(model, ..., None)` and raises
ValueError when it is not None (the switch no longer works, and core says so at model
inspection). The gate now evaluates such a refusal on the value the plugin's class body
sets (refusedattrs.py).

The fake core is cut from vLLM 0.13.0's `vllm/model_executor/models/interfaces.py`
(`SupportsMultiModal`'s class switches and `supports_multimodal`).
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gatekit
from overlay.gate.refusedattrs import UNKNOWN, _evaluate, refusals

PKGS = {"vllm/__init__.py": "", "vllm/model_executor/__init__.py": "", "vllm/model_executor/models/__init__.py": ""}

INTERFACES = """
    from typing import ClassVar


    class SupportsMultiModal:
        supports_multimodal: ClassVar[bool] = True
        merge_by_field_config: ClassVar[bool | None] = None
        multimodal_cpu_fields: ClassVar[set[str] | None] = None


    def supports_multimodal(model):
        res = getattr(model, "supports_multimodal", False)
        if res:
            merge_by_field_config = getattr(model, "merge_by_field_config", None)
            if merge_by_field_config is False:
                raise ValueError("`merge_by_field_config=False` is no longer effective")
            if merge_by_field_config is True:
                print("`merge_by_field_config=True` is redundant")

            multimodal_cpu_fields = getattr(model, "multimodal_cpu_fields", None)
            if multimodal_cpu_fields is not None:
                raise ValueError("`multimodal_cpu_fields` is no longer effective")
        return res
"""

QWEN2_VL = """
    from vllm.model_executor.models.interfaces import SupportsMultiModal


    class Qwen2VLForConditionalGeneration(SupportsMultiModal):
        pass
"""

LOADER = """
    from vllm.model_executor.models.interfaces import supports_multimodal


    def inspect_model(model_cls):
        return supports_multimodal(model_cls)
"""

PLUGIN = """
    from vllm.model_executor.models.qwen2_vl import Qwen2VLForConditionalGeneration


    class MyVL(Qwen2VLForConditionalGeneration):
        {body}


    class Base:
        pass


    class Plain(Base):
        multimodal_cpu_fields = {{"image_grid_thw"}}
"""


def findings(tmp_path, body: str, caller: bool = True) -> list:
    core = {"vllm/model_executor/models/interfaces.py": INTERFACES,
            "vllm/model_executor/models/qwen2_vl.py": QWEN2_VL}
    if caller:
        core["vllm/model_executor/model_loader.py"] = LOADER
    report = gatekit.gate_loaded(tmp_path, PKGS, core, {"vllm_ascend/models.py": PLUGIN.format(body=body)},
                                 ("vllm_ascend.models",))
    return [f for f in report.findings if f.symbol.startswith("override:vllm_ascend.models.")]


def test_a_class_attribute_core_raises_on_is_an_error(tmp_path):
    [f] = findings(tmp_path, 'multimodal_cpu_fields = {"image_grid_thw", "video_grid_thw"}')
    assert f.symbol == "override:vllm_ascend.models.MyVL.multimodal_cpu_fields"
    assert (f.plugin_path, f.plugin_line, f.severity) == ("vllm_ascend/models.py", 5, "error")
    assert "supports_multimodal" in f.message and "ValueError" in f.message, f.message
    assert f.core_path == "vllm/model_executor/models/interfaces.py"


@pytest.mark.parametrize("body", [
    "multimodal_cpu_fields = None",  # the test is `is not None`
    "merge_by_field_config = True",  # core only warns on it
    "other_switch = 1",
])
def test_a_value_core_accepts_is_no_finding(tmp_path, body):
    assert findings(tmp_path, body) == []


def test_the_value_core_raises_on_for_another_switch(tmp_path):
    [f] = findings(tmp_path, "merge_by_field_config = False")
    assert f.symbol == "override:vllm_ascend.models.MyVL.merge_by_field_config"


def test_a_refusal_no_core_code_runs_is_no_finding(tmp_path):
    assert findings(tmp_path, 'multimodal_cpu_fields = {"image_grid_thw"}', caller=False) == []


def test_a_class_outside_core_s_hierarchy_is_not_judged(tmp_path):
    # Plain sets the attribute too and has a base, but no core class is in its method resolution order
    assert [f.symbol for f in findings(tmp_path, 'multimodal_cpu_fields = {"a"}')] == \
        ["override:vllm_ascend.models.MyVL.multimodal_cpu_fields"]


VALUES = st.sampled_from([None, True, False, 0, 1, "", "x", (), ("a",), frozenset(), frozenset({"a"})])
TESTS = st.sampled_from(["v is not None", "v is None", "v", "not v", "v is True", "v is False", "v == 1",
                         "v != 1", 'v == "x"', "not (v is None)"])


@settings(max_examples=60, deadline=None)
@given(value=VALUES, test=TESTS, direct=st.booleans())
def test_the_refusal_is_judged_as_python_would_run_it(value, test, direct):
    # the branch is taken exactly when Python would take it with the plugin's value, whether
    # the core reads the attribute into a name first or inside the test
    probe = 'getattr(model, "switch", None)'
    spelled = test.replace("v", probe) if direct else test
    source = (f"def check(model):\n    v = {probe}\n    if {spelled}:\n        raise ValueError('no')\n"
              if not direct else f"def check(model):\n    if {spelled}:\n        raise ValueError('no')\n")
    [(func, node, _, subject)] = refusals(ast.parse(source), "switch")
    assert func == "check"
    expected = bool(eval(test, {}, {"v": value}))  # noqa: S307 - a test's own fixed expressions
    assert _evaluate(node.test, value, subject) is expected


def test_a_test_the_gate_cannot_evaluate_is_unknown():
    source = 'def check(model, x):\n    v = getattr(model, "switch", None)\n    if v is not None and x:\n' \
             '        raise ValueError("no")\n'
    [(_, node, _, subject)] = refusals(ast.parse(source), "switch")
    assert _evaluate(node.test, {"a"}, subject) is UNKNOWN


def test_a_name_bound_twice_or_a_branch_that_returns_first_is_no_refusal():
    twice = 'def check(model):\n    v = getattr(model, "switch", None)\n    v = None\n    if v is not None:\n' \
            '        raise ValueError("no")\n'
    returns = 'def check(model):\n    if getattr(model, "switch", None) is not None:\n        return 1\n' \
              '        raise ValueError("no")\n'
    other = 'def check(model):\n    thing = object()\n    if getattr(thing, "switch", None) is not None:\n' \
            '        raise ValueError("no")\n'
    other_bound = 'def check(model):\n    thing = object()\n    v = getattr(thing, "switch", None)\n' \
                  '    if v is not None:\n        raise ValueError("no")\n'
    for source in (twice, returns, other, other_bound):
        assert refusals(ast.parse(source), "switch") == [], source
