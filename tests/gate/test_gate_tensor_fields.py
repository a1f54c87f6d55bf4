"""A field core now sets to a plain tensor, used by a plugin runner as the buffer it was.

vLLM 0.19.0 made `GPUModelRunner.positions` and `.seq_lens` plain tensors
(`self.positions = torch.zeros(...)`, where `self._make_buffer(...)` made CPU/GPU buffers
before). Plugin runners that inherit core's `__init__` kept reading `self.positions.gpu`,
writing `self.seq_lens.np[:n]` and indexing `self.seq_lens.cpu[:n]` (vllm-ascend 0.18.0,
vllm-omni 0.18.0, vllm-qaic 0.15.0; each a truth item of the evaluation). Synthetic trees of
that shape; torch itself is not in them, as it is not in a real core tree."""

from __future__ import annotations

from textwrap import dedent, indent

import gatekit
import pytest

PKGS = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.19.1'\n"}

BUFFER = """
    class CpuGpuBuffer:
        def __init__(self, n):
            self.cpu = [0] * n
            self.gpu = [0] * n
            self.np = self.cpu

        def copy_to_gpu(self, n=None):
            return self.gpu
"""

CORE = """
    import torch

    from vllm.utils import CpuGpuBuffer


    class GPUModelRunner:
        def __init__(self, n):
            self.positions = torch.zeros(n, dtype=torch.int64, device="cpu")
            self.seq_lens = torch.zeros(n, dtype=torch.int32).pin_memory()
            self.input_ids = self._make_buffer(n)

        def _make_buffer(self, n) -> CpuGpuBuffer:
            return CpuGpuBuffer(n)
"""

PLUGIN = """
    from vllm.worker import GPUModelRunner


    class NPUModelRunner(GPUModelRunner):
        def dummy_run(self, n):
            self.seq_lens.np[:n] = 1
            self.seq_lens.copy_to_gpu(n)
            positions = self.positions.gpu[:n]
            host = self.seq_lens.cpu[:n]
            moved = self.positions.cpu()
            shape = self.positions.shape
            ids = self.input_ids.gpu[:n]
            return positions, host, moved, shape, ids


    NPUModelRunner(4).dummy_run(2)
"""

ALL = [("positions.gpu", "error"), ("seq_lens.copy_to_gpu", "error"), ("seq_lens.cpu", "error"),
       ("seq_lens.np", "error")]


def _found(tmp_path, plugin: str = PLUGIN, core: str = CORE, extra: dict | None = None):
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/utils.py": dedent(BUFFER), "vllm/worker.py": dedent(core)},
                                 {"vllm_ascend/runner.py": dedent(plugin), **(extra or {})}, ("vllm_ascend.runner",))
    return sorted((".".join(f.symbol.split(".")[-2:]), f.severity) for f in report.findings
                  if f.symbol.startswith("attribute:vllm.worker.GPUModelRunner."))


def test_buffer_members_used_on_a_field_core_made_a_tensor_are_errors(tmp_path):
    assert _found(tmp_path) == ALL


def test_the_message_names_core_s_assignment_and_what_the_tensor_lacks(tmp_path):
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/utils.py": dedent(BUFFER), "vllm/worker.py": dedent(CORE)},
                                 {"vllm_ascend/runner.py": dedent(PLUGIN)}, ("vllm_ascend.runner",))
    [gpu] = gatekit.by_symbol(report, "attribute:vllm.worker.GPUModelRunner.positions.gpu")
    assert "`self.positions = torch.zeros(...)` (vllm/worker.py:8)" in gpu.message
    assert "a torch.Tensor has no attribute 'gpu'" in gpu.message
    [cpu] = gatekit.by_symbol(report, "attribute:vllm.worker.GPUModelRunner.seq_lens.cpu")
    assert "`self.seq_lens = torch.zeros(...).pin_memory(...)`" in cpu.message
    assert "`cpu` is a method, which cannot be indexed" in cpu.message


def test_a_computed_setattr_of_names_its_module_never_quotes_does_not_hide_it(tmp_path):
    """vLLM's `GPUModelRunner.update_config` does `setattr(self, config_name, new_config)` for
    the `allowed_config_names` it quotes ("load_config", "model_config")."""
    core = CORE + ("\n        def update_config(self, overrides):\n"
                   "            allowed = {'load_config', 'model_config'}\n"
                   "            for name, value in overrides.items():\n"
                   "                assert name in allowed\n"
                   "                setattr(self, name, value)\n")
    assert _found(tmp_path, core=core) == ALL


