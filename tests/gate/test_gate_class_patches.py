"""Class-body patches: a plugin class whose namespace a patcher copies onto a core class or
module, `class RunnerPatch(Patch[GPUModelRunner])` applied by `RunnerPatch.apply_patch()`.

The pattern is arctic-inference's (a general plugin, the twenty-seventh held-out set): its
`ArcticPatch[Target]` sets every name a subclass's body binds onto the target. Before, the
gate read such a class as a plugin class with an unknown base: the names it adds to core
(`_SP = None` on `parallel_state`) were reads of missing core names, 129 of the set's 147
false error sites, and its patch methods were never checked against core's callers. Now each
name is a replacement of the target's, as `Target.name = ...` at load would be.

Also here: a name the plugin stores on a core module inside a function
(`parallel_state._ORIG = parallel_state._TP`) is the plugin's own for a read in another
function; and the plugin's subclass of a core class counts the fields of its plugin-side
bases (`class MyArgs(EngineArgs, ExtraArgs)`).

Synthetic trees; the patcher is written here, not copied. The fake core's shapes are cut from
vLLM 0.10.1/0.11.0: `vllm/distributed/parallel_state.py` (`initialize_model_parallel(
tensor_model_parallel_size, pipeline_model_parallel_size, decode_context_model_parallel_size,
backend)`, called positionally by `ensure_model_parallel_initialized`),
`vllm/v1/worker/gpu_model_runner.py:1948` (`GPUModelRunner.load_model(self, eep_scale_up=False)`)
and `vllm/v1/worker/gpu_worker.py:200-212` (`Worker` builds its `GPUModelRunner` and calls
`load_model(eep_scale_up=...)`)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import gatekit
from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.gate import run_gate
from overlay.gate.classpatches import patched_names, patcher_method

CORE = {
    "vllm/__init__.py": "",
    "vllm/_version.py": "__version__ = version = '0.11.0'\n",
    "vllm/distributed/__init__.py": "",
    "vllm/distributed/parallel_state.py": """
        _TP = None


        def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                      decode_context_model_parallel_size=1, backend=None):
            global _TP
            _TP = object()


        def ensure_model_parallel_initialized(tensor_model_parallel_size, pipeline_model_parallel_size,
                                              decode_context_model_parallel_size=1, backend=None):
            if _TP is None:
                initialize_model_parallel(tensor_model_parallel_size, pipeline_model_parallel_size,
                                          decode_context_model_parallel_size, backend)
    """,
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": """
        from dataclasses import dataclass


        @dataclass
        class EngineArgs:
            model: str = "m"

            def __post_init__(self):
                pass
    """,
    "vllm/v1/__init__.py": "",
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/worker/gpu_model_runner.py": """
        class GPUModelRunner:
            def __init__(self, vllm_config, device):
                self.vllm_config = vllm_config
                self.device = device
                self.supports_mm_inputs = False

            def load_model(self, eep_scale_up: bool = False) -> None:
                self.model = None

            def _pool(self, hidden_states, kv_connector_output):
                return hidden_states
    """,
    "vllm/v1/worker/gpu_worker.py": """
        import os

        from vllm.distributed.parallel_state import ensure_model_parallel_initialized
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner


        class Worker:
            def __init__(self, vllm_config, device):
                self.model_runner: GPUModelRunner = GPUModelRunner(vllm_config, device)

            def init_device(self):
                ensure_model_parallel_initialized(1, 1)

            def load_model(self) -> None:
                eep_scale_up = os.environ.get("SCALE_UP") == "1"
                self.model_runner.load_model(eep_scale_up=eep_scale_up)
    """,
}

# the patcher: subscripted with its target, copies the subclass's namespace onto it
PATCHER = """
    from types import ModuleType


    class Patch:
        def __class_getitem__(cls, target):
            return type(f"{cls.__name__}[{target.__name__}]", (cls,), {"_patch_target": target})

        @classmethod
        def apply_patch(cls):
            target = cls._patch_target
            for name, attr in cls.__dict__.items():
                if name in ("_patch_target", "__dict__", "__weakref__", "__module__", "__doc__"):
                    continue
                setattr(target, name, attr)
