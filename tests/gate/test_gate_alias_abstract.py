"""Issue 27, miss classes of the hand gate tuned on be940519a2 vs 0.25.0, on synthetic
trees (written here, never copied upstream code):

- core calls a class or function through a local alias (`cls = A if c else B`, an
  `if`/`else` that binds it, `f = g` then `f(...)`): a replacement of `A.__init__` or of
  the module's `g` is checked against those calls;
- a plugin class derives from a subscripted generic core base (`Engine[Info]`): its
  `super().__init__(...)` is checked against the base, as for a plain base;
- a plugin class leaves abstract a method its core ABC declares abstract: instantiating
  it raises TypeError.
"""

from __future__ import annotations

import ast
import re

import gatekit
from hypothesis import given
from hypothesis import strategies as st

from overlay.gate import aliascalls

PKGS = {"vllm/__init__.py": "", "vllm/models/__init__.py": ""}


def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], loaded: tuple[str, ...]):
    return gatekit.gate_loaded(tmp_path, PKGS, core, plugin, loaded)


by_symbol = gatekit.by_symbol


# ----------------------------------------------------------------------------- (a) local aliases

CORE_LAYER = """
    class PlainAttention:
        def __init__(self, hidden, prefix="", reduce_results=True):
            self.hidden = hidden


    class LatentAttention:
        def __init__(self, hidden, prefix="", reduce_results=True):
            self.hidden = hidden


    class DecoderLayer:
        def __init__(self, hidden, use_latent, sequence_parallel):
            attn_cls = LatentAttention if use_latent else PlainAttention
            self.attn = attn_cls(hidden, prefix="attn", reduce_results=not sequence_parallel)


    class BranchLayer:
        def __init__(self, hidden, kind):
            if kind == "plain":
                layer_cls = PlainAttention
            else:
                layer_cls = LatentAttention
            self.attn = layer_cls(hidden, "attn", not kind)
"""

PLUGIN_LAYER = """
    from vllm.models import layer


    def _latent_init(self, hidden, prefix=""):
        self.hidden = hidden


    layer.LatentAttention.__init__ = _latent_init
"""


def test_init_replacement_is_checked_against_calls_through_a_local_alias(tmp_path):
    report = gate(tmp_path, {"vllm/models/layer.py": CORE_LAYER},
                  {"vllm_ascend/patch_layer.py": PLUGIN_LAYER}, ("vllm_ascend.patch_layer",))
    found = by_symbol(report, "replacement:vllm.models.layer.LatentAttention.__init__")
    assert [f.severity for f in found] == ["error"]
    core = tmp_path / "core"
    lines = {gatekit.line_of(core, "vllm/models/layer.py", "self.attn = attn_cls("),
             gatekit.line_of(core, "vllm/models/layer.py", "self.attn = layer_cls(")}
    assert found[0].core_line in lines
    assert "reduce_results" in found[0].message
    assert "no core caller seen" not in found[0].summary
    # both alias calls are named: the keyword at one, the third position at the other
    assert "core calls it at" in found[0].reason


CORE_SAMPLER = """
    def sample_v1(logits, top_k):
        return logits


    def sample_v2(logits, top_k):
        return logits


    def run(logits, use_v2):
        fn = sample_v2 if use_v2 else sample_v1
        return fn(logits, top_k=4)
"""

PLUGIN_SAMPLER = """
    from vllm.models import sampler


    def npu_sample(logits):
        return logits


    sampler.sample_v2 = npu_sample
"""


def test_module_function_replacement_is_checked_against_calls_through_a_local_alias(tmp_path):
    report = gate(tmp_path, {"vllm/models/sampler.py": CORE_SAMPLER},
                  {"vllm_ascend/patch_sampler.py": PLUGIN_SAMPLER}, ("vllm_ascend.patch_sampler",))
    found = by_symbol(report, "replacement:vllm.models.sampler.sample_v2")
    assert [(f.severity, f.core_line) for f in found] == [
        ("error", gatekit.line_of(tmp_path / "core", "vllm/models/sampler.py", "return fn("))]
    assert "top_k" in found[0].message


CORE_REBOUND = """
    class LatentAttention:
        def __init__(self, hidden, prefix="", reduce_results=True):
            self.hidden = hidden


    def build(hidden, other):
        attn_cls = LatentAttention
        attn_cls = other
        return attn_cls(hidden, reduce_results=False)
"""


