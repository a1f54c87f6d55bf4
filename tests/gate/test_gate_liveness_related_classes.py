"""A plugin's `self.m(...)` in class K is evidence that `m` runs only for K's own method, a
base's or a subclass's: it runs on a K (issue 27, thirtieth session).

Measured with both engines on vllm-omni 0.28.0 -> 0.29.0: GLM-Image's processor calls its own
`self._call_hf_processor(...)`, and that call was taken as evidence that Bagel's, MiMo-Audio's,
Qwen2.5-Omni's and Step-Audio2's processors' `_call_hf_processor` overrides run, so their
`super()._call_hf_processor(...)` (a hook core 0.29.0 removed and no longer calls) became 16
confirmed forecasts, all false. Core's own calls already obeyed the rule (`_dispatches_here`).
Synthetic trees; the shapes are the plugin's, no upstream code is copied.
"""

from __future__ import annotations

from test_gate_confirmed_forecasts import SPEC_NEW, SPEC_OLD, _gate_marks, _loaded_plugin, _release  # noqa: E402

PLUGIN = """
    from vllm.spec import Speculator


    class Bagel(Speculator):
        def _build_metadata(self, n: int) -> int:
            return super()._build_metadata(n)  # SUPER: only other classes call this name


    class Glm(Speculator):
        def _build_metadata(self, n: int) -> int:
            return n

        def run(self) -> int:
            return self._build_metadata(1)


    class BagelChild(Bagel):
        def step(self) -> int:
            return self._build_metadata(2)


    Glm().run()
"""


def _super_severities(run, tmp_path, plugin: str) -> list[str]:
    old = _release(tmp_path, "1.0", {"vllm/spec.py": SPEC_OLD})
    new = _release(tmp_path, "2.0", {"vllm/spec.py": SPEC_NEW})
    _, doc, marks = _gate_marks(run, tmp_path, old, new, _loaded_plugin(tmp_path, "spec", plugin), "vllm_ascend/spec.py")
    return [f["severity"] for f in marks.get("SUPER", []) if "undefined in superclass" in f["message"]]


def test_a_call_through_self_in_an_unrelated_class_is_no_evidence(run, tmp_path):
    # before: Glm's `self._build_metadata(1)` confirmed Bagel's line (an error)
    assert _super_severities(run, tmp_path, PLUGIN) == ["warning"]


def test_a_call_through_self_in_a_subclass_that_is_built_is_evidence(run, tmp_path):
    assert _super_severities(run, tmp_path, PLUGIN + "\n    BagelChild().step()\n") == ["error"]


def test_a_class_s_call_of_its_own_method_is_evidence(run, tmp_path):
    # the class itself is no entry of the bases the gate linearizes: it must count all the same
    own = PLUGIN.replace("""    class Glm(Speculator):""", """    class Bagel2(Speculator):
        def _build_metadata(self, n: int) -> int:
            return super()._build_metadata(n)  # SUPER: its own class calls it

        def go(self) -> int:
            return self._build_metadata(3)


    Bagel2().go()


    class Glm(Speculator):""")
    assert sorted(_super_severities(run, tmp_path, own)) == ["error", "warning"]
