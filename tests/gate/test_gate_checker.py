"""The checker engine (issue 27, item 1): mypy run differentially on a prepared copy.

Synthetic trees (written here, never upstream code): core 1.0 (the release the plugin
declares) has `KVCacheTensor.shared_by`; core 2.0 dropped it. The plugin builds one
(`KVCacheTensor(shared_by=...)`, which the hand gate reports too) and reads the field
(which only the checker sees).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gatekit import KV_NEW, KV_OLD, tree
from overlay.gate import checker
from overlay.gate.checker import Diagnostic, new_diagnostics
from overlay.gate.prepare import pin_versions, strip_suppressions

needs_mypy = pytest.mark.skipif(checker.installed() is None,
                                reason="mypy (the `gate` extra, which `make test` installs) is not installed")

RUNNER = """
    from vllm.v1.kv_cache_interface import KVCacheTensor
    import vllm.v1.kv_cache_utils
    import third_party_nobody_has


    def build(size: int) -> KVCacheTensor:
        return KVCacheTensor(size=size, shared_by=["layer.0"])


    def owners(t: KVCacheTensor) -> list[str]:
        return t.shared_by


    def maybe(t: KVCacheTensor) -> list[str]:
        if "shared_by" in KVCacheTensor.__dataclass_fields__:
            return t.shared_by
        return []
"""


def _core(root: Path, new: bool) -> Path:
    version = "2.0" if new else "1.0"
    utils = {} if new else {"vllm/v1/kv_cache_utils.py": "X = 1\n"}
    return tree(root, {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", **utils,
                       "vllm/_version.py": f"__version__ = version = '{version}'\n",
                       "vllm/v1/kv_cache_interface.py": KV_NEW if new else KV_OLD})


def _plugin(root: Path, runner: str = RUNNER, extra: dict[str, str] | None = None) -> Path:
    return tree(root, {"vllm_ascend/__init__.py": "", "vllm_ascend/utils.py": UTILS,
                       "vllm_ascend/runner.py": runner, **(extra or {})})


UTILS = """
    def vllm_version_is(target: str) -> bool:
        import vllm
        return vllm.__version__ == target
"""


def _gate(run, tmp_path: Path, plugin: Path, engine: str = "both"):
    old, new = _core(tmp_path / "core-1", False), _core(tmp_path / "core-2", True)
    code, out, err = run("gate", "--core", new, "--plugin", plugin, "--declared-core", old,
                         "--engine", engine, "--json", root=tmp_path)
    assert code in (0, 1), err
    return code, json.loads(out)


def _line(plugin: Path, needle: str) -> int:
    text = (plugin / "vllm_ascend/runner.py").read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if needle in line)


@needs_mypy
def test_removed_field_read_and_the_constructor_both_engines_agree_on(run, tmp_path):
    plugin = _plugin(tmp_path / "plugin")
    code, doc = _gate(run, tmp_path, plugin)
    by_line = {f["plugin"]["line"]: f for f in doc["findings"] if f["plugin"]["path"] == "vllm_ascend/runner.py"}
    ctor = by_line[_line(plugin, "KVCacheTensor(size=size")]
    assert ctor["engine"] == "both" and ctor["severity"] == "error" and ctor["confidence"] == "high"
    read = by_line[_line(plugin, "return t.shared_by")]
    # the hand engine reads through core's annotations too now (typed reads): both agree
    assert read["engine"] == "both" and read["severity"] == "error", read
    guarded = by_line[_line(plugin, "__dataclass_fields__") + 1]
    assert guarded["severity"] == "info" and "__dataclass_fields__" in guarded["reason"]
    assert code == 1  # the agreed one is an error
    assert any(c["rule"] == "attr-defined" and c["count"] >= 1 for c in doc["clusters"]), doc["clusters"]
    assert doc["stats"]["checker_declared"] == "1.0"
    # a core module core dropped is a break; a third-party module nobody has is not
    assert any("kv_cache_utils" in f["symbol"] + f["message"] and f["engine"] in ("both", "checker")
               for f in doc["findings"]), [(f["engine"], f["symbol"], f["message"]) for f in doc["findings"]]
    assert not any("third_party_nobody_has" in f["message"] for f in doc["findings"])


@needs_mypy
def test_checker_engine_alone_reports_only_what_the_checker_found(run, tmp_path):
    code, doc = _gate(run, tmp_path, _plugin(tmp_path / "plugin"), engine="checker")
    assert {f["engine"] for f in doc["findings"]} == {"both", "checker"}


@needs_mypy
def test_a_suppression_comment_in_the_plugin_does_not_hide_the_break(run, tmp_path):
    runner = "\n    # mypy: ignore-errors" + RUNNER.replace("return t.shared_by\n",
                                                        "return t.shared_by  # type: ignore[attr-defined]\n", 1)
    plugin = _plugin(tmp_path / "plugin", runner)
    _, doc = _gate(run, tmp_path, plugin)
    assert any(f["engine"] == "checker" and "shared_by" in f["message"] for f in doc["findings"]), doc["findings"]
    assert "type: ignore" in (plugin / "vllm_ascend/runner.py").read_text()  # the tree itself is untouched


VERSIONED = """
    from vllm.v1.kv_cache_interface import KVCacheTensor

    from vllm_ascend.utils import vllm_version_is


    def owners(t: KVCacheTensor) -> list[str]:
        if vllm_version_is("1.0"):
            return t.shared_by
        else:
            return t.group.names