def test_an_alias_bound_to_something_else_too_is_not_a_call_of_the_class(tmp_path):
    report = gate(tmp_path, {"vllm/models/layer.py": CORE_REBOUND},
                  {"vllm_ascend/patch_layer.py": PLUGIN_LAYER}, ("vllm_ascend.patch_layer",))
    found = by_symbol(report, "replacement:vllm.models.layer.LatentAttention.__init__")
    # `attn_cls` may hold `other`: no visible core call, only the declared signature (a warning)
    assert [f.severity for f in found] == ["warning"]


# ----------------------------------------------------------------------------- (b) generic bases

CORE_ENGINE = """
    from abc import ABC, abstractmethod
    from typing import Generic, TypeVar

    TInfo = TypeVar("TInfo")


    class TransferEngine(ABC, Generic[TInfo]):
        def __init__(self, config, vllm_config, device, model):
            self.config = config

        @abstractmethod
        def init_transfer(self, info):
            raise NotImplementedError

        @abstractmethod
        def start_update(self):
            raise NotImplementedError

        @abstractmethod
        def finish_update(self):
            raise NotImplementedError

        def shutdown(self):
            pass
"""

PLUGIN_ENGINE = """
    from vllm.models.engine import TransferEngine


    class NpuInfo:
        pass


    class NpuEngine(TransferEngine[NpuInfo]):
        def __init__(self, config, parallel_config, model=None):
            super().__init__(config, parallel_config, model)

        def init_transfer(self, info):
            pass


    def register(factory):
        factory.register_engine("npu", "vllm_ascend.engine", "NpuEngine")
"""


def test_super_init_through_a_subscripted_generic_core_base(tmp_path):
    report = gate(tmp_path, {"vllm/models/engine.py": CORE_ENGINE},
                  {"vllm_ascend/engine.py": PLUGIN_ENGINE}, ("vllm_ascend.engine",))
    found = by_symbol(report, "call:vllm.models.engine.TransferEngine.__init__")
    assert [(f.severity, f.plugin_line) for f in found] == [
        ("error", gatekit.line_of(tmp_path / "plugin", "vllm_ascend/engine.py", "super().__init__"))]
    assert "'model'" in found[0].message


# ----------------------------------------------------------------------------- (c) abstract methods

def test_plugin_class_leaving_a_core_abstract_method_unimplemented(tmp_path):
    report = gate(tmp_path, {"vllm/models/engine.py": CORE_ENGINE},
                  {"vllm_ascend/engine.py": PLUGIN_ENGINE}, ("vllm_ascend.engine",))
    missing = {f.symbol: f for f in report.findings if f.symbol.startswith("override:vllm_ascend.engine.NpuEngine.")}
    assert sorted(missing) == ["override:vllm_ascend.engine.NpuEngine.finish_update",
                               "override:vllm_ascend.engine.NpuEngine.start_update"]
    f = missing["override:vllm_ascend.engine.NpuEngine.start_update"]
    assert f.severity == "error" and f.plugin_path == "vllm_ascend/engine.py"
    assert f.core_path == "vllm/models/engine.py"
    assert f.core_line == gatekit.line_of(tmp_path / "core", "vllm/models/engine.py", "def start_update")
    assert "abstract" in f.message


def test_a_class_only_named_in_all_and_used_through_a_static_factory_is_never_built(tmp_path):
    """tpu-inference's VllmCompressedTensorsMoEMethod lacks two abstract methods of core's
    base, but nothing instantiates it: the plugin calls its static `get_moe_method`, which
    returns other classes, and its package lists it in `__all__`. Neither builds it, so
    the findings are warnings; a registry entry naming it still counts."""
    plugin = {"vllm_ascend/engine.py": """
                  from vllm.models.engine import TransferEngine


                  class NpuEngine(TransferEngine):
                      def init_transfer(self, info):
                          pass

                      @staticmethod
                      def pick():
                          return None
              """,
              "vllm_ascend/__init__.py": 'from vllm_ascend.engine import (\n    NpuEngine,\n)\n\n__all__ = [\n    "NpuEngine",\n]\n',
              "vllm_ascend/use.py": "from vllm_ascend.engine import NpuEngine\n\n\ndef method():\n    return NpuEngine.pick()\n"}
    report = gate(tmp_path, {"vllm/models/engine.py": CORE_ENGINE}, plugin, ("vllm_ascend.engine",))
    missing = [f for f in report.findings if f.symbol.startswith("override:vllm_ascend.engine.NpuEngine.")]
    assert missing and {f.severity for f in missing} == {"warning"}, [(f.symbol, f.severity) for f in missing]
    plugin["vllm_ascend/use.py"] += '\n\nENGINES = {"npu": "NpuEngine"}\n'
    report = gate(tmp_path / "registered", {"vllm/models/engine.py": CORE_ENGINE}, plugin, ("vllm_ascend.engine",))
    assert {f.severity for f in report.findings if f.symbol.startswith("override:vllm_ascend.engine.NpuEngine.")} == {"error"}


