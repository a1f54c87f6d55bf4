"""A module name built from a dotted template is a way to a plugin module: vllm-mindspore's
lazy model registry maps each architecture to a module name and builds
`"vllm_mindspore.model_executor.models.{}".format(name)`, so its model modules load when a
model is chosen; what core lacks there is an error, as on an entry point's chain. Synthetic
trees; no upstream code is copied."""

from __future__ import annotations

import gatekit
from hypothesis import given, strategies as st

from overlay.gate.scan import _template_modules
from overlay.gate.index import ModuleInfo

PKGS = {"vllm/__init__.py": "", "vllm/entrypoints/__init__.py": "", "vllm/entrypoints/utils.py": "X = 1\n"}

MODEL = """
    from vllm.entrypoints.utils import cli_env_setup


    class Qwen2ForCausalLM:
        pass
"""

REGISTRY = """
    _NATIVE_MODELS = {"Qwen2ForCausalLM": ("qwen2", "Qwen2ForCausalLM")}
    PATHS = "vllm_ascend.models.{}"


    def lazy(arch):
        mod, cls = _NATIVE_MODELS[arch]
        return PATHS.format(mod), cls
"""


def _severities(tmp_path, registry, folder: str = "vllm_ascend/models"):
    """The severity of each finding, the model modules `qwen2` and `llama` sitting in `folder`."""
    core = gatekit.tree(tmp_path / "core", PKGS)
    packages = {f"{pkg}/__init__.py": "" for pkg in ("vllm_ascend/models", folder)}
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": gatekit.PLUGIN_ENTRY,
        "vllm_ascend/__init__.py": "def register():\n    import vllm_ascend.registry  # noqa\n",
        "vllm_ascend/registry.py": registry, **packages,
        f"{folder}/qwen2.py": MODEL, f"{folder}/llama.py": MODEL})
    return {f.plugin_path: f.severity for f in gatekit.run_gate(core, plugin).findings}


def test_a_template_filled_with_its_modules_names_reaches_those_modules(tmp_path):
    assert _severities(tmp_path / "a", REGISTRY) == {"vllm_ascend/models/qwen2.py": "error",
                                                     "vllm_ascend/models/llama.py": "warning"}
    # negative twin: the names the template is filled with are not in its module
    assert _severities(tmp_path / "b", REGISTRY.replace('("qwen2",', '(NAME,')) == {
        "vllm_ascend/models/qwen2.py": "warning", "vllm_ascend/models/llama.py": "warning"}


@given(st.text(alphabet="abc.{}_ ", max_size=30))
def test_a_template_names_only_existing_modules_of_its_package(text):
    """Whatever the text, only names in existing modules come back, each the template filled
    with one of the module's identifier constants: an existing module itself, or a name in one
    (what follows the last hole, `pkg.{}._` filled as `pkg.a._`, is a name in `pkg.a`)."""
    import ast
    tree = ast.parse('X = ("a", "b_c", "not ok")\n')
    mod = ModuleInfo.__new__(ModuleInfo)
    object.__setattr__(mod, "tree", tree)
    have = {"pkg.a", "pkg.b_c.x", "pkg.z"}
    got = _template_modules("pkg." + text, mod, lambda n: n if n in have else None)
    reachable = have - {"pkg.z"}  # no constant of the module fills a hole with "z"
    assert all(any(name == m or name.startswith(m + ".") for m in reachable) for name in got), got


FSTRING_REGISTRY = """
    _MODEL_LIST = ["qwen2"]


    def register_custom_models():
        for _model in _MODEL_LIST:
            print(f"vllm_ascend.models.{_model}.register")
"""


def test_an_fstring_template_with_a_name_after_the_module_reaches_the_module(tmp_path):
    """vllm-gcu's general plugin resolves `f"vllm_gcu.models.{_model}.register"` for each name of
    its `_MODEL_LIST`: the filled part names the module, what follows a name in it."""
    assert _severities(tmp_path / "a", FSTRING_REGISTRY) == {"vllm_ascend/models/qwen2.py": "error",
                                                             "vllm_ascend/models/llama.py": "warning"}
    assert _severities(tmp_path / "b", FSTRING_REGISTRY.replace('["qwen2"]', "[]")) == {
        "vllm_ascend/models/qwen2.py": "warning", "vllm_ascend/models/llama.py": "warning"}


TWO_HOLE_REGISTRY = """
    _OMNI_MODELS = {"QwenOmni": ("qwen_omni", "qwen2", "QwenOmniModel")}


    def lazy_models():
        return {arch: f"vllm_ascend.models.{mod_folder}.{mod_relname}:{cls_name}"
                for arch, (mod_folder, mod_relname, cls_name) in _OMNI_MODELS.items()}
"""


def test_a_template_with_two_holes_reaches_the_modules_its_table_names(tmp_path):
    """vllm-omni's registry builds `f"vllm_omni.model_executor.models.{mod_folder}.{mod_relname}"`
    from a table of (folder, module, class): each filled part must name a package or module,
    and what follows a colon names the class."""
    assert _severities(tmp_path / "a", TWO_HOLE_REGISTRY, "vllm_ascend/models/qwen_omni") == {
        "vllm_ascend/models/qwen_omni/qwen2.py": "error", "vllm_ascend/models/qwen_omni/llama.py": "warning"}
    # negative twin: the folder the table names is not a package of the plugin
    assert _severities(tmp_path / "b", TWO_HOLE_REGISTRY.replace('("qwen_omni",', '("other",'),
                       "vllm_ascend/models/qwen_omni") == {
        "vllm_ascend/models/qwen_omni/qwen2.py": "warning", "vllm_ascend/models/qwen_omni/llama.py": "warning"}


@given(st.lists(st.sampled_from(["pkg.", "{}", "{x}", ".", "a", "b_c", ":", "x", " "]), max_size=8))
def test_a_template_with_several_holes_names_only_existing_modules(pieces):
    """Whatever the template's shape, every name that comes back starts with an existing
    module of the package, each hole filled with one of the module's identifier constants."""
    import ast
    tree = ast.parse('X = ("a", "b_c", "x", "not ok")\n')
    mod = ModuleInfo.__new__(ModuleInfo)
    object.__setattr__(mod, "tree", tree)
    have = {"pkg.a", "pkg.a.b_c", "pkg.b_c", "pkg.b_c.x"}
    got = _template_modules("".join(pieces), mod, lambda n: n if n in have else None)
    assert all(any(g == h or g.startswith(h + ".") for h in have) for g in got)
    assert len(got) <= 4 ** 3
