"""Core calls through a local alias: `attn_cls = LatentAttention if use_mla else Attention`
(or an `if`/`else` binding it, or `fn = sample`) then `attn_cls(...)` in the same function.

The name search (`callers.module_sites`) finds calls by the name written before the `(`,
so a call through such a name is invisible to it. A local name counts as an alias when
every binding of it in the function is a plain assignment (`x = ...`, `x: T = ...`) whose
value is a name or attribute chain, or a conditional expression of such (`A if c else B`,
nested), and every one of those resolves in the module to a definition (a class or
function of either tree): then `x(...)` is a call of each of them. A name also bound any
other way (a parameter, a loop, `with ... as`, an unpacking, an import, `global`), or to a
value the module cannot resolve (`x = other_param`), is not followed: it may hold something
else. Pure functions of a module's syntax tree.
"""

from __future__ import annotations

import ast
import re

from overlay.gate.callers import Callers, Site, function_scopes, module_name
from overlay.gate.index import ModuleInfo, dotted, qualify
from overlay.gate.signature import call_shape, from_ast

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own_nodes(func: ast.AST):
    """The nodes of a function's own body (nested functions, lambdas, classes excluded)."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def _choices(value: ast.expr) -> list[str] | None:
    """The dotted names a value may be: `A`, `m.A`, `A if c else B`; None for anything else."""
    if isinstance(value, ast.IfExp):
        body, orelse = _choices(value.body), _choices(value.orelse)
        return body + orelse if body is not None and orelse is not None else None
    name = dotted(value)
    return [name] if name else None


def local_aliases(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[str]]:
    """name -> the dotted expressions it may hold, for each local name of `func` bound only
    by plain assignments of names, attribute chains or conditionals of them."""
    params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    params |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a is not None}
    found: dict[str, list[str]] = {}
    open_names: set[str] = set(params)
    plain: set[int] = set()  # the target nodes of the plain assignments (read below)
    for node in _own_nodes(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            plain.add(id(node.targets[0]))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
            plain.add(id(node.target))
        else:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and id(node) not in plain:
                open_names.add(node.id)  # bound some other way (unpacking, loop, with, walrus)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                open_names.update(node.names)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                open_names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                open_names.add(node.name)
            continue
        choices = _choices(value)
        if choices is None:
            open_names.add(target)
        else:
            found.setdefault(target, []).extend(choices)
    return {name: choices for name, choices in found.items() if name not in open_names}


def alias_calls(mod: ModuleInfo, qualname: str, plugin: bool, resolves, scopes: list | None = None) -> list[Site]:
    """Calls in `mod` through a local alias that may hold `qualname` (an absolute dotted
    name): `resolves(dotted)` says whether an absolute name is a definition the gate knows
    (every choice of the alias must be one)."""
    if mod.tree is None:
        return []
    short = qualname.rsplit(".", 1)[-1]
    out: list[Site] = []
    for _, _, cls, node in scopes if scopes is not None else function_scopes(mod.tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        aliases = {}
        for name, choices in local_aliases(node).items():
            if not any(c.rsplit(".", 1)[-1] == short for c in choices):
                continue
            targets = [qualify(mod, c) for c in choices]
            if qualname in targets and all(t is not None and resolves(t) for t in targets):
                aliases[name] = targets
        if not aliases:
            continue
        sig = from_ast(node)
        for n in _own_nodes(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in aliases:
                out.append(Site(mod.name, mod.path, cls, node.name, "", call_shape(n, sig), plugin))
    out.sort(key=lambda s: s.shape.line)
    return out


def _may_alias(data: bytes, name: str) -> bool:
    """Can the file's text alias `name` at all: does it name it other than right before a
    call (`name(`, `name[`)? A cheap test before any function is walked."""
    raw = name.encode()
    return raw in data and re.search(rb"\b%s\b(?!\s*[(\[])" % re.escape(raw), data) is not None


def _resolver(callers: Callers):
    def resolves(target: str) -> bool:
        return any(index.resolve_dotted(target) is not None for _, _, index, _ in callers.trees)
    return resolves


def module_alias_calls(callers: Callers, mod: ModuleInfo, attr: str) -> list[Site]:
    """Calls through local aliases of `mod`'s global `attr` inside core module `mod` (what a
    replacement of that module attribute reaches, as its bare-name calls do)."""
    if not _may_alias(callers.text(mod.path, 0), attr):
        return []
    return alias_calls(mod, f"{mod.name}.{attr}", False, _resolver(callers))


def constructor_calls(callers: Callers, mod: ModuleInfo, cls_name: str, limit: int, *,
                      world=None, aliases: bool = True) -> list[Site] | None:
    """Core calls that build core class `mod.cls_name`: `Cls(...)`, `m.Cls(...)` where the
    name resolves to it, and calls through local aliases of it, in the core files naming the
    class. None when more than `limit` core files name it (too common to search). With
    `world`, a name reaching the class through re-exports (`from ...layers.fused_moe import
    FusedMoE`) counts too; `aliases=False` leaves out the calls through local aliases."""
    qualname = f"{mod.name}.{cls_name}"
    files = callers.mentions(cls_name)
    if len(files) > limit:
        return None
    index = callers.trees[0][2]
    resolves = _resolver(callers)
    out: list[Site] = []
    for path in files:
        fmod = index.module(module_name(path))
        if fmod is None or fmod.path != path or fmod.tree is None:
            continue
        for s in callers.core_sites(path, cls_name):
            spelled = f"{s.receiver}.{cls_name}" if s.receiver else cls_name
            if s.receiver in ("self", "cls", "super", "?"):
                continue
            target = qualify(fmod, spelled)
            if target != qualname and not (world is not None and target is not None
                                           and _is_class(world.resolve_dotted(target), mod.name, cls_name)):
                continue
            out.append(s)
        if aliases and _may_alias(callers.text(path, 0), cls_name):
            out += alias_calls(fmod, qualname, False, resolves)
    return out


def _is_class(found, module: str, name: str) -> bool:
    return found is not None and found[0] == "class" and found[1][0].name == module and found[1][1].name == name
