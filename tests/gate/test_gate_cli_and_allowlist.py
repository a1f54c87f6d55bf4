"""`overlay gate` on the command line: outputs, exit codes, allowlist, bad input."""

from __future__ import annotations

import datetime as dt
import json
from xml.etree import ElementTree as ET

import gatekit
import pytest
from hypothesis import given

from overlay import paths
from overlay.errors import OverlayError
from overlay.gate import run_gate
from overlay.gate.allowlist import load as load_allowlist
from tests.hostile_text import TEXT, unsafe_in

FACTORY = "replacement:vllm.v1.worker.gpu.model_runner.ModelCudaGraphManager"


@pytest.fixture
def broken(tmp_path):
    core = gatekit.core(tmp_path / "core", new=True, version="0.25.0")
    plugin = gatekit.plugin(tmp_path / "plugin", fixed=False)
    return core, plugin


def allowlist(tmp_path, body: str):
    path = tmp_path / "allow.yaml"
    path.write_text(body)
    return path


def test_text_output_and_exit_code(run, broken):
    core, plugin = broken
    code, out, err = run("gate", "--core", core, "--plugin", plugin)
    assert code == 1
    assert err == ""
    line, = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert line.startswith("error: vllm_ascend/worker/v2/model_runner.py:")
    assert "lora_capture_cases" in line and len(line) < 240
    assert out.rstrip().splitlines()[-1].startswith("FAILED: 1 error")
    code, out, _ = run("gate", "--core", core, "--plugin", plugin, "-v")
    assert "(core vllm/v1/worker/gpu/model_runner.py:" in out and "why: core calls it at" in out


def test_clean_run_exits_zero(run, tmp_path):
    core = gatekit.core(tmp_path / "core", new=True, version="0.25.0")
    plugin = gatekit.plugin(tmp_path / "plugin", fixed=True)
    code, out, _ = run("gate", "--core", core, "--plugin", plugin)
    assert code == 0
    assert "OK: no contract breaks" in out


def test_json_and_junit(run, broken, tmp_path):
    core, plugin = broken
    junit = tmp_path / "out" / "gate.xml"
    code, out, _ = run("gate", "--core", core, "--plugin", plugin, "--json", "--junit", junit)
    assert code == 1
    doc = json.loads(out)
    assert doc["ok"] is False
    assert doc["counts"]["replacement"] == 1
    (f,) = doc["findings"]
    assert f["symbol"] == FACTORY
    assert f["plugin"]["path"] == "vllm_ascend/worker/v2/model_runner.py"
    assert f["core"]["path"] == "vllm/v1/worker/gpu/model_runner.py"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "1"
    case = suite.find("testcase")
    assert case.get("name") == FACTORY
    assert "lora_capture_cases" in case.find("failure").get("message")


def test_allowlist_accepts_with_reason(run, broken, tmp_path):
    core, plugin = broken
    path = allowlist(tmp_path, f"""
accepted:
  - symbol: "{FACTORY}"
    reason: "fixed by 0001-lora-graph-args.patch in the series"
    expires: 2999-01-01
""")
    code, out, _ = run("gate", "--core", core, "--plugin", plugin, "--allowlist", path, "-v")
    assert code == 0
    assert "1 accepted" in out
    assert "fixed by 0001-lora-graph-args.patch" in out


def test_expired_entry_no_longer_applies(broken, tmp_path):
    core, plugin = broken
    path = allowlist(tmp_path, f"""
accepted:
  - symbol: "{FACTORY}"
    reason: "temporary"
    expires: 2020-01-01
""")
    report = run_gate(core, plugin, path)
    assert [f.symbol for f in report.findings] == [FACTORY]
    assert any("expired on 2020-01-01" in n for n in report.notes)


def test_pin_limited_entry(broken, tmp_path):
    core, plugin = broken
    path = allowlist(tmp_path, f"""
accepted:
  - symbol: "{FACTORY}"
    reason: "only this pairing"
    pins: [1f486d96]
""")
    assert run_gate(core, plugin, path, pin="1f486d96").ok
    assert not run_gate(core, plugin, path, pin="a30addc7").ok
    assert not run_gate(core, plugin, path).ok


def test_unused_entry_is_noted(broken, tmp_path):
    core, plugin = broken
    path = allowlist(tmp_path, """
accepted:
  - symbol: "import:vllm.gone:thing"
    reason: "stale"
    expires: 2999-01-01
""")
    report = run_gate(core, plugin, path)
    assert any("matched nothing" in n for n in report.notes)


