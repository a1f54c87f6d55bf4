"""The start-up smoke's inner half: walk the plugin's start-up path inside the
composed test environment (`python walker.py RESULTS.jsonl`).

It runs with the composed core and plugin importable, torch_npu stubbed the way
the plugin's CPU unit tests stub it, and nothing of overlay's own: stdlib, torch,
vLLM and the plugin only. Each step prints one line and appends one JSON record
to RESULTS; a step whose prerequisite failed is recorded as `skipped`.

Where core calls into the plugin on the MRV2 path, the step executes core's own
call expression, taken from core's source with `ast`, against the plugin's code:
the arguments are exactly those core passes, so a signature, keyword or dataclass
field that disagrees fails here as it would on hardware. Only what a CPU cannot
run (Triton/NPU kernels, a real model) is replaced, and each step says what.
"""

from __future__ import annotations

import ast
import contextlib
import builtins
import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import textwrap
import traceback
import types
from pathlib import Path
from typing import Any, Callable, Iterator
from unittest.mock import MagicMock

# ----------------------------------------------------------------------------- step runner


@dataclasses.dataclass(frozen=True)
class StepResult:
    """One step's outcome: the walker writes it, overlay.smoke.results reads it back."""

    step: str
    status: str  # ok | FAILED | skipped
    detail: str = ""
    where: str = ""
    data: dict = dataclasses.field(default_factory=dict)  # what a step measured (the decode counts)
    lies: str = ""  # a failure's place: core | plugin | series | smoke

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def line(self) -> str:
        text = f"  {self.status:<7} {self.step}"
        if self.detail:
            text += f": {self.detail}"
        if self.where:
            text += f" ({self.where})"
        if self.lies:
            text += f" [{self.lies}]"
        return text


SMOKE_DIR = Path(__file__).resolve().parent
# Where a failure lies: the frame that raised, read innermost first.
CORE, PLUGIN, SERIES, SMOKE = "core", "plugin", "series", "smoke"
STAND_IN_TYPES = ("StandIn", "NotBuilt", "_Locals")  # the smoke's own stand-in values
SERIES_FILES_ENV = "OVERLAY_SMOKE_SERIES_FILES"  # a file: the plugin paths the series changes, one a line


def _tree_path(path: str) -> tuple[str, str] | None:
    """(core|plugin, path inside its tree) for a file of the composed core or plugin."""
    for marker, kind in (("/vllm_ascend/", PLUGIN), ("/vllm/", CORE)):
        if marker in path:
            return kind, marker.strip("/") + "/" + path.split(marker, 1)[1]
    return None


def _smoke_built(obj: Any) -> bool:
    """An object the smoke made: a stand-in, a namespace, or a runner it built
    (a missing attribute on one is the smoke's construction, not core's)."""
    if obj is None:
        return False
    return (type(obj).__name__ in STAND_IN_TYPES or isinstance(obj, types.SimpleNamespace)
            or bool(vars(obj).get(SMOKE_BUILT, False) if hasattr(obj, "__dict__") else False))


SMOKE_BUILT = "_overlay_smoke_built"  # set on every runner the smoke builds


def _is_smoke(path: str) -> bool:
    try:
        return Path(path).resolve().parent == SMOKE_DIR
    except OSError:
        return False


def origin(exc: BaseException, series_files: frozenset[str] | set[str] = frozenset()) -> tuple[str, str]:
    """(where, lies) for an exception: the innermost frame of the smoke's own files,
    core's or the plugin's decides. A frame in the smoke is the smoke's fault (its
    stand-ins, its construction); core's files are core's; a plugin file the series
    changes is the series', another is upstream plugin's. No such frame (a test's
    own code, the environment): the smoke."""
    # Walk.step only calls the step: the step's own code is where a failure starts.
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not (f.filename == __file__ and f.name == "step")]
    on_stand_in = (isinstance(exc, TypeError) and any(f"'{name}'" in str(exc) for name in STAND_IN_TYPES)) or (
        isinstance(exc, AttributeError) and _smoke_built(getattr(exc, "obj", None)))
    if on_stand_in:
        # core or the plugin used a value the smoke stood in for beyond what it models
        frame = frames[-1] if frames else None
        placed = _tree_path(frame.filename) if frame else None
        return (f"{placed[1]}:{frame.lineno}, on a smoke stand-in" if placed else "smoke check"), SMOKE
    for frame in reversed(frames):
        if _is_smoke(frame.filename):
            return ("smoke check" if frame.filename == __file__ else
                    f"smoke {Path(frame.filename).name}:{frame.lineno}"), SMOKE
        placed = _tree_path(frame.filename)
        if placed:
            kind, path = placed
            if kind == PLUGIN and path in series_files:
                kind = SERIES
            return f"{path}:{frame.lineno}", kind
    if frames:
        return f"{frames[-1].filename}:{frames[-1].lineno}", SMOKE
    return "", SMOKE


def _where(exc: BaseException) -> str:
    return origin(exc)[0]


