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

from overlay.gate.conditions import DECIDED, TYPE_CHECKING, UNDECIDABLE, Env, Verdict, evaluate
from overlay.gate.index import ModuleInfo, absolute_module, dotted, qualify
from overlay.gate.signature import CallShape, call_shape

# Compound statements whose header expressions run where the statement sits.
HEADERS = {ast.If: ("test",), ast.While: ("test",), ast.For: ("iter",), ast.AsyncFor: ("iter",)}

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
    mod_name: str = ""  # the plugin module that imports it


@dataclass
class Scope:
    """Names visible at a point: function-local imports and defs, innermost last."""

    local_imports: dict[str, str] = field(default_factory=dict)
    defs: dict[str, ast.AST] = field(default_factory=dict)
    strings: dict[str, str] = field(default_factory=dict)
    # local names bound once to a dotted expression (`cls = outputs_mod.ModelRunnerOutput`)
    aliases: dict[str, str] = field(default_factory=dict)

    def child(self, body: list[ast.stmt]) -> "Scope":
        new = Scope(dict(self.local_imports), dict(self.defs), dict(self.strings), dict(self.aliases))
        for stmt in _flat(body):
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Attribute) and dotted(stmt.value)):
                new.aliases[stmt.targets[0].id] = dotted(stmt.value)  # type: ignore[assignment]
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


@dataclass(frozen=True)
class CallUse:
    """A plugin call of something that may be a class: `Name(...)`, `mod.Name(...)`."""

    path: str
    line: int
    func: str  # dotted expression as written
    module: ModuleInfo
    local: dict
    shape: CallShape
    ctx: Context


@dataclass(frozen=True)
class AttrRead:
    """`a.b.c` read by code that runs when the module is imported (module level or a
    class body): an attribute core lacks fails the import itself."""

    path: str
    line: int
    expr: str
    module: ModuleInfo
    ctx: Context