@pytest.mark.parametrize("body,message", [
    ("accepted:\n  - symbol: x\n    expires: 2999-01-01\n", "missing 'reason'"),
    ("accepted:\n  - symbol: x\n    reason: y\n", "needs an expiry"),
    ("accepted:\n  - symbol: x\n    reason: y\n    expires: soon\n", "'expires' must be a date"),
    ("accepted:\n  - symbol: x\n    reason: y\n    pins: [a]\n    colour: red\n", "unknown key 'colour'"),
    ("accepted:\n  - symbol: x\n    reason: y\n    pins: [a]\n    kind: typo\n", "unknown kind 'typo'"),
    ("accepted: [\n", ""),
    ("accepted:\n  - symbol: x\n    reason: y\n    expires: 2026-02-30\n", "2026-02-30"),  # no such day
    ("- just a list\n", "mapping with an 'accepted' list"),
])
def test_bad_allowlist_is_one_error_line(run, broken, tmp_path, body, message):
    core, plugin = broken
    path = allowlist(tmp_path, body)
    with pytest.raises(OverlayError):
        load_allowlist(path)
    code, out, err = run("gate", "--core", core, "--plugin", plugin, "--allowlist", path)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("overlay: error: ")
    assert str(path) in err and message in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv,message", [
    (["gate"], "no pin sets found"),
    (["gate", "--plugin", "{plugin}"], "nothing to gate"),
    (["gate", "--core", "{tmp}/nope", "--plugin", "{plugin}"], "core tree not found"),
    (["gate", "--core", "{tmp}/empty", "--plugin", "{plugin}"], "no Python package in the core tree"),
    (["gate", "--pin", "x", "--core", "{tmp}"], "either --pin or --core/--plugin"),
    (["gate", "--core", "{core}", "--plugin", "{plugin}", "--allowlist", "{tmp}/none.yaml"],
     "allowlist not found"),
    (["gate", "--plugin", "{plugin}", "--bisect", "core=a...b", "--core-repo", "{tmp}"], "bad bisect range"),
    (["gate", "--plugin", "{plugin}", "--bisect", "plugin=a..b", "--core-repo", "{tmp}"], "only bisect the core"),
    (["gate", "--plugin", "{plugin}", "--bisect", "core=a..b"], "needs the core's git history"),
    (["gate", "--plugin", "{plugin}", "--bisect", "core=a..b", "--core-repo", "{tmp}"], "not a git directory"),
    (["gate", "--core", "{core}", "--plugin", "{plugin}", "--core-version", "banana"], "bad --core-version 'banana'"),
    (["gate", "--core", "{core}/vllm", "--plugin", "{plugin}"], "holds no `vllm` package the plugin imports"),
    (["gate", "--core", "{plugin}", "--plugin", "{plugin}"], "holds no `vllm` package the plugin imports"),
])
def test_bad_input_is_one_error_line(run, broken, tmp_path, argv, message):
    core, plugin = broken
    (tmp_path / "empty").mkdir()
    argv = [a.format(tmp=tmp_path, core=core, plugin=plugin) for a in argv]
    code, out, err = run(*argv, root=tmp_path)
    assert code == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_pin_uses_composed_trees(run, tmp_path):
    root = tmp_path / "project"
    (root / "pins").mkdir(parents=True)
    (root / "series.yaml").write_text("series: []\n")
    (root / "pins" / "1f486d96.yaml").write_text(
        "description: test\ndefault: true\ntargets:\n  core:\n    repo: https://example.org/a/core\n"
        "    commit: " + "a1" * 20 + "\n  plugin:\n    repo: https://example.org/a/plugin\n"
        "    commit: " + "b2" * 20 + "\n")
    code, _, err = run("gate", root=root)  # the default pin set
    assert code == 2 and "no composed core tree for pin set 1f486d96" in err
    assert "overlay apply --pin 1f486d96" in err
    gatekit.core(paths.composed_dir(root, "1f486d96", "core"), new=True, version="0.25.0")
    gatekit.plugin(paths.composed_dir(root, "1f486d96", "plugin"), fixed=False)
    code, out, _ = run("gate", "--pin", "1f4", root=root)
    assert code == 1 and "lora_capture_cases" in out
    # A gate-allowlist.yaml at the project root is picked up by default, limited to this pin.
    (root / "gate-allowlist.yaml").write_text(
        f'accepted:\n  - symbol: "{FACTORY}"\n    reason: "series fixes it"\n    pins: [1f486d96]\n')
    code, out, _ = run("gate", "--pin", "1f486d96", root=root)
    assert code == 0, out
    from overlay.commands.gate import gate_after_apply
    assert gate_after_apply(root, "1f486d96", None, json_mode=True) == 0


def test_today_is_used_for_expiry():
    # guards the comparison direction: an entry expiring today still applies today
    from overlay.gate.allowlist import Allowlist, Entry, apply
    from overlay.gate.findings import Finding
    f = Finding("import", "import:a:b", "p.py", 1, "", 0, "m")
    today = dt.date(2026, 7, 1)
    entry = Entry("import:a:b", None, None, "r", today, (), 1)
    reported, suppressed, _ = apply((f,), Allowlist("x", (entry,)), None, today=today)
    assert not reported and len(suppressed) == 1
    reported, _, _ = apply((f,), Allowlist("x", (entry,)), None, today=today + dt.timedelta(days=1))
    assert reported == (f,)


