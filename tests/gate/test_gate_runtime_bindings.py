"""Breaks the hand gate missed where a name is bound at run time (issue 27), on synthetic
trees written here (never copied upstream code):

- a replacement installed through a module obtained at run time (`m =
  sys.modules.get("core.mod")`, `sys.modules["core.mod"]`, `importlib.import_module(...)`,
  then `m.f = ours` or `setattr(m, "f", ours)`): core's own calls in that module reach
  the replacement;
- a call through a name bound at module level to a core function, method or class
  (`_orig = Pool.free`, then `_orig(self, blocks, extra)`), also when the plugin
  replaces that attribute afterwards: the captured object is core's;
- core calling a method through a module global the plugin replaced with its class
  (`runner.Batch = AscendBatch`; core's `Batch.make_dummy(..., max_len=)` in that
  module runs the plugin's classmethod).
"""

from __future__ import annotations

import pytest

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/core/__init__.py": "",
        "vllm/v1/worker/__init__.py": ""}


def gate(tmp_path, core: dict[str, str], plugin: dict[str, str], loaded: tuple[str, ...]):
    # a plugin file that imports core, so the gate knows which package core is
    plugin = {"vllm_ascend/uses_core.py": "import vllm  # noqa: F401\n", **plugin}
    return gatekit.gate_loaded(tmp_path, PKGS, core, plugin, loaded)


def errors(report, symbol):
    return [f for f in report.findings if f.symbol == symbol and f.severity == "error"]


# ----------------------------------------------------------------------------- (A) module obtained at run time

COORD_CORE = {
    "vllm/v1/core/coord.py": """
        def get_coord(config, budget, lookahead=0):
            return (config, budget, lookahead)
    """,
    "vllm/v1/core/manager.py": """
        from vllm.v1.core.coord import get_coord


        class Manager:
            def __init__(self, config):
                self.coord = get_coord(config=config, budget=1, lookahead=2)
    """,
}

# the plugin's replacement, without the new `lookahead` (spliced into each module below)
OURS = "def get_coord(config, budget):\n            return (config, budget)\n"

RUNTIME_MODULES = {
    "sys.modules.get": """
        import sys
        {ours}
        _manager = sys.modules.get("vllm.v1.core.manager")
        if _manager is not None:
            _manager.get_coord = get_coord
    """,
    "sys.modules[...]": """
        import sys
        {ours}
        _manager = sys.modules["vllm.v1.core.manager"]
        _manager.get_coord = get_coord
    """,
    "importlib.import_module + setattr": """
        import importlib
        {ours}
        _manager = importlib.import_module("vllm.v1.core.manager")
        setattr(_manager, "get_coord", get_coord)
    """,
    "import_module in a function": """
        from importlib import import_module
        {ours}

        def install():
            mod = import_module("vllm.v1.core.manager")
            mod.get_coord = get_coord


        install()
    """,
}


@pytest.mark.parametrize("how", sorted(RUNTIME_MODULES))
def test_replacement_through_a_runtime_module_reaches_core_calls(tmp_path, how):
    body = RUNTIME_MODULES[how].replace("{ours}", OURS)
    report = gate(tmp_path, COORD_CORE, {"vllm_ascend/patch_coord.py": body}, ("vllm_ascend.patch_coord",))
    found = errors(report, "replacement:vllm.v1.core.manager.get_coord")
    assert found, [f.to_dict() for f in report.findings]
    assert "lookahead" in found[0].summary
    assert found[0].core_path == "vllm/v1/core/manager.py"


# ----------------------------------------------------------------------------- (B) module-level captures

POOL_CORE = {
    "vllm/v1/core/pool.py": """
        class Pool:
            def __init__(self, size):
                self.size = size

            def free(self, blocks):
                return blocks


        def release(blocks):
            return blocks
    """,
}


def test_call_through_a_captured_core_method_the_plugin_then_replaces(tmp_path):
    plugin = {"vllm_ascend/patch_pool.py": """
        from vllm.v1.core.pool import Pool

        _orig_free = Pool.free


        def _free(self, blocks, prepend=False):
            _orig_free(self, blocks, prepend)


        Pool.free = _free
    """}
    report = gate(tmp_path, POOL_CORE, plugin, ("vllm_ascend.patch_pool",))
    found = errors(report, "call:vllm.v1.core.pool.Pool.free")
    assert found, [f.to_dict() for f in report.findings]
    assert found[0].plugin_path == "vllm_ascend/patch_pool.py"


