"""A core call that a flag pinned by the plugin's class keeps from running on its object.

Core guards some calls with a flag of the object it calls: vLLM 0.24–0.34's
`RoutedExperts.forward_modular` asserts `not self.quant_method.is_monolithic` and then calls
`self.quant_method.apply(layer=..., topk_weights=..., ...)`; `forward_monolithic` asserts the
flag and calls `apply_monolithic`. Where the plugin's class answers the flag with a constant
that fails the guard (vllm-rbln's MoE methods define `is_monolithic` as a property returning
True, and run `apply` from their own runner), core's call never runs with the plugin's
object, so it is no contract for the plugin's method.

A guard is a plain flag of the call's own receiver (`recv.flag`, `not recv.flag`, an operand
of `and`/`or`) in an enclosing `if`/`while`, an earlier operand, an earlier `if` that always
leaves, or an earlier `assert` of the call's function (guards.reads). A flag is pinned on the
plugin's class when the first class of its MRO that binds the name is a plugin class that
binds it as a constant: a class attribute (`is_monolithic = True`) or a property whose body
only returns a constant. Not pinned where the plugin stores an attribute of that name
anywhere (`x.flag = ...`), names it as a string in one of the chain's classes (`setattr`),
or a plugin subclass binds it again (the object may be one of those); a method that is not a
property is a bound method, truthy whatever it returns, and pins nothing here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from overlay.gate.guards import reads, strings
from overlay.gate.index import ClassInfo, ModuleInfo
from overlay.gate.signature import dotted

_UNKNOWN = object()  # bound, but not to a constant the gate can read


@dataclass(frozen=True)
class Pin:
    value: object  # the constant the plugin's object answers
    owner: str  # the plugin class binding it
    where: str  # path:line of the binding


def _returned_constant(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> object:
    """The constant a property returns when its body does nothing else (a docstring
    aside); `_UNKNOWN` otherwise, and for a function that is not a property."""
    if isinstance(fn, ast.AsyncFunctionDef) or not any(
            (dotted(d) or "").split(".")[-1] in ("property", "cached_property") for d in fn.decorator_list):
        return _UNKNOWN
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) \
        and isinstance(fn.body[0].value, ast.Constant) and isinstance(fn.body[0].value.value, str) else fn.body
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Constant):
        return body[0].value.value
    return _UNKNOWN


def _binding(node: ast.ClassDef, name: str) -> tuple[object, int] | None:
    """How the class statement binds `name` (the last binding wins, as at run time):
    (constant or `_UNKNOWN`, line); None when it does not bind it. A binding under an `if`
    or a `try` of the class body is `_UNKNOWN`."""
    found: tuple[object, int] | None = None
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            found = (_returned_constant(stmt), stmt.lineno)
        elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found = (stmt.value.value if isinstance(stmt.value, ast.Constant) and len(stmt.targets) == 1
                     else _UNKNOWN, stmt.lineno)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            found = (stmt.value.value if isinstance(stmt.value, ast.Constant) else _UNKNOWN, stmt.lineno)
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Expr)) and any(
                isinstance(n, (ast.Name, ast.FunctionDef, ast.AsyncFunctionDef))
                and getattr(n, "id", getattr(n, "name", None)) == name for n in ast.walk(stmt)):
            found = (_UNKNOWN, stmt.lineno)
    return found


def pin_finder(chain: list[tuple[ModuleInfo, ClassInfo] | None], is_core: Callable[[str], bool], stored: set[str],
               bound_below: Callable[[str, str], bool]) -> Callable[[str], Pin | None]:
    """flag -> its Pin where the plugin's class pins it (see the module's doc), else None;
    memoised. `chain`: the class and its bases in MRO order, None for one the gate cannot
    read (a binding past it is no pin); `stored`: every attribute name the plugin stores on
    any object; `bound_below(cls, flag)`: a plugin subclass of `cls` binds `flag`."""
    memo: dict[str, Pin | None] = {}

    def pin(flag: str) -> Pin | None:
        if flag not in memo:
            memo[flag] = _pin(chain, is_core, stored, bound_below, flag)
        return memo[flag]

    return pin


def _pin(chain, is_core, stored, bound_below, flag: str) -> Pin | None:
    if not chain or chain[0] is None or is_core(chain[0][0].name) or flag in stored:
        return None
    for link in chain:
        if link is None:
            return None  # a base the gate cannot read may bind it first
        mod, cls = link
        found = _binding(cls.node, flag) if cls.node is not None else (
            (_UNKNOWN, cls.line) if cls.declares(flag) else None)
        if found is None:
            continue
        value, line = found
        if is_core(mod.name) or value is _UNKNOWN or bound_below(chain[0][1].name, flag) \
                or any(flag in strings(c.node) for m, c in filter(None, chain)
                       if not is_core(m.name) and c.node is not None):
            return None
        return Pin(value, cls.name, f"{mod.path}:{line}")
    return None


def _guard_flags(fn: ast.AST, recv: str, meth: str, line: int) -> list[tuple]:
    """The flag guards (guards.Guard with a flag) of each call `recv.meth(...)` at `line`."""
    return [tuple(g for g in guards if g.flag is not None)
            for attr, at, called, guards in reads(fn, recv, flow=True) if attr == meth and called and at == line]


def blocked(fn: ast.AST | None, recv: str, meth: str, line: int, pin: Callable[[str], Pin | None]) -> str | None:
    """Why core's call `recv.meth(...)` at `line` of `fn` never runs with the plugin's
    object: a flag guard of it fails on the flag's pinned value (`pin`, see pin_finder).
    None when it may run or the call is not found there."""
    if fn is None or recv in ("", "?", "super", "cls"):
        return None
    whys = []
    for guards in _guard_flags(fn, recv, meth, line):
        failing = [(g, p) for g in guards if (p := pin(g.flag)) is not None and bool(p.value) != g.value]
        whys.append(None if not failing else
                    f"core runs it only under `{failing[0][0].text}`, and {failing[0][1].owner}.{failing[0][0].flag} "
                    f"is always {failing[0][1].value!r} ({failing[0][1].where})")
    return whys[0] if whys and all(whys) else None
