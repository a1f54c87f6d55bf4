"""A `try` whose handler raises again guards nothing (issue 27, thirtieth session).

`except Exception: cleanup(); raise` (vllm-omni 0.18.0's `AsyncOmniEngine` stage launch,
around `engine_manager, coordinator, addresses = launch_cm.__enter__()`) lets the failure out
of the `try` as it came. Both engines took any handler that names the exception for a guard:
the hand engine dropped a read of a field core no longer has, or a call core no longer
accepts, in such a body, and the checker's forecast there became info ("guarded by
try/except Exception"). Now a handler guards only where it can end without raising (a
`return`, `break` or `continue` in it, or a last statement other than `raise`, keeps it a
guard, as before). About a fifth of the plugins' handlers that catch `Exception`,
`AttributeError`, `TypeError` or `ValueError` raise again.

Synthetic trees; the shapes are the plugins', no upstream code is copied.
"""

from __future__ import annotations

import ast
import textwrap

import gatekit
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.gate.engines import PluginShapes, shape_of
from overlay.gate.guards import reraises

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": ""}

CONFIG = """
    from dataclasses import dataclass


    @dataclass
    class SchedulerConfig:
        max_num_seqs: int = 1
"""

PLUGIN = """
    import logging

    from vllm.v1.config import SchedulerConfig

    logger = logging.getLogger(__name__)


    def budget(cfg: SchedulerConfig) -> int:
        try:
            return cfg.max_model_len
        except {handler}
"""

RERAISING = {
    "bare": "Exception:\n            logger.error('no budget')\n            raise",
    "wrapped": "AttributeError as e:\n            raise RuntimeError('no budget') from e",
    "conditional_then_raise": "Exception:\n            if logger:\n                logger.error('x')\n            raise",
}
GUARDING = {
    "fallback": "AttributeError:\n            return 0",
    "returns_before_raise": "Exception:\n            if logger:\n                return 0\n            raise",
    "logs_only": "Exception:\n            logger.error('no budget')",
}


def _read_findings(tmp_path, handler: str) -> list[str]:
    plugin = {"vllm_ascend/budget.py": textwrap.dedent(PLUGIN).replace("{handler}", handler)}
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/v1/config.py": textwrap.dedent(CONFIG)}, plugin,
                                 ("vllm_ascend.budget",))
    return [f.severity for f in report.findings if f.symbol.endswith("SchedulerConfig.max_model_len")]


@pytest.mark.parametrize("case", sorted(RERAISING))
def test_a_read_under_a_handler_that_raises_again_is_judged(tmp_path, case):
    assert _read_findings(tmp_path, RERAISING[case]) == ["error"]


@pytest.mark.parametrize("case", sorted(GUARDING))
def test_a_handler_that_can_end_quietly_still_guards(tmp_path, case):
    assert _read_findings(tmp_path, GUARDING[case]) == []


CALLS = """
    from vllm.v1.engine import launch


    def start():
        try:
            launch(addresses=None, log_stats=False)
        except {handler}
"""


def _call_findings(tmp_path, handler: str) -> list[str]:
    core = "def launch(addresses):\n    return addresses\n"
    plugin = {"vllm_ascend/start.py": textwrap.dedent(CALLS).replace("{handler}", handler)}
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/v1/engine.py": core}, plugin, ("vllm_ascend.start",))
    return [f.severity for f in report.findings if f.kind == "call" and f.symbol.endswith("launch")]


def test_a_call_core_refuses_under_a_handler_that_raises_again_is_judged(tmp_path):
    assert _call_findings(tmp_path, "TypeError:\n            print('launch failed')\n            raise") == ["error"]
    assert _call_findings(tmp_path, "TypeError:\n            launch(None)") == []  # a fallback: guarded, as before


def test_the_checker_s_guard_skips_a_handler_that_raises_again():
    text = textwrap.dedent("""
        def f(x):
            try:
                x.gone()
            except Exception:
                cleanup()
                raise
            try:
                x.gone()
            except AttributeError:
                return None
    """)
    guarded = shape_of(text).guarded
    assert [(first, why) for first, _, why, _ in guarded] == [(9, "try/except AttributeError")]

    class Source:
        def read(self, path):
            return text.encode()

    shapes = PluginShapes(Source(), ["m.py"])  # type: ignore[arg-type]
    assert shapes.guard_at("m.py", 4, frozenset({"AttributeError"})) is None
    assert shapes.guard_at("m.py", 9, frozenset({"AttributeError"})) == "try/except AttributeError"


# ------------------------------------------------------------------ against Python's own run

STATEMENTS = ["pass", "log()", "if flag:\n    return 1", "if flag:\n    log()", "for i in range(2):\n    break",
              "while flag:\n    flag = False", "def inner():\n    return 1", "raise", "raise ValueError('x') from None",
              "if flag:\n    raise"]


@settings(max_examples=80, deadline=None)
@given(body=st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=4), flag=st.booleans())
def test_a_handler_said_to_raise_again_raises_whatever_its_flag(body, flag):
    handler_body = textwrap.indent("\n".join(body), "        ")
    source = (f"def run(flag):\n    try:\n        raise KeyError('k')\n    except KeyError:\n{handler_body}\n"
              "    return 'quiet'\n")
    handler = ast.parse(source).body[0].body[0].handlers[0]  # type: ignore[attr-defined]
    space: dict = {"log": lambda: None}
    exec(compile(source, "<generated>", "exec"), space)  # our own generated function
    try:
        space["run"](flag)
        raised = False
    except (KeyError, ValueError):
        raised = True
    if reraises(handler):
        assert raised  # never a false "it raises again": that would drop a real guard
    if body[-1].startswith("raise") and not any(s.startswith(("if flag:\n    return", "for ", "while ")) for s in body):
        assert reraises(handler)  # a last `raise` nothing can skip is seen
