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


# Core reads what every worker returns: vLLM 0.21.0's `Executor.initialize_from_config` collects
# `collective_rpc("compile_or_warm_up_model")` and reads `.language_model`/`.encoder` of each result
# (a CompilationTimes); 0.17.x took `max()` of them. A worker whose override returns nothing (vllm-metal,
# vllm-qaic, vllm-spyre) or a float (vllm-gaudi, vllm-rbln) breaks there.
READS_RESULT = EXECUTOR.replace('''        def start(self):''', '''        def initialize_from_config(self):
            compilation_times = self.collective_rpc("compile_or_warm_up_model")
            if compilation_times:
                self.compilation_time = max(t.language_model for t in compilation_times)
                self.encoder_time = max(t.encoder for t in compilation_times)

        def start(self):
            self.initialize_from_config()''')
BASE_WARMUP = WORKER_BASE.replace('''        def check_health(self):''', '''        def compile_or_warm_up_model(self) -> CompilationTimes:
            raise NotImplementedError

        def check_health(self):''')


def _warmup(body: str) -> str:
    return WORKER + "\n" + "\n".join("    " + line if line else "" for line in body.strip("\n").split("\n")) + "\n"


def test_a_worker_method_whose_result_core_reads_must_return_what_core_reads(tmp_path):
    none = _warmup('''
    def compile_or_warm_up_model(self) -> None:
        self.warm = True
''')
    assert _gate(tmp_path / "a", worker=none, executor=READS_RESULT, worker_base=BASE_WARMUP) == [
        ("override:vllm_ascend.worker.NPUWorker.compile_or_warm_up_model", "warning"),
        ("override:vllm_ascend.worker.NPUWorker.reset_encoder_cache", "warning"),
        ("override:vllm_ascend.worker.NPUWorker.sample_tokens", "warning")]
    a_float = _warmup('''
    def compile_or_warm_up_model(self) -> float:
        return self.vllm_config.compilation_time
''')
    assert ("override:vllm_ascend.worker.NPUWorker.compile_or_warm_up_model", "warning") in _gate(
        tmp_path / "b", worker=a_float, executor=READS_RESULT, worker_base=BASE_WARMUP)
    # max() of what each worker returns: None fails, a float does not
    old = READS_RESULT.replace("max(t.language_model for t in compilation_times)", "max(compilation_times)")
    old = old.replace("max(t.encoder for t in compilation_times)", "0.0")
    assert ("override:vllm_ascend.worker.NPUWorker.compile_or_warm_up_model", "warning") in _gate(
        tmp_path / "c", worker=none, executor=old, worker_base=BASE_WARMUP)
    assert ("override:vllm_ascend.worker.NPUWorker.compile_or_warm_up_model", "warning") not in _gate(
        tmp_path / "d", worker=a_float, executor=old, worker_base=BASE_WARMUP)


@pytest.mark.parametrize("body", [
    # it returns something the checker cannot name: not judged
    '''
    def compile_or_warm_up_model(self):
        return self.model_runner.warm_up()
''',
    '''
    def compile_or_warm_up_model(self):
        return super().compile_or_warm_up_model()
''',
    # a nested function's `return 1.0` is not the method's: it returns the function
    '''
    def compile_or_warm_up_model(self):
        def inner():
            return 1.0
        return inner
''',
    # it only raises, or it is a generator: not a method meant to return
    '''
    def compile_or_warm_up_model(self):
        raise RuntimeError("not on this device")
''',
])
def test_a_worker_method_that_returns_a_value_or_never_returns_is_fine(tmp_path, body):
    assert ("override:vllm_ascend.worker.NPUWorker.compile_or_warm_up_model", "warning") not in _gate(
        tmp_path, worker=_warmup(body), executor=READS_RESULT, worker_base=BASE_WARMUP)


def test_a_result_core_drops_or_only_passes_on_is_not_read(tmp_path):
    none = _warmup('''
    def compile_or_warm_up_model(self) -> None:
        self.warm = True
''')
    dropped = READS_RESULT.replace('compilation_times = self.collective_rpc("compile_or_warm_up_model")',
                                   'self.collective_rpc("compile_or_warm_up_model"); compilation_times = []')
    passed = READS_RESULT.replace("self.compilation_time = max(t.language_model for t in compilation_times)",
                                  "self.compilation_time = compilation_times")
    passed = passed.replace("self.encoder_time = max(t.encoder for t in compilation_times)", "pass")
    for name, executor in (("dropped", dropped), ("passed", passed)):
        assert ("override:vllm_ascend.worker.NPUWorker.compile_or_warm_up_model", "warning") not in _gate(
            tmp_path / name, worker=none, executor=executor, worker_base=BASE_WARMUP), name