"""

PATCHES = """
    from vllm.distributed import parallel_state
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from patchy.patching import Patch


    class ParallelStatePatch(Patch[parallel_state]):
        _SP = None

        def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                      backend=None):
            return tensor_model_parallel_size


    class RunnerPatch(Patch[GPUModelRunner]):
        def load_model(self):
            self.prepare_weights()
            if self.is_multimodal_model:
                return

        def prepare_weights(self):
            return self.device

        def execute_model(self, hidden_states):
            self.prepare_weights()
            return self._pool(hidden_states, None, None)


    def sp_group():
        return parallel_state._SP


    def sp_group_imported():
        from vllm.distributed.parallel_state import _SP
        return _SP


    def apply():
        ParallelStatePatch.apply_patch()
        RunnerPatch.apply_patch()
        return sp_group(), sp_group_imported()
"""

INIT = """
    def register():
        from patchy import patches
        patches.apply()
"""

ENTRY = """
    from setuptools import setup
    setup(name="patchy", entry_points={"vllm.general_plugins": ["patchy = patchy:register"]})
"""


def _gate(tmp_path: Path, patches: str = PATCHES, patcher: str = PATCHER, extra: dict[str, str] | None = None):
    core = gatekit.tree(tmp_path / "core", CORE)
    plugin = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "patchy/__init__.py": INIT,
                                                "patchy/patching.py": patcher, "patchy/patches.py": patches,
                                                **(extra or {})})
    return run_gate(core, plugin)


def _errors(report) -> list[tuple[str, int]]:
    return sorted((f.symbol, f.plugin_line) for f in report.findings if f.severity == "error")


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(text).lstrip("\n").splitlines(), 1) if needle in line)


def test_the_names_a_patch_adds_are_the_plugins_and_its_methods_face_cores_callers(tmp_path):
    errors = _errors(_gate(tmp_path))
    # the module patch's replacement takes 3 arguments; core's ensure_model_parallel_initialized passes 4
    assert ("replacement:vllm.distributed.parallel_state.initialize_model_parallel",
            _line(PATCHES, "def initialize_model_parallel")) in errors
    # the class patch's load_model takes no eep_scale_up; core's Worker passes it
    assert ("replacement:vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model",
            _line(PATCHES, "def load_model")) in errors
    # self in a patch method is core's runner: a name it lacks is read; one the patch adds is not
    assert ("attribute:vllm.v1.worker.gpu_model_runner.GPUModelRunner.is_multimodal_model",
            _line(PATCHES, "self.is_multimodal_model")) in errors
    assert not [e for e in errors if "prepare_weights" in e[0]]
    # a patch method's call on `self` meets core's method (`_pool` takes two arguments, not
    # three); a method a patch installs is the plugin's own
    assert ("call:vllm.v1.worker.gpu_model_runner.GPUModelRunner._pool", _line(PATCHES, "self._pool(")) in errors
    # `_SP`, which the module patch adds, read and imported when a function runs
    assert not [e for e in errors if "_SP" in e[0]], errors


def test_a_patch_class_nobody_applies_changes_nothing(tmp_path):
    unapplied = PATCHES.replace("        ParallelStatePatch.apply_patch()\n        RunnerPatch.apply_patch()\n",
                                "        pass\n")
    assert unapplied != PATCHES
    errors = _errors(_gate(tmp_path, unapplied))
    assert not [e for e in errors if e[0].startswith("replacement:")]
    # nothing adds `_SP` to core's module: its reads are core names that are missing
    assert ("attribute:vllm.distributed.parallel_state._SP", _line(PATCHES, "return parallel_state._SP")) in errors


def test_a_subscripted_base_that_copies_nothing_is_no_patcher(tmp_path):
    # `__class_getitem__` alone (a generic container) makes no patch: its loop stores nothing,
    # or stores under another name than the one it walks
    for body in ("                print(name)\n", "                label = 'seen'\n                setattr(target, label, attr)\n"):
        plain = PATCHER.replace("                setattr(target, name, attr)\n", body)
        assert plain != PATCHER
        errors = _errors(_gate(tmp_path / str(len(body)), patcher=plain))
        assert not [e for e in errors if e[0].startswith("replacement:")]


FUNCTION_STORES = """
    import functools

    from vllm.distributed import parallel_state


    def swap():
        parallel_state._ORIG_TP = parallel_state._TP


    def restore():
        return parallel_state._ORIG_TP


    def wrap():
        orig = parallel_state._GONE
        parallel_state._GONE = lambda: orig


    def rewrap():
        parallel_state._LOST = functools.wraps(parallel_state._TP)(
            parallel_state._LOST)
