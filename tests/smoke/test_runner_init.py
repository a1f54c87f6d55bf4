"""The smoke's runner is cut from the real `__init__`s: every attribute core's and
the plugin's `__init__` set at a release, and a failure says where it lies."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "overlay" / "smoke"))
import decode_steps  # noqa: E402  (runs in the composed env, so it is loaded by path here too)
import runner_init  # noqa: E402
import walker  # noqa: E402

CORE = """
    import contextlib

    LIMIT = 3

    def device_stream(device):
        if device == "cpu":
            raise RuntimeError("no NPU on this host")
        return "stream"

    class Config:
        n = 4
        dp = 2
        spec = None

    class GPURunner:
        def __init__(self, vllm_config, device):
            self.vllm_config = vllm_config
            self.max_num_reqs = vllm_config.n * 2        # computed, not a constant
            self.adaptive_verification = None
            self.output_stream = device_stream(device)   # needs the device
            self.dp_size = vllm_config.dp
            if vllm_config.spec is not None:
                self.speculator = "draft"                # the branch not taken sets nothing
            else:
                self.speculator = None
            self.req_states = [0] * self.max_num_reqs
            self.cases = [c for c in range(LIMIT)]       # a comprehension sees the globals
"""

PLUGIN = """
    import contextlib

    from {core} import GPURunner

    @contextlib.contextmanager
    def wrapper():
        yield True

    class NPURunner(GPURunner):
        def __init__(self, vllm_config, device):
            self.ascend = "ascend"
            with wrapper() as wrapped:
                super().__init__(vllm_config, device)
            self.wrapped = wrapped
            self._finegrained_tp_requires_graph = self.max_num_reqs > 1 and self.dp_size > 1
            del self.req_states
            self.req_states: list = [1] * self.max_num_reqs
"""


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def trees(tmp_path):
    """A synthetic core (under vllm/) and plugin (under vllm_ascend/), as the composed trees lay them out."""
    core_file = tmp_path / "core" / "vllm" / "fake_gpu_runner.py"
    plugin_file = tmp_path / "plugin" / "vllm_ascend" / "fake_npu_runner.py"
    for path in (core_file, plugin_file):
        path.parent.mkdir(parents=True)
    core_file.write_text(textwrap.dedent(CORE))
    plugin_file.write_text(textwrap.dedent(PLUGIN.format(core="fake_gpu_runner_core")))
    core = _load(core_file, "fake_gpu_runner_core")
    plugin = _load(plugin_file, "fake_npu_runner_plugin")
    yield core, plugin
    for name in ("fake_gpu_runner_core", "fake_npu_runner_plugin"):
        sys.modules.pop(name, None)


def test_the_smokes_runner_has_every_attribute_the_inits_set(trees):
    core, plugin = trees
    runner, skipped = decode_steps.new_runner(plugin.NPURunner, core.Config(), "cpu")
    every = {"ascend", "wrapped", "vllm_config", "max_num_reqs", "adaptive_verification", "output_stream",
             "dp_size", "speculator", "req_states", "cases", "_finegrained_tp_requires_graph"}
    assert every <= set(vars(runner))
    # as the __init__s compute them, in their order (the plugin's statements after core's)
    assert runner.max_num_reqs == 8 and runner.cases == [0, 1, 2] and runner.speculator is None
    assert runner._finegrained_tp_requires_graph is True and runner.wrapped is True
    assert runner.req_states == [1] * 8
    # the statement a CPU cannot run is named, and so is the attribute it leaves unbuilt
    assert [s.where.rsplit("/", 1)[1] for s in skipped] == ["fake_gpu_runner.py:21"]
    assert skipped[0].attributes == ("output_stream",)
    with pytest.raises(runner_init.NotBuiltError, match=r"runner.output_stream was not built on the CPU: "
                                                        r"its __init__ statement at vllm/fake_gpu_runner.py:21 "
                                                        r"raised RuntimeError: no NPU on this host"):
        runner.output_stream.wait_stream(None)


def test_the_source_lists_every_attribute_of_the_init_chain(trees):
    core, plugin = trees
    names = runner_init.init_attributes(plugin.NPURunner)
    assert set(names) == {"ascend", "wrapped", "_finegrained_tp_requires_graph", "req_states", "vllm_config",
                          "max_num_reqs", "adaptive_verification", "output_stream", "dp_size", "speculator",
                          "cases"}


def _failing(tmp_path: Path, folder: str, name: str):
    path = tmp_path / folder / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("def boom(value):\n    return value.missing_attribute\n")
    return _load(path, name)


def test_a_use_of_what_the_smoke_could_not_build_lies_in_the_smoke(trees):
    core, plugin = trees
    runner, _ = decode_steps.new_runner(plugin.NPURunner, core.Config(), "cpu")
    w = walker.Walk(None)
    w.step("uses-stream", lambda: runner.output_stream.synchronize())
    result = w.results["uses-stream"]
    assert (result.status, result.lies) == ("FAILED", "smoke")
    assert "[smoke]" in result.line()


def test_a_failure_is_placed_in_core_plugin_series_or_the_smoke(tmp_path):
    core = _failing(tmp_path, "core/vllm", "fake_core_place")
    plugin = _failing(tmp_path, "tree/vllm_ascend/worker", "fake_plugin_place")
    patched = _failing(tmp_path, "tree/vllm_ascend/patch", "fake_series_place")
    w = walker.Walk(None, series_files={"vllm_ascend/patch/fake_series_place.py"})
    w.step("in-core", lambda: core.boom(object()))
    w.step("in-plugin", lambda: plugin.boom(object()))
    w.step("in-series", lambda: patched.boom(object()))
    w.step("in-smoke", lambda: runner_init.NotBuilt("x", "here", "E").anything)
    w.step("smoke-outdated", lambda: walker._known_fields(type("T", (), {"__dataclass_fields__": {}}), gone=1))
    assert {name: r.lies for name, r in w.results.items()} == {
        "in-core": "core", "in-plugin": "plugin", "in-series": "series", "in-smoke": "smoke",
        "smoke-outdated": "smoke"}
    assert w.results["in-core"].where == "vllm/fake_core_place.py:2"


def test_core_or_plugin_tripping_on_a_smoke_stand_in_lies_in_the_smoke(tmp_path):
    path = tmp_path / "tree" / "vllm_ascend" / "worker" / "fake_stand_in_use.py"
    path.parent.mkdir(parents=True)
    path.write_text("def prepare(batch_req_state):\n    return max(4, batch_req_state.num_tokens)\n")
    plugin = _load(path, "fake_stand_in_use")
    w = walker.Walk(None, series_files={"vllm_ascend/worker/fake_stand_in_use.py"})
    w.step("stand-in", lambda: plugin.prepare(walker.StandIn()))
    result = w.results["stand-in"]
    assert (result.status, result.lies) == ("FAILED", "smoke")
    assert result.where == "vllm_ascend/worker/fake_stand_in_use.py:2, on a smoke stand-in"
