"""A read of an old name in the branch a feature probe for its successor leaves only to a core
that lacks the successor: `view = getattr(region, "create_next_worker_view", None)`, then
`if view is None: view = region.create_next_view` (vllm-ascend 0.28.0rc1 and 0.29.0rc1,
kv_offload/native/cpu_npu.py, on `mmap_region: SharedOffloadRegion`). Where core's class has
the new name as a plain method, getattr returns it, the branch does not run, and its read is
no break; anything the gate cannot be sure of (no such method, a property, an untyped
probe of an untyped object, a probe rebound in a branch or a loop) leaves the branch judged as before. Synthetic trees; the shape
is the plugin's and core's shared_offload_region.py."""

from __future__ import annotations

import gatekit
import pytest

PKGS = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.30.0'\n"}

CORE = """
    class SharedOffloadRegion:
        def create_next_worker_view(self, n):
            return n
"""

FALLBACK = """
    from vllm.region import SharedOffloadRegion


    def factory(mmap_region: SharedOffloadRegion):
        create_view = getattr(mmap_region, "create_next_worker_view", None)
        if create_view is None:
            create_view = mmap_region.create_next_view
        return create_view


    factory(SharedOffloadRegion())
"""


def _reads(tmp_path, plugin: str, core: str = CORE) -> list[tuple[str, int, str]]:
    from textwrap import dedent

    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/region.py": dedent(core)},
                                 {"vllm_ascend/offload.py": dedent(plugin)}, ("vllm_ascend.offload",))
    return sorted((f.symbol.rsplit(".", 1)[-1], f.plugin_line, f.severity) for f in report.findings
                  if f.kind == "attribute")


@pytest.mark.parametrize("test", ["create_view is None", "not create_view"])
def test_the_fallback_a_core_with_the_successor_method_never_takes_is_no_break(tmp_path, test):
    assert _reads(tmp_path, FALLBACK.replace("create_view is None:", f"{test}:")) == []


def test_the_else_branch_of_a_positive_probe_is_not_taken_either(tmp_path):
    plugin = FALLBACK.replace("""        if create_view is None:
            create_view = mmap_region.create_next_view""", """        if create_view is not None:
            return create_view
        else:
            create_view = mmap_region.create_next_view""")
    assert _reads(tmp_path, plugin) == []


def test_a_hasattr_probe_on_the_typed_receiver_is_decided_the_same_way(tmp_path):
    plugin = FALLBACK.replace("""        create_view = getattr(mmap_region, "create_next_worker_view", None)
        if create_view is None:""", """        if not hasattr(mmap_region, "create_next_worker_view"):""")
    assert _reads(tmp_path, plugin) == []


@pytest.mark.parametrize("case", ["successor_gone", "successor_a_property", "probe_reassigned", "untyped_probe",
                                  "probe_in_a_branch", "rebound_in_a_loop", "rebound_by_a_def",
                                  "default_not_none"])
def test_where_the_probe_is_not_certain_the_branch_is_judged(tmp_path, case):
    plugin, core = FALLBACK, CORE
    if case == "successor_gone":  # this core has neither name: the fallback runs and fails
        core = "class SharedOffloadRegion:\n    pass\n"
    elif case == "successor_a_property":  # a property may return None
        core = CORE.replace("        def create_next_worker_view", "        @property\n"
                                                                    "        def create_next_worker_view")
    elif case == "probe_reassigned":
        plugin = FALLBACK.replace("        if create_view is None:",
                                  "        create_view = None\n        if create_view is None:")
    elif case == "untyped_probe":  # the probe asks an object of no known class
        plugin = FALLBACK.replace("def factory(mmap_region: SharedOffloadRegion):",
                                  "def factory(mmap_region: SharedOffloadRegion, other):"
                                  ).replace('getattr(mmap_region, "create_next_worker_view", None)',
                                            'getattr(other, "create_next_worker_view", None)')
    elif case == "probe_in_a_branch":  # bound in one branch, None in the other
        plugin = FALLBACK.replace(
            '        create_view = getattr(mmap_region, "create_next_worker_view", None)\n',
            '        if mmap_region:\n            create_view = None\n        else:\n'
            '            create_view = getattr(mmap_region, "create_next_worker_view", None)\n')
    elif case == "rebound_in_a_loop":  # a later pass tests what the loop's end bound
        plugin = FALLBACK.replace(
            "        if create_view is None:\n            create_view = mmap_region.create_next_view\n",
            "        for _ in range(2):\n            if create_view is None:\n"
            "                create_view = mmap_region.create_next_view\n            create_view = None\n")
    elif case == "rebound_by_a_def":  # a nested def of the same name rebinds it
        plugin = FALLBACK.replace("        if create_view is None:",
                                  "        def create_view():\n            return None\n\n        if create_view is None:")
    elif case == "default_not_none":  # getattr's default is not None: `is None` says nothing
        plugin = FALLBACK.replace('"create_next_worker_view", None)', '"create_next_worker_view", 0)')
    found = _reads(tmp_path, plugin, core)
    assert [name for name, _, _ in found] == ["create_next_view"], found
