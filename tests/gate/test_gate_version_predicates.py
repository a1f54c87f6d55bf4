"""A plugin's own predicate that compares core's version for equality decides its branches
as `vllm_version_is(...)` does: vllm-gcu imports a patch module only under
`if is_vllm_equal("0.8.0"):`, whose body compares `vllm.__version__`'s base version with its
argument, so against 0.9.2 the patch module never loads (7 false errors on vllm-gcu 0.8.0 ->
0.9.2). Synthetic trees; the predicate's shape is the plugin's, no upstream code is copied."""

from __future__ import annotations

import gatekit
import pytest

from overlay.gate import run_gate

UTILS = """
    from packaging import version


    def is_vllm_equal(target: str) -> bool:
        try:
            import vllm
            vllm_base_version = version.parse(str(vllm.__version__)).base_version
            target_base_version = version.parse(target).base_version
            return vllm_base_version == target_base_version
        except Exception:
            return False
"""

PATCHES = """
    from vllm_gcu.utils import is_vllm_equal


    if is_vllm_equal("0.8.0"):
        from vllm_gcu.patch import patch_0_8_0  # noqa
"""

PATCH = "from vllm.old_layer import FusedMoE\n"

ENTRY = """
    from setuptools import setup
    setup(name="vllm-gcu", entry_points={"vllm.platform_plugins": ["gcu = vllm_gcu:register"]})
"""


def _errors(tmp_path, core_version, utils=UTILS):
    core = {"vllm/__init__.py": "", "vllm/_version.py": f"__version__ = version = '{core_version}'\n",
            "vllm/layer.py": "class FusedMoE:\n    pass\n"}
    init = "def register():\n    import vllm_gcu.patch  # noqa\n"
    core_dir = gatekit.tree(tmp_path / "core", core)
    plugin_dir = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_gcu/__init__.py": init, "vllm_gcu/utils.py": utils,
        "vllm_gcu/patch/__init__.py": PATCHES, "vllm_gcu/patch/patch_0_8_0.py": PATCH})
    return [f.symbol for f in run_gate(core_dir, plugin_dir).findings if f.severity == "error"]


def test_the_plugins_own_equality_predicate_decides_the_branch(tmp_path):
    assert _errors(tmp_path / "a", "0.9.2") == []  # the patch module is not imported with 0.9.2
    assert _errors(tmp_path / "b", "0.8.0") == ["import:vllm.old_layer"]  # it is with 0.8.0


@pytest.mark.parametrize("utils", [
    UTILS.replace("return vllm_base_version == target_base_version", "return vllm_base_version >= target_base_version"),
    UTILS.replace("vllm.__version__", "vllm.__name__"),  # not about core's version
    UTILS.replace("def is_vllm_equal(target: str)", "def is_vllm_equal(target: str, other: str = '')"),
])
def test_another_shape_is_not_an_equality_predicate(tmp_path, utils):
    """An ordering, a predicate not about core's version, or one of more parameters is not
    decided: both branches are read, and the import of the gone module is not proven dead."""
    assert _errors(tmp_path, "0.9.2", utils) != []
