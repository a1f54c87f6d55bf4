"""A platform hook core's `Platform` leaves to a `NotImplementedError` stub, newly called on
`current_platform`, breaks a plugin platform that does not define it (vLLM 0.20.0's
`set_random_seed` -> `current_platform.manual_seed_all(seed)`: vllm-gaudi 0.19.1 and
vllm-metax 0.19.0 lacked it). Synthetic trees; shapes from core's platforms/interface.py."""

from __future__ import annotations

import ast

import gatekit
import pytest
from hypothesis import given, strategies as st

from overlay.gate import run_gate
from overlay.gate.platformstubs import caught_at

PLATFORMS = """
    class Platform:
        @classmethod
        def manual_seed_all(cls, seed: int) -> None:
            raise NotImplementedError

        @classmethod
        def get_device_name(cls) -> str:
            raise NotImplementedError
""" + gatekit.CURRENT_PLATFORM

SEEDING = """
    def set_random_seed(seed):
        from vllm.platforms import current_platform

        current_platform.manual_seed_all(seed)
"""

SEEDING_CAUGHT = """
    def set_random_seed(seed):
        from vllm.platforms import current_platform

        try:
            current_platform.manual_seed_all(seed)
        except NotImplementedError:
            pass
"""

WORKER = """
    from vllm.utils.seeding import set_random_seed


    class Worker:
        def __init__(self, seed):
            set_random_seed(seed)
"""

PLATFORM = """
    from vllm.platforms import Platform


    class NPUPlatform(Platform):
        device_name = "npu"
"""

ENTRY = """
    from setuptools import setup
    setup(name="vllm-ascend", entry_points={"vllm.platform_plugins": ["ascend = vllm_ascend:register"]})
"""


PLUGIN_WORKER = """
    from vllm.utils.seeding import set_random_seed


    class NPUWorker:
        def init_device(self):
            set_random_seed(0)
"""


def _gate(tmp_path, seeding=SEEDING, platform=PLATFORM, returns="vllm_ascend.platform.NPUPlatform",
          worker=PLUGIN_WORKER, init=None):
    core = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.20.0'\n",
            "vllm/platforms/__init__.py": PLATFORMS, "vllm/utils/__init__.py": "",
            "vllm/utils/seeding.py": seeding, "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "",
            "vllm/v1/worker/gpu_worker.py": WORKER}
    init = init or (f'def register():\n    import vllm_ascend.platform  # noqa\n    import vllm_ascend.worker  # noqa\n'
                    f'    return "{returns}"\n')
    core_dir = gatekit.tree(tmp_path / "core", core)
    plugin_dir = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": init,
                                                    "vllm_ascend/platform.py": platform,
                                                    "vllm_ascend/worker.py": worker})
    return [f for f in run_gate(core_dir, plugin_dir).findings if f.kind == "override"]


def test_a_stub_hook_core_calls_on_current_platform_is_an_error(tmp_path):
    (f,) = _gate(tmp_path)
    assert f.symbol == "override:vllm_ascend.platform.NPUPlatform.manual_seed_all" and f.severity == "error"
    assert "current_platform.manual_seed_all" in f.message and "NotImplementedError" in f.summary
    # get_device_name is a stub too, but nothing calls it: no finding
    # only core's own worker calls set_random_seed: reached through core's code, a warning
    (f,) = _gate(tmp_path / "core-only", worker="")
    assert f.severity == "warning" and "reached only through core's own code" in f.reason


def test_an_alias_choosing_the_platform_class_judges_both_classes(tmp_path):
    """vllm-metax's entry point returns `vllm_metax.platform.MacaPlatform`, a module-level
    `MacaPlatform = MxsmlMacaPlatform if mxsml_available else NonMxsmlMacaPlatform`."""
    aliased = PLATFORM.replace("class NPUPlatform(Platform):", "class MxPlatform(Platform):") + """

    class PlainPlatform(Platform):
        pass


    NPUPlatform = MxPlatform if MxPlatform.device_name else PlainPlatform
"""
    assert sorted(f.symbol for f in _gate(tmp_path, platform=aliased)) == [
        "override:vllm_ascend.platform.MxPlatform.manual_seed_all",
        "override:vllm_ascend.platform.PlainPlatform.manual_seed_all"]


LAZY_REGISTER = """
    def __getattr__(name):
        if name == "MetalConfig":
            from vllm_ascend.config import MetalConfig

            return MetalConfig
        elif name == "register":
            return _register
        raise AttributeError(name)


    def _register():
        import vllm_ascend.platform  # noqa
        import vllm_ascend.worker  # noqa
        return "vllm_ascend.platform.NPUPlatform"
"""


@pytest.mark.parametrize("init", [
    LAZY_REGISTER,  # vllm-metal: the package serves `register` through a PEP 562 __getattr__
    "def _register():\n    import vllm_ascend.platform  # noqa\n    import vllm_ascend.worker  # noqa\n"
    "    return 'vllm_ascend.platform.NPUPlatform'\n\n\nregister = _register\n",  # an alias
])
def test_an_entry_point_function_bound_lazily_or_by_alias_names_the_platform(tmp_path, init):
    """The entry point `vllm_ascend:register` names what Python resolves the attribute to: a
    module-level alias of a function, or what the module's `__getattr__` returns for it."""
    (f,) = _gate(tmp_path, init=init)
    assert f.symbol == "override:vllm_ascend.platform.NPUPlatform.manual_seed_all" and f.severity == "error"
    # a __getattr__ serving other names only, or returning something that is not a function
    # of the module, names no platform
    assert _gate(tmp_path / "other", init=LAZY_REGISTER.replace('name == "register"', 'name == "other"')) == []
    assert _gate(tmp_path / "nofn", init=LAZY_REGISTER.replace("return _register", "return 3")) == []


