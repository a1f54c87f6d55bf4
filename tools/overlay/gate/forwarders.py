"""Plugin methods that only hand their arguments on to the next class in the method
resolution order: `def __init__(self, *args, **kwargs): super().__init__(*args, **kwargs)`.

A call through such a method reaches the core method below it with the very arguments
the caller passed, so the gate judges the call against that core method (read by the
call check for `super().m(...)` and inherited `self.m(...)`)."""

from __future__ import annotations

import ast

_MEMO: dict[tuple[int, str], tuple[object, bool]] = {}


def forwards(node: ast.ClassDef | None, meth: str) -> bool:
    """The class body defines `meth` once, as `(self, *a, **k)` with no other parameter,
    and its body calls `super().meth(*a, **k)` passing nothing else (memoized per class)."""
    if node is None:
        return False
    key = (id(node), meth)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    found = _forwards(node, meth)
    if len(_MEMO) > 50000:
        _MEMO.clear()
    _MEMO[key] = (node, found)
    return found


def _forwards(node: ast.ClassDef, meth: str) -> bool:
    defs = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == meth]
    if len(defs) != 1 or defs[0].decorator_list:
        return False
    a = defs[0].args
    if a.posonlyargs or len(a.args) != 1 or a.kwonlyargs or a.vararg is None or a.kwarg is None:
        return False
    star, dstar = a.vararg.arg, a.kwarg.arg
    for n in ast.walk(defs[0]):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == meth):
            continue
        recv = n.func.value
        if not (isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super"
                and not recv.args):
            continue
        if len(n.args) == 1 and isinstance(n.args[0], ast.Starred) and isinstance(n.args[0].value, ast.Name) \
                and n.args[0].value.id == star and len(n.keywords) == 1 and n.keywords[0].arg is None \
                and isinstance(n.keywords[0].value, ast.Name) and n.keywords[0].value.id == dstar:
            return True
    return False
