"""A plugin's V0 branch does not run on a core without a V0 engine.

vllm-rbln 0.10.0's platform names its V0 worker and scheduler only under
`if envs.VLLM_USE_V1: ... else: <V0 classes>`. vLLM 0.11.0 removed the V0 engine
(`vllm.engine.llm_engine.LLMEngine` became an alias of V1's class), so against 0.13.0 that
branch never runs: either the switch reads true, or reading it raises first. The V0 modules
it names (scheduler, block manager, worker, model runner) are then not loaded at start-up,
and their imports of V0 core modules are no errors (52 false error keys on vllm-rbln 0.10.0
-> 0.13.0). Synthetic trees; the shapes are the plugin's, no upstream code is copied."""

from __future__ import annotations

import ast

import gatekit
import pytest

from overlay.gate import run_gate
from overlay.gate.conditions import DECIDED, PLAIN, Env, evaluate
from overlay.gate.index import TreeIndex
from overlay.gate.source import DirSource

ENTRY = """
    from setuptools import setup
    setup(name="vllm-x", entry_points={"vllm.platform_plugins": ["x = vllm_x:register"]})
"""

# the plugin's own env module, lazily reading variables as rbln_envs does
ENVS = """
    import os

    environment_variables = {
        "VLLM_USE_V1": lambda: bool(int(os.environ.get("VLLM_USE_V1", "1"))),
    }


    def __getattr__(name):
        if name in environment_variables:
            return environment_variables[name]()
        raise AttributeError(name)
"""

PLATFORM = """
    import vllm_x.envs as envs
    from vllm.platforms.interface import Platform


    class XPlatform(Platform):
        @classmethod
        def check_and_update_config(cls, vllm_config):
            if envs.VLLM_USE_V1:
                vllm_config.parallel_config.worker_cls = "vllm_x.v1.worker.XWorker"
            else:
                vllm_config.parallel_config.worker_cls = "vllm_x.worker.XWorker"
"""

V0_WORKER = """
    from vllm.worker.worker_base import LoRANotSupportedWorkerBase


    class XWorker(LoRANotSupportedWorkerBase):
        pass
"""

V1_WORKER = """
    from vllm.v1.worker.worker_base import WorkerBase


    class XWorker(WorkerBase):
        pass
"""

V0_SYMBOL = "import:vllm.worker.worker_base"  # the module, or a name in it


def _v0(errors: list[str]) -> bool:
    """Is the V0 worker's import among the errors?"""
    return any(s.split(":")[:2] == V0_SYMBOL.split(":") for s in errors)

CORE_BASE = {
    "vllm/__init__.py": "",
    "vllm/platforms/__init__.py": "",
    "vllm/platforms/interface.py": "class Platform:\n    pass\n",
    "vllm/v1/__init__.py": "",
    "vllm/v1/engine/__init__.py": "",
    "vllm/v1/engine/llm_engine.py": "class LLMEngine:\n    pass\n",
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/worker/worker_base.py": "class WorkerBase:\n    pass\n",
    "vllm/engine/__init__.py": "",
}
# 0.11.0 on: the V0 engine is gone, its name an alias of V1's
V1_ONLY = {"vllm/engine/llm_engine.py": "from vllm.v1.engine.llm_engine import LLMEngine as V1LLMEngine\n"
                                        "\nLLMEngine = V1LLMEngine\n"}
# before: a V0 engine of its own (its worker base lacks the name the plugin imports, so
# the V0 module's import is broken on this core too)
WITH_V0 = {"vllm/engine/llm_engine.py": "class LLMEngine:\n    pass\n",
           "vllm/worker/__init__.py": "", "vllm/worker/worker_base.py": "class WorkerBase:\n    pass\n"}


def _errors(tmp_path, core_extra, platform=PLATFORM, extra=None):
    core_dir = gatekit.tree(tmp_path / "core", {**CORE_BASE, **core_extra})
    plugin_dir = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_x/__init__.py": "def register():\n    return 'vllm_x.platform.XPlatform'\n",
        "vllm_x/envs.py": ENVS, "vllm_x/platform.py": platform, "vllm_x/worker.py": V0_WORKER,
        "vllm_x/v1/__init__.py": "", "vllm_x/v1/worker.py": V1_WORKER, **(extra or {})})
    return sorted(f.symbol for f in run_gate(core_dir, plugin_dir).findings if f.severity == "error")


def test_the_v0_branch_is_not_loaded_on_a_core_without_a_v0_engine(tmp_path):
    assert not _v0(_errors(tmp_path / "v1", V1_ONLY))
    # on a core with a V0 engine the user may switch to it: the V0 worker may load
    assert _v0(_errors(tmp_path / "v0", WITH_V0))


