"""A core class that only a string names, in code that cannot run, has no instance.

vLLM 0.11.0's TPU platform names its worker as a string (`parallel_config.worker_cls =
"vllm.v1.worker.tpu_worker.TPUWorker"`, in `TpuPlatform.check_and_update_config`), and only
that worker builds `TPUModelRunner`, whose `compute_logits` calls
`self.model.compute_logits(hidden_states)`. With vllm-ascend's platform in place the TPU
platform's code never runs, so neither does the TPU worker or its runner; that call is no
evidence against the plugin's models that still take `sampling_metadata` (the gate cited it for
vllm-ascend 0.10.2rc1 -> 0.11.0, vllm-rbln 0.10.0 -> 0.13.0 and vllm-spyre 1.0.2 -> 0.11.0; with
it gone they cite the next core caller, a multimodal model's `self.language_model.compute_logits`).
Synthetic trees; the shapes are core's, no upstream code is copied."""

from __future__ import annotations

import gatekit
import pytest

from overlay.gate import run_gate

from test_gate_protocols import INTERFACES  # core's model protocols, shared with the protocol tests

PLATFORM_BASE = """
    class Platform:
        @classmethod
        def check_and_update_config(cls, vllm_config):
            pass
"""

TPU_PLATFORM = """
    from vllm.platforms.interface import Platform


    class TpuPlatform(Platform):
        @classmethod
        def check_and_update_config(cls, vllm_config):
            vllm_config.parallel_config.worker_cls = "vllm.v1.worker.tpu_worker.TPUWorker"
"""

TPU_WORKER = """
    from vllm.v1.worker.tpu_model_runner import TPUModelRunner


    class TPUWorker:
        def init_device(self):
            self.model_runner = TPUModelRunner(self.vllm_config)
"""

TPU_RUNNER = """
    class TPUModelRunner:
        def __init__(self, vllm_config):
            self.model = None

        def compute_logits(self, hidden_states):
            return self.model.compute_logits(hidden_states)

        def execute_model(self, hidden_states):
            return self.compute_logits(hidden_states)
"""

PLATFORM = """
    from vllm.platforms.interface import Platform


    class XPlatform(Platform):
        @classmethod
        def check_and_update_config(cls, vllm_config):
            vllm_config.parallel_config.worker_cls = "vllm_x.worker.XWorker"
"""

MODEL = """
    class CustomForCausalLM:
        def forward(self, input_ids, positions):
            return input_ids

        def compute_logits(self, hidden_states, sampling_metadata):
            return hidden_states
"""

ENTRY = """
    from setuptools import setup
    setup(name="vllm-x", entry_points={"vllm.platform_plugins": ["x = vllm_x:register"]})
"""

SYMBOL = "override:vllm_x.models.CustomForCausalLM.compute_logits"


def _errors(tmp_path, tpu_platform=TPU_PLATFORM, platform=PLATFORM, core_extra=None, plugin_extra=None):
    core = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.11.0'\n",
            "vllm/models/__init__.py": "", "vllm/models/interfaces_base.py": INTERFACES,
            "vllm/platforms/__init__.py": "", "vllm/platforms/interface.py": PLATFORM_BASE,
            "vllm/platforms/tpu.py": tpu_platform,
            "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "",
            "vllm/v1/worker/tpu_worker.py": TPU_WORKER, "vllm/v1/worker/tpu_model_runner.py": TPU_RUNNER,
            **(core_extra or {})}
    init = ("def register():\n    import vllm_x.models  # noqa\n    return 'vllm_x.platform.XPlatform'\n"
            '\n\nMODELS = {"CustomForCausalLM": "vllm_x.models:CustomForCausalLM"}\n')
    core_dir = gatekit.tree(tmp_path / "core", core)
    plugin_dir = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_x/__init__.py": init, "vllm_x/platform.py": platform,
        "vllm_x/worker.py": "class XWorker:\n    pass\n", "vllm_x/models.py": MODEL, **(plugin_extra or {})})
    return sorted(f.symbol for f in run_gate(core_dir, plugin_dir).findings if f.severity == "error")


def test_a_runner_only_another_platform_s_string_named_worker_builds_never_runs(tmp_path):
    assert SYMBOL not in _errors(tmp_path)


@pytest.mark.parametrize("tpu_platform", [
    # the string at module level: it may be read by anything
    TPU_PLATFORM + '\n\nWORKER = "vllm.v1.worker.tpu_worker.TPUWorker"\n',
    # the string in code that runs: a plain core function nothing rules out
    TPU_PLATFORM + '\n\ndef default_worker():\n    return "vllm.v1.worker.tpu_worker.TPUWorker"\n',
    # a string naming the module only, or another spelling: not the class in full
    TPU_PLATFORM + '\n\ndef f():\n    return getattr(__import__("vllm.v1.worker.tpu_worker"), "TPUWorker")\n',
])
def test_a_string_in_code_that_may_run_keeps_the_worker_live(tmp_path, tpu_platform):
    assert SYMBOL in _errors(tmp_path, tpu_platform=tpu_platform)


def test_the_plugin_naming_the_worker_keeps_it_live(tmp_path):
    platform = PLATFORM.replace('"vllm_x.worker.XWorker"', '"vllm.v1.worker.tpu_worker.TPUWorker"')
    assert SYMBOL in _errors(tmp_path, platform=platform)


def test_the_plugin_s_platform_inheriting_the_tpu_platform_s_method_keeps_it_live(tmp_path):
    platform = ("from vllm.platforms.tpu import TpuPlatform\n\n\n"
                "class XPlatform(TpuPlatform):\n    device_name = 'x'\n")
    assert SYMBOL in _errors(tmp_path, platform=platform)
    # overriding the method, it runs its own: the TPU platform's string is never read
    overriding = platform.replace("device_name = 'x'", "@classmethod\n    def check_and_update_config(cls, c):\n"
                                  "        c.parallel_config.worker_cls = 'vllm_x.worker.XWorker'")
    assert SYMBOL not in _errors(tmp_path / "overriding", platform=overriding)


def test_a_worker_also_built_by_name_somewhere_live_keeps_it_live(tmp_path):
    extra = {"vllm/v1/executor.py": "from vllm.v1.worker.tpu_worker import TPUWorker\n\n\n"
                                    "def make():\n    return TPUWorker()\n"}
    assert SYMBOL in _errors(tmp_path, core_extra=extra)


def test_a_worker_used_as_a_value_elsewhere_keeps_it_live(tmp_path):
    extra = {"vllm/v1/registry.py": "from vllm.v1.worker.tpu_worker import TPUWorker\n\n\n"
                                    "WORKERS = [TPUWorker]\n"}
    assert SYMBOL in _errors(tmp_path, core_extra=extra)
