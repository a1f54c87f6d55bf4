"""Which methods of a class call the same method of a base (`super().m(...)`,
`Base.m(self, ...)`): read by the override check (checks) and the dead-code pass (engine),
so neither imports the other for it."""

from __future__ import annotations

import ast

_SUPER_CALLS: dict[int, tuple[object, frozenset[str]]] = {}


def super_calls(node) -> frozenset[str]:
    """Methods of a class whose body calls the same method of a base (`super().m(...)`,
    `Base.m(self, ...)`): the core method still runs, through the override. Memoized
    per class node (asked for every plugin class and again for each of its bases)."""
    hit = _SUPER_CALLS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    found = frozenset(_super_calls(node))
    if len(_SUPER_CALLS) > 50000:
        _SUPER_CALLS.clear()
    _SUPER_CALLS[id(node)] = (node, found)
    return found


def _super_calls(node) -> set[str]:
    out = set()
    for stmt in node.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == stmt.name:
                recv = n.func.value
                if (isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super") \
                        or (isinstance(recv, (ast.Name, ast.Attribute)) and n.args
                            and isinstance(n.args[0], ast.Name) and n.args[0].id == "self"):
                    out.add(stmt.name)
    return out
