"""A configuration file the plugin ships inside its package is a way in: vllm-omni's stage
configs (YAML under its package) name the worker class each stage runs
(`worker_cls: vllm_omni.worker.gpu_ar_worker.GPUARWorker`), and the plugin loads them by path,
so no import or Python string reaches those modules. What core lacks there is an error, as on
an entry point's chain. The file is data: searched for names, never loaded. Synthetic trees;
no upstream code is copied."""

from __future__ import annotations

from pathlib import Path

import gatekit
from hypothesis import given, settings, strategies as st

from overlay.gate.source import DirSource
from overlay.gate.startup import PACKAGE_DATA, package_data

PKGS = {"vllm/__init__.py": "", "vllm/entrypoints/__init__.py": "", "vllm/entrypoints/utils.py": "X = 1\n"}

WORKER = """
    from vllm.entrypoints.utils import cli_env_setup


    class StageWorker:
        pass
"""

STAGES = """
stage_args:
  - stage_id: 0
    runtime:
      worker_cls: vllm_ascend.worker.stage_worker.StageWorker
"""


def _severities(tmp_path, files):
    core = gatekit.tree(tmp_path / "core", PKGS)
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": gatekit.PLUGIN_ENTRY,
        "vllm_ascend/__init__.py": "def register():\n    return None\n",
        "vllm_ascend/worker/__init__.py": "",
        "vllm_ascend/worker/stage_worker.py": WORKER, "vllm_ascend/worker/other_worker.py": WORKER,
        **files})
    return {f.plugin_path: f.severity for f in gatekit.run_gate(core, plugin).findings}


def test_a_shipped_configuration_naming_a_class_reaches_its_module(tmp_path):
    assert _severities(tmp_path / "a", {"vllm_ascend/stage_configs/omni.yaml": STAGES}) == {
        "vllm_ascend/worker/stage_worker.py": "error", "vllm_ascend/worker/other_worker.py": "warning"}
    # negative twins: the same file under tests/ is not a configuration the plugin supports;
    # a name no module of the plugin has reaches nothing
    assert _severities(tmp_path / "b", {"vllm_ascend/tests/omni.yaml": STAGES}) == {
        "vllm_ascend/worker/stage_worker.py": "warning", "vllm_ascend/worker/other_worker.py": "warning"}
    assert _severities(tmp_path / "c", {"vllm_ascend/stage_configs/omni.yaml":
                                        STAGES.replace("stage_worker.", "gone_worker.")}) == {
        "vllm_ascend/worker/stage_worker.py": "warning", "vllm_ascend/worker/other_worker.py": "warning"}


def test_the_configuration_is_named_in_the_chain(tmp_path):
    core = gatekit.tree(tmp_path / "core", PKGS)
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": gatekit.PLUGIN_ENTRY, "vllm_ascend/__init__.py": "def register():\n    return None\n",
        "vllm_ascend/worker/__init__.py": "", "vllm_ascend/worker/stage_worker.py": WORKER,
        "vllm_ascend/stage_configs/omni.json": '{"worker_cls": "vllm_ascend.worker.stage_worker:StageWorker"}'})
    (finding,) = gatekit.run_gate(core, plugin).findings
    assert "vllm_ascend/stage_configs/omni.json names vllm_ascend.worker.stage_worker" in finding.reason


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="vllm_ascend.worker:stage_ x\n{}\"'", max_size=120))
def test_only_modules_the_plugin_has_come_back(tmp_path_factory, text):
    """Whatever the file holds, each entry point names an existing module of the package,
    and nothing is run."""
    root = tmp_path_factory.mktemp("data")
    (root / "vllm_ascend" / "worker").mkdir(parents=True)
    (root / "vllm_ascend" / "conf.yaml").write_text(text)
    have = {"vllm_ascend.worker", "vllm_ascend.worker.stage_worker"}
    points = package_data(DirSource(Path(root)), frozenset({"vllm_ascend"}), lambda n: n in have)
    assert all(p.group == PACKAGE_DATA and p.module in have and p.name == "vllm_ascend/conf.yaml" for p in points)


def test_a_data_file_that_leads_out_of_the_tree_is_not_read(tmp_path):
    """A hostile archive's `conf.yaml` linking outside the tree: the bounded reader refuses it,
    says so, and nothing it names is followed."""
    outside = tmp_path / "outside.yaml"
    outside.write_text(STAGES)
    root = tmp_path / "plugin"
    (root / "vllm_ascend" / "worker").mkdir(parents=True)
    (root / "vllm_ascend" / "conf.yaml").symlink_to(outside)
    src = DirSource(root)
    have = {"vllm_ascend.worker", "vllm_ascend.worker.stage_worker"}
    assert package_data(src, frozenset({"vllm_ascend"}), lambda n: n in have) == ()
    assert src.skipped == {"vllm_ascend/conf.yaml": "is a link that leads out of the tree"}
