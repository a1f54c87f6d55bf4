"""A feature probe the gate can answer from core's source decides its branch, as
`hasattr(core_class, "x")` does: `"x" in C.__dataclass_fields__`, `"x" in
inspect.signature(f).parameters` and `"x" in inspect.getfullargspec(f).args`, also asked
through a plugin helper that only returns such a test.

The cases are vllm-ascend 0.28.0rc1's: `recompute_scheduler.py` builds
`KVConnectorBlockState(req_ids=..., resolve_block_ids=..., ...)` only under
`if "req_ids" in KVConnectorBlockState.__dataclass_fields__:` and the eager form otherwise, and
`distributed/eplb/state.py` adds `num_valid_physical_experts` to `from_mapping`'s keywords only
if `_upstream_from_mapping_accepts_valid_expert_count()` (a helper returning an
`inspect.signature` test) holds. Before, the probe only excused the probed name, so the
keyword that comes with it (`resolve_block_ids`) and the helper's keyword were errors against
vLLM 0.29.0, which has neither. Where the gate cannot be sure (no dataclass in the hierarchy, a
base outside the tree, a decorated function, a helper with parameters), the test stays a
probe of the name, as before. Synthetic trees; no upstream code is copied. The fake core's shapes
are cut from vLLM 0.29.0: `vllm/v1/core/sched/output.py:209` (`KVConnectorBlockState`, a dataclass
of `block_ids` and `boundary_state_offloads`) and `vllm/distributed/eplb/eplb_state.py:1047`
(`EplbState.from_mapping`, a classmethod of model, model_config, device, parallel_config,
expanded_physical_to_logical)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import gatekit
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from overlay.gate.conditions import DECIDED, PLAIN, Env, _dataclass_field_names, _parameter_names, evaluate
from overlay.gate.index import TreeIndex
from overlay.gate.source import DirSource

PKGS = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.29.0'\n"}

STATE_OLD = """
    from dataclasses import dataclass, field


    @dataclass
    class KVConnectorBlockState:
        block_ids: dict[str, tuple[list[int], ...]]
        boundary_state_offloads: dict[str, list[tuple[int, int, int]]]
"""

STATE_NEW = """
    from dataclasses import dataclass, field
    from typing import Callable


    @dataclass
    class KVConnectorBlockState:
        req_ids: set = field(default_factory=set)
        resolve_block_ids: Callable | None = None
        boundary_state_offloads: dict = field(default_factory=dict)
"""

SCHEDULER = """
    from vllm.output import KVConnectorBlockState


    def block_state(req_ids, resolve, offloads):
        if "req_ids" in KVConnectorBlockState.__dataclass_fields__:
            return KVConnectorBlockState(req_ids=req_ids, resolve_block_ids=resolve,
                                         boundary_state_offloads=offloads)
        else:
            return KVConnectorBlockState(block_ids={}, boundary_state_offloads=offloads)


    block_state(set(), None, {})
"""


def _constructor_findings(tmp_path: Path, core: str, plugin: str = SCHEDULER) -> list[tuple[int, str]]:
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/output.py": textwrap.dedent(core)},
                                 {"vllm_ascend/sched.py": textwrap.dedent(plugin)}, ("vllm_ascend.sched",))
    return sorted((f.plugin_line, f.severity) for f in report.findings
                  if f.symbol.endswith("KVConnectorBlockState") or "KVConnectorBlockState" in f.message)


def test_a_dataclass_field_probe_core_answers_no_skips_the_branch(tmp_path):
    # before: the probe excused only `req_ids`, so `resolve_block_ids` was an error
    assert _constructor_findings(tmp_path, STATE_OLD) == []


def test_a_dataclass_field_probe_core_answers_yes_judges_that_branch(tmp_path):
    assert _constructor_findings(tmp_path, STATE_NEW) == []
    # the probed field is there and its companion is not: the branch runs and raises
    partial = STATE_NEW.replace("        resolve_block_ids: Callable | None = None\n", "")
    lines = _constructor_findings(tmp_path, partial)
    assert [sev for _, sev in lines] == ["error"]
    assert lines[0][0] == gatekit.line_of(tmp_path / "plugin", "vllm_ascend/sched.py", "return KVConnectorBlockState(req_ids")


def test_the_else_branch_is_judged_where_it_runs(tmp_path):
    # core has neither form: the eager branch runs, and its `block_ids` is unknown there
    bare = STATE_OLD.replace("        block_ids: dict[str, tuple[list[int], ...]]\n", "")
    lines = _constructor_findings(tmp_path, bare)
    assert [sev for _, sev in lines] == ["error"]
    assert lines[0][0] == gatekit.line_of(tmp_path / "plugin", "vllm_ascend/sched.py", "return KVConnectorBlockState(block_ids")


def test_where_the_class_is_no_dataclass_the_probe_only_excuses_its_name(tmp_path):
    # reading __dataclass_fields__ would raise: not a question core answers, so both branches
    # are judged and `resolve_block_ids` (not probed) is reported, as before the rule
    core = """
        class KVConnectorBlockState:
            def __init__(self, block_ids=None, boundary_state_offloads=None):
                self.block_ids = block_ids
    """
    lines = _constructor_findings(tmp_path, core)
    then_line = gatekit.line_of(tmp_path / "plugin", "vllm_ascend/sched.py", "return KVConnectorBlockState(req_ids")
    assert then_line in [line for line, _ in lines]


EPLB_CORE = """
    class EplbState:
        @classmethod
        def from_mapping(cls, model, model_config, device, parallel_config, expanded_physical_to_logical):
            return cls()
