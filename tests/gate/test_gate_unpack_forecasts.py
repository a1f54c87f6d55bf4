"""An unpack of the wrong size raises whenever its line runs: the checker's
`Too many values to unpack (3 expected, 4 provided)` and `Need more than 2 values to unpack (3
expected)` are raising diagnostics (ValueError), so such a forecast is confirmed where the hand
gate sees its line run (issue 27, thirtieth session).

The case: vllm-omni 0.18.0's `AsyncOmniEngine` unpacks `launch_core_engines(...).__enter__()`
into three names; vLLM 0.20.0's context manager yields four (the checker found it; the line sits
in `try: ... except Exception: ...; raise`, which the same session stopped taking for a guard,
see test_gate_reraising_handlers.py). The same class is in the tuned truth eight times more
(vllm-omni's runners at 0.16.0 and 0.20.0, vllm-gaudi's `_maybe_pad_hidden_states` at 0.24.0), all
checker forecasts until now. A handler that catches ValueError (or Exception) and ends quietly
guards it; one for TypeError does not. Synthetic trees; no upstream code is copied.
"""

from __future__ import annotations

import pytest

from gatekit import tree
from overlay.gate.checker import Diagnostic, new_diagnostics
from overlay.gate.engines import PluginShapes, combine, raised_by, raises
from overlay.gate.findings import Finding
from overlay.gate.source import DirSource

from test_gate_confirmed_forecasts import _gate_marks, _loaded_plugin, _release  # noqa: E402


def _checker(head: str, line: int, path: str = "vllm_ascend/engine.py") -> Finding:
    return Finding("type", f"type:misc:{head}", path, line, "", 0, head, severity="warning",
                   reason="new with core 2.0: the checker alone (a forecast)", engine="checker", confidence="medium")


@pytest.mark.parametrize("head", ["Too many values to unpack (3 expected, 4 provided)",
                                  "Need more than 2 values to unpack (3 expected)",
                                  "Need more than 1 value to unpack (2 expected)"])
def test_an_unpack_of_the_wrong_size_raises_value_error(head):
    f = _checker(head, 3)
    assert raises(f) and raised_by(f) == frozenset({"ValueError"})


def test_other_misc_diagnostics_still_need_not_raise():
    assert not raises(_checker('Unpacking a string is disallowed', 3))
    assert not raises(_checker("Incompatible types in assignment", 3))


TRIES = """
    def start(launch):
        try:
            a, b, c = launch()  # 3: except ValueError catches it
        except ValueError:
            pass
        try:
            a, b, c = launch()  # 7: except TypeError does not
        except TypeError:
            pass
        try:
            a, b, c = launch()  # 11: except Exception does
        except Exception:
            return None
        try:
            a, b, c = launch()  # 15: a handler that raises again does not
        except ValueError:
            raise
"""


def test_a_try_guards_an_unpack_only_where_a_handler_catches_value_error_and_ends_quietly(tmp_path):
    plugin = tree(tmp_path / "p", {"vllm_ascend/engine.py": TRIES})
    path = "vllm_ascend/engine.py"
    shapes = PluginShapes(DirSource(plugin), [path])
    runs = {(path, n): (True, "called at vllm_ascend/engine.py:20") for n in (3, 7, 11, 15)}
    found = {}
    for line in (3, 7, 11, 15):
        [out] = combine([], [_checker("Too many values to unpack (3 expected, 4 provided)", line, path)], shapes,
                        frozenset({"vllm_ascend", "vllm_ascend.engine"}), runs=runs)
        found[line] = out.severity
    assert found == {3: "info", 7: "error", 11: "info", 15: "error"}, found
    # a diagnostic that need not raise keeps the old rule: ValueError alone guards nothing for it
    assert shapes.guard_at(path, 3, None) is None


LAUNCH_OLD = """
    from contextlib import contextmanager
    from typing import Iterator


    @contextmanager
    def launch_core_engines(n: int) -> Iterator[tuple[int, int, int]]:
        yield n, n, n
"""

LAUNCH_NEW = LAUNCH_OLD.replace("tuple[int, int, int]", "tuple[int, int, int, int]").replace(
    "yield n, n, n", "yield n, n, n, n")

ENGINE = """
    import logging

    from vllm.v1.engine.utils import launch_core_engines

    logger = logging.getLogger(__name__)


    def start_stage(n: int) -> int:
        try:
            launch_cm = launch_core_engines(n)
            manager, coordinator, addresses = launch_cm.__enter__()  # UNPACK: four now
            return manager
        except Exception:
            logger.error("stage %s failed", n)
            raise


    STARTED = start_stage(1)
"""


def test_the_unpack_of_a_changed_return_is_a_confirmed_forecast_end_to_end(run, tmp_path):
    core = {"vllm/v1/__init__.py": "", "vllm/v1/engine/__init__.py": ""}
    old = _release(tmp_path, "1.0", {**core, "vllm/v1/engine/utils.py": LAUNCH_OLD})
    new = _release(tmp_path, "2.0", {**core, "vllm/v1/engine/utils.py": LAUNCH_NEW})
    plugin = _loaded_plugin(tmp_path, "engine", ENGINE)
    _, doc, marks = _gate_marks(run, tmp_path, old, new, plugin, "vllm_ascend/engine.py")
    unpacks = [f for f in marks.get("UNPACK", []) if "values to unpack" in f["message"]]
    assert [f["severity"] for f in unpacks] == ["error"], doc["findings"]
    assert "confirmed" in unpacks[0]["reason"]
    # the same plugin against the core it was written for: nothing new, nothing to report
    _, same, _ = _gate_marks(run, tmp_path, old, old, plugin, "vllm_ascend/engine.py")
    assert not [f for f in same["findings"] if "values to unpack" in f["message"]]


def _diag(message: str, line: int = 10) -> Diagnostic:
    return Diagnostic("vllm_omni/runner.py", line, "misc", message)


def test_a_site_that_mismatched_with_the_declared_core_is_no_new_unpack():
    """vllm-omni 0.27.0rc1's NPU runner unpacks `_bookkeeping_sync` into six names; the
    checker reads core's method (7 values at 0.27.0, 8 at 0.28.0) where the object runs
    vllm-ascend's override: a site that mismatched before is not new for its count."""
    before = [_diag("Too many values to unpack (6 expected, 7 provided)", 1048)]
    assert new_diagnostics([_diag("Too many values to unpack (6 expected, 8 provided)", 1050)], before) == []
    assert new_diagnostics([_diag("Need more than 5 values to unpack (6 expected)")], before) == []
    # another target count is another site; no mismatch before is a new one
    assert len(new_diagnostics([_diag("Too many values to unpack (3 expected, 8 provided)")], before)) == 1
    assert len(new_diagnostics([_diag("Too many values to unpack (6 expected, 8 provided)")], [])) == 1
    # the message reported is the checker's own
    [d] = new_diagnostics([_diag("Too many values to unpack (6 expected, 8 provided)")], [])
    assert d.message == "Too many values to unpack (6 expected, 8 provided)"
