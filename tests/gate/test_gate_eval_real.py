"""Issue 10 on the real trees (needs OVERLAY_MIRROR): the two CI-tested pairings stay
quiet and precise, and every known start-up break of 801a6b41 against 0.25.0 is an
error. Verdicts come from the committed classification (benchmarks/gate_eval.yaml)."""

from __future__ import annotations

import ast
import inspect
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from overlay import paths
from overlay.gate import run_gate
from overlay.gate.evaluation import finding_key, load, score

pytestmark = pytest.mark.mirror

ROOT = Path(__file__).resolve().parents[2]

KNOWN_801A6B41_VS_0_25_0 = {
    "replacement:vllm.v1.worker.gpu.model_runner.ModelCudaGraphManager @ vllm_ascend/worker/v2/model_runner.py",
    "import:vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils:_compute_global_lse"
    " @ vllm_ascend/worker/v2/spec_decode/rejection_sampler_utils.py",
    "import:vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils:_compute_block_stats_kernel"
    " @ vllm_ascend/worker/v2/spec_decode/rejection_sampler_utils.py",
    "replacement:vllm.v1.worker.gpu.attn_utils._reshape_kv_cache @ vllm_ascend/patch/worker/patch_v2/patch_attn_utils.py",
    "override:vllm_ascend.core.recompute_scheduler.RecomputeScheduler.schedule @ vllm_ascend/core/recompute_scheduler.py",
    "import:vllm.tool_parsers.deepseekv4_tool_parser @ vllm_ascend/patch/platform/patch_deepseek_v4_tool_call_parser.py",
    "constructor:vllm_ascend.worker.v2.model_runner:vllm_ascend.worker.v2.input_batch.AscendInputBatch"
    " @ vllm_ascend/worker/v2/model_runner.py",
    "attribute:vllm.tool_parsers.glm47_moe_tool_parser.Glm47MoeModelToolParser._extract_tool_call_regions"
    " @ vllm_ascend/patch/platform/patch_glm47_tool_call_parser.py",
}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    mirror = Path(os.environ["OVERLAY_MIRROR"])
    repo = paths.find_mirror_repo(mirror, "vllm-project+vllm-ascend")
    if repo is None:
        pytest.skip("the mirror has no vllm-ascend repository")
    base = tmp_path_factory.mktemp("eval")
    cache: dict[str, Path] = {}

    def get(commit: str, version: str) -> tuple[Path, Path]:
        if version not in cache:
            sdist = mirror / "pypi" / f"vllm-{version}.tar.gz"
            if not sdist.is_file():
                pytest.skip(f"the mirror has no vllm {version} source archive")
            with tarfile.open(sdist) as tar:
                tar.extractall(base, filter="data")
            cache[version] = base / f"vllm-{version}"
        plugin = base / f"plugin-{commit}"
        if not plugin.is_dir():
            plugin.mkdir()
            data = subprocess.run(["git", "--git-dir", str(repo), "archive", commit],
                                  check=True, capture_output=True).stdout
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(plugin, filter="data")
        return cache[version], plugin

    return get


def pairing(name: str):
    return next(p for p in load(ROOT / "benchmarks" / "gate_eval.yaml") if p.name == name)


@pytest.mark.parametrize("name", ["15818534ec-vs-0.24.0", "fe7bfc4746-vs-0.25.0"])
def test_ci_tested_pairings_report_few_errors_and_most_are_real(trees, name):
    p = pairing(name)
    core, plugin = trees(p.plugin, p.core)
    report = run_gate(core, plugin, ROOT / "gate-allowlist.yaml", note_unused=False)
    s = score(p, report.findings)
    assert s.errors <= 5, [finding_key(f) for f in report.findings if f.severity == "error"]
    assert s.true_errors >= 0.8 * s.errors
    assert not s.unclassified, [finding_key(f) for f in s.unclassified]


def test_all_known_start_up_breaks_of_801a6b41_against_0_25_0_are_errors(trees):
    core, plugin = trees("801a6b41", "0.25.0")
    report = run_gate(core, plugin, ROOT / "gate-allowlist.yaml", note_unused=False)
    errors = {finding_key(f) for f in report.findings if f.severity == "error"}
    assert KNOWN_801A6B41_VS_0_25_0 <= errors, KNOWN_801A6B41_VS_0_25_0 - errors