@pytest.mark.skipif(__import__("overlay.gate.checker", fromlist=["installed"]).installed() is None,
                    reason="mypy (the `gate` extra, which `make test` installs) is not installed")
def test_the_checker_and_the_hand_gate_agree_on_a_result_core_reads_and_it_is_an_error(run, tmp_path):
    """Core 1 declares `compile_or_warm_up_model() -> None` and drops the results; core 2 returns
    CompilationTimes and reads `.language_model` of each. The plugin's override returning None
    is the checker's override diagnostic (new with core 2) and the hand gate's warning: an error."""
    import json

    times = "\n    class CompilationTimes:\n        language_model: float = 0.0\n        encoder: float = 0.0\n"
    old_base = (times + WORKER_BASE).replace('''        def check_health(self):''', '''        def compile_or_warm_up_model(self) -> None:
            raise NotImplementedError

        def check_health(self):''')
    old_exec = READS_RESULT.replace('compilation_times = self.collective_rpc("compile_or_warm_up_model")',
                                    'self.collective_rpc("compile_or_warm_up_model"); compilation_times = []')
    worker = _warmup('''
    def compile_or_warm_up_model(self) -> None:
        self.warm = True
''')
    roots = {}
    for name, base, executor in (("core-1", old_base, old_exec), ("core-2", times + BASE_WARMUP, READS_RESULT)):
        roots[name] = gatekit.tree(tmp_path / name, {
            "vllm/__init__.py": "", "vllm/_version.py": f"__version__ = version = '{name[-1]}.0'\n",
            "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "", "vllm/v1/worker/worker_base.py": base,
            "vllm/v1/executor/__init__.py": "", "vllm/v1/executor/abstract.py": executor,
            "vllm/v1/executor/ray_utils.py": RAY_UTILS, "vllm/v1/engine/__init__.py": "",
            "vllm/v1/engine/core.py": ENGINE})
    plugin = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "vllm_ascend/__init__.py": INIT,
                                                "vllm_ascend/platform.py": PLATFORM, "vllm_ascend/worker.py": worker})
    code, out, err = run("gate", "--core", roots["core-2"], "--plugin", plugin, "--declared-core", roots["core-1"],
                         "--engine", "both", "--json", root=tmp_path)
    assert code == 1, err
    found = [f for f in json.loads(out)["findings"]
             if f["symbol"] == "override:vllm_ascend.worker.NPUWorker.compile_or_warm_up_model"]
    assert [(f["severity"], f["engine"]) for f in found] == [("error", "both")], found
    assert ".language_model" in found[0]["message"] and "compile_or_warm_up_model" in found[0]["reason"], found


def test_a_worker_named_by_joining_strings_is_the_worker(tmp_path):
    """vllm-qaic names its worker as `worker_cls = worker_cls_pkg_root + "." + worker_cls_name` in
    its platform's class body, the name a conditional of two constants; an f-string over a
    constant is read the same way. Parts the gate cannot read name no worker."""
    from overlay.gate.workerrpc import worker_names

    joined = PLATFORM.replace('''        device_name = "npu"
''', '''        device_name = "npu"
        worker_name = "NPUWorker" if True else "OtherWorker"
        worker_root = "vllm_ascend.worker"
        worker_cls = worker_root + "." + worker_name
''').replace('"vllm_ascend.worker.NPUWorker"', "cls.worker_cls")
    assert _gate(tmp_path, platform=joined) == [
        ("override:vllm_ascend.worker.NPUWorker.reset_encoder_cache", "warning"),
        ("override:vllm_ascend.worker.NPUWorker.sample_tokens", "warning")]
    tree = ast.parse('ROOT = "a.b"\nclass P:\n    def f(self, p, x):\n        p.worker_cls = f"{ROOT}.W"\n'
                     '        p.worker_cls = ROOT + "." + x\n')
    assert worker_names([tree]) == {"a.b.W"}


def test_a_join_nested_beyond_the_recursion_limit_names_no_worker_and_does_not_crash():
    from overlay.gate.workerrpc import worker_names

    tree = ast.parse("worker_cls = " + " + ".join(['"a."'] * 1500) + ' + "W"\n')
    assert worker_names([tree]) == {"a."}  # not folded: the dotted constants, as for any unknown part
