"""Execution probes (overlay.testing.probes): a probe at a line runs exactly when the
statement holding it runs, and never moves a line."""

from __future__ import annotations

import textwrap

from hypothesis import given, strategies as st

from overlay.testing import probes

SOURCE = textwrap.dedent("""\
    import os


    def f(x, flag):
        if flag and (
                x > 1):
            y = g(x,
                  2)
        for i in range(
                x):
            pass
        with open(
                os.devnull) as fh:
            pass
        return x


    def g(a, b):
        return a + b


    @staticmethod
    def h(a=os.sep):
        return a
    """)


def run_probed(source: str, wanted: dict[str, int], call: str) -> tuple[list[str], object]:
    text, made = probes.instrument(source, wanted)
    hits: list[str] = []
    namespace = {"__builtins__": {**__builtins__, probes.PROBE_BUILTIN: hits.append}} \
        if isinstance(__builtins__, dict) else {"__builtins__": {**vars(__builtins__), probes.PROBE_BUILTIN: hits.append}}
    exec(compile(text, "probed.py", "exec"), namespace)
    result = eval(call, namespace)
    return hits, (made, result)


def test_a_probe_fires_when_its_statement_runs_and_not_otherwise():
    wanted = {"call": 8, "if": 6, "for": 10, "with": 13, "ret": 19}
    hits, (made, result) = run_probed(SOURCE, wanted, "f(3, True)")
    assert result == 3 and all(p.placed for p in made)
    assert hits.count("if") == 1 and hits.count("call") == 1 and hits.count("for") == 1
    assert hits.count("with") == 1 and hits.count("ret") == 1  # g's body ran once
    hits, _ = run_probed(SOURCE, wanted, "f(3, False)")
    assert "call" not in hits and "ret" not in hits and "if" in hits


def _statement_lines(text: str) -> list[tuple[str, int, int]]:
    import ast
    return sorted((type(n).__name__, n.lineno, n.end_lineno) for n in ast.walk(ast.parse(text))
                  if isinstance(n, ast.stmt) and not _is_probe(n))


def _is_probe(node) -> bool:
    import ast
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == probes.PROBE_BUILTIN)


def test_line_numbers_never_move():
    text, _ = probes.instrument(SOURCE, {"a": 7, "b": 10, "c": 13, "d": 19})
    assert len(text.splitlines()) == len(SOURCE.splitlines())
    assert _statement_lines(text) == _statement_lines(SOURCE)


def test_a_line_no_statement_can_carry_is_not_probed_never_not_reached():
    text, made = probes.instrument(SOURCE, {"decorator": 22, "default": 23, "blank": 3})
    assert {p.id: p.placed for p in made} == {"decorator": False, "default": False, "blank": False}
    assert text == SOURCE


def test_a_file_that_does_not_parse_is_left_alone():
    assert probes.instrument("def f(:\n", {"x": 1}) is None


@given(st.lists(st.integers(min_value=1, max_value=len(SOURCE.splitlines())), max_size=8))
def test_any_set_of_lines_keeps_the_file_valid_and_its_meaning(lines):
    wanted = {f"p{i}": line for i, line in enumerate(lines)}
    text, made = probes.instrument(SOURCE, wanted)
    assert len(made) == len(wanted)
    hits, (_, result) = run_probed(SOURCE, wanted, "(f(3, True), f(0, False), g(1, 2))")
    assert result == (3, 0, 3)
    assert set(hits) <= set(wanted)