def test_a_platform_defining_the_hook_or_core_catching_the_stub_is_fine(tmp_path):
    defined = PLATFORM + """

        @classmethod
        def manual_seed_all(cls, seed):
            pass
    """
    assert _gate(tmp_path / "a", platform=defined) == []
    assert _gate(tmp_path / "b", seeding=SEEDING_CAUGHT) == []
    # a plugin class the entry point does not return is not current_platform
    assert _gate(tmp_path / "c", returns="vllm_ascend.platform.OtherPlatform") == []


@given(st.sampled_from(["NotImplementedError", "Exception", "(ValueError, NotImplementedError)", ""]),
       st.sampled_from(["ValueError", "KeyError", "(ValueError, KeyError)"]))
def test_caught_at_reads_the_handlers_of_the_enclosing_try(catching, other):
    """Any handler naming the stub's exception (or a bare except) catches it; others do not."""
    def source(handler):
        return f"try:\n    x = 1\n    f()\nexcept {handler}:\n    pass\n"
    assert caught_at(ast.parse(source(catching)), 3)
    assert not caught_at(ast.parse(source(other)), 3)
    assert not caught_at(ast.parse(source(catching)), 5)  # the handler's own body is not guarded


CORE_WORKER = """
    from vllm.platforms import current_platform


    class Worker:
        def init_device(self):
            current_platform.manual_seed_all(0)
"""


@pytest.mark.parametrize("plugin_worker, severity", [
    # vllm-kunlun's worker subclasses core's and runs its init_device
    ("from vllm.v1.worker.gpu_worker import Worker\n\n\nclass XPUWorker(Worker):\n    pass\n", "error"),
    # it overrides init_device: core's never runs (the plugin's replaces it): no finding
    ("from vllm.v1.worker.gpu_worker import Worker\n\n\nclass XPUWorker(Worker):\n"
     "    def init_device(self):\n        pass\n", None),
    # vllm-metax's platform names core's worker class by its dotted name
    ('WORKER_CLS = "vllm.v1.worker.gpu_worker.Worker"\n', "error"),
    ('WORKER_CLS = "vllm.v1.worker.gpu_worker.OtherWorker"\n', "warning"),
])
def test_a_core_method_the_plugin_runs_makes_the_stub_certain(tmp_path, plugin_worker, severity):
    core = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.20.0'\n",
            "vllm/platforms/__init__.py": PLATFORMS, "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "",
            "vllm/v1/worker/gpu_worker.py": CORE_WORKER,
            "vllm/v1/engine.py": "from vllm.v1.worker.gpu_worker import Worker\n\n\ndef start(w: Worker):\n"
                                 "    w.init_device()\n"}
    init = 'def register():\n    import vllm_ascend.platform  # noqa\n    import vllm_ascend.worker  # noqa\n' \
           '    return "vllm_ascend.platform.NPUPlatform"\n'
    core_dir = gatekit.tree(tmp_path / "core", core)
    plugin_dir = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": init,
                                                    "vllm_ascend/platform.py": PLATFORM,
                                                    "vllm_ascend/worker.py": plugin_worker})
    found = [f for f in run_gate(core_dir, plugin_dir).findings if f.kind == "override"]
    if severity is None:
        assert found == []
        return
    (f,) = found
    assert f.symbol.endswith("NPUPlatform.manual_seed_all") and f.severity == severity, (f.severity, f.reason)


@given(st.lists(st.sampled_from(["register", "_register", "a", "b", "__getattr__"]), min_size=1, max_size=6),
       st.booleans())
def test_entry_function_ends_on_any_alias_chain_and_names_only_a_module_function(chain, define):
    """Upstream modules are data: alias cycles (`register = a; a = register`), a chain through
    `__getattr__` or one too long end in None, never a loop; what is found is a `def` of the
    module."""
    from overlay.gate.startup import entry_function

    lines = [f"{x} = {y}" for x, y in zip(chain, chain[1:] + chain[:1])]
    if define:
        lines.append(f"def {chain[-1]}():\n    return 'p.P'")
    tree = ast.parse("\n".join(lines) + "\n")
    found = entry_function(tree, "register")
    assert found is None or (found in tree.body and found.name != "__getattr__")


@pytest.mark.parametrize("named, severity", [("Worker", "error"), ("OtherWorker", "warning")])
def test_a_core_function_that_core_code_the_plugin_runs_calls_makes_the_stub_certain(tmp_path, named, severity):
    """vllm-metax 0.19.0 names core's `Worker` by its dotted name; that worker's method calls
    `set_random_seed`, which calls `current_platform.manual_seed_all` (vLLM 0.20.0): the
    plugin runs it, one call away. A class the plugin does not run gives a warning."""
    (f,) = _gate(tmp_path, worker=f'WORKER_CLS = "vllm.v1.worker.gpu_worker.{named}"\n')
    assert f.symbol.endswith("NPUPlatform.manual_seed_all") and f.severity == severity, (f.severity, f.reason)
