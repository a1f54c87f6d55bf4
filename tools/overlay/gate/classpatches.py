"""Class-body patches: a plugin class whose namespace a patcher copies onto a core class or
module (arctic-inference's `class XPatch(ArcticPatch[Scheduler])`, then `XPatch.apply_patch()`).

A patcher is a plugin class that is subscripted with its target (it defines
`__class_getitem__`) and has a method that walks the class's own namespace
(`for name, attr in cls.__dict__.items():` or `vars(cls).items()`) and stores each entry
on another object with `setattr(target, name, ...)`. A class built on `Patcher[T]`, where
`T` is core's, whose patcher method the plugin calls (`XPatch.apply_patch()`), replaces
every name its body binds on `T`: each becomes a replacement, exactly as if the plugin had
written `T.name = ...` when it loads. So a patch method is checked against core's callers
and its `self` against `T`, and a name the body adds (`_SP = None` on a module) is the
plugin's own.
"""

from __future__ import annotations

import ast
from typing import Callable

from overlay.gate.index import ModuleInfo, TreeIndex, dotted, qualify
from overlay.gate.scan import PluginClass, PluginFacts, Replacement

# dunders the patcher's walk of `cls.__dict__` meets on every class; none is a patch
_CLASS_MACHINERY = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                              "__parameters__", "__orig_bases__", "__annotations__", "__firstlineno__",
                              "__static_attributes__", "__classcell__"})


def _namespace_walk(loop: ast.For) -> str | None:
    """The name the loop binds to each key of a class's own namespace: `for name, attr in
    cls.__dict__.items()`, `for name in vars(cls)`, ...; None for any other loop."""
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys") \
            and not it.args:
        it = it.func.value
    own = (isinstance(it, ast.Attribute) and it.attr == "__dict__") or \
        (isinstance(it, ast.Call) and dotted(it.func) == "vars" and len(it.args) == 1)
    if not own:
        return None
    target = loop.target
    if isinstance(target, ast.Tuple) and target.elts:
        target = target.elts[0]
    return target.id if isinstance(target, ast.Name) else None


def patcher_method(node: ast.ClassDef) -> str | None:
    """The method of a patcher class that copies a subclass's namespace onto its target, or
    None when the class is no patcher."""
    methods = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not any(m.name == "__class_getitem__" for m in methods):
        return None
    for m in methods:
        for loop in ast.walk(m):
            if not isinstance(loop, ast.For):
                continue
            key = _namespace_walk(loop)
            if key is None:
                continue
            for call in ast.walk(loop):
                if isinstance(call, ast.Call) and dotted(call.func) == "setattr" and len(call.args) == 3 \
                        and isinstance(call.args[1], ast.Name) and call.args[1].id == key:
                    return m.name
    return None


def _patcher(world: TreeIndex, pc: PluginClass, base: ast.expr) -> str | None:
    """The patcher method of the class `base` names (a plugin class), or None."""
    name = dotted(base)
    if name is None:
        return None
    if name in pc.scope.defs and isinstance(pc.scope.defs[name], ast.ClassDef):
        return patcher_method(pc.scope.defs[name])  # type: ignore[arg-type]
    target = qualify(pc.module, name, pc.scope.local_imports)
    found = world.resolve_dotted(target) if target else None
    if found is None or found[0] != "class":
        return None
    _, info = found[1]  # type: ignore[misc]
    return patcher_method(info.node) if info.node is not None else None


def patch_target(world: TreeIndex, pc: PluginClass, is_core: Callable[[str], bool]) -> tuple[str, str] | None:
    """(core target, patcher method) of a class built on `Patcher[T]`, or None."""
    for base in pc.node.bases:
        if not isinstance(base, ast.Subscript):
            continue
        method = _patcher(world, pc, base.value)
        if method is None:
            continue
        name = dotted(base.slice)
        target = qualify(pc.module, name, pc.scope.local_imports) if name else None
        if target is not None and is_core(target):
            return target, method
    return None


def _bound_names(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, value) pairs a class-body statement binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(stmt.name, ast.Name(id=stmt.name, ctx=ast.Load()))]
    if isinstance(stmt, ast.Assign):
        return [(t.id, stmt.value) for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
        return [(stmt.target.id, stmt.value)]
    return []


def patched_names(node: ast.ClassDef) -> list[str]:
    """The names a patch class's body binds, which its patcher sets on the target."""
    return [name for stmt in node.body for name, _ in _bound_names(stmt) if name not in _CLASS_MACHINERY]


def _applied(facts: PluginFacts, cls: str, method: str) -> bool:
    """Does the plugin call `Cls.method()` anywhere (`XPatch.apply_patch()`)?"""
    want = f"{cls}.{method}"
    return any(u.func == want or u.func.endswith("." + want) for u in facts.calls)


def replacements(facts: PluginFacts, world: TreeIndex, is_core: Callable[[str], bool]) -> list[Replacement]:
    """The replacements every applied class-body patch makes on its core target."""
    out: list[Replacement] = []
    for pc in facts.classes:
        if pc.ctx.type_checking:
            continue
        found = patch_target(world, pc, is_core)
        if found is None or not _applied(facts, pc.node.name, found[1]):
            continue
        target, method = found
        facts.patch_targets[id(pc.node)] = target
        body = pc.scope.child(pc.node.body)  # the body's defs, for the replacement's value
        mod: ModuleInfo = pc.module
        for stmt in pc.node.body:
            for name, value in _bound_names(stmt):
                if name in _CLASS_MACHINERY:
                    continue
                out.append(Replacement(pc.path, stmt.lineno, target, name, value, mod, body, pc.ctx,
                                       in_class=False, at_import=True,
                                       installed_by=f"{pc.node.name}.{method}()"))
    return out