"""


@needs_mypy
def test_version_branches_are_pinned_to_the_core_under_test(run, tmp_path):
    """Unpinned, both branches are checked on both cores: the 1.0 branch's read of the
    dropped field is a false alarm, and the missing `group` (in the branch that runs on
    2.0) cancels out in the diff."""
    _, doc = _gate(run, tmp_path, _plugin(tmp_path / "plugin", VERSIONED))
    messages = [f["message"] for f in doc["findings"] if f["engine"] != "hand"]
    assert any('has no attribute "group"' in m or "no attribute 'group'" in m for m in messages), messages
    assert not any("shared_by" in m for m in messages), messages


EVIL = """
    from pathlib import Path
    Path({marker!r}).write_text("ran")
    def plugin(version):
        raise SystemExit("upstream code ran")
"""


@needs_mypy
def test_no_program_from_either_tree_runs_their_mypy_configuration_is_ignored(run, tmp_path):
    marker = tmp_path / "ran"
    evil = EVIL.format(marker=str(marker))
    configs = {"mypy.ini": "[mypy]\nplugins = evil_plugin\n", "setup.cfg": "[mypy]\nplugins = evil_plugin\n",
               "pyproject.toml": "[tool.mypy]\nplugins = ['evil_plugin']\n", ".mypy.ini": "[mypy]\nplugins = evil_plugin\n",
               "evil_plugin.py": evil, "vllm_ascend/evil_plugin.py": evil}
    plugin = _plugin(tmp_path / "plugin", extra=configs)
    tree(tmp_path / "core-2", {k: v for k, v in configs.items() if not k.startswith("vllm_ascend")})
    _, doc = _gate(run, tmp_path, plugin)
    assert not marker.exists()
    assert any(f["engine"] == "checker" for f in doc["findings"])


def test_without_mypy_the_checker_engine_says_so_in_one_line(run, tmp_path, monkeypatch):
    monkeypatch.setattr(checker, "installed", lambda: None)
    plugin = _plugin(tmp_path / "plugin")
    old, new = _core(tmp_path / "core-1", False), _core(tmp_path / "core-2", True)
    code, out, err = run("gate", "--core", new, "--plugin", plugin, "--declared-core", old, "--engine", "both",
                         root=tmp_path)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) <= 2 and "mypy" in lines[0] and "Traceback" not in err
    assert "[gate]" in err


def test_a_string_that_holds_a_suppression_is_not_a_comment():
    text = 'x = "# type: ignore"  # type: ignore[assignment]\ny = 1  # pyright: basic\n'
    assert strip_suppressions(text) == 'x = "# type: ignore"\ny = 1\n'


def test_pinned_version_tests_keep_every_line_where_it_was():
    text = ('if vllm_version_is(\n    "0.29.0"\n):\n    a = 1\nif not vllm_version_is("0.27.1") and x:\n    b = 2\n'
            'if vllm.__version__ != "0.29":\n    c = 3\n')
    out, n = pin_versions(text, "0.29.0")
    assert n == 3
    assert out.count("\n") == text.count("\n")
    assert out.splitlines()[0] == "if (True" and "if not False and x:" in out and "if False:" in out


lines = st.integers(min_value=1, max_value=10_000)
diag = st.builds(Diagnostic, st.sampled_from(["p/a.py", "p/b.py"]), lines,
                 st.sampled_from(["attr-defined", "call-arg"]), st.sampled_from(['"A" has no attribute "x"', "m\nnote"]))


@given(st.lists(diag, max_size=12), st.randoms(use_true_random=False), lines)
def test_the_diff_ignores_line_numbers_and_counts_a_multiset(old, rnd, shift):
    moved = [Diagnostic(d.path, d.line + shift, d.rule, d.message) for d in old]
    rnd.shuffle(moved)
    assert new_diagnostics(moved, old) == []
    extra = Diagnostic("p/a.py", 1, "attr-defined", '"A" has no attribute "x"')
    assert new_diagnostics(moved + [extra], old) == [extra]


@needs_mypy
def test_a_plugin_file_that_does_not_parse_is_left_out_not_the_whole_run(run, tmp_path):
    plugin = _plugin(tmp_path / "plugin", extra={"vllm_ascend/broken.py": "def f(:\n"})
    _, doc = _gate(run, tmp_path, plugin)
    assert any(f["engine"] == "checker" and "shared_by" in f["message"] for f in doc["findings"])
    assert any("vllm_ascend/broken.py" in n and "checker" in n for n in doc["notes"])


def test_an_info_finding_of_the_hand_gate_is_not_made_an_error_by_the_checker(tmp_path):
    from overlay.gate.engines import PluginShapes, combine
    from overlay.gate.findings import Finding
    from overlay.gate.source import DirSource

    plugin = _plugin(tmp_path / "plugin")
    note = Finding("attribute", "attribute:vllm.x.A.y", "vllm_ascend/runner.py", 9, "", 0, "m", severity="info")
    warn = Finding("attribute", "attribute:vllm.x.A.y", "vllm_ascend/runner.py", 9, "", 0, "m", severity="warning")
    chk = Finding("type", 'type:attr-defined:"A" has no attribute "y"', "vllm_ascend/runner.py", 9, "", 0,
                  '"A" has no attribute "y"', severity="warning", engine="checker")
    shapes = PluginShapes(DirSource(plugin), ["vllm_ascend/runner.py"])
    assert {(f.engine, f.severity) for f in combine([note], [chk], shapes, None)} == {("hand", "info"), ("checker", "warning")}
    assert [(f.engine, f.severity) for f in combine([warn], [chk], shapes, None)] == [("both", "error")]


def test_agreement_does_not_make_an_unreached_or_no_op_warning_an_error(tmp_path):
    """Both engines agreeing that code is broken says nothing of whether it runs: a hand
    warning in a module start-up does not load, or a patch that does nothing, stays a
    warning (engine both, confidence high). Seen on real pairings: the deprecated opt-in
    kv_offload modules and dead patch targets became false errors."""
    from overlay.gate.engines import PluginShapes, combine
    from overlay.gate.findings import Finding
    from overlay.gate.source import DirSource

    plugin = _plugin(tmp_path / "plugin")
    shapes = PluginShapes(DirSource(plugin), ["vllm_ascend/runner.py"])
    chk = Finding("type", 'type:attr-defined:Module "vllm.x" has no attribute "y"', "vllm_ascend/runner.py", 9, "",
                  0, 'Module "vllm.x" has no attribute "y"', severity="warning", engine="checker")
    warn = Finding("import", "import:vllm.x:y", "vllm_ascend/runner.py", 9, "", 0, "m", severity="warning")
    dead = replace(warn, kind="patch-target", symbol="patch-target:vllm.x.y")
    loaded = frozenset({"vllm_ascend"})
    assert [(f.engine, f.severity, f.confidence) for f in combine([warn], [chk], shapes, loaded)] == [
        ("both", "warning", "high")]
    assert [(f.engine, f.severity) for f in combine([dead], [chk], shapes, None)] == [("both", "warning")]
    on_path = frozenset({"vllm_ascend", "vllm_ascend.runner"})
    assert [(f.engine, f.severity) for f in combine([warn], [chk], shapes, on_path)] == [("both", "error")]
    # an override checked against the declared signature only: the checker's override
    # check sees no caller either (real: AscendMedusaProposer.propose, whose core callers
    # the plugin's runner overrides)
    declared = replace(warn, kind="override", summary="A.f lacks core parameter 'x' (declared; no core caller seen)")
    assert [(f.engine, f.severity) for f in combine([declared], [chk], shapes, on_path)] == [("both", "warning")]
    # a site inside a private helper the plugin calls only in branches this core does not
    # take (unreached.py; real: vllm-ascend 0.10.1rc1's _pool_v010 on 0.10.2)
    from overlay.gate.unreached import demote_reason
    helper = replace(warn, severity="warning", reason=demote_reason("_pool_v010", "0.10.2", ["vllm_ascend/runner.py:3"]))
    assert [(f.engine, f.severity) for f in combine([helper], [chk], shapes, on_path)] == [("both", "warning")]
