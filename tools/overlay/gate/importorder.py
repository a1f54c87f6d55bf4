"""The order in which the plugin's start-up runs module-level code, for the import-order
binding check (bindings.py).

From each entry point the walk does what Python's import does, statement by statement:
`import a.b.c` runs `a`, `a.b`, `a.b.c` (each once, plugin or core), `from m import x`
runs `m` and `m.x` when that is a module, and the entry point's function body and the
plugin functions module-level code calls (`apply_patches()`) run where they are called.
It records events at the statements the caller asks about (`marks`: module -> lines) and
the start of every module, in order.

An event is `certain` when nothing before it in its chain could have gone otherwise: no
undecided condition (a core `if current_platform...`, a plugin test the gate cannot
settle), no `try:` body, no handler. The walk does take the branches it cannot decide,
so an uncertain event is a place where something may happen, never a place where it
certainly does. Functions not called at module level (a worker's `__init__`) are not
walked: what they import happens later, at a time this walk does not place.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from overlay.gate.conditions import DECIDED, TYPE_CHECKING, evaluate
from overlay.gate.index import ModuleInfo, TreeIndex, absolute_module, dotted, qualify

MAX_CALL_DEPTH = 4


@dataclass(frozen=True)
class Event:
    kind: str  # "start" (a module begins to run) | "mark" (a statement asked about runs)
    module: str
    line: int
    certain: bool
    chain: tuple[str, ...]  # the modules being imported, outermost first


@dataclass
class Walk:
    """One entry point's start-up, from a fresh interpreter."""

    root: str
    events: list[Event] = field(default_factory=list)

    def first(self, kind: str, module: str, line: int = 0, certain_only: bool = False) -> int | None:
        for i, e in enumerate(self.events):
            if e.kind == kind and e.module == module and (kind == "start" or e.line == line) \
                    and (e.certain or not certain_only):
                return i
        return None


class _Done(Exception):
    """Raised inside a walk that has seen every statement it was asked to stop after."""


