"""Calls through a name the plugin bound to a core object: a capture.

- At module (or function) level, `_orig = Pool.free` / `_orig = mod.f` / `_Orig = mod.Cls`
  (the scanner's `Scope.aliases`): `_orig(self, blocks)` calls what the name held when it
  was bound, core's own object, also when the plugin replaces `Pool.free` afterwards.
- In a class body, `_core_free = Pool.free` called as `Cls._core_free(self, ...)`,
  `cls._core_free(...)` (the function itself: the receiver is passed by hand) or
  `self._core_free(...)` (bound to the instance: `self` is the first argument).

Pure: the expression a call's callee stands for; the resolver looks it up in core.
"""

from __future__ import annotations

import ast

from overlay.gate.index import dotted
from overlay.gate.scan import CallUse


def aliased(use: CallUse) -> tuple[str, bool]:
    """(the callee expression with a captured head name replaced by what it was bound to,
    whether it was)."""
    head, dot, rest = use.func.partition(".")
    if use.aliases and head in use.aliases and head not in use.local:
        return use.aliases[head] + dot + rest, True
    return use.func, False


def class_capture(use: CallUse) -> tuple[str, bool] | None:
    """(the dotted expression, called through an instance) for `X.name(...)` where `X` is
    `self`, `cls` or the enclosing plugin class and that class's body binds `name` exactly
    once, to a dotted expression, and defines nothing else of that name."""
    node = use.cls
    head, _, attr = use.func.partition(".")
    if node is None or not attr or "." in attr or head not in ("self", "cls", node.name):
        return None
    value = None
    count = 0
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == attr:
            return None
        assigned: ast.expr | None
        if isinstance(stmt, ast.Assign):
            targets, assigned = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            targets, assigned = [stmt.target], stmt.value
        else:
            continue
        for t in targets:
            if isinstance(t, ast.Name) and t.id == attr:
                count += 1
                value = assigned
            elif not isinstance(t, (ast.Name, ast.Attribute, ast.Subscript)):
                return None  # a tuple target may bind it too: not followed
    if count != 1 or not isinstance(value, ast.Attribute):
        return None
    expr = dotted(value)
    if expr is None or expr.split(".")[0] in ("self", "cls", node.name):
        return None
    return expr, head == "self"