"""


def test_a_name_a_function_stores_on_a_core_module_is_the_plugins_for_other_functions(tmp_path):
    extra = {"patchy/stores.py": FUNCTION_STORES}
    init = INIT + "        from patchy import stores  # noqa\n"
    core = gatekit.tree(tmp_path / "core", CORE)
    plugin = gatekit.tree(tmp_path / "plugin", {"setup.py": ENTRY, "patchy/__init__.py": init,
                                                "patchy/patching.py": PATCHER, "patchy/patches.py": PATCHES,
                                                **extra})
    errors = _errors(run_gate(core, plugin))
    assert not [e for e in errors if "_ORIG_TP" in e[0]], errors
    # read before the same function's store: core's name, which core lacks
    assert ("attribute:vllm.distributed.parallel_state._GONE", _line(FUNCTION_STORES, "orig = ")) in errors
    # read on the storing statement's own next line (`m.f = wrap(\n m.f)`, vllm-ascend 0.17.0rc1's
    # get_cudagraph_and_dp_padding): still before the store
    assert ("attribute:vllm.distributed.parallel_state._LOST",
            _line(FUNCTION_STORES, "parallel_state._LOST)")) in errors


ARGS = """
    from dataclasses import dataclass

    from vllm.engine.arg_utils import EngineArgs

    from patchy.patching import Patch


    @dataclass
    class ExtraArgs:
        fp32_lm_head: bool = False


    @dataclass
    class MyEngineArgs(EngineArgs, ExtraArgs):
        pass


    class EngineArgsPatch(Patch[EngineArgs]):
        def __post_init__(self):
            if self.fp32_lm_head:
                return
            if self.never_defined:
                return


    def apply():
        EngineArgsPatch.apply_patch()
"""


def test_a_patch_method_reads_what_the_plugins_subclass_gets_from_its_own_base(tmp_path):
    errors = _errors(_gate(tmp_path, ARGS))
    assert not [e for e in errors if "fp32_lm_head" in e[0]], errors
    assert ("attribute:vllm.engine.arg_utils.EngineArgs.never_defined", _line(ARGS, "self.never_defined")) in errors


# ----------------------------------------------------------------------------- against Python

_IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in {
    "if", "in", "is", "or", "as", "and", "def", "for", "del", "not", "try", "with", "else", "elif", "from",
    "pass", "class", "while", "yield", "raise", "async", "await", "break", "return", "lambda", "global",
    "import", "assert", "except", "finally", "continue", "nonlocal"})
_MEMBER = st.one_of(
    _IDENT.map(lambda n: (n, f"    def {n}(self):\n        return 1\n")),
    _IDENT.map(lambda n: (n, f"    {n} = 1\n")),
    _IDENT.map(lambda n: (n, f"    {n}: int = 2\n")),
    _IDENT.map(lambda n: (n, f"    @classmethod\n    def {n}(cls):\n        return 3\n")),
    _IDENT.map(lambda n: (n, f"    class {n.capitalize()}:\n        pass\n")),
    _IDENT.map(lambda n: (n, f"    {n}: int\n")),  # an annotation alone binds nothing
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_MEMBER, min_size=1, max_size=6))
def test_the_names_read_are_the_names_python_installs(members):
    body = "".join(code for _, code in members)
    source = textwrap.dedent(PATCHER) + "\n\nclass Target:\n    pass\n\n\nclass P(Patch[Target]):\n" + body \
        + "\n\nP.apply_patch()\n"
    space: dict = {}
    exec(compile(source, "<patch>", "exec"), space)  # the synthetic patcher itself, run
    installed = {k for k in vars(space["Target"]) if not k.startswith("__")} - {"_patch_target"}
    tree = ast.parse(source)
    patcher = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Patch")
    patch = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "P")
    assert patcher_method(patcher) == "apply_patch"
    assert set(patched_names(patch)) == installed