@pytest.mark.parametrize("test", [
    "not envs.VLLM_USE_V1",  # the V0 classes in the body
    "is_pooling and not envs.VLLM_USE_V1",
])
def test_a_negated_switch_skips_its_body(tmp_path, test):
    platform = PLATFORM.replace("if envs.VLLM_USE_V1:", f"is_pooling = vllm_config is None\n"
                                f"            if {test}:").replace(
        '"vllm_x.v1.worker.XWorker"', '"vllm_x.worker_tmp"').replace(
        '"vllm_x.worker.XWorker"', '"vllm_x.v1.worker.XWorker"').replace('"vllm_x.worker_tmp"',
                                                                         '"vllm_x.worker.XWorker"')
    assert "if " + test in platform
    assert not _v0(_errors(tmp_path / "v1", V1_ONLY, platform))
    assert _v0(_errors(tmp_path / "v0", WITH_V0, platform))


@pytest.mark.parametrize("test", [
    "envs.VLLM_USE_V2",  # another switch: not the V0/V1 one
    "envs.VLLM_USE_V1 == 0",  # a comparison is not read
    "vllm_config.use_v1",  # not the environment switch
])
def test_another_test_is_not_decided(tmp_path, test):
    platform = PLATFORM.replace("if envs.VLLM_USE_V1:", f"if {test}:")
    assert _v0(_errors(tmp_path, V1_ONLY, platform))


def test_a_core_whose_engine_cannot_be_read_is_not_proven_v1_only(tmp_path):
    """No `vllm.engine.llm_engine` and no V1 engine either: unknown, so both branches load."""
    core = {"vllm/engine/llm_engine.py": "from vllm.somewhere_else import LLMEngine\n"}
    assert _v0(_errors(tmp_path, core))


def test_a_v0_module_loaded_another_way_is_still_loaded(tmp_path):
    init = "def register():\n    import vllm_x.worker  # noqa\n    return 'vllm_x.platform.XPlatform'\n"
    core_dir = gatekit.tree(tmp_path / "core", {**CORE_BASE, **V1_ONLY})
    plugin_dir = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_x/__init__.py": init, "vllm_x/envs.py": ENVS, "vllm_x/platform.py": PLATFORM,
        "vllm_x/worker.py": V0_WORKER, "vllm_x/v1/__init__.py": "", "vllm_x/v1/worker.py": V1_WORKER})
    errors = [f.symbol for f in run_gate(core_dir, plugin_dir).findings if f.severity == "error"]
    assert _v0(errors)


def test_the_switch_read_itself_is_still_checked(tmp_path):
    """Deciding the branch does not hide the test: `vllm.envs.VLLM_USE_V1` read from a core
    whose envs no longer define it is reported (it raises before either branch)."""
    platform = PLATFORM.replace("import vllm_x.envs as envs", "import vllm.envs as envs")
    core = {**V1_ONLY, "vllm/envs.py": "VLLM_OTHER = 1\n"}
    errors = _errors(tmp_path, core, platform)
    assert "attribute:vllm.envs.VLLM_USE_V1" in errors
    assert not _v0(errors)


def _verdict(tmp_path, core_extra, expr):
    core_dir = gatekit.tree(tmp_path / "core", {**CORE_BASE, **core_extra})
    world = TreeIndex(DirSource(core_dir), packages=frozenset({"vllm"}))
    mod = world.module("vllm.engine")
    env = Env(world=world, is_core=lambda n: n.split(".")[0] == "vllm", version=None)
    return evaluate(ast.parse(expr, mode="eval").body, mod, {}, env)


def test_the_verdict_itself(tmp_path):
    assert _verdict(tmp_path / "a", V1_ONLY, "envs.VLLM_USE_V1") == _verdict(
        tmp_path / "a", V1_ONLY, "not (not envs.VLLM_USE_V1)")
    v = _verdict(tmp_path / "b", V1_ONLY, "envs.VLLM_USE_V1")
    assert (v.kind, v.value) == (DECIDED, True)
    assert _verdict(tmp_path / "c", WITH_V0, "envs.VLLM_USE_V1").kind == PLAIN


def test_the_switch_imported_by_name_is_the_same_switch(tmp_path):
    platform = PLATFORM.replace("import vllm_x.envs as envs", "from vllm_x.envs import VLLM_USE_V1").replace(
        "if envs.VLLM_USE_V1:", "if VLLM_USE_V1:")
    assert "if VLLM_USE_V1:" in platform
    assert not _v0(_errors(tmp_path / "v1", V1_ONLY, platform))
    # a local variable of that name is not the environment switch
    local = platform.replace("from vllm_x.envs import VLLM_USE_V1", "").replace(
        "if VLLM_USE_V1:", "VLLM_USE_V1 = vllm_config is None\n            if VLLM_USE_V1:")
    assert _v0(_errors(tmp_path / "local", V1_ONLY, local))
