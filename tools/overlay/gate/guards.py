"""The tests of one object's flags that decide whether a read or a call of it runs.

`reads(fn, recv)` lists every `recv.x` read in a function (`recv` the method's `self`, or a
dotted receiver such as `self.quant_method`), each with the tests of `recv`'s own state it
runs under: an enclosing `if`/`while`/conditional expression and, with `flow`, a plain flag
(`recv.flag`, `not recv.flag`) in an earlier operand of the same `and`/`or`, in the test of
an earlier `if` of the same block that always leaves (`if not recv.flag: return`), in an
earlier `assert` of the same block (`assert not recv.flag`: what follows runs only where it
held), or in the test of an enclosing `if`/`while`. Pure functions of the syntax tree.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overlay.gate.signature import dotted


def _is(node: ast.expr, recv: str) -> bool:
    """Does `node` spell the receiver (`self`, `self.quant_method`)?"""
    if isinstance(node, ast.Name):
        return node.id == recv
    return isinstance(node, ast.Attribute) and "." in recv and dotted(node) == recv


def strings(node: ast.AST) -> set[str]:
    """Every string constant under `node`: a name it may test or set through `getattr`,
    `hasattr` or `setattr`."""
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def state_test(test: ast.expr, recv: str) -> str | None:
    """The first `recv.attr` a condition reads (`if self.use_x:`), else None."""
    for n in ast.walk(test):
        if isinstance(n, ast.Attribute) and _is(n.value, recv):
            return f"{recv}.{n.attr}"
    return None


@dataclass(frozen=True)
class Guard:
    """A test of the object's own state that a read runs under. `flag` None: an enclosing
    `if`/`while`/conditional expression that reads `text` anywhere in its test, which counts
    as it is. Otherwise a plain flag (`self.flag`, `not self.flag`, an operand of `and`/`or`)
    whose value `value` the read needs, from an earlier operand, an early exit or an assert
    (`flow`): what it proves depends on what the object's flag is (selfstate's `_holds`,
    pinnedflags' `blocked`)."""

    text: str
    flag: str | None = None
    value: bool | None = None


def implied(test: ast.expr, recv: str, value: bool) -> tuple[str, bool] | None:
    """(flag, its value) that `test` evaluating to `value` implies, for a plain flag read
    (`recv.flag`, `not ...`, an operand of an `and` that is true or an `or` that is false);
    None when it implies none."""
    if isinstance(test, ast.Attribute) and _is(test.value, recv):
        return test.attr, value
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return implied(test.operand, recv, not value)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And if value else ast.Or):
        return next((found for v in test.values if (found := implied(v, recv, value)) is not None), None)
    return None


def flow_guard(test: ast.expr, recv: str, value: bool) -> tuple[Guard, ...]:
    found = implied(test, recv, value)
    return (Guard(f"{'' if found[1] else 'not '}{recv}.{found[0]}", found[0], found[1]),) if found else ()


def exits(body: list[ast.stmt]) -> bool:
    """Does the block always leave where it ends (`return`, `raise`, `continue`, `break`)?"""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def reraises(handler: ast.ExceptHandler) -> bool:
    """Does the handler raise again on every path (`except Exception: cleanup(); raise`, or
    `raise RuntimeError(...) from e`)? Then it guards nothing: the failure still leaves the
    `try`. Only a body whose last statement is a `raise`, with no `return`, `break` or
    `continue` before it that could leave the handler quietly (nested definitions aside)."""
    if not handler.body or not isinstance(handler.body[-1], ast.Raise):
        return False
    stack: list[ast.AST] = list(handler.body[:-1])
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Return, ast.Break, ast.Continue)):
            return False
        stack.extend(ast.iter_child_nodes(node))
    return True


def reads(fn, recv: str, flow: bool = False) -> list[tuple[str, int, bool, tuple[Guard, ...]]]:
    """(attribute, line, called, guards) of every `recv.attr` read in `fn` (nested functions
    too), in source order, with the guards described above. Walked with an explicit stack:
    a long expression chain (`a + a + ... + a`) nests deeper than Python's recursion limit."""
    called = {id(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}
    out: list[tuple[str, int, bool, tuple[Guard, ...]]] = []

    def block(stmts: list, guards: tuple[Guard, ...]) -> list[tuple[ast.AST, tuple[Guard, ...]]]:
        """Each statement with the guards it runs under: an earlier `if` that always
        leaves, or an earlier `assert`, guards what follows it."""
        tasks = []
        for stmt in stmts:
            tasks.append((stmt, guards))
            if flow and isinstance(stmt, ast.If) and not stmt.orelse and exits(stmt.body):
                guards = guards + flow_guard(stmt.test, recv, False)  # what follows runs when it fails
            elif flow and isinstance(stmt, ast.Assert):
                guards = guards + flow_guard(stmt.test, recv, True)  # what follows runs when it held
        return tasks

    def children(node: ast.AST, guards: tuple[Guard, ...]) -> list[tuple[ast.AST, tuple[Guard, ...]]]:
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            state = state_test(node.test, recv)
            inner = guards + ((Guard(state),) if state else ())
            body, orelse = (inner + flow_guard(node.test, recv, True), inner + flow_guard(node.test, recv, False)) \
                if flow else (inner, inner)
            if isinstance(node, ast.IfExp):
                return [(node.test, guards), (node.body, body), (node.orelse, orelse)]
            return [(node.test, guards), *block(node.body, body), *block(node.orelse, orelse)]
        if flow and isinstance(node, ast.BoolOp):
            tasks, inner = [], guards
            for value in node.values:  # a later operand runs only as the earlier ones decide
                tasks.append((value, inner))
                inner = inner + flow_guard(value, recv, isinstance(node.op, ast.And))
            return tasks
        tasks = []
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                tasks += block(value, guards)
            elif isinstance(value, list):
                tasks += [(child, guards) for child in value if isinstance(child, ast.AST)]
            elif isinstance(value, ast.AST):
                tasks.append((value, guards))
        return tasks

    stack: list[tuple[ast.AST, tuple[Guard, ...]]] = [(fn, ())]
    while stack:
        node, guards = stack.pop()
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _is(node.value, recv):
            out.append((node.attr, node.lineno, id(node) in called, guards))
        stack.extend(reversed(children(node, guards)))  # reversed: popped in source order
    return out