def test_call_through_a_captured_core_function_and_class(tmp_path):
    plugin = {"vllm_ascend/patch_pool.py": """
        import vllm.v1.core.pool as pool_mod

        _orig_release = pool_mod.release
        _OrigPool = pool_mod.Pool


        def _release(blocks, prepend=False):
            _orig_release(blocks, prepend)
            return _OrigPool(4, prepend)


        pool_mod.release = _release
    """}
    report = gate(tmp_path, POOL_CORE, plugin, ("vllm_ascend.patch_pool",))
    assert errors(report, "call:vllm.v1.core.pool.release"), [f.to_dict() for f in report.findings]
    assert [f for f in report.findings if f.severity == "error" and "Pool" in f.symbol
            and f.symbol != "call:vllm.v1.core.pool.release"], [f.to_dict() for f in report.findings]


def test_call_through_a_class_level_capture(tmp_path):
    plugin = {"vllm_ascend/pool.py": """
        from vllm.v1.core.pool import Pool


        class AscendPool(Pool):
            _core_free = Pool.free

            def free(self, blocks, prepend=False):
                return AscendPool._core_free(self, blocks, prepend)
    """, "vllm_ascend/use.py": """
        from vllm_ascend.pool import AscendPool

        POOL = AscendPool(4)
        POOL.free([1])
    """}
    report = gate(tmp_path, POOL_CORE, plugin, ("vllm_ascend.use",))
    assert errors(report, "call:vllm.v1.core.pool.Pool.free"), [f.to_dict() for f in report.findings]


# ----------------------------------------------------------------------------- (C) replaced module global

BATCH_CORE = {
    "vllm/v1/worker/batch.py": """
        class Batch:
            def __init__(self, n):
                self.n = n

            @classmethod
            def make_dummy(cls, n, buffers, max_len=None):
                return cls(n)

            def split(self, at):
                return at
    """,
    "vllm/v1/worker/runner.py": """
        from vllm.v1.worker.batch import Batch


        class Runner:
            def dummy_run(self, buffers):
                batch = Batch.make_dummy(1, buffers, max_len=4)
                return Batch.split(batch, 1)
    """,
}

ASCEND_BATCH = {
    "vllm_ascend/batch.py": """
        from vllm.v1.worker.batch import Batch


        class AscendBatch(Batch):
            @classmethod
            def make_dummy(cls, n, buffers):
                return cls(n)

            def split(self, at, extra):
                return at
    """,
    "vllm_ascend/patch_batch.py": """
        from vllm.v1.worker import runner

        from vllm_ascend.batch import AscendBatch

        runner.Batch = AscendBatch
    """,
}


def test_core_calls_a_method_through_a_module_global_the_plugin_replaced(tmp_path):
    report = gate(tmp_path, BATCH_CORE, ASCEND_BATCH, ("vllm_ascend.patch_batch",))
    found = errors(report, "replacement:vllm.v1.worker.runner.Batch")
    assert found, [f.to_dict() for f in report.findings]
    text = " ".join(f.summary + f.message for f in found)
    # both calls: the classmethod's new keyword, and the plain method called through the
    # class with its receiver passed by hand (line 7; sites of one symbol are merged)
    assert "max_len" in text and "vllm/v1/worker/runner.py:7" in text
    assert all(f.core_path == "vllm/v1/worker/runner.py" for f in found)


def test_replaced_global_call_in_code_the_plugin_overrides_is_not_an_error(tmp_path):
    plugin = dict(ASCEND_BATCH)
    plugin["vllm_ascend/runner.py"] = """
        from vllm.v1.worker.runner import Runner


        class NPURunner(Runner):
            def dummy_run(self, buffers):
                return None
    """
    plugin["vllm_ascend/patch_batch.py"] = ASCEND_BATCH["vllm_ascend/patch_batch.py"] + \
        "\n        import vllm_ascend.runner  # noqa\n"
    report = gate(tmp_path, BATCH_CORE, plugin, ("vllm_ascend.patch_batch", "vllm_ascend.runner"))
    assert not errors(report, "replacement:vllm.v1.worker.runner.Batch"), [f.to_dict() for f in report.findings]