PLUGIN_ENGINES_COMPLETE = """
    import abc

    from vllm.models.engine import TransferEngine


    class UpdateMixin:
        def start_update(self):
            pass


    class Complete(UpdateMixin, TransferEngine):
        def __init__(self, config, vllm_config, device, model):
            super().__init__(config, vllm_config, device, model)

        def init_transfer(self, info):
            pass

        finish_update = UpdateMixin.start_update


    class StillAbstract(TransferEngine):
        @abc.abstractmethod
        def extra(self):
            pass


    class Middle(TransferEngine):
        def init_transfer(self, info):
            pass


    class Leaf(Middle):
        def start_update(self):
            pass

        def finish_update(self):
            pass
"""

CORE_NOT_ABC = """
    from abc import abstractmethod


    class Plain:
        @abstractmethod
        def start_update(self):
            raise NotImplementedError
"""

CORE_BACKEND = """
    from abc import ABC, abstractmethod


    class Backend(ABC):
        @staticmethod
        @abstractmethod
        def get_impl_cls():
            raise NotImplementedError


    class LinearBackend(Backend):
        @staticmethod
        def get_name():
            return "linear"
"""

PLUGIN_BACKEND = """
    from vllm.models.backend import LinearBackend


    class NpuLinearBackend(LinearBackend):
        @staticmethod
        def get_name():
            return "npu"


    def backend_cls():
        return NpuLinearBackend
"""

PLUGIN_NOT_ABC = """
    from vllm.models.plain import Plain


    class Mine(Plain):
        pass
"""


def test_implemented_by_a_mixin_an_attribute_or_a_subclass_is_no_finding(tmp_path):
    report = gate(tmp_path, {"vllm/models/engine.py": CORE_ENGINE, "vllm/models/plain.py": CORE_NOT_ABC,
                             "vllm/models/backend.py": CORE_BACKEND},
                  {"vllm_ascend/engine.py": PLUGIN_ENGINES_COMPLETE, "vllm_ascend/plain.py": PLUGIN_NOT_ABC,
                   "vllm_ascend/backend.py": PLUGIN_BACKEND},
                  ("vllm_ascend.engine", "vllm_ascend.plain", "vllm_ascend.backend"))
    # Complete: a plugin mixin and a class attribute provide them; StillAbstract declares an
    # abstract method itself; Middle is completed by its plugin subclass Leaf; Plain is no
    # ABC, so @abstractmethod does not stop instantiation; NpuLinearBackend is used as a class
    # (its abstract method is static, and nothing calls the class), as core's LinearBackend is
    assert not [f for f in report.findings if f.kind == "override"], [f.symbol for f in report.findings]


def test_a_class_nothing_builds_or_registers_is_a_warning(tmp_path):
    unregistered = PLUGIN_ENGINE.split("    def register(")[0]
    report = gate(tmp_path, {"vllm/models/engine.py": CORE_ENGINE},
                  {"vllm_ascend/engine.py": unregistered}, ("vllm_ascend.engine",))
    found = by_symbol(report, "override:vllm_ascend.engine.NpuEngine.start_update")
    assert [f.severity for f in found] == ["warning"]


# ----------------------------------------------------------------------------- the alias rule itself

OTHER_BINDINGS = ["for x in items: pass", "with ctx() as x: pass", "x, y = pair", "(x := other())",
                  "import x", "from m import x", "x += 1", "global x", "try:\n        pass\n    except E as x:\n        pass",
                  "x = other()", "x = items[0]", "del x"]


@given(st.sampled_from(OTHER_BINDINGS), st.booleans())
def test_a_name_also_bound_any_other_way_is_no_alias(binding, first):
    lines = ["x = A if c else B", binding] if not first else [binding, "x = A if c else B"]
    src = "def f(c, items, pair):\n" + "".join(f"    {line}\n" for line in lines) + "    x()\n"
    fn = ast.parse(src).body[0]
    assert "x" not in aliascalls.local_aliases(fn)