@dataclass
class PluginFacts:
    imports: list[ImportUse] = field(default_factory=list)
    calls: list[CallUse] = field(default_factory=list)
    attr_reads: list[AttrRead] = field(default_factory=list)
    # plugin module -> plugin modules it imports or names in a dotted string (any scope,
    # only the branches that run): the edges of the start-up import graph
    refs: dict[str, set[str]] = field(default_factory=dict)
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
        if not ctx.type_checking:
            self.expressions(stmt, ctx, scope)
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self.facts.imported_tops[alias.name.split(".")[0]] += 1
                if scope is not self.top:
                    scope.local_imports[alias.asname or alias.name.split(".")[0]] = \
                        alias.name if alias.asname else alias.name.split(".")[0]
                if self.is_core(alias.name):
                    self.record(ImportUse(self.mod.path, stmt.lineno, alias.name, None, ctx, self.mod.name))
                elif not ctx.type_checking:
                    self.ref(alias.name)
        elif isinstance(stmt, ast.ImportFrom):
            src = absolute_module(self.mod.name, self.mod.is_package, stmt.level, stmt.module)
            if stmt.level == 0 and src:
                self.facts.imported_tops[src.split(".")[0]] += len(stmt.names)
            for alias in stmt.names:
                if scope is not self.top and alias.name != "*":
                    scope.local_imports[alias.asname or alias.name] = f"{src}.{alias.name}"
                if self.is_core(src):
                    self.record(ImportUse(self.mod.path, stmt.lineno, src,
                                          None if alias.name == "*" else alias.name, ctx, self.mod.name))
                elif src and not ctx.type_checking:
                    self.ref(src if alias.name == "*" else f"{src}.{alias.name}", src)
        elif isinstance(stmt, ast.If):
            v = self.instance_flag(stmt.test, scope) or evaluate(stmt.test, self.mod, scope.local_imports, self.env)
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
            self.class_stack.append(stmt)
            self.block(stmt.body, ctx, scope, in_class=True)
            self.class_stack.pop()
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

    def instance_flag(self, test: ast.expr, scope: Scope) -> Verdict | None:
        """`if self.flag:` where the class turns the flag off under a condition on core
        that holds (`if self.use_v2 and vllm_version_is("0.24.0"): self.use_v2 = False`):
        decided False. None when that is not the case."""
        negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        inner = test.operand if negate else test  # type: ignore[attr-defined]
        name = dotted(inner)
        if not self.class_stack or not name or not name.startswith("self.") or name.count(".") != 1:
            return None
        key = (id(self.class_stack[-1]), name)
        if key not in self.flag_memo:
            self.flag_memo[key] = self._forced_off(self.class_stack[-1], name, scope)
        if not self.flag_memo[key]:
            return None
        return Verdict(DECIDED, negate)

    def _forced_off(self, cls: ast.ClassDef, name: str, scope: Scope) -> bool:
        offs = self.off_switches.get(id(cls))
        if offs is None:  # every `if ...: self.x = False` in the class, walked once
            offs = {}
            for node in ast.walk(cls):
                if isinstance(node, ast.If):
                    for b in node.body:
                        if (isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(b.value, ast.Constant)
                                and b.value.value is False and dotted(b.targets[0])):
                            offs.setdefault(dotted(b.targets[0]), []).append(node)
            self.off_switches[id(cls)] = offs
        for node in offs.get(name, []):
            parts = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) \
                else [node.test]
            rest = [p for p in parts if dotted(p) != name]
            verdicts = [evaluate(p, self.mod, scope.local_imports, self.env) for p in rest]
            if rest and all(v.kind == DECIDED and v.value for v in verdicts):
                return True
        return False

    def ref(self, name: str, fallback: str | None = None) -> None:
        """An edge of the start-up graph to the plugin module `name` (or, when `name`
        is not a module, `fallback` or its longest module prefix)."""
        if name.split(".")[0] not in self.env.world.packages:
            return
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            candidate = ".".join(parts[:cut])
            if self.env.world.module(candidate) is not None:
                self.facts.refs.setdefault(self.mod.name, set()).add(candidate)
                return
            if candidate == fallback:
                return

    def expressions(self, stmt: ast.stmt, ctx: Context, scope: Scope) -> None:
        """Calls, dotted strings and import-time attribute reads in the expressions this
        statement evaluates where it stands (not in nested function bodies)."""
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            roots: list[ast.AST] = [i.context_expr for i in stmt.items]
        elif type(stmt) in HEADERS:
            roots = [getattr(stmt, f) for f in HEADERS[type(stmt)]]
        else:
            roots = [stmt]
        import_time = scope is self.top
        stack = list(roots)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if "." in text and len(text) < 200 and text.split(".")[0] in self.env.world.packages \
                        and all(p.isidentifier() for p in text.replace(":", ".").split(".")):
                    self.ref(text.replace(":", "."))
                continue
            if isinstance(node, ast.Call):
                func = dotted(node.func)
                if func is not None and func.split(".")[-1][:1].isupper():
                    self.facts.calls.append(CallUse(self.mod.path, node.lineno, func, self.mod,
                                                    scope.local_imports, call_shape(node), ctx))
            if import_time and isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                expr = dotted(node)
                if expr is not None:
                    self.facts.attr_reads.append(AttrRead(self.mod.path, node.lineno, expr, self.mod, ctx))
                    continue  # the longest chain only: its prefixes are checked with it
            stack.extend(ast.iter_child_nodes(node))

    def record(self, use: ImportUse) -> None:
        if not use.ctx.type_checking:
            self.facts.imports.append(use)

    def replacement(self, owner_expr: ast.expr, attr: str, value: ast.expr, line: int,
                    ctx: Context, scope: Scope, in_class: bool) -> None:
        if ctx.type_checking:
            return
        name = dotted(owner_expr)
        if name is None:
            return
        head, dot, rest = name.partition(".")
        if head in scope.aliases and head not in scope.local_imports:
            name = scope.aliases[head] + dot + rest
        elif head in ("self", "cls"):
            return
        owner = qualify(self.mod, name, scope.local_imports)
        if owner is None or not self.is_core(owner):
            return
        self.facts.replacements.append(Replacement(self.mod.path, line, owner, attr, value,
                                                   self.mod, scope, ctx, in_class))

    def run(self) -> None:
        assert self.mod.tree is not None
        self.top = Scope()
        self.class_stack: list[ast.ClassDef] = []
        self.flag_memo: dict = {}
        self.off_switches: dict = {}
        self.block(self.mod.tree.body, Context(), self.top)


def scan_module(mod: ModuleInfo, env: Env, facts: PluginFacts) -> None:
    if mod.tree is None:
        return
    facts.files += 1
    _Scanner(mod, env, facts).run()
