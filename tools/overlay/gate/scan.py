"""Scanning the plugin: what it imports from core, which core classes it subclasses,
and which core attributes it replaces, each with the condition it runs under.

The walk keeps track of function-local imports (so `setattr(alias, ...)` inside a
context manager resolves) and of the function that encloses each statement (so
a replacement `module.Name = factory` finds the nested `def factory`).
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field

from overlay.gate.conditions import DECIDED, TYPE_CHECKING, UNDECIDABLE, Env, evaluate
from overlay.gate.index import ModuleInfo, absolute_module, dotted, qualify

IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True)
class Context:
    """The conditions a statement runs under."""

    guard: tuple[int, str] | None = None  # (try id, branch) of a try/except ImportError
    undecidable: str = ""  # why an enclosing core condition could not be decided
    type_checking: bool = False


@dataclass(frozen=True)
class ImportUse:
    path: str
    line: int
    module: str  # absolute module imported from (or imported)
    name: str | None  # None for `import module`
    ctx: Context


@dataclass
class Scope:
    """Names visible at a point: function-local imports and defs, innermost last."""

    local_imports: dict[str, str] = field(default_factory=dict)
    defs: dict[str, ast.AST] = field(default_factory=dict)
    strings: dict[str, str] = field(default_factory=dict)

    def child(self, body: list[ast.stmt]) -> "Scope":
        new = Scope(dict(self.local_imports), dict(self.defs), dict(self.strings))
        for stmt in _flat(body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                new.defs[stmt.name] = stmt
            elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                  and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Constant)
                  and isinstance(stmt.value.value, str)):
                new.strings[stmt.targets[0].id] = stmt.value.value
        return new


@dataclass(frozen=True)
class Replacement:
    path: str
    line: int
    owner: str  # absolute dotted name of the core module/class whose attribute is replaced
    attr: str
    value: ast.expr
    module: ModuleInfo  # the plugin module it happens in
    scope: Scope
    ctx: Context
    in_class: bool = False  # assigned inside a class body (not a replacement of core)


@dataclass(frozen=True)
class PluginClass:
    path: str
    line: int
    module: ModuleInfo
    node: ast.ClassDef
    scope: Scope
    ctx: Context


@dataclass
class PluginFacts:
    imports: list[ImportUse] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    classes: list[PluginClass] = field(default_factory=list)
    files: int = 0
    try_lines: dict[int, tuple[str, int]] = field(default_factory=dict)
    # branches of each guarded try that can stand in for a failed import (a handler
    # that re-raises cannot)
    try_branches: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # top-level package of every absolute import (any condition, any scope), counted
    # by imported name: tells which package the plugin expects core to provide
    imported_tops: Counter = field(default_factory=Counter)


def _flat(body: list[ast.stmt]):
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                yield from _flat(getattr(stmt, part, []))
            for h in getattr(stmt, "handlers", []):
                yield from _flat(h.body)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((dotted(t) or "").split(".")[-1] in IMPORT_ERRORS for t in types)


class _Scanner:
    def __init__(self, mod: ModuleInfo, env: Env, facts: PluginFacts) -> None:
        self.mod = mod
        self.env = env
        self.facts = facts

    def is_core(self, name: str) -> bool:
        return self.env.is_core(name)

    def block(self, body: list[ast.stmt], ctx: Context, scope: Scope, in_class: bool = False) -> None:
        for stmt in body:
            self.stmt(stmt, ctx, scope, in_class)

    def stmt(self, stmt: ast.stmt, ctx: Context, scope: Scope, in_class: bool) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self.facts.imported_tops[alias.name.split(".")[0]] += 1
                if scope is not self.top:
                    scope.local_imports[alias.asname or alias.name.split(".")[0]] = \
                        alias.name if alias.asname else alias.name.split(".")[0]
                if self.is_core(alias.name):
                    self.record(ImportUse(self.mod.path, stmt.lineno, alias.name, None, ctx))
        elif isinstance(stmt, ast.ImportFrom):
            src = absolute_module(self.mod.name, self.mod.is_package, stmt.level, stmt.module)
            if stmt.level == 0 and src:
                self.facts.imported_tops[src.split(".")[0]] += len(stmt.names)
            for alias in stmt.names:
                if scope is not self.top and alias.name != "*":
                    scope.local_imports[alias.asname or alias.name] = f"{src}.{alias.name}"
                if self.is_core(src):
                    self.record(ImportUse(self.mod.path, stmt.lineno, src,
                                          None if alias.name == "*" else alias.name, ctx))
        elif isinstance(stmt, ast.If):
            v = evaluate(stmt.test, self.mod, scope.local_imports, self.env)
            if v.kind == TYPE_CHECKING:
                self.block(stmt.body, Context(ctx.guard, ctx.undecidable, True), scope, in_class)
                self.block(stmt.orelse, ctx, scope, in_class)
            elif v.kind == DECIDED:
                self.block(stmt.body if v.value else stmt.orelse, ctx, scope, in_class)
            elif v.kind == UNDECIDABLE:
                inner = Context(ctx.guard, ctx.undecidable or v.why, ctx.type_checking)
                self.block(stmt.body, inner, scope, in_class)
                self.block(stmt.orelse, inner, scope, in_class)
            else:
                self.block(stmt.body, ctx, scope, in_class)
                self.block(stmt.orelse, ctx, scope, in_class)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            guarded = any(_catches_import_error(h) for h in stmt.handlers)
            if guarded:
                tid = len(self.facts.try_lines)
                self.facts.try_lines[tid] = (self.mod.path, stmt.lineno)
                self.block(stmt.body, Context((tid, "body"), ctx.undecidable, ctx.type_checking),
                           scope, in_class)
                self.facts.try_branches[tid] = ("body",) + tuple(
                    f"except{i}" for i, h in enumerate(stmt.handlers)
                    if _catches_import_error(h) and not any(isinstance(x, ast.Raise) for x in h.body))
                for i, h in enumerate(stmt.handlers):
                    branch = Context((tid, f"except{i}"), ctx.undecidable, ctx.type_checking) \
                        if _catches_import_error(h) else ctx
                    self.block(h.body, branch, scope, in_class)
            else:
                self.block(stmt.body, ctx, scope, in_class)
                for h in stmt.handlers:
                    self.block(h.body, ctx, scope, in_class)
            self.block(stmt.orelse, ctx, scope, in_class)
            self.block(stmt.finalbody, ctx, scope, in_class)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.block(stmt.body, ctx, scope.child(stmt.body))
        elif isinstance(stmt, ast.ClassDef):
            if not ctx.type_checking:
                self.facts.classes.append(PluginClass(self.mod.path, stmt.lineno, self.mod, stmt,
                                                      scope, ctx))
            self.block(stmt.body, ctx, scope, in_class=True)
        elif isinstance(stmt, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
            self.block(stmt.body, ctx, scope, in_class)
            self.block(getattr(stmt, "orelse", []), ctx, scope, in_class)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Attribute):
                    self.replacement(t.value, t.attr, stmt.value, stmt.lineno, ctx, scope, in_class)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if dotted(call.func) == "setattr" and len(call.args) == 3:
                attr_node = call.args[1]
                attr = None
                if isinstance(attr_node, ast.Constant) and isinstance(attr_node.value, str):
                    attr = attr_node.value
                elif isinstance(attr_node, ast.Name):
                    attr = scope.strings.get(attr_node.id)
                if attr is not None:
                    self.replacement(call.args[0], attr, call.args[2], stmt.lineno, ctx, scope, in_class)

    def record(self, use: ImportUse) -> None:
        if not use.ctx.type_checking:
            self.facts.imports.append(use)

    def replacement(self, owner_expr: ast.expr, attr: str, value: ast.expr, line: int,
                    ctx: Context, scope: Scope, in_class: bool) -> None:
        if ctx.type_checking:
            return
        name = dotted(owner_expr)
        if name is None or name.split(".")[0] in ("self", "cls"):
            return
        owner = qualify(self.mod, name, scope.local_imports)
        if owner is None or not self.is_core(owner):
            return
        self.facts.replacements.append(Replacement(self.mod.path, line, owner, attr, value,
                                                   self.mod, scope, ctx, in_class))

    def run(self) -> None:
        assert self.mod.tree is not None
        self.top = Scope()
        self.block(self.mod.tree.body, Context(), self.top)


def scan_module(mod: ModuleInfo, env: Env, facts: PluginFacts) -> None:
    if mod.tree is None:
        return
    facts.files += 1
    _Scanner(mod, env, facts).run()