BUMPS = ["bb474a6a94-vs-0.25.0", "76ab5e28b9-vs-0.25.1", "b909a4703d-vs-0.26.0", "e8f25e304d-vs-0.27.1",
         "cda592a640-vs-0.27.1"]


@pytest.fixture(scope="module")
def bump_scores(trees):
    from overlay.gate.engine import Cache
    shared = Cache()
    out = {}
    for name in BUMPS + ["351879064c-vs-0.27.1"]:
        p = pairing(name)
        core, plugin = trees(p.plugin, p.core)
        report = run_gate(core, plugin, ROOT / "gate-allowlist.yaml", note_unused=False, cache=shared)
        out[name] = score(p, report.findings)
    return out


def test_release_bumps_recall_and_precision_as_errors(bump_scores):
    """Issue 19: on the release-bump pairings, recall on the maintainers' API changes
    (truth items in reach) is at least 70% as errors, and at least 90% of the errors
    are real; every finding is classified."""
    from overlay.gate.evaluation import totals
    scores = [bump_scores[n] for n in BUMPS]
    assert not [finding_key(f) for s in scores for f in s.unclassified]
    t = totals(scores)
    assert t["truth_recall"] >= 0.70, t
    assert t["precision"] >= 0.90, t


def _def_at(tree: ast.Module, name: str, line: int):
    return next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == name and n.lineno <= line <= (n.end_lineno or n.lineno)), None)


def _call_at(tree: ast.Module, name: str, line: int):
    def called(n):
        f = n.func.value if isinstance(n.func, ast.Subscript) else n.func
        return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    return next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n) == name
                 and n.lineno <= line <= (n.end_lineno or n.lineno)), None)


def _signature(fn: ast.FunctionDef, bound: bool) -> inspect.Signature:
    """The parameters of a core def as `inspect` sees them, built from the syntax tree
    (nothing of the release runs); `bound`: called through an instance (drop self)."""
    a, P = fn.args, inspect.Parameter
    params = [P(x.arg, P.POSITIONAL_ONLY) for x in a.posonlyargs] + [P(x.arg, P.POSITIONAL_OR_KEYWORD)
                                                                     for x in a.args]
    for i in range(len(params) - len(a.defaults), len(params)):
        params[i] = params[i].replace(default=None)
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += [P(x.arg, P.KEYWORD_ONLY, **({} if d is None else {"default": None}))
               for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params[1:] if bound else params)


def _call_refused_by_release(finding, core: Path, plugin: Path) -> bool:
    """Independently of the gate's own signature code: does the release's def, read
    from the sdist, refuse the plugin's call, read from the plugin tree?"""
    name = finding.symbol.rsplit(".", 1)[-1]
    call = _call_at(ast.parse((plugin / finding.plugin_path).read_bytes()), name, finding.plugin_line)
    fn = _def_at(ast.parse((core / finding.core_path).read_bytes()), name, finding.core_line)
    if call is None or fn is None or any(isinstance(x, ast.Starred) for x in call.args) \
            or any(k.arg is None for k in call.keywords):
        return False
    bound = isinstance(call.func, ast.Attribute) or bool(fn.args.args and fn.args.args[0].arg in ("self", "cls"))
    try:
        _signature(fn, bound).bind(*call.args, **{k.arg: k.value for k in call.keywords})
    except TypeError:
        return True
    return False


def test_the_negative_control_has_no_false_alarm_and_its_errors_are_breaks_the_release_shows(trees):
    """Issue 19 asked for at most one error on the control 351879064c vs 0.27.1, on the
    premise that a plugin already adapted to 0.27.1 breaks nothing there. It keeps two,
    and both are real: each call is refused by the release's own signature, checked
    here from both source trees without the gate's code. The bar this test holds: no
    false alarm, and at most one error that is not such a proven break."""
    p = pairing("351879064c-vs-0.27.1")
    core, plugin = trees(p.plugin, p.core)
    report = run_gate(core, plugin, ROOT / "gate-allowlist.yaml", note_unused=False)
    s = score(p, report.findings)
    assert not s.unclassified and not s.false_alarms, [finding_key(f) for f in s.false_alarms]
    errors = [f for f in report.findings if f.severity == "error"]
    proven = [f for f in errors if f.kind == "call" and _call_refused_by_release(f, core, plugin)]
    assert len(errors) - len(proven) <= 1, sorted({finding_key(f) for f in errors} - {finding_key(f) for f in proven})