"""

EPLB_PLUGIN = """
    import inspect

    from vllm.distributed.eplb import eplb_state as _eplb_state


    def _upstream_accepts_valid_expert_count() -> bool:
        \"\"\"Does core's from_mapping take the valid-expert count?\"\"\"
        return "num_valid_physical_experts" in inspect.signature(_eplb_state.EplbState.from_mapping).parameters


    class AscendEplbState(_eplb_state.EplbState):
        @classmethod
        def from_mapping(cls, model, model_config, device, parallel_config, mapping, num_valid):
            kwargs = {"model": model, "model_config": model_config, "device": device,
                      "parallel_config": parallel_config, "expanded_physical_to_logical": mapping}
            if _upstream_accepts_valid_expert_count():
                kwargs["num_valid_physical_experts"] = num_valid
            return super().from_mapping(**kwargs)


    AscendEplbState.from_mapping(None, None, None, None, None, 1)
"""


def _from_mapping_findings(tmp_path: Path, core: str = EPLB_CORE, plugin: str = EPLB_PLUGIN) -> list[str]:
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/distributed/__init__.py": "",
                                                  "vllm/distributed/eplb/__init__.py": "",
                                                  "vllm/distributed/eplb/eplb_state.py": textwrap.dedent(core)},
                                 {"vllm_ascend/eplb.py": textwrap.dedent(plugin)}, ("vllm_ascend.eplb",))
    return [f.severity for f in report.findings if "from_mapping" in f.symbol and f.kind == "call"]


def test_a_signature_probe_through_a_helper_decides_the_keyword(tmp_path):
    # before: the helper's test was not read, the keyword counted as passed: an error
    assert _from_mapping_findings(tmp_path) == []


def test_a_core_that_takes_the_keyword_gets_it(tmp_path):
    core = EPLB_CORE.replace("expanded_physical_to_logical):", "expanded_physical_to_logical, num_valid_physical_experts=None):")
    assert _from_mapping_findings(tmp_path, core) == []
    # and a core that requires it where the helper asks another name: the keyword never comes
    asks_other = EPLB_PLUGIN.replace('return "num_valid_physical_experts" in', 'return "something_else" in')
    required = EPLB_CORE.replace("expanded_physical_to_logical):", "expanded_physical_to_logical, num_valid_physical_experts):")
    assert _from_mapping_findings(tmp_path, required, asks_other) == ["error"]


@pytest.mark.parametrize("case", ["helper_with_a_parameter", "decorated_core_method", "helper_doing_more"])
def test_a_helper_or_function_the_gate_cannot_read_leaves_the_keyword_judged(tmp_path, case):
    plugin, core = EPLB_PLUGIN, EPLB_CORE
    if case == "helper_with_a_parameter":
        plugin = plugin.replace("def _upstream_accepts_valid_expert_count() -> bool:",
                                "def _upstream_accepts_valid_expert_count(strict=True) -> bool:")
    elif case == "decorated_core_method":  # a wrapper may report another signature
        core = core.replace("        @classmethod\n", "        @classmethod\n        @some_wrapper\n")
    else:
        plugin = plugin.replace('        """Does core\'s from_mapping take the valid-expert count?"""\n',
                                "        print('asked')\n")
    assert _from_mapping_findings(tmp_path, core, plugin) == ["error"]


# ------------------------------------------------------------------ the answers, against Python's own

NAMES = ["a", "b", "c", "d"]
FIELD = st.tuples(st.sampled_from(NAMES), st.sampled_from(["int = 0", "ClassVar[int] = 0", "int = field(default=0)",
                                                           "int = field(init=False, default=0)", "plain"]))
CLASS = st.tuples(st.booleans(), st.lists(FIELD, max_size=3), st.booleans())


def _index(tmp_path: Path, source: str) -> TreeIndex:
    root = gatekit.tree(tmp_path, {**PKGS, "vllm/m.py": source})
    return TreeIndex(DirSource(root), packages=frozenset({"vllm"}))


