"""The walker's machinery on synthetic code: step runner, core call sites, and
loading a package past its failing statements. (The steps themselves need a
composed core and plugin: tests/smoke/test_smoke_real.py.)"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "overlay" / "smoke"))
import walker  # noqa: E402  (runs in the composed env, so it is loaded by path here too)


def test_step_ok_failed_and_skipped(tmp_path, capsys):
    out = tmp_path / "steps.jsonl"
    w = walker.Walk(out)
    w.step("first", lambda: "fine")
    w.step("second", lambda: 1 / 0, needs=("first",))
    w.step("third", lambda: "never", needs=("second",))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["step"], r["status"]) for r in records] == [("first", "ok"), ("second", "FAILED"), ("third", "skipped")]
    assert records[1]["detail"] == "ZeroDivisionError: division by zero"
    assert records[1]["where"].endswith("test_walker.py:22")
    assert records[2]["detail"] == "needs second"
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].startswith("  FAILED  second: ZeroDivisionError")


def test_a_step_needing_an_unknown_step_is_skipped(tmp_path):
    w = walker.Walk(None)
    w.step("lonely", lambda: "x", needs=("never-ran",))
    assert w.results["lonely"].status == "skipped"


def _module(tmp_path, name, source, folder=""):
    where = tmp_path / folder
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{name}.py").write_text(textwrap.dedent(source))
    sys.path.insert(0, str(where))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(where))


def test_call_site_runs_the_callers_own_expression(tmp_path):
    mod = _module(tmp_path, "fake_core_a", """
        def factory(config, device, *, lora_capture_cases=None):
            return (config, device, lora_capture_cases)

        class Runner:
            def init(self, mode):
                self.manager = factory(self.config, self.device, lora_capture_cases=self.cases)
    """)
    runner = type("R", (), {"config": "cfg", "device": "cpu", "cases": [1, 2]})()
    result = walker.run_call_site(mod.Runner.init, "factory", {"self": runner})
    assert result == ("cfg", "cpu", [1, 2])


def test_call_site_signature_break_points_at_the_real_line(tmp_path):
    mod = _module(tmp_path, "fake_core_b", """
        def factory(config, device):
            return config

        class Runner:
            def init(self, mode):
                x = 1
                self.manager = factory(self.config, self.device, lora_capture_cases=[])
    """, folder="core/vllm")
    runner = type("R", (), {"config": "cfg", "device": "cpu"})()
    with pytest.raises(TypeError, match="unexpected keyword argument 'lora_capture_cases'") as info:
        walker.run_call_site(mod.Runner.init, "factory", {"self": runner})
    assert walker.origin(info.value) == ("vllm/fake_core_b.py:8", "core")


def test_call_site_locals_not_given_are_stand_ins_and_globals_resolve(tmp_path):
    mod = _module(tmp_path, "fake_core_c", """
        import dataclasses

        @dataclasses.dataclass
        class Batch:
            ids: object
            padding: object

        def helper(buffers, n):
            return {"padding": buffers.flags[:n]}

        def prepare(self, scheduler_output):
            ids = sorted(scheduler_output.items)
            return Batch(ids=ids, **helper(self.buffers, len(ids)))
    """)
    me = type("S", (), {"buffers": type("B", (), {"flags": [True, False, True]})()})()
    batch = walker.run_call_site(mod.prepare, "Batch", {"self": me})
    # Only the call expression runs: `ids` is a local of the body, so a stand-in
    # (len 0), and the module's own helper slices the real buffer with it.
    assert isinstance(batch.ids, walker.StandIn)
    assert batch.padding == []


def test_missing_call_site_names_the_function(tmp_path):
    mod = _module(tmp_path, "fake_core_d", "def step(self):\n    return self.schedule()\n")
    with pytest.raises(LookupError, match="step no longer calls execute_model"):
        walker.find_call_site(mod.step, "execute_model")
    w = walker.Walk(None)
    w.step("gone", lambda: walker.find_call_site(mod.step, "execute_model"))
    assert (w.results["gone"].status, w.results["gone"].where) == ("FAILED", "smoke check")


def test_package_loaded_past_failing_statements(tmp_path):
    pkg = tmp_path / "fakeplugin_patches"
    pkg.mkdir()
    (pkg / "good_a.py").write_text("LOADED = True\n")
    (pkg / "good_b.py").write_text("LOADED = True\n")
    (pkg / "bad_attr.py").write_text("import fakeplugin_patches.good_a as m\nm.missing_attribute\n")
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        import fakeplugin_patches.good_a
        import fakeplugin_patches.bad_attr
        import fakeplugin_patches.no_such_module
        FLAG = True
        if FLAG:
            import fakeplugin_patches.good_b
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(AttributeError):
            __import__("fakeplugin_patches")
        failures = walker.load_package_tolerantly("fakeplugin_patches")
        assert [(where.rsplit(":", 1)[1], type(exc).__name__) for where, exc in failures] == [
            ("3", "AttributeError"), ("4", "ModuleNotFoundError")]
        assert sys.modules["fakeplugin_patches.good_b"].LOADED
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("fakeplugin_patches")]:
            del sys.modules[name]


def test_stand_in_absorbs_what_a_call_site_does_with_it():
    s = walker.StandIn()
    assert isinstance(s.a.b[1:3](4) + 1, walker.StandIn)
    assert len(s) == 0 and list(s) == []


def test_call_site_of_a_method_a_plugin_patch_wrapped(tmp_path):
    mod = _module(tmp_path, "fake_core_e", """
        def scheduler(config):
            return ("built", config)

        class EngineCore:
            def __init__(self, config):
                self.scheduler = scheduler(config)

        def patch():
            original_init = EngineCore.__init__

            def _patched_engine_core_init(self, *args, **kwargs):   # no functools.wraps
                original_init(self, *args, **kwargs)

            EngineCore.__init__ = _patched_engine_core_init

        patch()
    """, folder="core/vllm")
    assert walker.run_call_site(mod.EngineCore.__init__, "scheduler", {"config": "cfg"}) == ("built", "cfg")
