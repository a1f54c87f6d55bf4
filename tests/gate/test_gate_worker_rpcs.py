"""Worker methods core calls by name: `collective_rpc("<method>")` reaches the worker class
the platform names through core's wrapper, so a worker lacking the method, or leaving it to
core's `NotImplementedError` stub, raises in the worker (vllm-metal lacked
`update_max_model_len`, `reset_encoder_cache` and `sample_tokens`; vllm-ascend and
vllm-gaudi `reset_encoder_cache`). Synthetic trees; shapes from core's
v1/worker/worker_base.py and v1/executor/abstract.py."""

from __future__ import annotations

import ast

import gatekit
import pytest

from overlay.gate import run_gate
from overlay.gate.workerrpc import rpc_method

WORKER_BASE = """
    class WorkerBase:
        def __init__(self, vllm_config):
            self.vllm_config = vllm_config

        def sample_tokens(self, grammar_output):
            raise NotImplementedError

        def check_health(self):
            return None


    class WorkerWrapperBase:
        def __init__(self):
            self.worker = None

        def init_worker(self, all_kwargs):
            self.worker = None

        def __getattr__(self, attr):
            return getattr(self.worker, attr)
"""

EXECUTOR = """
    class Executor:
        def collective_rpc(self, method, args=(), kwargs=None):
            raise NotImplementedError

        def reset_encoder_cache(self):
            self.collective_rpc("reset_encoder_cache")

        def sample_tokens(self, grammar_output):
            return self.collective_rpc("sample_tokens", args=(grammar_output,))

        def check_health(self):
            self.collective_rpc(method="check_health")

        def start(self):
            self.collective_rpc("init_worker", args=([],))
            self.collective_rpc("adjust_rank", args=({},))
            self.reset_encoder_cache()
            self.sample_tokens(None)
            self.check_health()
"""

RAY_UTILS = """
    from vllm.v1.worker.worker_base import WorkerWrapperBase

    try:
        import ray

        class RayWorkerWrapper(WorkerWrapperBase):
            def adjust_rank(self, rank_mapping):
                self.rpc_rank = rank_mapping[self.rpc_rank]
    except ImportError:
        ray = None
"""

ENGINE = """
    from vllm.v1.executor.abstract import Executor


    class EngineCore:
        def __init__(self):
            self.model_executor = Executor()
            self.model_executor.start()
"""

PLATFORM = """
    class NPUPlatform:
        device_name = "npu"

        @classmethod
        def check_and_update_config(cls, vllm_config):
            vllm_config.parallel_config.worker_cls = "vllm_ascend.worker.NPUWorker"
"""

WORKER = """
    from vllm.v1.worker.worker_base import WorkerBase


    class NPUWorker(WorkerBase):
        def execute_model(self, scheduler_output):
            return None
"""

ENTRY = """
    from setuptools import setup
    setup(name="vllm-ascend", entry_points={"vllm.platform_plugins": ["ascend = vllm_ascend:register"]})
"""

INIT = ('def register():\n    import vllm_ascend.platform  # noqa\n    import vllm_ascend.worker  # noqa\n'
        '    return "vllm_ascend.platform.NPUPlatform"\n')


def _gate(tmp_path, worker=WORKER, executor=EXECUTOR, platform=PLATFORM, worker_base=WORKER_BASE):
    core = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.20.0'\n",
            "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "",
            "vllm/v1/worker/worker_base.py": worker_base, "vllm/v1/executor/__init__.py": "",
            "vllm/v1/executor/abstract.py": executor, "vllm/v1/executor/ray_utils.py": RAY_UTILS,
            "vllm/v1/engine/__init__.py": "",
            "vllm/v1/engine/core.py": ENGINE}
    core_dir = gatekit.tree(tmp_path / "core", core)
    plugin_dir = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": INIT,
                                                    "vllm_ascend/platform.py": platform,
                                                    "vllm_ascend/worker.py": worker})
    return sorted((f.symbol, f.severity) for f in run_gate(core_dir, plugin_dir).findings
                  if "by name" in f.summary)


