"""A plugin shipped in a PEP 420 namespace package: its tree holds no top-level `__init__.py`.

optimum-neuron's platform plugin lives in `optimum/neuron/vllm/` and `optimum/` has no
`__init__.py` (the distribution shares the `optimum` namespace with others). Before, the gate
found "no Python package in the plugin tree" and stopped. A tree with no regular top-level
package is now read as its namespace packages; a tree that has one keeps exactly its regular
packages, so a stray folder of packages beside them (an app, a sibling project) is not read.

Synthetic trees. The fake core's shapes are cut from vLLM 0.11.0: `vllm/platforms/interface.py`
(`Platform`'s annotated `_enum`/`device_name`/`device_type` and `dispatch_key = "CPU"`;
`UnspecifiedPlatform` with `_enum = PlatformEnum.UNSPECIFIED` and `device_type = ""`) and
`vllm/worker/worker_base.py`, which keeps `WorkerBase(vllm_config)` and no longer has the V0
`LocalOrDistributedWorkerBase` (vLLM 0.10.2's line 262)."""

from __future__ import annotations

import gatekit
import pytest

from overlay.errors import OverlayError
from overlay.gate import run_gate
from overlay.gate.engine import top_packages
from overlay.gate.source import DirSource

CORE = {
    "vllm/__init__.py": "",
    "vllm/_version.py": "__version__ = version = '0.11.0'\n",
    "vllm/platforms/__init__.py": "",
    "vllm/platforms/interface.py": """
        import enum


        class PlatformEnum(enum.Enum):
            OOT = enum.auto()
            UNSPECIFIED = enum.auto()


        class Platform:
            _enum: PlatformEnum
            device_name: str
            device_type: str
            dispatch_key: str = "CPU"


        class UnspecifiedPlatform(Platform):
            _enum = PlatformEnum.UNSPECIFIED
            device_type = ""
    """,
    "vllm/worker/__init__.py": "",
    "vllm/worker/worker_base.py": """
        class WorkerBase:
            def __init__(self, vllm_config) -> None:
                self.vllm_config = vllm_config
                self.model_config = vllm_config.model_config
                self.parallel_config = vllm_config.parallel_config
    """,
}

PLATFORM = """
    from vllm.platforms.interface import UnspecifiedPlatform


    class AcmePlatform(UnspecifiedPlatform):
        worker_cls = "acme.neuron.vllm.worker.AcmeWorker"
"""

WORKER = """
    from vllm.worker.worker_base import LocalOrDistributedWorkerBase


    class AcmeWorker(LocalOrDistributedWorkerBase):
        pass
"""

PLUGIN_ENTRY = """
    def register():
        return "acme.neuron.vllm.platform.AcmePlatform"
"""

SETUP = """
    from setuptools import setup
    setup(name="acme-neuron",
          entry_points={"vllm.platform_plugins": ["acme = acme.neuron.vllm.plugin:register"]})
"""


def _errors(report) -> list[tuple[str, str]]:
    return sorted((f.symbol, f.plugin_path) for f in report.findings if f.severity == "error")


def _namespace_plugin(tmp_path):
    return gatekit.tree(tmp_path / "plugin", {
        "setup.py": SETUP,
        "acme/neuron/__init__.py": "",
        "acme/neuron/vllm/__init__.py": "",
        "acme/neuron/vllm/plugin.py": PLUGIN_ENTRY,
        "acme/neuron/vllm/platform.py": PLATFORM,
        "acme/neuron/vllm/worker.py": WORKER,
    })


def test_a_namespace_package_plugin_is_gated(tmp_path):
    core = gatekit.tree(tmp_path / "core", CORE)
    plugin = _namespace_plugin(tmp_path)
    assert top_packages(DirSource(plugin)) == {"acme"}
    errors = _errors(run_gate(core, plugin))
    assert ("import:vllm.worker.worker_base:LocalOrDistributedWorkerBase", "acme/neuron/vllm/worker.py") in errors


def test_a_tree_with_neither_kind_of_package_is_still_refused(tmp_path):
    core = gatekit.tree(tmp_path / "core", CORE)
    plugin = gatekit.tree(tmp_path / "plugin", {"setup.py": SETUP, "acme/loose.py": WORKER,
                                                "tests/unit/__init__.py": ""})
    with pytest.raises(OverlayError, match="no Python package in the plugin tree"):
        run_gate(core, plugin)


def test_regular_packages_keep_a_stray_folder_of_packages_out(tmp_path):
    core = gatekit.tree(tmp_path / "core", CORE)
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": SETUP.replace("acme.neuron.vllm.plugin", "acme_plugin"),
        "acme_plugin/__init__.py": PLUGIN_ENTRY.replace("acme.neuron.vllm.platform", "acme_plugin.platform"),
        "acme_plugin/platform.py": PLATFORM.replace("acme.neuron.vllm.worker", "acme_plugin.worker"),
        "acme_plugin/worker.py": "from vllm.worker.worker_base import WorkerBase\n",
        "apps/demo/__init__.py": "",
        "apps/demo/main.py": WORKER,
    })
    assert top_packages(DirSource(plugin)) == {"acme_plugin"}
    files = {f.plugin_path for f in run_gate(core, plugin).findings}
    assert not any(f.startswith("apps/") for f in files)


def test_the_cli_gates_a_namespace_package_plugin_end_to_end(run, tmp_path):
    """`overlay gate --core --plugin` on a namespace package plugin: the break is the one error
    line and the exit is 1 (before, exit 2 with "no Python package in the plugin tree")."""
    core = gatekit.tree(tmp_path / "core", CORE)
    plugin = _namespace_plugin(tmp_path)
    code, out, err = run("gate", "--core", core, "--plugin", plugin)
    assert (code, err) == (1, "")
    errors = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "acme/neuron/vllm/worker.py" in errors[0], out