def _env(index: TreeIndex) -> Env:
    return Env(world=index, is_core=lambda name: name.split(".")[0] == "vllm", version="0.29.0")


@settings(max_examples=30, deadline=None)
@given(classes=st.lists(CLASS, min_size=1, max_size=3))
def test_dataclass_field_names_are_python_s(tmp_path_factory, classes):
    lines = ["from dataclasses import dataclass, field, KW_ONLY", "from typing import ClassVar", ""]
    for i, (is_dataclass, fields, kw_only_marker) in enumerate(classes):
        base = f"(C{i - 1})" if i else ""
        lines += ["@dataclass"] if is_dataclass else []
        lines.append(f"class C{i}{base}:")
        body = ["_: KW_ONLY"] if kw_only_marker and is_dataclass else []
        for name, form in fields:
            body.append(f"{name} = 0" if form == "plain" else f"{name}: {form}")
        lines += [f"    {b}" for b in body] or ["    pass"]
        lines.append("")
    source = "\n".join(lines)
    space: dict = {}
    try:
        exec(compile(source, "<generated>", "exec"), space)  # our own generated class statements
    except TypeError:
        assume(False)  # a class Python refuses to build (a field turned ClassVar below it) is in no core
    last = space[f"C{len(classes) - 1}"]
    expected = frozenset(last.__dataclass_fields__) if hasattr(last, "__dataclass_fields__") else None
    index = _index(tmp_path_factory.mktemp("t"), source)
    found = index.resolve_dotted(f"vllm.m.C{len(classes) - 1}")
    assert found is not None and found[0] == "class"
    assert _dataclass_field_names(_env(index), *found[1]) == expected


PARAMS = st.tuples(st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
                   st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
                   st.booleans(), st.lists(st.sampled_from(NAMES), max_size=2, unique=True), st.booleans())


@settings(max_examples=30, deadline=None)
@given(params=PARAMS, kind=st.sampled_from(["function", "method", "staticmethod", "classmethod"]))
def test_parameter_names_are_inspect_s(tmp_path_factory, params, kind):
    posonly, args, vararg, kwonly, kwarg = params
    seen: set[str] = set()
    posonly = [n for n in posonly if not (n in seen or seen.add(n))]
    args = [n for n in args if not (n in seen or seen.add(n))]
    kwonly = [n for n in kwonly if not (n in seen or seen.add(n))]
    first = {"method": ["self"], "classmethod": ["cls"]}.get(kind, [])
    parts = first + posonly + (["/"] if posonly else []) + args
    parts += ["*rest"] if vararg else (["*"] if kwonly else [])
    parts += kwonly + (["**extra"] if kwarg else [])
    header = f"def f({', '.join(parts)}):\n    return None\n"
    if kind == "function":
        source, dotted = header, "vllm.m.f"
    else:
        decorator = f"    @{kind}\n" if kind in ("staticmethod", "classmethod") else ""
        source = "class C:\n" + decorator + textwrap.indent(header, "    ")
        dotted = "vllm.m.C.f"
    space: dict = {}
    exec(compile(source, "<generated>", "exec"), space)  # our own generated def
    obj = space["f"] if kind == "function" else space["C"].f
    index = _index(tmp_path_factory.mktemp("t"), source)
    env = _env(index)
    assert _parameter_names(env, dotted, positional_only=False) == frozenset(inspect.signature(obj).parameters)
    assert _parameter_names(env, dotted, positional_only=True) == frozenset(inspect.getfullargspec(obj).args)


def test_only_a_question_core_answers_is_decided(tmp_path):
    index = _index(tmp_path, "from dataclasses import dataclass\nfrom third_party import Unknown\n\n\n"
                             "@dataclass\nclass D:\n    a: int = 0\n\n\nclass C:\n    pass\n\n\n"
                             "@dataclass\nclass E(Unknown):\n    a: int = 0\n")
    mod = index.module("vllm.m")
    assert mod is not None

    def verdict(test: str) -> tuple[str, bool | None]:
        v = evaluate(ast.parse(test, mode="eval").body, mod, {"vllm": "vllm", "other": "other"}, _env(index))
        return v.kind, v.value

    assert verdict('"a" in vllm.m.D.__dataclass_fields__') == (DECIDED, True)
    assert verdict('"b" in vllm.m.D.__dataclass_fields__') == (DECIDED, False)
    assert verdict('"a" not in vllm.m.D.__dataclass_fields__') == (DECIDED, False)
    assert verdict('"a" in vllm.m.C.__dataclass_fields__') == (PLAIN, None)  # no dataclass: the read raises
    assert verdict('"b" in vllm.m.E.__dataclass_fields__') == (PLAIN, None)  # a base it cannot read may hold b
    assert verdict('"a" in other.D.__dataclass_fields__') == (PLAIN, None)  # not core's
    assert verdict('"a" in values') == (PLAIN, None)