@given(st.lists(st.sampled_from(["A", "m.B", "A if c else m.B", "(A if c else B) if d else m.C"]), min_size=1, max_size=4))
def test_plain_assignments_of_names_and_conditionals_are_aliases(values):
    src = "def f(c, d):\n" + "".join(f"    if c:\n        x = {v}\n" for v in values) + "    x()\n"
    fn = ast.parse(src).body[0]
    expected = [n for v in values for n in re.findall(r"[A-Za-z_][\w.]*", v) if n not in ("if", "else", "c", "d")]
    assert {k: sorted(v) for k, v in aliascalls.local_aliases(fn).items()} == {"x": sorted(expected)}


def test_a_plugin_class_named_as_the_core_class_it_extends_is_built_only_by_the_plugin(tmp_path):
    """vllm-metax's `CompressedTensorsMoEMethod(CompressedTensorsMoEMethod)` shadows core's class
    of that name and serves only its static `get_moe_method`. Core builds and names its own
    class (`TransferEngine(...)` below, in core's own module), which says nothing of the
    plugin's: the findings are warnings; a plugin call of the class still makes them errors."""
    core_builds = CORE_ENGINE + """

    def make(config, parallel_config):
        return TransferEngine(config, parallel_config)


    REGISTRY = {"transfer": TransferEngine}
"""
    plugin = """
        import vllm.models.engine as core_engine
        from vllm.models.engine import TransferEngine as CoreEngine


        class TransferEngine(CoreEngine):
            def init_transfer(self, info):
                pass

            @staticmethod
            def pick():
                return core_engine.TransferEngine.shutdown  # core's class, named through its module


        def method():
            return TransferEngine.pick()
    """
    report = gate(tmp_path, {"vllm/models/engine.py": core_builds}, {"vllm_ascend/engine.py": plugin},
                  ("vllm_ascend.engine",))
    missing = [f for f in report.findings if f.symbol.startswith("override:vllm_ascend.engine.TransferEngine.")]
    assert missing and {f.severity for f in missing} == {"warning"}, [(f.symbol, f.severity) for f in missing]
    built = gate(tmp_path / "built", {"vllm/models/engine.py": core_builds},
                 {"vllm_ascend/engine.py": plugin + "\n\n        ENGINE = TransferEngine(None, None)\n"},
                 ("vllm_ascend.engine",))
    missing = [f for f in built.findings if f.symbol.startswith("override:vllm_ascend.engine.TransferEngine.")]
    assert missing and {f.severity for f in missing} == {"error"}, [(f.symbol, f.severity) for f in missing]


def test_a_quoted_annotation_of_the_shadowing_class_builds_nothing(tmp_path):
    """vllm-metax's static `get_moe_method(...) -> "CompressedTensorsMoEMethod":` names the class
    in a quoted return annotation, which passes nothing anywhere (7 false errors over three
    vllm-metax pairings); a quoted registry entry still counts."""
    plugin = """
        import vllm.models.engine as core_engine
        from vllm.models.engine import TransferEngine as CoreEngine


        class TransferEngine(CoreEngine):
            def init_transfer(self, info):
                pass

            @staticmethod
            def pick(config: "TransferEngine") -> "TransferEngine":
                return core_engine.TransferEngine.shutdown  # core's class, named through its module


        def method():
            return TransferEngine.pick(None)
    """
    report = gate(tmp_path, {"vllm/models/engine.py": CORE_ENGINE}, {"vllm_ascend/engine.py": plugin},
                  ("vllm_ascend.engine",))
    missing = [f for f in report.findings if f.symbol.startswith("override:vllm_ascend.engine.TransferEngine.")]
    assert missing and {f.severity for f in missing} == {"warning"}, [(f.symbol, f.severity) for f in missing]
    registered = gate(tmp_path / "registered", {"vllm/models/engine.py": CORE_ENGINE},
                      {"vllm_ascend/engine.py": plugin + '\n\n        ENGINES = {"transfer": "TransferEngine"}\n'},
                      ("vllm_ascend.engine",))
    missing = [f for f in registered.findings if f.symbol.startswith("override:vllm_ascend.engine.TransferEngine.")]
    assert missing and {f.severity for f in missing} == {"error"}, [(f.symbol, f.severity) for f in missing]
