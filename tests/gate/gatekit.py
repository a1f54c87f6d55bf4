"""Synthetic core/plugin trees for the gate tests (written by the tests, never copied upstream code).

The two seed-000 failures are modelled with the same shapes the real trees have:
- core's model runner constructs `ModelCudaGraphManager(..., decode_query_len=...,
  lora_capture_cases=...)` through a module-global name the plugin monkeypatches
  with a `factory` that does not take `lora_capture_cases`;
- the plugin imports `_compute_global_logsumexp` from a core that only has the old
  helper name `_compute_global_lse`.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest

from overlay import paths
from overlay.gate import run_gate
from overlay.series.model import load_pin


# ------------------------------------------------------------------ the checker engine's fixture
# core 1.0 has KVCacheTensor.shared_by, core 2.0 dropped it (issue 27)

KV_OLD = """
    from dataclasses import dataclass, field


    @dataclass
    class KVCacheTensor:
        size: int
        shared_by: list[str] = field(default_factory=list)
"""

KV_NEW = """
    from dataclasses import dataclass


    @dataclass
    class KVCacheTensor:
        size: int
"""


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(content).lstrip("\n"))
    return root


# ----------------------------------------------------------------------------- core

CUDAGRAPH_NEW = """
    class CudaGraphManager:
        def __init__(self, vllm_config, device, cudagraph_mode, decode_query_len,
                     lora_capture_cases=None):
            self.lora_capture_cases = lora_capture_cases or [0]

        def capture(self, model, has_lora=False, progress_bar_desc="capture"):
            pass


    class ModelCudaGraphManager(CudaGraphManager):
        pass
"""

CUDAGRAPH_OLD = """
    class CudaGraphManager:
        def __init__(self, vllm_config, device, cudagraph_mode, decode_query_len):
            pass

        def capture(self, model, progress_bar_desc="capture"):
            pass


    class ModelCudaGraphManager(CudaGraphManager):
        pass
"""

RUNNER_NEW = """
    from vllm.v1.worker.gpu.cudagraph_utils import ModelCudaGraphManager


    class GPUModelRunner:
        def init_cudagraph_manager(self, cudagraph_mode):
            self.cudagraph_manager = ModelCudaGraphManager(
                self.vllm_config,
                self.device,
                cudagraph_mode,
                decode_query_len=self.decode_query_len,
                lora_capture_cases=self.lora_capture_cases,
            )
"""

RUNNER_OLD = """
    from vllm.v1.worker.gpu.cudagraph_utils import ModelCudaGraphManager


    class GPUModelRunner:
        def init_cudagraph_manager(self, cudagraph_mode):
            self.cudagraph_manager = ModelCudaGraphManager(
                self.vllm_config,
                self.device,
                cudagraph_mode,
                decode_query_len=self.decode_query_len,
            )
"""

SAMPLER_NEW = """
    def _compute_global_logsumexp(local_max, local_sumexp):
        return local_max


    def _compute_local_logits_stats_kernel(logits):
        return logits
"""

SAMPLER_OLD = """
    def _compute_global_lse(local_max, local_sumexp):
        return local_max


    def _compute_block_stats_kernel(logits):
        return logits
"""


def core_files(new: bool, version: str | None) -> dict[str, str]:
    files = {
        "vllm/__init__.py": "",
        "vllm/v1/__init__.py": "",
        "vllm/v1/worker/__init__.py": "",
        "vllm/v1/worker/gpu/__init__.py": "",
        "vllm/v1/worker/gpu/cudagraph_utils.py": CUDAGRAPH_NEW if new else CUDAGRAPH_OLD,
        "vllm/v1/worker/gpu/model_runner.py": RUNNER_NEW if new else RUNNER_OLD,
        "vllm/v1/worker/gpu/spec_decode/__init__.py": "",
        "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py": SAMPLER_NEW if new else SAMPLER_OLD,
    }
    if version:
        files["vllm/_version.py"] = f"__version__ = version = '{version}'\n"
    return files


def core(root: Path, new: bool = True, version: str | None = None, extra: dict[str, str] | None = None) -> Path:
    return tree(root, {**core_files(new, version), **(extra or {})})


# ----------------------------------------------------------------------------- plugin

# The monkeypatch as the plugin had it: factory() has no lora_capture_cases.
PLUGIN_RUNNER_BROKEN = """
    from contextlib import contextmanager

    import vllm.v1.worker.gpu.model_runner as vllm_model_runner

    from vllm_ascend.worker.v2.aclgraph_utils import ModelAclGraphManager


    @contextmanager
    def graph_manager_wrapper(model_runner):
        original_graph_manager = vllm_model_runner.ModelCudaGraphManager

        def factory(vllm_config, device, cudagraph_mode, decode_query_len):
            return ModelAclGraphManager(vllm_config, device, cudagraph_mode, decode_query_len, model_runner)

        try:
            vllm_model_runner.ModelCudaGraphManager = factory
            yield
        finally:
            vllm_model_runner.ModelCudaGraphManager = original_graph_manager
"""

# The fix (vllm-ascend#10935 in spirit): accept and forward lora_capture_cases.
PLUGIN_RUNNER_FIXED = PLUGIN_RUNNER_BROKEN.replace(
    "def factory(vllm_config, device, cudagraph_mode, decode_query_len):\n"
    "            return ModelAclGraphManager(vllm_config, device, cudagraph_mode, decode_query_len, model_runner)",
    "def factory(vllm_config, device, cudagraph_mode, decode_query_len, lora_capture_cases=None):\n"
    "            return ModelAclGraphManager(vllm_config, device, cudagraph_mode, decode_query_len, model_runner,\n"
    "                                        lora_capture_cases=lora_capture_cases)")

PLUGIN_ACLGRAPH = """
    from vllm.v1.worker.gpu.cudagraph_utils import ModelCudaGraphManager


    class ModelAclGraphManager(ModelCudaGraphManager):
        def __init__(self, vllm_config, device, cudagraph_mode, decode_query_len, model_runner,
                     lora_capture_cases=None):
            self.model_runner = model_runner