class _Walker:
    def __init__(self, world: TreeIndex, env, is_plugin, marks: dict[str, set[int]], root: str) -> None:
        self.world = world
        self.env = env
        self.is_plugin = is_plugin
        self.marks = marks
        self.walk = Walk(root)
        self.done: set[str] = set()
        self.stack: list[str] = []
        self.calls: list[int] = []  # ids of function bodies being walked (no recursion)
        self.stop: set[tuple[str, int]] = set()  # the walk may end once these statements ran

    def event(self, kind: str, module: str, line: int, certain: bool) -> None:
        self.walk.events.append(Event(kind, module, line, certain, tuple(self.stack)))
        if kind == "mark" and (module, line) in self.stop:
            self.stop.discard((module, line))
            if not self.stop:
                raise _Done  # every statement asked about has run: what follows does not matter

    def run_module(self, name: str, certain: bool) -> None:
        parts = name.split(".")
        for cut in range(1, len(parts) + 1):
            sub = ".".join(parts[:cut])
            if sub in self.done:
                continue
            mod = self.world.module(sub)
            if mod is None or mod.tree is None:
                return
            self.done.add(sub)
            self.stack.append(sub)
            self.event("start", sub, 0, certain)
            self.body(mod, mod.tree.body, certain, {})
            self.stack.pop()

    def body(self, mod: ModuleInfo, stmts: list[ast.stmt], certain: bool, local: dict) -> None:
        for stmt in stmts:
            if stmt.lineno in self.marks.get(mod.name, ()):
                self.event("mark", mod.name, stmt.lineno, certain)
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    self.run_module(alias.name, certain)
            elif isinstance(stmt, ast.ImportFrom):
                src = absolute_module(mod.name, mod.is_package, stmt.level, stmt.module)
                if src:
                    self.run_module(src, certain)
                    for alias in stmt.names:
                        if alias.name != "*" and self.world.module(f"{src}.{alias.name}") is not None:
                            self.run_module(f"{src}.{alias.name}", certain)
            elif isinstance(stmt, ast.If):
                v = evaluate(stmt.test, mod, local, self.env)
                if v.kind == TYPE_CHECKING:
                    self.body(mod, stmt.orelse, certain, local)
                elif v.kind == DECIDED:
                    self.body(mod, stmt.body if v.value else stmt.orelse, certain, local)
                else:
                    self.calls_in(mod, stmt.test, certain, local)
                    self.body(mod, stmt.body, False, local)
                    self.body(mod, stmt.orelse, False, local)
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                self.body(mod, stmt.body, False, local)  # it may stop at any statement
                for h in stmt.handlers:  # type: ignore[attr-defined]
                    self.body(mod, h.body, False, local)
                self.body(mod, stmt.orelse, False, local)  # type: ignore[attr-defined]
                self.body(mod, stmt.finalbody, certain, local)  # type: ignore[attr-defined]
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    self.calls_in(mod, item.context_expr, certain, local)
                self.body(mod, stmt.body, False, local)  # a context manager may swallow an error
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                self.body(mod, stmt.body, False, local)
                self.body(mod, stmt.orelse, False, local)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if isinstance(stmt, ast.ClassDef):
                    self.body(mod, stmt.body, certain, local)  # a class body runs where it stands
            elif isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)):
                if stmt.value is not None:
                    self.calls_in(mod, stmt.value, certain, local)

    def calls_in(self, mod: ModuleInfo, expr: ast.expr, certain: bool, local: dict) -> None:
        """Plugin functions called in `expr` run here: their bodies are walked where they stand.
        Core code is not searched: what it calls at import time is its own business, and a
        call from core into the plugin at import time is not a thing core does."""
        if not self.is_plugin(mod.name):
            return
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                name = dotted(node.func)
                if name:
                    self.call(mod, name, certain, local)

    def call(self, mod: ModuleInfo, name: str, certain: bool, local: dict) -> None:
        target = qualify(mod, name, local)
        if target is None or not self.is_plugin(target) or len(self.calls) >= MAX_CALL_DEPTH:
            return
        obj = self.world.resolve_dotted(target)
        if obj is None or obj[0] != "func":
            return
        fmod, sig = obj[1]  # type: ignore[misc]
        node = next((s for s in fmod.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.lineno == sig.line), None) if fmod.tree is not None else None
        if node is None or id(node) in self.calls:
            return
        self.calls.append(id(node))
        self.body(fmod, node.body, certain, _local_imports(fmod, node))
        self.calls.pop()


def _local_imports(mod: ModuleInfo, fn: ast.AST) -> dict[str, str]:
    """Names the function's own imports bind (for resolving the calls in its body)."""
    out: dict[str, str] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Import):
            for a in n.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(n, ast.ImportFrom):
            src = absolute_module(mod.name, mod.is_package, n.level, n.module)
            for a in n.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{src}.{a.name}"
    return out


def startup_walks(world: TreeIndex, env, is_plugin, roots: dict[str, str],
                  marks: dict[str, set[int]]) -> list[Walk]:
    """One walk per entry point module (`roots`: module -> "group: module:attr"), each
    from a fresh interpreter: the order core loads its plugins in is not known."""
    walks = []
    for root, label in sorted(roots.items()):
        w = _Walker(world, env, is_plugin, marks, root)
        w.run_module(root, True)
        attr = label.rpartition(":")[2] if label.count(":") >= 2 else ""
        mod = world.module(root)
        if attr and mod is not None and attr in mod.functions:
            w.call(mod, attr, True, {})
        walks.append(w.walk)
    return walks


def module_walk(world: TreeIndex, env, is_plugin, module: str, marks: dict[str, set[int]]) -> Walk:
    """What importing `module` itself runs, in order, up to the last of its own statements
    in `marks` (the walk stops there), whatever imported it: its parent
    packages are taken as imported already (they run first; what they import can only
    have happened earlier), so every event inside is certain as far as the module's own
    statements go. A module it imports that was imported before runs nothing again: a
    binding seen inside that import was made then, earlier still."""
    w = _Walker(world, env, is_plugin, marks, module)
    parts = module.split(".")
    w.done.update(".".join(parts[:i]) for i in range(1, len(parts)))
    w.stop = {(module, line) for line in marks.get(module, ())}
    try:
        w.run_module(module, True)
    except _Done:
        pass  # the module's own statements asked about have all run
    return w.walk