def test_one_break_at_two_core_call_sites_is_one_finding(run, tmp_path):
    core = gatekit.tree(tmp_path / "core", {"vllm/__init__.py": "", "vllm/enc.py": """
        class EncoderCudaGraphManager:
            def _run_budget_graph(self, mm_kwargs, token_budget, path=None):
                pass

            def run(self, kw):
                self._run_budget_graph(kw, 1, path="a")
                self._run_budget_graph(kw, 2, path="b")


        def drive(manager: EncoderCudaGraphManager):
            manager.run({})
    """})
    plugin = gatekit.tree(tmp_path / "plugin", {"vllm_ascend/__init__.py": "", "vllm_ascend/enc.py": """
        from vllm.enc import EncoderCudaGraphManager


        class EncoderAclGraphManager(EncoderCudaGraphManager):
            def _run_budget_graph(self, mm_kwargs, token_budget):
                pass
    """})
    junit = tmp_path / "gate.xml"
    code, _, _ = run("gate", "--core", core, "--plugin", plugin, "--junit", junit)
    assert code == 1
    case, = ET.parse(junit).getroot().iter("testcase")
    assert case.get("name") == "override:vllm_ascend.enc.EncoderAclGraphManager._run_budget_graph"
    text = case.find("failure").text
    assert "vllm/enc.py:6" in text and "also at core vllm/enc.py:7" in text


def test_junit_case_names_are_unique():
    from overlay.gate.findings import Finding
    from overlay.gate.report import _case_names
    a = Finding("override", "override:m.C.f", "p.py", 3, "core.py", 6, "x")
    b = Finding("override", "override:m.C.f", "p.py", 3, "core.py", 7, "x", severity="warning")
    c = Finding("override", "override:m.C.f", "q.py", 3, "core.py", 7, "x")
    names = _case_names([a, b, c])
    assert len(set(names)) == 3, names


def test_syntax_error_in_plugin_file_is_a_note_in_the_output(run, broken):
    core, plugin = broken
    (plugin / "vllm_ascend" / "oops.py").write_text("def (:\n")
    code, out, _ = run("gate", "--core", core, "--plugin", plugin)
    assert code == 1
    assert "note: plugin file vllm_ascend/oops.py does not parse (" in out


def test_the_committed_allowlist_is_valid_and_bounded():
    """The project's gate-allowlist.yaml: loads, every entry has a reason and a date expiry,
    and none accepts a real break the series fixes (the seed failures)."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    path = root / "gate-allowlist.yaml"
    if not path.is_file():
        pytest.skip("no committed allowlist")
    allow = load_allowlist(path)
    assert allow.entries
    for e in allow.entries:
        assert e.expires is not None and len(e.reason) > 40, e.symbol
        assert e.kind is not None and e.path is not None, e.symbol  # accepted as narrowly as possible
        assert "ModelCudaGraphManager" not in e.symbol and "rejection_sampl" not in e.symbol


def test_default_allowlist_on_other_trees_does_not_note_unused_entries(run, broken, tmp_path):
    core, plugin = broken
    root = tmp_path / "project"
    root.mkdir()
    (root / "series.yaml").write_text("series: []\n")
    (root / "gate-allowlist.yaml").write_text(
        'accepted:\n  - symbol: "import:vllm.gone:x"\n    reason: "about a pin set"\n    expires: 2999-01-01\n')
    code, out, _ = run("gate", "--core", core, "--plugin", plugin, root=root)
    assert code == 1 and "matched nothing" not in out
    code, out, _ = run("gate", "--core", core, "--plugin", plugin, "--allowlist", root / "gate-allowlist.yaml")
    assert "matched nothing" in out  # named explicitly: a stale entry is worth a note


@given(TEXT, TEXT, TEXT)
def test_the_text_report_prints_no_control_character_from_upstream(symbol, message, path):
    """Findings quote upstream's names, paths and source text (issue 26 item 7): one line
    each, whatever they hold, and no escape sequence reaches the terminal."""
    from overlay.gate.findings import Finding, GateReport, Suppressed
    from overlay.gate.report import text

    found = Finding("override", symbol, path, 3, "core/" + path, 5, message, reason=message, summary=message)
    report = GateReport("core " + path, "plugin " + path, message, (found,),
                        (Suppressed(found, message, 2),), notes=(message,))
    shown = text(report, verbose=True)
    assert unsafe_in(shown, newlines=True) == []
    assert len(shown.splitlines()) == len(text(GateReport("c", "p", "v", (found,), (Suppressed(found, "r", 2),),
                                                          notes=("n",)), verbose=True).splitlines())