def test_a_store_of_the_name_on_another_field_does_not_hide_it(tmp_path):
    """vllm-qaic sets `self.input_ids.cpu = ...` (a buffer of its own) and
    `self.input_batch.block_table[0].block_table.np = ...`, and reads `self.seq_lens.cpu[:n]`:
    the stores are on other objects."""
    plugin = PLUGIN.replace("        def dummy_run(self, n):",
                            "        def attach(self, t):\n            self.input_ids.cpu = self.input_ids.parts[0].np = t\n"
                            "            self.input_ids.gpu = self.input_ids.copy_to_gpu = t\n\n"
                            "        def dummy_run(self, n):")
    assert _found(tmp_path, plugin) == ALL


@pytest.mark.parametrize("case", ["core_makes_buffers", "plugin_sets_it", "plugin_subclass_sets_it",
                                  "plugin_subclass_unreadable_base", "core_property", "another_core_assignment",
                                  "core_tuple_assignment", "core_setattr", "core_setattr_constant",
                                  "core_stores_on_it", "plugin_stores_on_a_tensor", "plugin_stores_on_the_field",
                                  "plugin_stores_on_a_call_result",
                                  "handled", "probed"])
def test_where_the_field_is_not_certainly_a_plain_tensor_nothing_is_said(tmp_path, case):
    plugin, core, extra = PLUGIN, CORE, None
    if case == "core_makes_buffers":  # the core before 0.19.0
        core = CORE.replace('torch.zeros(n, dtype=torch.int64, device="cpu")', "self._make_buffer(n)").replace(
            "torch.zeros(n, dtype=torch.int32).pin_memory()", "self._make_buffer(n)")
    elif case == "plugin_sets_it":
        plugin = PLUGIN.replace("        def dummy_run(self, n):",
                                "        def __init__(self, n):\n            super().__init__(n)\n"
                                "            self.positions = self._make_buffer(n)\n"
                                "            self.seq_lens = self._make_buffer(n)\n\n"
                                "        def dummy_run(self, n):")
    elif case == "plugin_subclass_sets_it":  # the object may be the subclass, whose fields are buffers
        plugin = PLUGIN + indent(dedent("""

            class OtherRunner(NPUModelRunner):
                def __init__(self, n):
                    super().__init__(n)
                    self.positions = self._make_buffer(n)
                    self.seq_lens = self._make_buffer(n)
        """), "    ")
    elif case == "plugin_subclass_unreadable_base":  # a base outside both trees may set them
        plugin = PLUGIN + indent(dedent("""

            from vllm_other.runner import OtherBase


            class OtherRunner(NPUModelRunner, OtherBase):
                pass
        """), "    ")
    elif case == "core_property":  # assignment goes through a setter, which may wrap the tensor
        setter = ("        @property\n        def {0}(self):\n            return self._{0}\n\n"
                  "        @{0}.setter\n        def {0}(self, value):\n            self._{0} = CpuGpuBuffer(value)\n\n")
        core = CORE.replace("        def _make_buffer", setter.format("positions") + setter.format("seq_lens")
                            + "        def _make_buffer")
    elif case == "another_core_assignment":  # some path sets them to something else
        core = CORE + "\n        def reset(self, n):\n            self.positions = self._make_buffer(n)\n" \
                      "            self.seq_lens = self._make_buffer(n)\n"
    elif case == "core_tuple_assignment":  # a store the plain-assignment walk does not see
        core = CORE + "\n        def reset(self, n):\n" \
                      "            self.positions, self.seq_lens = self._make_buffer(n), self._make_buffer(n)\n"
    elif case == "core_setattr":  # a computed name its module quotes
        core = CORE + "\n        def reset(self, n):\n            for name in ('positions', 'seq_lens'):\n" \
                      "                setattr(self, name, self._make_buffer(n))\n"
    elif case == "core_setattr_constant":
        core = CORE + "\n        def reset(self, n):\n            setattr(self, 'positions', self._make_buffer(n))\n" \
                      "            setattr(self, 'seq_lens', self._make_buffer(n))\n"
    elif case == "core_stores_on_it":  # core hangs the buffer's names on the tensor itself
        core = CORE.replace("            self.input_ids = self._make_buffer(n)\n",
                            "            self.input_ids = self._make_buffer(n)\n"
                            "            self.positions.gpu = self.positions\n"
                            "            self.seq_lens.np = self.seq_lens.copy_to_gpu = self.seq_lens.cpu = None\n")
    elif case == "plugin_stores_on_a_tensor":
        plugin = PLUGIN.replace("        def dummy_run(self, n):",
                                "        def attach(self, t):\n            t.gpu = t.np = t.copy_to_gpu = t.cpu = t\n\n"
                                "        def dummy_run(self, n):")
    elif case == "plugin_stores_on_the_field":
        plugin = PLUGIN.replace("        def dummy_run(self, n):",
                                "        def attach(self, t):\n            self.positions.gpu = self.seq_lens.np = t\n"
                                "            self.seq_lens.copy_to_gpu = self.seq_lens.cpu = t\n\n"
                                "        def dummy_run(self, n):")
    elif case == "plugin_stores_on_a_call_result":  # the method may return the field itself
        plugin = PLUGIN.replace("        def dummy_run(self, n):",
                                "        def attach(self, t):\n            self.table().gpu = self.table().np = t\n"
                                "            self.table().copy_to_gpu = self.table().cpu = t\n\n"
                                "        def dummy_run(self, n):")
    elif case == "handled":
        plugin = PLUGIN.replace("            self.seq_lens.np[:n] = 1\n", "            try:\n"
                                "                self.seq_lens.np[:n] = 1\n"
                                "                self.seq_lens.copy_to_gpu(n)\n"
                                "                positions = self.positions.gpu[:n]\n"
                                "                host = self.seq_lens.cpu[:n]\n"
                                "            except (AttributeError, TypeError):\n"
                                "                return None\n").replace(
            "            self.seq_lens.copy_to_gpu(n)\n            positions = self.positions.gpu[:n]\n"
            "            host = self.seq_lens.cpu[:n]\n", "")
    elif case == "probed":
        plugin = PLUGIN.replace("            self.seq_lens.np[:n] = 1\n", "            if not hasattr(self.seq_lens, 'np'):\n"
                                "                return None\n            self.seq_lens.np[:n] = 1\n")
    found = _found(tmp_path, plugin, core, extra)
    if case == "probed":  # only the probed name is spared
        assert found == [x for x in ALL if x[0] != "seq_lens.np"], found
    else:
        assert found == [], found