def test_a_method_core_sends_by_name_that_the_worker_lacks_or_leaves_to_a_stub_is_a_warning(tmp_path):
    assert _gate(tmp_path) == [
        ("override:vllm_ascend.worker.NPUWorker.reset_encoder_cache", "warning"),  # no class defines it
        ("override:vllm_ascend.worker.NPUWorker.sample_tokens", "warning"),  # core's stub only raises
    ]
    # check_health (method=, implemented by core's base), init_worker (the wrapper's own) and
    # adjust_rank (the Ray wrapper's, a subclass defined under a try) are fine


def test_a_worker_that_defines_the_methods_or_answers_any_name_is_fine(tmp_path):
    defined = WORKER + """
        def reset_encoder_cache(self):
            pass

        def sample_tokens(self, grammar_output):
            return None
"""
    assert _gate(tmp_path / "a", worker=defined) == []
    forwarding = WORKER + """
        def __getattr__(self, name):
            return getattr(self.model_runner, name)
"""
    assert _gate(tmp_path / "b", worker=forwarding) == []


def test_only_a_worker_the_platform_names_and_only_calls_core_can_run_uncaught_count(tmp_path):
    # a worker class no start-up string names is not dispatched to
    assert _gate(tmp_path / "a", platform=PLATFORM.replace("vllm_ascend.worker.NPUWorker",
                                                           "vllm_ascend.worker.OtherWorker")) == []
    caught = EXECUTOR.replace('''        def reset_encoder_cache(self):
            self.collective_rpc("reset_encoder_cache")''', '''        def reset_encoder_cache(self):
            try:
                self.collective_rpc("reset_encoder_cache")
            except AttributeError:
                pass''')
    assert _gate(tmp_path / "b", executor=caught) == [("override:vllm_ascend.worker.NPUWorker.sample_tokens", "warning")]
    # a base the gate cannot read may define any name
    unread = WORKER.replace("class NPUWorker(WorkerBase):", "class NPUWorker(WorkerBase, Unknown):")
    assert _gate(tmp_path / "c", worker=unread) == []


@pytest.mark.parametrize("call, name", [
    ('x.collective_rpc("reset_encoder_cache")', "reset_encoder_cache"),
    ('x.collective_rpc(method="profile", args=(True,))', "profile"),
    ("x.collective_rpc(fn)", None),  # a callable, not a name
    ('x.collective_rpc("not a name")', None),
    ("x.collective_rpc(b'pickled')", None),
])
def test_rpc_method_reads_only_a_constant_name(call, name):
    node = ast.parse(call, mode="eval").body
    assert rpc_method(node) == name


def test_every_forwarding_class_beside_the_worker_base_answers_its_own_names(tmp_path):
    """vLLM 0.10's V0 module keeps a delegating worker (its own `__getattr__`) before the
    wrapper: the names either answers itself (`init_worker`) are not the worker's."""
    head, sep, tail = WORKER_BASE.partition("\n    class WorkerWrapperBase:")
    delegating = head + """
    class DelegateWorkerBase(WorkerBase):
        def __getattr__(self, attr):
            return getattr(self.worker, attr)

""" + sep + tail
    assert _gate(tmp_path, worker_base=delegating) == [
        ("override:vllm_ascend.worker.NPUWorker.reset_encoder_cache", "warning"),
        ("override:vllm_ascend.worker.NPUWorker.sample_tokens", "warning")]


def test_only_the_class_assigned_to_core_worker_field_is_a_worker(tmp_path):
    """A plugin class start-up names for another role (a model runner's dotted name) is not
    dispatched to by name; the worker field may hold either of two classes, or come as a
    keyword."""
    from overlay.gate.workerrpc import worker_names

    other_role = PLATFORM.replace("vllm_config.parallel_config.worker_cls =",
                                  "vllm_config.parallel_config.model_runner_cls =")
    assert _gate(tmp_path, platform=other_role) == []
    tree = ast.parse('p.worker_cls = "a.V1Worker" if v1 else "a.V0Worker"\n'
                     'worker_cls: str = "b.W"\nParallelConfig(worker_cls="c.W", other="d.X")\n'
                     'p.sd_worker_cls = "e.W"\n')
    assert worker_names([tree]) == {"a.V1Worker", "a.V0Worker", "b.W", "c.W"}
