"""A core call guarded by a flag of its receiver that the plugin's class pins against it.

vLLM 0.24-0.34's `RoutedExperts.forward_modular` asserts `not self.quant_method.is_monolithic`
and then calls `self.quant_method.apply(layer=, x=, topk_weights=, topk_ids=, ...)`. vllm-rbln's
MoE methods answer `is_monolithic` with a property that returns True and run `apply` from their
own runner, so core's call never runs with their objects; the gate called each override an
error (7 false keys over four vllm-rbln pairings). Where the flag is not pinned (computed, a
core binding, stored by the plugin, bound again below, or pinned the other way) the call can
run and the error stays. Synthetic trees written anew, in the shape of those files."""

from __future__ import annotations

import ast
import textwrap

import gatekit
import pytest

from overlay.gate import run_gate
from overlay.gate.guards import reads
from overlay.gate.index import ClassInfo, ModuleInfo
from overlay.gate.pinnedflags import pin_finder

ENTRY = """
    from setuptools import setup
    setup(name="vllm-x", entry_points={"vllm.general_plugins": ["x = vllm_x:register"]})
"""

METHOD = """
    class FusedMoEMethodBase:
        @property
        def is_monolithic(self) -> bool:
            return False

        def apply(self, layer, x, topk_weights, topk_ids):
            return x

        def apply_monolithic(self, layer, x, router_logits):
            return x
"""

ROUTED = """
    from vllm.moe.method import FusedMoEMethodBase


    class RoutedExperts:
        def __init__(self, quant_method: FusedMoEMethodBase):
            self.quant_method: FusedMoEMethodBase = quant_method

        def forward_modular(self, x, topk_weights, topk_ids):
            assert not self.quant_method.is_monolithic
            return self.quant_method.apply(layer=self, x=x, topk_weights=topk_weights, topk_ids=topk_ids)

        def forward_monolithic(self, x, router_logits):
            assert self.quant_method.is_monolithic
            return self.quant_method.apply_monolithic(layer=self, x=x, router_logits=router_logits)


    class MoERunner:
        def __init__(self, experts: RoutedExperts):
            self.experts = experts

        def forward(self, x, router_logits, topk_weights, topk_ids):
            if self.experts.quant_method.is_monolithic:
                return self.experts.forward_monolithic(x, router_logits)
            return self.experts.forward_modular(x, topk_weights, topk_ids)
"""

PLUGIN = """
    from vllm.moe.method import FusedMoEMethodBase


    class XMoEMethod(FusedMoEMethodBase):
        @property
        def is_monolithic(self) -> bool:
            # keep core off its modular path: the plugin's runner calls apply() itself
            return True

        def apply(self, layer, x, router_logits):
            return x
"""

APPLY = "override:vllm_x.moe.XMoEMethod.apply"


def _findings(tmp_path, plugin=PLUGIN, routed=ROUTED, method=METHOD, extra=None):
    for text in (plugin, routed, method, *(extra or {}).values()):
        ast.parse(textwrap.dedent(text))  # a variant that does not parse would pass for nothing
    core = gatekit.tree(tmp_path / "core", {
        "vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.30.0'\n",
        "vllm/moe/__init__.py": "", "vllm/moe/method.py": method, "vllm/moe/routed.py": routed})
    plugin_tree = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_x/__init__.py": "def register():\n    import vllm_x.moe  # noqa\n",
        "vllm_x/moe.py": plugin, **(extra or {})})
    return {f.symbol: f for f in run_gate(core, plugin_tree).findings}


def _error(found, symbol=APPLY):
    return symbol in found and found[symbol].severity == "error"


