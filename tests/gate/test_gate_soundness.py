"""What the gate must not miss, and must not invent: names bound only for type checkers,
calls that pass `*args`/`**kwargs`, core methods that only raise, and core trees that do
not hold the package the plugin imports."""

from __future__ import annotations

import gatekit
import pytest

from overlay.errors import OverlayError
from overlay.gate import run_gate


def gate(tmp_path, core_files: dict[str, str], plugin_files: dict[str, str]):
    core = gatekit.tree(tmp_path / "core", {"vllm/__init__.py": "", **core_files})
    plugin = gatekit.tree(tmp_path / "plugin", {"vllm_ascend/__init__.py": "", **plugin_files})
    return run_gate(core, plugin)


# ----------------------------------------------------------------------------- TYPE_CHECKING


TYPED = """
    from typing import TYPE_CHECKING

    if TYPE_CHECKING:
        from vllm.config import VllmConfig
        from vllm.config import ModelConfig
    else:
        ModelConfig = object
"""


def test_name_bound_only_for_type_checkers_is_an_import_finding(tmp_path):
    report = gate(tmp_path, {"vllm/config.py": "class VllmConfig:\n    pass\nclass ModelConfig:\n    pass\n",
                             "vllm/worker.py": TYPED},
                  {"vllm_ascend/a.py": "from vllm.worker import VllmConfig\n"})
    (f,) = report.findings
    assert (f.kind, f.symbol) == ("import", "import:vllm.worker:VllmConfig")
    assert "only under `if TYPE_CHECKING:`" in f.message and "at run time" in f.message
    assert (f.core_path, f.core_line) == ("vllm/worker.py", 4)


def test_type_checking_names_served_at_run_time_still_resolve(tmp_path):
    # the `else:` branch runs, and a lazy __getattr__ table serves the typed name
    report = gate(tmp_path, {"vllm/config.py": "class VllmConfig:\n    pass\nclass ModelConfig:\n    pass\n",
                             "vllm/worker.py": TYPED + """
    _LAZY = {"VllmConfig": "vllm.config:VllmConfig"}

    def __getattr__(name):
        if name in _LAZY:
            return 1
        raise AttributeError(name)
"""},
                  {"vllm_ascend/a.py": "from vllm.worker import VllmConfig, ModelConfig\n"})
    assert report.ok, [f.message for f in report.findings]


def test_hasattr_on_a_type_checking_only_name_is_false(tmp_path):
    report = gate(tmp_path, {"vllm/config.py": "class VllmConfig:\n    pass\nclass ModelConfig:\n    pass\n",
                             "vllm/worker.py": TYPED},
                  {"vllm_ascend/a.py": """
        import vllm.worker as w

        if hasattr(w, "VllmConfig"):
            from vllm.config import GoneConfig
    """})
    assert report.ok  # the guarded import never runs: hasattr() is False at run time


# ----------------------------------------------------------------------------- *args / **kwargs call sites

# The reviewer's shape: core calls forward() only through *a / **kw.
BASE = """
    class Base:
        def forward(self, x, *, scale=1.0):
            return x

        def run(self, **kw):
            return self.forward(1, **kw)

        def run2(self, *a):
            return self.forward(*a)

        def step(self, x, scale=1.0, **kw):
            return self.step_impl(x, **kw)

        def step_impl(self, x, *, scale=1.0, bias=None):
            return x

        def pos(self, *a):
            return self.pos_impl(*a)

        def pos_impl(self, x, y, z=None):
            return x
"""


def base_gate(tmp_path, plugin_class: str):
    return gate(tmp_path, {"vllm/base.py": BASE},
                {"vllm_ascend/m.py": "from vllm.base import Base\n\n\nclass M(Base):\n" + plugin_class})


def test_override_dropping_a_keyword_that_kwargs_may_carry_is_reported(tmp_path):
    report = base_gate(tmp_path, "    def forward(self, x):\n        return x\n")
    (f,) = report.findings
    assert f.kind == "override" and f.symbol == "override:vllm_ascend.m.M.forward"
    assert (f.core_path, f.core_line) == ("vllm/base.py", 6)  # run(): self.forward(1, **kw)
    assert "'scale' by keyword, which the call's **kwargs may pass" in f.message


@pytest.mark.parametrize("method", [
    "    def forward(self, x, *, scale=1.0):\n        return x\n",  # takes what core declares
    "    def forward(self, x, **kwargs):\n        return x\n",  # takes anything by keyword
    # step() names `scale` itself: its **kw, forwarded to step_impl, can never hold it
    "    def step_impl(self, x, *, bias=None):\n        return x\n",
    "    def pos_impl(self, x, y, z=None):\n        return x\n",
])
def test_open_call_sites_pass_when_the_declared_parameters_are_accepted(tmp_path, method):
    report = base_gate(tmp_path, method)
    assert report.ok, [f.message for f in report.findings]


def test_star_args_may_fill_every_declared_position(tmp_path):
    report = base_gate(tmp_path, "    def pos_impl(self, x, y):\n        return x\n")
    (f,) = report.findings
    assert "'z' by position, which the call's *args may fill" in f.message