def test_an_opt_in_module_makes_it_a_warning(tmp_path):
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/utils.py": dedent(BUFFER), "vllm/worker.py": dedent(CORE)},
                                 {"vllm_ascend/runner.py": dedent(PLUGIN)}, ())
    found = sorted((".".join(f.symbol.split(".")[-2:]), f.severity) for f in report.findings
                   if f.symbol.startswith("attribute:vllm.worker.GPUModelRunner."))
    assert found == [(name, "warning") for name, _ in ALL]


def test_the_member_lists_cover_what_the_rule_relies_on():
    from overlay.gate import tensormembers
    assert tensormembers.has("cpu") and tensormembers.is_method("cpu")
    assert tensormembers.has("shape") and not tensormembers.is_method("shape")
    assert tensormembers.has("__getitem__") and not tensormembers.has("gpu") and not tensormembers.has("np")
    assert not tensormembers.TENSOR_DATA & tensormembers.TENSOR_METHODS


def test_the_member_printer_names_what_a_newer_torch_adds(monkeypatch, capsys):
    """`python -m overlay.gate.tensormembers` under a newer torch: a stand-in `torch` module
    whose Tensor has every listed name (as torch 2.13's does) plus one new method and one new
    property; the printer names those two, each in its list."""
    import types

    from overlay.gate import tensormembers

    body = {name: (lambda self: None) for name in tensormembers.TENSOR_METHODS}
    body.update({name: property(lambda self: None) for name in tensormembers.TENSOR_DATA})
    body.update(new_method=lambda self: None, new_data=property(lambda self: None))
    fake = types.ModuleType("torch")
    fake.Tensor = type("Tensor", (), body)
    fake.__version__ = "9.9.9"
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    assert tensormembers.main() == 0
    assert capsys.readouterr().out.split("\n")[:2] == ["TENSOR_DATA: new_data", "TENSOR_METHODS: new_method"]
    del fake.Tensor.new_method, fake.Tensor.new_data
    assert tensormembers.main() == 0
    assert capsys.readouterr().out.strip() == "torch 9.9.9: nothing to add"
