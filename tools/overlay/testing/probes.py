"""Execution probes: did a test run reach a given line of the plugin?

The forward matrix asks, for each gate error, whether the plugin's unit tests (or the
smoke) reached its site at that release. A tracer would slow every call of every test; a
probe costs nothing where it is not. `instrument` (pure) rewrites one source file so that
the statement holding each wanted line first calls `__overlay_probe__(ID)`, a builtin the
test run installs (`PROBE_BUILTIN`). Line numbers never change: the call is inserted on the
statement's own first line (`ID; stmt`), or, for a compound statement whose header holds
the line (`if`, `while`, `for`, `with`), around the header's expression
(`(__overlay_probe__(ID) or (expr))`, which evaluates to the expression). So tracebacks
still point where the gate's findings do. A line no statement can carry a probe for (a
decorator, a default argument, a class body's header) is reported as not probed: unknown,
never "not reached".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

PROBE_BUILTIN = "__overlay_probe__"

_SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Raise, ast.Assert,
           ast.Delete, ast.Pass, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Break,
           ast.Continue)


@dataclass(frozen=True)
class Probe:
    id: str  # the caller's name for the line (e.g. "vllm_ascend/x.py:12")
    line: int
    placed: bool  # False: no statement could carry it (unknown whether reached)


def _statements(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            yield node


def _header_expr(stmt: ast.stmt, line: int) -> ast.expr | None:
    """The header expression of a compound statement that spans `line`, if any."""
    if isinstance(stmt, (ast.If, ast.While)):
        candidates = [stmt.test]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        candidates = [stmt.iter]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        candidates = [item.context_expr for item in stmt.items]
    else:
        return None
    for expr in candidates:
        if expr.lineno <= line <= (expr.end_lineno or expr.lineno):
            return expr
    return None


def _innermost(tree: ast.AST, line: int) -> ast.stmt | None:
    best = None
    for stmt in _statements(tree):
        end = stmt.end_lineno or stmt.lineno
        if stmt.lineno <= line <= end:
            if best is None or (end - stmt.lineno) < ((best.end_lineno or best.lineno) - best.lineno):
                best = stmt
    return best


def instrument(source: str, wanted: dict[str, int]) -> tuple[str, list[Probe]] | None:
    """`source` with a probe for each `wanted` id -> line; None if it does not parse.

    Edits are made from the end of the file backwards, so each one's offsets stay valid.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (line, col, text): inserted before that column
    probes = []
    for pid, line in wanted.items():
        stmt = _innermost(tree, line)
        call = f"{PROBE_BUILTIN}({pid!r})"
        if stmt is None:
            probes.append(Probe(pid, line, False))
            continue
        expr = _header_expr(stmt, line)
        if expr is not None:
            edits.append((expr.end_lineno or expr.lineno, expr.end_col_offset or 0, "))"))
            edits.append((expr.lineno, expr.col_offset, f"({call} or ("))
            probes.append(Probe(pid, line, True))
        elif isinstance(stmt, _SIMPLE):
            edits.append((stmt.lineno, stmt.col_offset, f"{call}; "))
            probes.append(Probe(pid, line, True))
        else:
            probes.append(Probe(pid, line, False))
    # ast offsets are UTF-8 byte columns: edit bytes of each line
    encoded = [ln.encode("utf-8") for ln in lines]
    for line, col, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        raw = encoded[line - 1]
        encoded[line - 1] = raw[:col] + text.encode("utf-8") + raw[col:]
    out = b"".join(encoded).decode("utf-8")
    try:
        ast.parse(out)
    except SyntaxError:  # never ship a file the probe broke: leave it unprobed
        return source, [Probe(p.id, p.line, False) for p in probes]
    return out, probes
