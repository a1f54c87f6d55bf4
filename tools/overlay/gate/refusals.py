"""Registry names the plugin's platform refuses: an allow-list checked whenever one is chosen.

tpu-inference's platform accepts only its own KV connectors:

    kv_transfer_config = vllm_config.kv_transfer_config
    if kv_transfer_config is not None:
        allowed = ("TPUConnector", "TPUConnectorHMA", "TPUOffloadConnector")
        if kv_transfer_config.kv_connector not in allowed:
            raise ValueError(...)

Core registers many connectors by name (`KVConnectorFactory.register_connector("Name",
"module", "Class")`). With this plugin only the allowed ones can be chosen, so a core class
registered under another name of that registry is not picked by the registration. The
allow-list guards a registry it shares names with (core's entries, or the plugin's own
registrations through the same function), or one whose module reads the attribute it
checks (`Refusals.refusing`).

An allow-list counts only where it is proven to run whenever a name is chosen:
- it sits in a method of the plugin's platform class that core calls by name;
- it is `if <value> not in <strings>:` with a `raise` in its body and no `return`, the strings a literal
  tuple, list or set, or a name bound once, to one, in the method or its module;
- between the method's body and it there are only the bodies of `if <x> is not None:`
  tests where `<x>` is `<value>`'s object or one it is read from (no name is chosen while
  the configuration is absent), and no `return` comes before it in the method.
Anything else is not proven and refuses nothing: a guard under another condition (vllm-ascend's
AFD-only connector check), or one that calls a function instead of raising (vllm-rbln's
`reject()`, which may only warn).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from overlay.gate.signature import dotted


@dataclass(frozen=True)
class AllowList:
    allowed: frozenset[str]
    where: str  # "path:line" of the guard
    read: str | None  # the attribute the guard compares (`kv_connector`), None for a bare name


@dataclass(frozen=True)
class Refusals:
    allow_lists: tuple[AllowList, ...] = ()
    # the plugin's own registrations: callee (`KVConnectorFactory.register_connector`) ->
    # the first string of each call to it (tpu-inference registers "TPUConnector" so)
    registered: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def refusing(self, name: str, registry: Callable[[], frozenset[str]], callee: str | None,
                 module_reads: Callable[[], frozenset[str]]) -> AllowList | None:
        """The allow-list that refuses `name`, registered in a registry that also holds
        `registry()` (and, for a call, whatever the plugin registers through `callee`), in a
        module that reads the attributes `module_reads()` gives; or None (at once, reading
        nothing, where the platform has no allow-list). An allow-list
        guards a registry only where it names that registry's entries, or where the
        registry's module reads the attribute the allow-list checks (core's connector
        factory reads `kv_transfer_config.kv_connector`; tpu-inference's connectors are
        named by module path, never registered)."""
        if not self.allow_lists:
            return None
        names = registry() | (self.registered.get(callee, frozenset()) if callee else frozenset())
        return next((a for a in self.allow_lists if name not in a.allowed
                     and (a.allowed & names or a.read is not None and a.read in module_reads())), None)


def read(classes: Iterable[tuple[str, ast.Module, ast.ClassDef]], platform: frozenset[str],
         core_calls: Callable[[str], bool], plugin_trees: Iterable[ast.Module]) -> Refusals:
    """The allow-lists of the plugin's platform classes, and the names the plugin registers.
    `classes`: (path, module tree, class) of each plugin class; `platform`: the platform
    classes' names; `core_calls(name)`: does core call a function or method of that name?"""
    found: list[AllowList] = []
    for path, tree, cls in classes:
        if cls.name not in platform:
            continue
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and core_calls(fn.name):
                found.extend(AllowList(allowed, f"{path}:{line}", read) for allowed, line, read in _guards(tree, fn))
    if not found:
        return Refusals()
    registered: dict[str, set[str]] = {}
    for tree in plugin_trees:
        for node in ast.walk(tree):
            name = first_string(node) if isinstance(node, ast.Call) else None
            if name is not None and dotted(node.func):  # type: ignore[attr-defined]
                registered.setdefault(dotted(node.func), set()).add(name)  # type: ignore[attr-defined]
    return Refusals(tuple(found), {k: frozenset(v) for k, v in registered.items()})


def attribute_reads(tree: ast.Module) -> frozenset[str]:
    """Every attribute name a module reads (`x.kv_connector` -> "kv_connector")."""
    return frozenset(n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load))


def first_string(call: ast.Call) -> str | None:
    """The first string constant among a call's positional arguments."""
    return next((a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)), None)


def _guards(tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterable[tuple[frozenset[str], int, str | None]]:
    returns = sorted(n.lineno for n in ast.walk(fn) if isinstance(n, ast.Return))
    stack: list[tuple[list[ast.stmt], tuple[str, ...]]] = [(fn.body, ())]
    while stack:
        body, present = stack.pop()
        for stmt in body:
            if not isinstance(stmt, ast.If):
                continue
            checked = _not_none(stmt.test)
            if checked is not None:
                stack.append((stmt.body, (*present, checked)))
                continue
            # `x is not None and x.name not in allowed` reads as the nested form
            tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And) \
                else [stmt.test]
            guards = [g for g in map(_not_in, tests) if g is not None]
            checks = [c for c in map(_not_none, tests) if c is not None]
            if len(guards) != 1 or len(guards) + len(checks) != len(tests) \
                    or not any(isinstance(s, ast.Raise) for s in stmt.body) \
                    or any(isinstance(n, ast.Return) for s in stmt.body for n in ast.walk(s)):
                continue
            value, strings = guards[0]
            allowed = _strings(strings, fn, tree)
            if allowed and all(value == p or value.startswith(p + ".") for p in (*present, *checks)) \
                    and not any(line < stmt.lineno for line in returns):
                yield allowed, stmt.lineno, value.rsplit(".", 1)[-1] if "." in value else None


def _not_none(test: ast.expr) -> str | None:
    """`x is not None` -> "x" (a dotted name), else None."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return dotted(test.left)
    return None


def _not_in(test: ast.expr) -> tuple[str, ast.expr] | None:
    """`value not in strings` -> (dotted value, strings), else None."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn):
        value = dotted(test.left)
        return (value, test.comparators[0]) if value else None
    return None


def _literal(node: ast.AST | None) -> frozenset[str] | None:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts \
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return frozenset(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _strings(node: ast.expr, fn: ast.AST, tree: ast.Module) -> frozenset[str] | None:
    """The strings a literal or a name bound exactly once to a literal holds, else None.
    The name is looked up in the method first, then at the module's top level."""
    found = _literal(node)
    if found is not None or not isinstance(node, ast.Name):
        return found
    for scope in (list(ast.walk(fn)), tree.body):
        binds = [n for n in scope if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                                                    ast.With, ast.NamedExpr, ast.Import, ast.ImportFrom))
                 and node.id in _bound(n)]
        if binds:
            one = binds[0]
            return _literal(one.value) if len(binds) == 1 and isinstance(one, (ast.Assign, ast.AnnAssign)) else None
    return None


def _bound(node: ast.AST) -> set[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = (node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
               if not isinstance(node, ast.With) else [i.optional_vars for i in node.items])
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}