def test_forwarded_kwargs_still_may_carry_what_the_caller_does_not_name(tmp_path):
    report = base_gate(tmp_path, "    def step_impl(self, x, *, scale=1.0):\n        return x\n")
    (f,) = report.findings
    assert "'bias' by keyword" in f.message and "'scale'" not in f.message.split("but", 1)[1]


def test_module_replacement_called_with_kwargs(tmp_path):
    report = gate(tmp_path, {"vllm/ops.py": """
        def kernel(x, *, fast=False):
            return x

        def launch(x, **opts):
            return kernel(x, **opts)
    """}, {"vllm_ascend/patch.py": """
        import vllm.ops

        def npu_kernel(x):
            return x

        vllm.ops.kernel = npu_kernel
    """})
    (f,) = report.findings
    assert f.kind == "replacement" and "'fast' by keyword" in f.message


# ----------------------------------------------------------------------------- core methods that only raise

KV = """
    class BaseKVCacheMethod:
        def apply(self, layer):
            raise RuntimeError(f"{self.__class__.__name__}.apply should not be called.")


    class WorkerBase:
        def load_model(self, *, load_dummy_weights=False):
            \"\"\"Load model onto target device.\"\"\"
            raise NotImplementedError
"""


def test_core_method_that_only_raises_demands_no_signature(tmp_path):
    report = gate(tmp_path, {"vllm/kv.py": KV}, {"vllm_ascend/q.py": """
        from vllm.kv import BaseKVCacheMethod


        class AscendKVCacheMethod(BaseKVCacheMethod):
            def apply(self, layer, query, key, value, kv_cache):
                return query
    """})
    assert report.ok, [f.message for f in report.findings]


def test_not_implemented_error_marks_an_interface_whose_declaration_holds(tmp_path):
    report = gate(tmp_path, {"vllm/kv.py": KV}, {"vllm_ascend/w.py": """
        from vllm.kv import WorkerBase


        class NPUWorker(WorkerBase):
            def load_model(self):
                pass
    """})
    (f,) = report.findings
    assert f.kind == "override" and "keyword-only core parameter 'load_dummy_weights'" in f.message


# ----------------------------------------------------------------------------- the core package itself


def test_core_tree_without_the_plugins_core_package_is_bad_input(tmp_path):
    core = gatekit.core(tmp_path / "core", new=True, version="0.25.0",
                        extra={"vllm/ray/__init__.py": "", "vllm/v1/worker/gpu/ray_utils.py": ""})
    plugin = gatekit.plugin(tmp_path / "plugin", extra={"vllm_ascend/r.py": "import ray\n"})
    # one folder too deep: `vllm/` holds packages (`v1`, `ray`), and the plugin imports `ray`
    with pytest.raises(OverlayError) as err:
        run_gate(core / "vllm", plugin)
    assert "holds no `vllm` package the plugin imports" in err.value.message
    assert "pass the folder that holds vllm/" in err.value.hint
    # the plugin tree passed as core
    with pytest.raises(OverlayError, match="holds no `vllm` package the plugin imports"):
        run_gate(plugin, plugin)
    assert not run_gate(core, plugin).ok  # the right folder gates (and finds the seed breaks)


def test_the_core_package_is_the_one_the_plugins_entry_point_groups_name(tmp_path):
    """tpu-inference is not named after core and imports `jax` more often than `vllm`; its
    entry point group (`vllm.general_plugins`) names the core package it is a plugin of."""
    core = gatekit.tree(tmp_path / "core", {"vllm/__init__.py": "", "vllm/kv.py": "X = 1\n"})
    files = {"tpu_inference/__init__.py": "", "tpu_inference/a.py": "import jax\nimport jax.numpy\n",
             "tpu_inference/b.py": "import jax\nfrom vllm.kv import Gone\n",
             "setup.py": 'from setuptools import setup\n\nsetup(name="tpu_inference", entry_points={'
                         '"vllm.general_plugins": ["layers = tpu_inference.a:register"]})\n'}
    report = run_gate(core, gatekit.tree(tmp_path / "plugin", files))
    assert [f.symbol for f in report.findings] == ["import:vllm.kv:Gone"]
    # without the entry point the most imported package is expected, and this core lacks it
    del files["setup.py"]
    with pytest.raises(OverlayError, match="holds no `jax` package the plugin imports"):
        run_gate(core, gatekit.tree(tmp_path / "plain", files))


def test_forwarding_is_judged_by_the_innermost_function(tmp_path):
    # inner() forwards its own **kw, which may hold `scale`: step() naming it does not help
    report = gate(tmp_path, {"vllm/base.py": """
        class Base:
            def step(self, x, scale=1.0, **kw):
                def inner(**kw):
                    return self.step_impl(x, **kw)
                return inner(scale=scale, **kw)

            def step_impl(self, x, *, scale=1.0):
                return x
    """}, {"vllm_ascend/m.py": """
        from vllm.base import Base


        class M(Base):
            def step_impl(self, x):
                return x
    """})
    (f,) = report.findings
    assert "'scale' by keyword" in f.message and f.core_line == 4
