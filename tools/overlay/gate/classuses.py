"""Class uses of a core name that core defines as a plain function.

vLLM 0.24.0 turned `FusedMoE` from a class into a factory function. A plugin that subclasses
it raises TypeError when its module is imported; `isinstance(x, FusedMoE)` and
`case FusedMoE():` raise TypeError when they run. The import itself still resolves, so no
other check sees it. A decorated function may return a class (or be one, wrapped): only an
undecorated `def` is certain.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator

from overlay.gate.index import ModuleInfo, TreeIndex, absolute_module, dotted, qualify
from overlay.gate.scan import ImportUse, PluginFacts
from overlay.gate.signature import Signature


@dataclass(frozen=True)
class ClassUse:
    expr: str  # the dotted expression used as a class
    line: int
    how: str  # "subclassed at line 6 (class X)", ...


def plain_function(world: TreeIndex, target: str) -> tuple[ModuleInfo, Signature] | None:
    """Core's undecorated module-level `def` behind the dotted name, if that is what it is."""
    found = world.resolve_dotted(target)
    if found is None or found[0] != "func":
        return None
    mod, sig = found[1]  # type: ignore[misc]
    return None if sig.decorators else (mod, sig)


def _live(body: list[ast.stmt], decide: Callable[[ast.expr], bool | None]) -> Iterator[ast.AST]:
    """Every node of `body` outside the `if` branches the decider rules out (a version test
    for another core). Iterative: plugin files may nest deeper than the recursion limit."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If):
            taken = decide(node.test)
            kids: list[ast.AST] = [node.test]
            kids += node.body if taken is not False else []
            kids += node.orelse if taken is not True else []
        else:
            yield node
            kids = list(ast.iter_child_nodes(node))
        stack.extend(reversed(kids))


def class_uses(tree: ast.Module, decide: Callable[[ast.expr], bool | None]) -> list[ClassUse]:
    """Where the module uses a (dotted) name as a class: a base of a class statement, the
    second argument of isinstance/issubclass (or a member of its tuple), a class pattern."""
    uses: list[ClassUse] = []
    for node in _live(tree.body, decide):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if (expr := dotted(base)) is not None:
                    uses.append(ClassUse(expr, node.lineno, f"subclassed at line {node.lineno} (class {node.name})"))
        elif isinstance(node, ast.Call) and dotted(node.func) in ("isinstance", "issubclass") and len(node.args) == 2:
            second = node.args[1]
            for item in second.elts if isinstance(second, ast.Tuple) else [second]:
                if (expr := dotted(item)) is not None:
                    uses.append(ClassUse(expr, node.lineno, f"isinstance/issubclass at line {node.lineno}"))
        elif isinstance(node, ast.MatchClass) and (expr := dotted(node.cls)) is not None:
            uses.append(ClassUse(expr, node.lineno, f"class pattern at line {node.lineno}"))
    return uses


def _local_imports(tree: ast.Module, mod: ModuleInfo) -> dict[str, str]:
    """name -> absolute dotted target of every `from m import name [as alias]` in the
    module, at any depth (a function-local import binds the name where it is used)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = absolute_module(mod.name, mod.is_package, node.level, node.module)
            for alias in node.names:
                if alias.name != "*":
                    out.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")
    return out


def function_class_uses(facts: PluginFacts, world: TreeIndex, is_core: Callable[[str], bool]
                        ) -> list[tuple[ImportUse, bool, str, list[ClassUse], ModuleInfo, Signature]]:
    """(the live import the use rests on, whether it imports the name itself, the core
    target, every use of it, core's module and def) per plugin module and core plain
    function used as a class there. Modules without a live import are not read."""
    out = []
    by_module: dict[str, list[ImportUse]] = {}
    for use in facts.imports:
        by_module.setdefault(use.mod_name, []).append(use)
    for name in sorted(by_module):
        mod = world.module(name)
        if mod is None or mod.tree is None:
            continue
        decide = world.decide
        try:
            uses = class_uses(mod.tree, (lambda test, m=mod: decide(test, m)) if decide is not None
                              else (lambda test: None))
        except RecursionError:
            continue  # a test nested too deeply to decide: the scan notes such files
        if not uses:
            continue
        local = _local_imports(mod.tree, mod)
        grouped: dict[str, list[ClassUse]] = {}
        for use in uses:
            target = qualify(mod, use.expr, local)
            if target is not None and is_core(target):
                grouped.setdefault(target, []).append(use)
        for target, sites in grouped.items():
            found = plain_function(world, target)
            if found is None:
                continue
            # a name the module also assigns (`X = torch.nn.Module` after probing the import)
            # may hold something else where it is used: not proven
            if any(b.kind == "assign" for s in sites for b in mod.bindings.get(s.expr.split(".")[0], [])):
                continue
            head = sites[0].expr.split(".")[0]
            binding = None
            if "." not in sites[0].expr and head in local:
                module, _, imported = local[head].rpartition(".")
                binding = next((u for u in by_module[name] if u.module == module and u.name == imported), None)
            # a dotted use (`layer.FusedMoE`): the import of its module gives the conditions
            anchor = binding or next((u for u in by_module[name] if u.name is None and target.startswith(u.module + ".")),
                                     None)
            if anchor is not None:
                out.append((anchor, binding is not None, target, sites, found[0], found[1]))
    return out
