"""A function nothing names never runs: vllm-gaudi's `HpuPlatform.patch_for_pt27` imports a
name core moved, inside a method that neither the plugin (other than its def), nor core, nor an
entry point ever names. Its finding is a warning; the same import in a method something calls,
in a function an entry point names (`register_ops`), or in a decorated function (a registry
may call it) stays an error. Synthetic trees; no upstream code is copied."""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/utils/__init__.py": "", "vllm/utils/torch_utils.py": "X = 1\n"}

PLATFORM = """
    import functools


    class HpuPlatform:
        @classmethod
        def patch_for_pt27(cls):
            from vllm.utils import is_torch_equal_or_newer
            return is_torch_equal_or_newer

        def used(self):
            from vllm.utils import gone_used
            return gone_used

        @functools.cache
        def decorated(self):
            from vllm.utils import gone_decorated
            return gone_decorated


    def start():
        return HpuPlatform().used()
"""

OPS = """
    def register_ops():
        from vllm.utils import gone_in_entry_point
        return gone_in_entry_point
"""

ENTRY = """
    from setuptools import setup

    setup(name="vllm_ascend",
          entry_points={"vllm.platform_plugins": ["ascend = vllm_ascend:register"],
                        "vllm.general_plugins": ["ops = vllm_ascend.ops:register_ops"]})
"""


def test_a_function_nothing_names_is_not_run_and_its_findings_are_warnings(tmp_path):
    core = gatekit.tree(tmp_path / "core", PKGS)
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_ascend/__init__.py": "def register():\n    import vllm_ascend.platform  # noqa\n",
        "vllm_ascend/platform.py": PLATFORM, "vllm_ascend/ops.py": OPS})
    report = gatekit.run_gate(core, plugin)
    got = {f.symbol.split(":")[-1]: f for f in report.findings}
    assert {n: f.severity for n, f in got.items()} == {
        "is_torch_equal_or_newer": "warning", "gone_used": "error", "gone_decorated": "error",
        "gone_in_entry_point": "error"}
    assert "inside patch_for_pt27, which nothing calls" in got["is_torch_equal_or_newer"].reason