def read_series_files(environ: dict[str, str] = os.environ) -> frozenset[str]:
    """The plugin paths the series changes, as run.py lists them for the walk with the series."""
    listing = environ.get(SERIES_FILES_ENV)
    if not listing:
        return frozenset()
    return frozenset(line.strip() for line in Path(listing).read_text().splitlines() if line.strip())


def last_line(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    text = lines[-1].strip() if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class Walk:
    """Runs named steps in order; a step runs only when the steps it needs passed."""

    def __init__(self, out: Path | None, series_files: frozenset[str] | set[str] = frozenset()):
        self.results: dict[str, StepResult] = {}
        self.out = out
        self.values: dict[str, Any] = {}
        self.series_files = frozenset(series_files)

    def record(self, result: StepResult) -> None:
        self.results[result.step] = result
        print(result.line(), flush=True)
        if self.out:
            with self.out.open("a") as f:
                f.write(json.dumps(dataclasses.asdict(result)) + "\n")

    def failure(self, name: str, exc: BaseException) -> StepResult:
        where, lies = origin(exc, self.series_files)
        return StepResult(name, "FAILED", last_line(exc), where, lies=lies)

    def step(self, name: str, fn: Callable[[], str | tuple[str, dict] | None], needs: tuple[str, ...] = ()) -> None:
        missing = [n for n in needs if self.results.get(n, StepResult(n, "missing")).status != "ok"]
        if missing:
            self.record(StepResult(name, "skipped", f"needs {', '.join(missing)}"))
            return
        try:
            note = fn() or ""
            data: dict = {}
            if isinstance(note, tuple):
                note, data = note
        except BaseException as exc:  # a step may raise SystemExit or worse; report it
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.record(self.failure(name, exc))
            return
        self.record(StepResult(name, "ok", note, data=data))


# ----------------------------------------------------------------------------- core call sites


class StandIn:
    """A value for a local of a call site whose contents the call does not check:
    any attribute, item, call or arithmetic on it gives another stand-in."""

    def __getattr__(self, name: str) -> "StandIn":
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn()

    def __getitem__(self, key: Any) -> "StandIn":
        return StandIn()

    def __call__(self, *args: Any, **kwargs: Any) -> "StandIn":
        return StandIn()

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0

    __int__ = __index__

    def _same(self, *_: Any) -> "StandIn":
        return StandIn()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __floordiv__ = __truediv__ = __mod__ = _same

    def __repr__(self) -> str:
        return "<stand-in>"


class _Locals(dict):
    """Locals for evaluating a call site: given names, else a stand-in."""

    def __init__(self, given: dict[str, Any], globals_: dict[str, Any]):
        super().__init__(given)
        self._globals = globals_

    def __missing__(self, name: str) -> Any:
        if name in self._globals or name in vars(builtins):
            raise KeyError(name)  # let the lookup go on to the module's globals
        return StandIn()


def callee_name(call: ast.Call) -> str:
    """`foo(...)` -> foo, `self.foo(...)` -> foo, `a.b.foo(...)` -> foo."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _called_on(call: ast.Call, owner: str | None) -> bool:
    """`owner.callee(...)` when an owner is given (`self.prepare_inputs`, not
    `self.model_state.prepare_inputs`)."""
    if owner is None:
        return True
    func = call.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == owner


def own_function(func: Callable) -> Callable:
    """`func` itself, or, where a patch replaced it with a wrapper that calls the
    original (functools.wraps or a closure), the original of the same name."""
    seen: set[int] = set()
    todo = [func]
    while todo:
        candidate = inspect.unwrap(todo.pop(0))
        if id(candidate) in seen:
            continue
        seen.add(id(candidate))
        if "<locals>" not in candidate.__qualname__:  # defined in its module or class, not a wrapper
            return candidate
        for cell in getattr(candidate, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if inspect.isfunction(value):
                todo.append(value)
    return func


def find_call_site(func: Callable, callee: str, owner: str | None = None) -> tuple[ast.Call, str, int]:
    """The first call of `callee` (on `owner`, if given) inside `func`'s source: (node, file, line)."""
    func = own_function(func)
    source = textwrap.dedent(inspect.getsource(func))
    _, start = inspect.getsourcelines(func)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and callee_name(node) == callee and _called_on(node, owner):
            return node, inspect.getsourcefile(func) or "?", start + node.lineno - 1
    raise LookupError(f"{func.__qualname__} no longer calls {owner + '.' if owner else ''}{callee}()")


def run_call_site(func: Callable, callee: str, given: dict[str, Any], owner: str | None = None) -> Any:
    """Evaluate `func`'s own call of `callee`, with `given` for its locals (others are
    stand-ins) and `func`'s module globals: the call core (or the plugin) makes."""
    func = own_function(func)
    call, path, line = find_call_site(func, callee, owner)
    # Line numbers of the real file, so a traceback points at the call site itself.
    ast.increment_lineno(call, line - call.lineno)
    code = compile(ast.Expression(body=call), path, "eval")
    globals_ = func.__globals__
    return eval(code, globals_, _Locals(given, globals_))  # noqa: S307 - core's own expression


# ----------------------------------------------------------------------------- continuing past a failed import


def load_package_tolerantly(package: str) -> list[tuple[str, BaseException]]:
    """Run a package's __init__ statement by statement (into `if` branches too),
    carrying on past statements that raise; returns (file:line, exception) for
    each. Used only after the package failed to import as a whole, so the walk can
    show what else on the start-up path breaks instead of stopping at the first."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(package)
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    parent, _, child = package.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)
    failures: list[tuple[str, BaseException]] = []
    origin = spec.origin

    def run(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If):
                test = compile(ast.Expression(body=node.test), origin, "eval")
                try:
                    branch = node.body if eval(test, module.__dict__) else node.orelse  # noqa: S307
                except Exception as exc:  # noqa: BLE001 - reported, walk goes on
                    failures.append((f"{origin}:{node.lineno}", exc))
                    continue
                run(branch)
                continue
            code = compile(ast.Module(body=[node], type_ignores=[]), origin, "exec")
            try:
                exec(code, module.__dict__)  # noqa: S102 - the package's own statement
            except Exception as exc:  # noqa: BLE001 - reported, walk goes on
                failures.append((f"{origin}:{node.lineno}", exc))

    run(ast.parse(Path(origin).read_text(), origin).body)
    return failures


# ----------------------------------------------------------------------------- CPU stand-ins for the NPU stack


STUBBED = "torch_npu, acl, triton.runtime, mooncake stubbed as the plugin's CPU tests do"


def stub_npu() -> str:
    """torch_npu, acl, triton.runtime and mooncake as the plugin's CPU unit tests
    stub them (tests/ut/conftest.py at the pinned plugin commit)."""
    if getattr(sys.modules.get("torch_npu"), "__overlay_smoke_stub__", False):
        return STUBBED
    if importlib.util.find_spec("torch_npu") is not None:
        return "a real torch_npu is installed: nothing stubbed"

    def module(name: str, **attrs: Any) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.util.spec_from_loader(name, loader=None)
        for key, value in attrs.items():
            setattr(mod, key, value)
        sys.modules[name] = mod
        return mod

    runtime = MagicMock()
    runtime.driver.active.utils.get_device_properties.return_value = {"num_aic": 8, "num_vectorcore": 8}
    sys.modules["triton.runtime"] = runtime
    npu_c = MagicMock()
    npu_c._NPUTaskGroupHandle = MagicMock
    torch_npu = module("torch_npu", __path__=[], npu=MagicMock(), profiler=MagicMock(),
                       npu_fusion_attention=MagicMock(),
                       npu_format_cast=MagicMock(side_effect=lambda weight, fmt: weight), _C=npu_c,
                       # dtype ids the plugin reads at import from 182b75ea84 on (the values
                       # its tests/ut/conftest.py assigns, "from real scenarios")
                       float4_e2m1fn_x2=296, hifloat8=290, float8_e8m0fnu=293,
                       __overlay_smoke_stub__=True)
    sys.modules["torch_npu._C"] = npu_c
    sys.modules["torch_npu._C._distributed_c10d"] = npu_c._distributed_c10d
    acl_rt = module("acl.rt", memcpy=MagicMock())
    module("acl", rt=acl_rt)
    module("mooncake.engine", TransferEngine=MagicMock())
    # Ascend-only packages the plugin imports at load time from 0.30.0rc2 on (its
    # conftest stubs fla_npu's kernels "alongside torch_npu"; worker.py imports the
    # ATB extensions). Any name imported from them is a mock, as the kernels are.
    for name in NPU_ONLY_PACKAGES:
        package = module(name, __path__=[], __getattr__=_mock_attribute)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)
    return _stub_torch(torch_npu)


# Packages that exist only on an NPU host; each is stubbed as a package whose every
# attribute is a mock (a kernel the smoke never launches).
NPU_ONLY_PACKAGES = ("fla_npu", "fla_npu.ops", "fla_npu.ops.ascendc",
                     "torch_npu.op_plugin", "torch_npu.op_plugin.atb", "torch_npu.op_plugin.atb._atb_ops")


def _mock_attribute(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return MagicMock(name=name)


def _stub_torch(torch_npu: types.ModuleType) -> str:
    import torch

    try:
        torch.utils.rename_privateuse1_backend("npu")
    except RuntimeError:
        pass
    torch.npu = MagicMock()
    torch.npu.Stream = MagicMock
    torch.version.cann = None
    torch.distributed.is_hccl_available = MagicMock(return_value=True)
    try:  # the CPU wheel of torchvision is CUDA-linked: define its schemas first
        importlib.import_module("composed_test_torchvision")
    except ImportError:
        pass
    # What the CPU tests add after importing the plugin; harmless before it.
    torch_npu.npu.current_device = MagicMock(return_value=0)
    sys.modules["torch_npu._inductor"] = MagicMock()
    for name in ("_npu_flash_attention", "_npu_paged_attention_splitfuse", "_npu_reshape_and_cache",
                 "npu_moe_gating_top_k_softmax", "npu_quant_matmul", "npu_rms_norm", "npu_swiglu",
                 "npu_convert_weight_to_int4pack"):
        setattr(torch_npu, name, MagicMock())
    return STUBBED


# ----------------------------------------------------------------------------- the steps


PLATFORM = "vllm_ascend.platform.NPUPlatform"


def step_platform() -> str:
    # Core resolves its platform from the `vllm.platform_plugins` entry points.
    from vllm.platforms import current_platform

    name = f"{type(current_platform).__module__}.{type(current_platform).__qualname__}"
    if name != PLATFORM:
        raise RuntimeError(f"core resolved platform {name}, not {PLATFORM}: is the plugin's entry point registered?")
    return "current_platform is NPUPlatform (entry point vllm.platform_plugins)"


def step_general_plugins() -> str:
    # EngineCore processes load the general plugins; the plugin's registrations
    # apply its process-wide (global) patches there.
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    return "vllm.general_plugins loaded (global patches applied by the plugin's registrations)"


def step_global_patches() -> str:
    from vllm.platforms import current_platform

    current_platform.pre_register_and_update()
    return "NPUPlatform.pre_register_and_update()"


def continue_past(walk: Walk, failed_step: str, package: str) -> None:
    """After `failed_step` failed, load `package` statement by statement and record
    one FAILED line per statement that raises; then mark the package loaded so the
    walk goes on (the walk as a whole has failed already)."""
    if walk.results[failed_step].status == "ok":
        walk.record(StepResult(f"{failed_step}-loaded", "ok", f"{package} imported"))
        return
    failures = load_package_tolerantly(package)
    for where, exc in failures:
        walk.record(walk.failure(f"{failed_step}: {_short(where)}", exc))
    walk.record(StepResult(f"{failed_step}-loaded", "ok",
                           f"{package} loaded statement by statement past {len(failures)} failing statement(s); "
                           "later steps run on what loaded"))


def _short(path_line: str) -> str:
    for marker in ("/vllm_ascend/", "/vllm/"):
        if marker in path_line:
            return marker.strip("/") + "/" + path_line.split(marker, 1)[1]
    return path_line


def step_worker_patches(walk: Walk) -> str:
    # As NPUWorker.__init__ does, with MRV2 selected.
    from vllm_ascend.utils import adapt_patch

    adapt_patch()
    import vllm_ascend.patch.worker as worker_patches

    mrv2 = getattr(worker_patches, "_V2_MODEL_RUNNER_SUPPORTED", None)
    walk.values["mrv2-off"] = mrv2 is False
    note = {True: "MRV2 worker patches applied", False: "the plugin keeps MRV2 off on this core (its V1 "
            "runner is used; the MRV2 steps below still run the MRV2 code)",
            None: "no MRV2 gate in this plugin (its MRV2 worker patches apply unconditionally)"}[mrv2]
    return f"adapt_patch() as NPUWorker.__init__ (VLLM_USE_V2_MODEL_RUNNER=1); {note}"


# A dense decoder-only model, described by its config alone: nothing is downloaded
# and no weights are loaded (the smoke never runs the model).
DENSE_MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 4096,
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float16",
}


def step_config(walk: Walk) -> str:
    """The VllmConfig of a dense single-card model, built as `vllm serve` builds it
    (EngineArgs.create_engine_config); that runs the platform's
    check_and_update_config, which picks the worker and scheduler classes."""
    from vllm.engine.arg_utils import EngineArgs

    folder = Path(tempfile.mkdtemp(prefix="overlay-smoke-model-"))
    (folder / "config.json").write_text(json.dumps(DENSE_MODEL_CONFIG))
    args = EngineArgs(model=str(folder), skip_tokenizer_init=True, dtype="float16", max_model_len=1024,
                      max_num_seqs=8, max_num_batched_tokens=1024, block_size=128, enforce_eager=True)
    # Core refuses MRV2 without Triton (vllm/config/vllm.py). An NPU host has
    # triton-ascend; a CPU has no usable Triton driver. Only this config check is
    # told Triton exists: no Triton kernel runs in the smoke, and the plugin's
    # Triton-only worker patches stay out as on any host without Triton.
    import vllm.config.vllm as core_vllm_config

    core_vllm_config.HAS_TRITON = True
    # Core inspects the model class in a subprocess so the parent never
    # initialises CUDA; nothing initialises a device here, so inspect in-process
    # (a subprocess would not have the torch_npu stand-ins).
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()
    vllm_config = args.create_engine_config()
    walk.values["vllm_config"] = vllm_config
    layout = _resolve_kv_cache_layout(vllm_config)
    # Workers build their device, runner and caches inside this context.
    from vllm.config import set_current_vllm_config

    context = set_current_vllm_config(vllm_config)
    context.__enter__()
    walk.values["config_context"] = context
    return (f"worker {vllm_config.parallel_config.worker_cls}, "
            f"scheduler {vllm_config.scheduler_config.get_scheduler_cls().__qualname__} "
            "(core's MRV2 Triton check told Triton exists)" + (f"; KV cache layout {layout}" if layout else ""))


def _resolve_kv_cache_layout(vllm_config: Any) -> str | None:
    """What EngineCore._initialize_kv_caches does before any KV cache exists, on a
    core that resolves one layout for the model (0.30.0 on): the layouts the
    plugin's attention backend supports, as a worker reports them, resolved by
    core and recorded on the cache config. None on a core without it."""
    from vllm.v1.engine import core as engine_core
    from vllm.v1.worker import worker_base

    resolve = getattr(engine_core, "resolve_kv_cache_layout", None)
    if resolve is None:
        return None
    from vllm_ascend.attention.attention_v1 import AscendAttentionBackend

    supported = [layout.name for layout in worker_base.get_supported_kv_cache_layouts([AscendAttentionBackend])]
    layout = resolve(vllm_config, [supported], [_full_attention_spec(vllm_config.cache_config.block_size)])
    worker_base.record_kv_cache_layout(vllm_config.cache_config, layout.name)
    return layout.name


def _full_attention_spec(block_size: int) -> Any:
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    return FullAttentionSpec(**_known_fields(FullAttentionSpec, block_size=block_size, num_kv_heads=2,
                                             head_size=32, dtype=_float16()))


class _ExecutorReached(Exception):
    """Raised by the stand-in executor: EngineCore.step got past schedule()."""


class _StandInExecutor:
    def execute_model(self, scheduler_output: Any, non_block: bool = False) -> Any:
        raise _ExecutorReached(scheduler_output)


def _kv_cache_config(vllm_config: Any, num_blocks: int = 64, block_size: int = 128, layers: tuple[str, ...] = ("model.layers.0.attn",)):
    """One full-attention group for a dense model's layers, made by core's own
    get_kv_cache_groups and get_kv_cache_config_from_groups (what
    get_kv_cache_configs does for a single card), so its KVCacheTensor,
    KVCacheGroupSpec and KVCacheConfig have this core's fields, whatever they are."""
    from vllm.v1.core import kv_cache_utils

    vllm_config = _config_with_blocks(vllm_config, num_blocks)
    spec = _full_attention_spec(block_size)
    groups = kv_cache_utils.get_kv_cache_groups(vllm_config, {name: spec for name in layers})
    memory = spec.page_size_bytes * num_blocks * len(layers)
    return kv_cache_utils.get_kv_cache_config_from_groups(vllm_config, groups, memory)


def _float16() -> Any:
    import torch

    return torch.float16


def _known_fields(cls: Any, **values: Any) -> dict[str, Any]:
    """`values` for a core dataclass, checked against the fields this core declares:
    a field the smoke relies on that core dropped is the smoke's to fix (one line)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    gone = sorted(set(values) - fields)
    if gone:
        raise SmokeOutdated(f"{cls.__qualname__} has no field {', '.join(gone)} on this core "
                            f"(fields: {', '.join(sorted(fields))})")
    return values


class SmokeOutdated(RuntimeError):
    """The smoke's own model of core is out of date: its fault, not core's."""


def _config_with_blocks(vllm_config: Any, num_blocks: int) -> Any:
    """The walk's VllmConfig as core's engine sees it after profiling: `num_blocks` blocks."""
    import copy

    vllm_config = copy.copy(vllm_config)
    vllm_config.cache_config = copy.copy(vllm_config.cache_config)
    vllm_config.cache_config.num_gpu_blocks_override = num_blocks
    return vllm_config


def step_scheduler(walk: Walk, async_scheduling: bool | None) -> str:
    """Build the scheduler class core builds for the dense config, the way
    EngineCore.__init__ builds it (its own call expression), add one request and
    run core's EngineCore.step up to the model executor: the schedule() call core
    makes every step, with the arguments it makes it with."""
    import copy

    from vllm import SamplingParams
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager

    vllm_config = walk.values["vllm_config"]
    if async_scheduling is not None and vllm_config.scheduler_config.async_scheduling != async_scheduling:
        vllm_config = copy.copy(vllm_config)
        vllm_config.scheduler_config = copy.copy(vllm_config.scheduler_config)
        vllm_config.scheduler_config.async_scheduling = async_scheduling
    # What EngineCore._initialize_kv_caches records before it builds the scheduler.
    vllm_config.cache_config.num_gpu_blocks = 64
    scheduler_cls = vllm_config.scheduler_config.get_scheduler_cls()
    engine = object.__new__(EngineCore)
    engine.structured_output_manager = StructuredOutputManager(vllm_config)
    engine.log_stats = False
    engine.model_executor = _StandInExecutor()
    block_size = vllm_config.cache_config.block_size
    scheduler = run_call_site(EngineCore.__init__, "Scheduler", {
        "self": engine, "Scheduler": scheduler_cls, "vllm_config": vllm_config,
        "kv_cache_config": _kv_cache_config(vllm_config, block_size=block_size), "include_finished_set": False,
        "scheduler_block_size": block_size, "hash_block_size": block_size,
    })
    engine.scheduler = scheduler
    request = Request("smoke-0", list(range(1, 33)), SamplingParams(max_tokens=4), None)
    scheduler.add_request(request)
    try:
        EngineCore.step(engine)
    except _ExecutorReached as reached:
        output = reached.args[0]
    else:
        raise RuntimeError("EngineCore.step returned without reaching the executor")
    scheduled = getattr(output, "num_scheduled_tokens", {})
    if scheduled.get("smoke-0") != 32:
        raise RuntimeError(f"schedule() did not schedule the request's 32 prompt tokens: {scheduled}")
    mro = " < ".join(c.__qualname__ for c in type(scheduler).__mro__[:3])
    return f"{mro}: EngineCore.step scheduled 32 tokens and reached the executor"


# ----------------------------------------------------------------------------- MRV2: core calling the plugin


LAYER = "model.layers.0.self_attn.attn"


def _npu_runner(walk: Walk) -> Any:
    """The Ascend MRV2 runner made by its real __init__ chain, statement by statement
    (decode_steps.new_runner): every attribute the plugin's and core's __init__ set at
    this release. What a statement could not build on the CPU is filled in as
    __init__ would have it only where the calls below need it."""
    import torch
    from decode_steps import new_runner
    from vllm_ascend.worker.v2.model_runner import NPUModelRunner

    from runner_init import NotBuilt

    vllm_config = walk.values["vllm_config"]
    runner, skipped = new_runner(NPUModelRunner, vllm_config, torch.device("cpu"))
    walk.values["runner-init"] = skipped
    full_graphs = vllm_config.compilation_config.cudagraph_mode.has_full_cudagraphs()
    needed = {"vllm_config": vllm_config, "device": torch.device("cpu"), "decode_query_len": 1,
              "lora_capture_cases": [0],
              # the graph-parameter update stream: a stream with full graphs, else None
              "update_stream": torch.npu.Stream() if full_graphs else None}
    for name, value in needed.items():
        if name not in vars(runner) or isinstance(vars(runner)[name], NotBuilt):
            setattr(runner, name, value)
    return runner


def _init_note(walk: Walk) -> str:
    from runner_init import summary

    return "runner from its __init__s: " + summary(walk.values.get("runner-init", []))


def step_graph_manager_factory(walk: Walk) -> str:
    """Core's ModelCudaGraphManager(...) call in GPUModelRunner.initialize_kv_cache,
    evaluated while the plugin's graph_manager_wrapper has swapped in its factory
    (NPUModelRunner.initialize_kv_cache wraps core's method with it)."""
    from vllm.config import CUDAGraphMode
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner
    from vllm_ascend.worker.v2 import model_runner as ascend_runner

    runner = _npu_runner(walk)
    with ascend_runner.graph_manager_wrapper(runner):
        manager = run_call_site(GPUModelRunner.initialize_kv_cache, "ModelCudaGraphManager",
                                {"self": runner, "cudagraph_mode": CUDAGraphMode.NONE})
    if type(manager).__name__ != "ModelAclGraphManager":
        raise RuntimeError(f"core's call built {type(manager).__qualname__}, not the Ascend ModelAclGraphManager")
    call, path, line = find_call_site(GPUModelRunner.initialize_kv_cache, "ModelCudaGraphManager")
    keywords = ", ".join(k.arg for k in call.keywords if k.arg) or "none"
    return f"ModelAclGraphManager built from core's call (keywords: {keywords}); {_init_note(walk)}"


def attention_layer(backend: Any, spec: Any) -> Any:
    """An attention layer as the model build leaves one: an instance of core's
    AttentionLayerBase (what core's get_layers_from_vllm_config selects), with
    `backend` and no KV cache bound yet. Its forward is never run."""
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

    class SmokeAttention(AttentionLayerBase):
        kv_cache = None
        kv_sharing_target_layer_name = None

        def get_attn_backend(self) -> Any:
            return backend

        def get_kv_cache_spec(self, vllm_config: Any) -> Any:
            return spec

    return SmokeAttention()


@contextlib.contextmanager
def registered(compilation_config: Any, layers: dict[str, Any]) -> Iterator[None]:
    """`layers` in the config's static forward context, where each layer's
    constructor puts itself, for the block; the context as it was afterwards."""
    context = compilation_config.static_forward_context
    clash = sorted(set(layers) & set(context))
    if clash:
        raise RuntimeError(f"the forward context already holds {', '.join(clash)}")
    context.update(layers)
    try:
        yield
    finally:
        for name in layers:
            context.pop(name, None)


def step_init_kv_cache(walk: Walk) -> str:
    """Core's own init_kv_cache, called as GPUModelRunner.initialize_kv_cache calls
    it, for one full-attention layer: it reaches the allocation, reshape and
    binding functions the plugin's worker patches replaced."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.v1.worker.gpu import attn_utils as core_attn_utils
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner
    from vllm.v1.worker.utils import AttentionGroup
    from vllm_ascend.attention.attention_v1 import AscendAttentionBackend

    vllm_config = walk.values["vllm_config"]
    kv_cache_config = _kv_cache_config(vllm_config, num_blocks=4, layers=(LAYER,))
    spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
    group = AttentionGroup(**_known_fields(AttentionGroup, backend=AscendAttentionBackend, layer_names=[LAYER],
                                           kv_cache_spec=spec, kv_cache_group_id=0))
    # The attention layer registers itself in the config's forward context when the
    # model is built (core's get_layers_from_vllm_config reads it back from there).
    layer = attention_layer(AscendAttentionBackend, spec)
    # The runner from its __init__s, with what initialize_kv_cache sets before its
    # init_kv_cache call (no HiSparse here: no block tables are passed on).
    runner = _npu_runner(walk)
    for name, value in dict(kv_caches=[], device=torch.device("cpu"), kv_cache_config=kv_cache_config,
                            attn_groups=[[group]], cache_config=vllm_config.cache_config,
                            kernel_block_sizes=[spec.block_size], vllm_config=vllm_config, block_tables=None,
                            compilation_config=vllm_config.compilation_config).items():
        setattr(runner, name, value)
    replaced = [name for name in ("_allocate_kv_cache", "_reshape_kv_cache")
                if getattr(core_attn_utils, name).__module__.startswith("vllm_ascend")]
    with set_current_vllm_config(vllm_config), registered(vllm_config.compilation_config, {LAYER: layer}):
        caches = run_call_site(GPUModelRunner.initialize_kv_cache, "init_kv_cache", {"self": runner})
    # Up to 0.29.0 init_kv_cache fills runner.kv_caches itself; on 0.30.0 it returns the
    # caches by layer name and initialize_kv_cache's next statement keeps them.
    if layer.kv_cache is None or not (runner.kv_caches or LAYER in (caches if isinstance(caches, dict) else ())):
        raise RuntimeError("init_kv_cache bound no KV cache to the layer and gave the runner none")
    cache = layer.kv_cache
    shapes = [tuple(t.shape) for t in (cache if isinstance(cache, (tuple, list)) else [cache])]
    return f"plugin {' and '.join(replaced) or 'nothing'} reached from core's init_kv_cache; K/V {shapes}"


def step_distributed(walk: Walk) -> str:
    """A one-rank world and model-parallel groups, as a single-card worker's
    init_device sets them up (gloo on loopback here instead of HCCL)."""
    import socket

    from vllm.distributed import parallel_state

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    parallel_state.init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                                distributed_init_method=f"tcp://127.0.0.1:{port}",
                                                backend="gloo")
    parallel_state.ensure_model_parallel_initialized(1, 1)
    return "world of 1 (gloo), tensor/pipeline parallel size 1"


def step_input_batch(walk: Walk) -> str:
    """The runner's own AscendInputBatch(...) call in prepare_inputs, evaluated
    against the installed core's InputBatch dataclass. The batch's tensors come
    from Triton kernels a CPU cannot run, so the call's locals are stand-ins;
    what is checked is what the runner passes: every field core requires, and no
    field core lacks."""
    import torch
    from vllm_ascend.worker.v2.model_runner import NPUModelRunner

    runner = _npu_runner(walk)
    num_tokens = 8
    # The buffers' other tensors (input_ids, positions, ...) are sliced into the batch unchecked.
    runner.input_buffers = StandIn()
    runner.input_buffers.is_padding = torch.zeros(16, dtype=torch.bool)
    runner.input_buffers.seq_lens_np = StandIn()
    batch = run_call_site(NPUModelRunner.prepare_inputs, "AscendInputBatch",
                          {"self": runner, "num_tokens_after_padding": num_tokens})
    fields = sorted(f.name for f in dataclasses.fields(batch))
    extra = [name for name in ("is_padding", "prompt_lens") if name in fields]
    return f"AscendInputBatch with {len(fields)} fields" + (f" (incl. {', '.join(extra)})" if extra else "")


def step_rejection_sampler(walk: Walk) -> str:
    """The Ascend rejection-sampler helpers import against core's (an NPU host
    imports them through the Triton worker patches; the helper names changed in
    vllm#46781)."""
    module = importlib.import_module("vllm_ascend.worker.v2.spec_decode.rejection_sampler_utils")
    core = importlib.import_module("vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils")
    taken = [id(value) for value in vars(module).values()]
    used = sorted(name for name, value in vars(core).items() if callable(value) and id(value) in taken)
    return f"imported; core helpers used: {', '.join(used) or 'none found'}"


def _decode(walk: Walk, key: str, *, switch_on: bool, draft_tokens: int = 0) -> Any:
    """8 decode steps (decode_steps.py) on the counting NPU; seq_lens_cpu must be the
    device-corrected length in every step."""
    from decode_steps import run_decode

    vllm_config = walk.values["vllm_config"]
    run = run_decode(vllm_config, run_call_site, switch_on=switch_on, draft_tokens=draft_tokens,
                     kv_cache_config=_kv_cache_config(vllm_config, layers=(LAYER,)))
    if run.seq_lens != run.expected:
        bad = next(i for i, (a, b) in enumerate(zip(run.seq_lens, run.expected)) if a != b)
        raise RuntimeError(f"step {bad + 1}: seq_lens_cpu {run.seq_lens[bad]}, device-corrected {run.expected[bad]}")
    walk.values[key] = run
    return run


def _counted(run: Any) -> str:
    from decode_steps import STEPS
    from device_counts import D2H, EVENT_SYNC, WAIT_EVENT

    c = run.counts
    return (f"{c[D2H]} D2H copies, {c[WAIT_EVENT]} stream waits (wait_event), {c[EVENT_SYNC]} event "
            f"synchronizes in {STEPS} steps")


def _counts_data(run: Any, case: str) -> dict[str, Any]:
    from decode_steps import BATCH, STEPS

    return {"case": case, "steps": STEPS, "batch": BATCH, "counts": run.counts, "sites": run.sites}


def step_metadata_off(walk: Walk) -> tuple[str, dict]:
    """Switch off: 8 decode steps of 8 requests through core's call path (see
    decode_steps.py); every device-to-host copy and event wait is counted."""
    run = _decode(walk, "decode-off", switch_on=False)
    return f"switch off: {_counted(run)}; seq_lens_cpu device-corrected", _counts_data(run, "switch-off")


def step_metadata_on(walk: Walk) -> tuple[str, dict]:
    """Switch on, same steps: exactly one D2H copy, one stream wait and one event
    synchronize fewer per step than with it off (the patch's claim), nothing else fewer."""
    from decode_steps import STEPS
    from device_counts import D2H, EVENT_SYNC, RECORD_EVENT, WAIT_EVENT

    off = walk.values["decode-off"]
    run = _decode(walk, "decode-on", switch_on=True)
    # record_event is not part of the claim: the copy records one, and so does its wait_stream.
    want = {name: off.counts[name] - (STEPS if name in (D2H, WAIT_EVENT, EVENT_SYNC) else 0)
            for name in off.counts if name != RECORD_EVENT}
    if walk.values.get("mrv2-off") and {n: run.counts[n] for n in want} == {n: off.counts[n] for n in want}:
        # The plugin does not use MRV2 on this core: its fail-closed check may decline the
        # configuration (e.g. a ModelState attribute this core lacks); no drop is right then.
        return (f"switch on: {_counted(run)}, as with it off: the plugin keeps MRV2 off on this core and "
                "the patch keeps the device path; seq_lens_cpu device-corrected", _counts_data(run, "switch-on"))
    if {name: run.counts[name] for name in want} != want:
        raise RuntimeError(f"switch on: {_counted(run)}; {run.counts}, expected one device-to-host copy, one "
                           f"wait and one synchronize fewer per step than switch off: {want}")
    return f"switch on: {_counted(run)}; seq_lens_cpu device-corrected", _counts_data(run, "switch-on")


def step_metadata_speculative(walk: Walk) -> tuple[str, dict]:
    """A draft token per request every step, some rejected on the device: with the
    switch on the runner must stay device-authoritative, so no count drops."""
    off = _decode(walk, "decode-spec-off", switch_on=False, draft_tokens=1)
    run = _decode(walk, "decode-spec-on", switch_on=True, draft_tokens=1)
    if run.counts != off.counts:
        raise RuntimeError(f"speculative, switch on: {run.counts}; switch off: {off.counts}: the switch must "
                           "change nothing when steps carry draft tokens")
    return (f"speculative (1 draft token per request, rejections on the device), switch on: {_counted(run)}, "
            f"as with it off; seq_lens_cpu device-corrected",
            _counts_data(run, "speculative-switch-on") | {"switch-off": off.counts, "switch-off-sites": off.sites})


# ----------------------------------------------------------------------------- the walk


def walk(out: Path | None) -> Walk:
    """Every step in start-up order; each runs only when what it needs passed."""
    w = Walk(out, read_series_files())
    w.step("stub-npu", stub_npu)
    w.step("platform", step_platform, needs=("stub-npu",))
    w.step("general-plugins", step_general_plugins, needs=("platform",))
    w.step("global-patches", step_global_patches, needs=("platform",))
    if w.results["platform"].status == "ok":
        continue_past(w, "global-patches", "vllm_ascend.patch.platform")
    w.step("worker-patches", lambda: step_worker_patches(w), needs=("global-patches-loaded",))
    if w.results["worker-patches"].status != "skipped":
        continue_past(w, "worker-patches", "vllm_ascend.patch.worker")
    w.step("config", lambda: step_config(w), needs=("global-patches-loaded",))
    w.step("scheduler", lambda: step_scheduler(w, None), needs=("config",))
    w.step("scheduler-sync", lambda: step_scheduler(w, False), needs=("config",))
    w.step("distributed", lambda: step_distributed(w), needs=("config",))
    mrv2 = ("worker-patches-loaded", "config")
    w.step("graph-manager-factory", lambda: step_graph_manager_factory(w), needs=(*mrv2, "distributed"))
    w.step("init-kv-cache", lambda: step_init_kv_cache(w), needs=mrv2)
    w.step("input-batch", lambda: step_input_batch(w), needs=mrv2)
    w.step("rejection-sampler", lambda: step_rejection_sampler(w), needs=("worker-patches-loaded",))
    w.step("metadata-switch-off", lambda: step_metadata_off(w), needs=mrv2)
    w.step("metadata-switch-on", lambda: step_metadata_on(w), needs=(*mrv2, "metadata-switch-off"))
    w.step("metadata-speculative", lambda: step_metadata_speculative(w), needs=mrv2)
    return w


def main(argv: list[str]) -> int:
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "1")  # the MRV2 path is the target
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded
    done = walk(Path(argv[0]) if argv else None)
    return 0 if all(r.status == "ok" for r in done.results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