@pytest.mark.parametrize("plugin", [
    PLUGIN,
    # a class attribute pins it as well as a property does
    PLUGIN.replace("@property\n        def is_monolithic(self) -> bool:\n"
                   "            # keep core off its modular path: the plugin's runner calls apply() itself\n"
                   "            return True", "is_monolithic = True"),
    # a docstring before the constant
    PLUGIN.replace("# keep core off its modular path: the plugin's runner calls apply() itself",
                   '"""The plugin\'s runner calls apply() itself."""'),
    # pinned by a plugin base class
    PLUGIN.replace("class XMoEMethod(FusedMoEMethodBase):\n        @property",
                   "class XBase(FusedMoEMethodBase):\n        @property")
          .replace("        def apply(self, layer, x, router_logits):",
                   "    class XMoEMethod(XBase):\n        def apply(self, layer, x, router_logits):"),
])
def test_a_call_behind_a_flag_the_plugin_pins_against_it_is_no_error(tmp_path, plugin):
    found = _findings(tmp_path, plugin=plugin)
    assert not _error(found), found.get(APPLY)


@pytest.mark.parametrize("routed", [
    # an enclosing `if not recv.flag:`
    ROUTED.replace("assert not self.quant_method.is_monolithic\n            return self.quant_method.apply(",
                   "if not self.quant_method.is_monolithic:\n                return self.quant_method.apply("),
    # the else branch of `if recv.flag:`
    ROUTED.replace("assert not self.quant_method.is_monolithic\n            return self.quant_method.apply(",
                   "if self.quant_method.is_monolithic:\n                return None\n"
                   "            else:\n                return self.quant_method.apply("),
    # an early exit
    ROUTED.replace("assert not self.quant_method.is_monolithic",
                   "if self.quant_method.is_monolithic:\n                raise RuntimeError('monolithic')"),
    # an earlier operand of `and`
    ROUTED.replace("assert not self.quant_method.is_monolithic\n            return self.quant_method.apply(",
                   "return not self.quant_method.is_monolithic and self.quant_method.apply("),
])
def test_each_guard_shape_counts(tmp_path, routed):
    assert not _error(_findings(tmp_path, routed=routed))


def test_the_reason_names_the_guard_and_the_pinned_binding(tmp_path):
    found = _findings(tmp_path)
    assert APPLY in found, "the override must still be reported, against what core declares"
    f = found[APPLY]
    assert f.severity != "error"
    assert "not self.quant_method.is_monolithic" in f.reason
    assert "XMoEMethod.is_monolithic is always True (vllm_x/moe.py:" in f.reason


def test_core_calling_through_self_under_a_pinned_flag_is_no_error(tmp_path):
    method = METHOD + textwrap.indent(textwrap.dedent("""
        def dispatch(self, layer, x, router_logits, topk_weights, topk_ids):
            if self.is_monolithic:
                return self.apply_monolithic(layer, x, router_logits)
            return self.apply(layer, x, topk_weights, topk_ids)
    """), "        ")
    routed = ROUTED + "\n\n    def run(m: FusedMoEMethodBase, layer, x, r, w, i):\n        return m.dispatch(layer, x, r, w, i)\n"
    assert not _error(_findings(tmp_path, method=method, routed=routed))
    plain = PLUGIN.replace("return True", "return False")
    assert _error(_findings(tmp_path / "off", plugin=plain, method=method, routed=routed))


@pytest.mark.parametrize("plugin, extra", [
    # pinned the other way: core's modular path runs with it
    (PLUGIN.replace("return True", "return False"), None),
    # not pinned by the plugin: core's own property answers
    (PLUGIN.replace("@property\n        def is_monolithic(self) -> bool:\n"
                    "            # keep core off its modular path: the plugin's runner calls apply() itself\n"
                    "            return True\n", ""), None),
    # computed, not a constant
    (PLUGIN.replace("return True", "return self.layer_count > 1"), None),
    # a method, not a property: a bound method is no flag the gate evaluates
    (PLUGIN.replace("        @property\n", ""), None),
    # the plugin stores the name somewhere: the object may answer otherwise
    (PLUGIN, {"vllm_x/setup_moe.py": "def off(method):\n    method.is_monolithic = False\n"}),
    # a plugin subclass binds it again: the object may be one of those
    (PLUGIN + "\n\n    class XModularMoEMethod(XMoEMethod):\n        is_monolithic = False\n", None),
    # named as a string in the class: setattr may change it
    (PLUGIN.replace("        def apply(", "        def off(self):\n            setattr(self, 'is_monolithic', 0)\n\n"
                                         "        def apply("), None),
])
def test_a_flag_that_is_not_pinned_against_the_guard_keeps_the_error(tmp_path, plugin, extra):
    assert _error(_findings(tmp_path, plugin=plugin, extra=extra))