"""

# The plugin adopted the new helper name; the paired core lacks it.
PLUGIN_SAMPLER_BROKEN = """
    from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import (
        _compute_global_logsumexp,
        _compute_local_logits_stats_kernel,
    )
"""

# The fix (vllm-ascend#10454 in spirit): a version-aware import that works on both cores.
PLUGIN_SAMPLER_FIXED = """
    from vllm_ascend.utils import vllm_version_is

    if vllm_version_is("0.23.0"):
        from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import (
            _compute_block_stats_kernel as _compute_local_logits_stats_kernel,
            _compute_global_lse as _compute_global_logsumexp,
        )
    else:
        from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import (
            _compute_global_logsumexp,
            _compute_local_logits_stats_kernel,
        )
"""

PLUGIN_UTILS = """
    def vllm_version_is(target):
        import vllm
        return vllm.__version__ == target
"""


def plugin_files(fixed: bool) -> dict[str, str]:
    return {
        "vllm_ascend/__init__.py": "",
        "vllm_ascend/utils.py": PLUGIN_UTILS,
        "vllm_ascend/worker/__init__.py": "",
        "vllm_ascend/worker/v2/__init__.py": "",
        "vllm_ascend/worker/v2/aclgraph_utils.py": PLUGIN_ACLGRAPH,
        "vllm_ascend/worker/v2/model_runner.py": PLUGIN_RUNNER_FIXED if fixed else PLUGIN_RUNNER_BROKEN,
        "vllm_ascend/worker/v2/spec_decode/__init__.py": "",
        "vllm_ascend/worker/v2/spec_decode/rejection_sampler_utils.py":
            PLUGIN_SAMPLER_FIXED if fixed else PLUGIN_SAMPLER_BROKEN,
        "tests/test_something.py": "from vllm.does.not.exist import nothing\n",  # tests are not gated
    }


def plugin(root: Path, fixed: bool = False, extra: dict[str, str] | None = None) -> Path:
    return tree(root, {**plugin_files(fixed), **(extra or {})})


def line_of(root: Path, rel: str, needle: str) -> int:
    for i, line in enumerate((root / rel).read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {rel}")


PLUGIN_ENTRY = """
    from setuptools import setup
    setup(name="vllm-ascend", entry_points={"vllm.platform_plugins": ["ascend = vllm_ascend:register"]})
"""


def gate_loaded(tmp_path: Path, pkgs: dict[str, str], core: dict[str, str], plugin: dict[str, str],
                loaded: tuple[str, ...]):
    """The gate on a synthetic core (`pkgs` + `core`) and a plugin whose register() imports
    the `loaded` modules."""
    core_dir = tree(tmp_path / "core", {**pkgs, **core})
    init = "def register():\n" + "".join(f"    import {m}  # noqa\n" for m in loaded)
    plugin_dir = tree(tmp_path / "plugin", {"setup.py": PLUGIN_ENTRY, "vllm_ascend/__init__.py": init, **plugin})
    return run_gate(core_dir, plugin_dir)


def by_symbol(report, symbol: str) -> list:
    """The report's findings with this symbol."""
    return [f for f in report.findings if f.symbol == symbol]


def real_trees(mirror: Path, base: Path, pin: str, versions: tuple[str, ...]) -> tuple[Path, dict[str, Path]]:
    """(the pin set's plugin commit exported from the real mirror, {version: extracted vllm
    sdist}) under `base`; skips when the mirror lacks one of them."""
    target = load_pin(Path(__file__).resolve().parents[2], pin).target("plugin")
    repo = paths.find_mirror_repo(mirror, target.source.mirror_name)
    if repo is None:
        pytest.skip("the mirror has no vllm-ascend repository")
    plugin = base / "plugin"
    plugin.mkdir()
    data = subprocess.run(["git", "--git-dir", str(repo), "archive", target.source.commit],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(plugin, filter="data")
    cores = {}
    for version in versions:
        sdist = mirror / "pypi" / f"vllm-{version}.tar.gz"
        if not sdist.is_file():
            pytest.skip(f"the mirror has no vllm {version} source archive")
        with tarfile.open(sdist) as tar:
            tar.extractall(base, filter="data")
        cores[version] = base / f"vllm-{version}"
    return plugin, cores


# vLLM's CustomOp registry as core defines it (custom_op.py): `register_oot` records a plugin
# class under an op's name, and `__new__` builds it wherever core writes `Op(...)`.
CUSTOM_OP_REGISTRY = """
    import torch


    class CustomOp(torch.nn.Module):
        op_registry_oot = {}

        def __new__(cls, *args, **kwargs):
            op_cls = CustomOp.op_registry_oot.get(cls.__name__, cls)
            return super().__new__(op_cls)

        @classmethod
        def register_oot(cls, _decorated_op_cls=None, name=None):
            CustomOp.op_registry_oot[name] = _decorated_op_cls
"""


# vLLM's `vllm.platforms` binds `current_platform` lazily through a module `__getattr__`
# (platforms/__init__.py); fixtures of core's platform module end with it
CURRENT_PLATFORM = """

    _current_platform = None


    def __getattr__(name):
        if name == "current_platform":
            return _current_platform
        raise AttributeError(name)
"""