@pytest.mark.parametrize("routed", [
    # a guard on another object's flag proves nothing about this one
    ROUTED.replace("assert not self.quant_method.is_monolithic", "assert not self.other.is_monolithic"),
    # two calls on one line, one of them unguarded: that one runs
    ROUTED.replace("assert not self.quant_method.is_monolithic\n            return self.quant_method.apply(layer=self, x=x, "
                   "topk_weights=topk_weights, topk_ids=topk_ids)",
                   "return (self.quant_method.apply(self, x, topk_weights, topk_ids) if not "
                   "self.quant_method.is_monolithic else self.quant_method.apply(self, x, topk_weights, topk_ids))"),
    # a test after the call does not guard it
    ROUTED.replace("assert not self.quant_method.is_monolithic\n            return self.quant_method.apply(",
                   "out = self.quant_method.apply(").replace(
                   "topk_ids=topk_ids)\n", "topk_ids=topk_ids)\n            assert not self.quant_method.is_monolithic\n"
                   "            return out\n", 1),
])
def test_a_guard_that_does_not_guard_the_call_keeps_the_error(tmp_path, routed):
    assert _error(_findings(tmp_path, routed=routed))


def test_the_monolithic_twin_is_still_checked(tmp_path):
    """The same pin lets core's monolithic call run: a plugin apply_monolithic that fails
    it is an error."""
    plugin = PLUGIN + "\n        def apply_monolithic(self, layer, x):\n            return x\n"
    assert _error(_findings(tmp_path, plugin=plugin), "override:vllm_x.moe.XMoEMethod.apply_monolithic")


def test_reads_records_an_assert_as_a_guard_of_what_follows():
    fn = ast.parse(textwrap.dedent("""
        def f(self):
            self.m.a()
            assert not self.m.flag
            self.m.b()
    """)).body[0]
    got = {attr: [g.text for g in guards if g.flag] for attr, _, called, guards in reads(fn, "self.m", flow=True)
           if called}
    assert got == {"a": [], "b": ["not self.m.flag"]}


def _link(source: str, name: str, module: str):
    tree = ast.parse(textwrap.dedent(source))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    mod = ModuleInfo(module, module.replace(".", "/") + ".py", False, tree)
    return mod, ClassInfo(name, node.lineno, (), {}, set(), (), node)


def test_a_pin_is_read_from_the_first_binding_in_the_mro_and_never_past_an_unreadable_base():
    is_core = lambda name: name.startswith("vllm.")  # noqa: E731
    mine = _link("class X:\n    def apply(self):\n        pass\n", "X", "vllm_x.moe")
    pinned = _link("class XBase:\n    is_monolithic = True\n", "XBase", "vllm_x.base")
    core = _link("class Base:\n    is_monolithic = False\n", "Base", "vllm.moe")
    never_below = lambda owner, flag: False  # noqa: E731
    assert pin_finder([mine, pinned, core], is_core, set(), never_below)("is_monolithic").value is True
    assert pin_finder([mine, None, pinned, core], is_core, set(), never_below)("is_monolithic") is None
    assert pin_finder([mine, core, pinned], is_core, set(), never_below)("is_monolithic") is None
    assert pin_finder([mine, pinned, core], is_core, {"is_monolithic"}, never_below)("is_monolithic") is None
    assert pin_finder([mine, pinned, core], is_core, set(), lambda owner, flag: True)("is_monolithic") is None


def test_a_core_function_deeper_than_the_recursion_limit_is_read_not_fatal(tmp_path):
    """A 2,000-term expression in the core function holding the call (upstream material the
    gate does not choose) nests deeper than Python's recursion limit; reading its guards
    used to raise RecursionError out of the whole gate."""
    deep = "            total = " + " + ".join(["x"] * 2000) + "\n"
    routed = ROUTED.replace("            assert not self.quant_method.is_monolithic\n",
                            deep + "            assert not self.quant_method.is_monolithic\n")
    found = _findings(tmp_path, routed=routed)
    assert APPLY in found and not _error(found)
