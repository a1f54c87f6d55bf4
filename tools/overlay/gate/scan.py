"""Scanning the plugin: what it imports from core, which core classes it subclasses,
and which core attributes it replaces, each with the condition it runs under.

The walk keeps track of function-local imports (so `setattr(alias, ...)` inside a
context manager resolves) and of the function that encloses each statement (so
a replacement `module.Name = factory` finds the nested `def factory`).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field

from overlay.gate.conditions import (DECIDED, TYPE_CHECKING, UNDECIDABLE, Env, Verdict, evaluate, getattr_probe,
                                     successor_probe)
from overlay.gate.guards import reraises
from overlay.gate.index import ModuleInfo, absolute_module, dotted, qualify
from overlay.gate.runtimemod import bound, module_of
from overlay.gate.signature import LAUNCH_OPTIONS, CallShape, call_shape

# Compound statements whose header expressions run where the statement sits.
HEADERS = {ast.If: ("test",), ast.While: ("test",), ast.For: ("iter",), ast.AsyncFor: ("iter",)}

IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True)
class Context:
    """The conditions a statement runs under."""

    guard: tuple[int, str] | None = None  # (try id, branch) of a try/except ImportError
    undecidable: str = ""  # why an enclosing core condition could not be decided
    type_checking: bool = False
    # exceptions an enclosing `try:` in the same function catches (`Exception` and a
    # bare `except:` included): a TypeError or AttributeError there is handled
    catches: frozenset[str] = frozenset()
    # names an enclosing test probes as strings (`hasattr(x, "a")`, `"a" in
    # C.__dataclass_fields__`, `"a" in inspect.signature(f).parameters`, a helper
    # `supports("a")`), also after `if not probe: return`: a keyword or read of that name
    # there is the plugin's own feature test, not a break
    probed: frozenset[str] = frozenset()
    # the nearest enclosing `try` of the same function, by id: its body (`attempt`), or a
    # handler that catches TypeError (`fallback`: it runs only when the body raised one)
    attempt: tuple[str, int] | None = None  # (path, line) of that `try`
    fallback: tuple[str, int] | None = None
    # the try (by id) whose body this is, in the same function, when it catches ImportError:
    # a plugin module loaded here fails into that try's handlers, not into its importer
    loading_try: int | None = None

    def probes(self, test: ast.expr) -> "Context":
        names = _probed_names(test)
        return dataclasses.replace(self, probed=self.probed | names) if names else self

    def handles(self, exc: str) -> bool:
        return handles(self.catches, exc)


def handles(caught: frozenset[str], exc: str) -> bool:
    """Do handlers naming `caught` catch `exc` (by its name, `Exception` or a bare `except:`)?"""
    return bool(caught & {exc, "Exception", "BaseException"})


def _probed_names(test: ast.expr) -> frozenset[str]:
    """Identifier-like string literals in a condition: the names it probes."""
    return frozenset(n.value for n in ast.walk(test) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and n.value.isidentifier() and not n.value.startswith("__"))


@dataclass(frozen=True)
class ImportUse:
    path: str
    line: int
    module: str  # absolute module imported from (or imported)
    name: str | None  # None for `import module`
    ctx: Context
    mod_name: str = ""  # the plugin module that imports it
    func: str | None = None  # the module-level function it sits in, if any


@dataclass
class Scope:
    """Names visible at a point: function-local imports and defs, innermost last."""

    local_imports: dict[str, str] = field(default_factory=dict)
    defs: dict[str, ast.AST] = field(default_factory=dict)
    strings: dict[str, str] = field(default_factory=dict)
    # local names bound once to a dotted expression (`cls = outputs_mod.ModelRunnerOutput`)
    aliases: dict[str, str] = field(default_factory=dict)
    # keyword dictionaries built in this function and passed on as `**name`: their keys,
    # as far as the branches that run add them (`kw = {"a": 1}`, `kw["b"] = 2`,
    # `kw.update(c=3)`); None once the gate can no longer tell
    kwdicts: dict[str, list[str] | None] = field(default_factory=dict)
    # the keys such a dictionary gets only after a probe for that name: the plugin's
    # feature test decides them, so a call spreading it neither passes nor misses them
    kwguarded: dict[str, set[str]] = field(default_factory=dict)
    # in a method: local names bound once to `self` or to `cast(T, self)` (a cast returns its
    # argument at run time): `processor = cast(Any, self); processor.meth(...)` calls self's
    self_aliases: frozenset[str] = frozenset()
    # local names whose class is known: a parameter's annotation (`spec: KVCacheSpec`,
    # not reassigned in the function), narrowed under `if isinstance(spec, (A, B)):`
    types: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # local names bound once to a module obtained at run time (`m = sys.modules.get("a.b")`):
    # (callee as written, module name), see runtimemod.py
    modules: dict[str, tuple[str, str]] = field(default_factory=dict)
    # local names whose latest binding, in straight-line code of this block, is a feature
    # probe `getattr(obj, "name", None)`: name -> (obj, "name") (conditions.successor_probe)
    probes: dict[str, tuple[str, str]] = field(default_factory=dict)

    def child(self, body: list[ast.stmt]) -> "Scope":
        new = Scope(dict(self.local_imports), dict(self.defs), dict(self.strings), dict(self.aliases),
                    modules=dict(self.modules))
        runtime_module_bindings(new, body)
        for stmt in flat_statements(body):
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


def _stored_names(node: ast.AST) -> set[str]:
    """Every plain name `node` binds or deletes anywhere inside it."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _forget_stored(scope: "Scope", stmt: ast.stmt) -> None:
    """Drop the probes of every name `stmt` stores anywhere (its branches included)."""
    for name in _stored_names(stmt):
        scope.probes.pop(name, None)


def _note_probe(scope: "Scope", stmt: ast.stmt) -> None:
    """After `stmt` ran: `v = getattr(obj, "name", None)` makes `v` a probe; any other
    binding of a name, here or in a branch of `stmt`, ends its probe (a branch may have
    rebound it, so only straight-line bindings count)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scope.probes.pop(stmt.name, None)  # the statement binds its name; its body binds its own
        return
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        probe = getattr_probe(stmt.value)
        if probe is not None:
            scope.probes[stmt.targets[0].id] = probe
            return
    if scope.probes:
        _forget_stored(scope, stmt)


def runtime_module_bindings(scope: "Scope", body: list[ast.stmt]) -> None:
    """Record in `scope` the names this body binds exactly once, to a module obtained at
    run time (runtimemod.py); a name bound more than once here is not one."""
    counts: Counter = Counter()
    found: dict[str, tuple[str, str]] = {}
    for stmt in flat_statements(body):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    counts[t.id] += 1
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and stmt.value is not None:
                record = bound(stmt.value, scope.strings)
                if record is not None:
                    found[targets[0].id] = record
    for name, record in found.items():
        if counts[name] == 1:
            scope.modules[name] = record
        else:
            scope.modules.pop(name, None)


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
    at_import: bool = False  # runs when the module is imported (module level, not in a function)
    func_site: tuple[str, int] | None = None  # the enclosing function's (path, def line); None at module level
    installed_by: str = ""  # the call that installs a class-body patch (classpatches.py), when it is one
    end_line: int = 0  # the assigning statement's last line (`m.f = wrap(\n m.f)` reads m.f before it stores)

    @property
    def at_module_line(self) -> bool:
        """Made where its own line runs during the module's import (a class-body patch is
        made later, when its patcher is called)."""
        return self.at_import and not self.installed_by


def supplied_at_load(facts: "PluginFacts") -> set[str]:
    """`owner.attr` of every name the plugin sets on a core module or class when it loads
    (`mod.x = ours` at import, a class-body patch's `_SP = None`)."""
    return {f"{r.owner}.{r.attr}" for r in facts.replacements if not r.in_class and r.at_import}


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
    """A plugin call: `name(...)`, `mod.name(...)`, `Class.meth(...)`, `kernel[grid](...)`,
    `self.meth(...)`, `self.attr.meth(...)`, `super().meth(...)`."""

    path: str
    line: int
    func: str  # dotted expression as written (`super().m` for a super call)
    module: ModuleInfo
    local: dict
    shape: CallShape
    ctx: Context
    cls: ast.ClassDef | None = None  # the plugin class whose method it sits in
    method: str | None = None  # that method
    aliases: dict | None = None  # local names bound to a dotted expression (`orig = mod.f`)
    receiver_types: tuple[str, ...] = ()  # for `x.meth(...)`: the class(es) `x` is known to be
    written: str = ""  # the expression as written where `func` reads a local bound to self as `self`


@dataclass(frozen=True)
class AttrRead:
    """`a.b.c` read by code that runs when the module is imported (module level or a
    class body): an attribute core lacks fails the import itself."""

    path: str
    line: int
    expr: str
    module: ModuleInfo
    ctx: Context
    import_time: bool = True  # False: inside a function body (runs when it is called)
    local: dict | None = None  # function-local imports in scope
    # what the root name is known to be (Scope.types of the function), and the plugin class
    # whose method it sits in (for `self.x.y` reads)
    types: dict | None = None
    cls: ast.ClassDef | None = None
    # read from the class's own namespace (`vars(C)["a"]`, `C.__dict__["a"]`): a name only a
    # base defines is a KeyError there
    own: bool = False
    site: tuple[str, int] | None = None  # (path, line) of the enclosing function's `def`
    subscripted: bool = False  # indexed where it stands (`a.b[i]`, read or assigned)


@dataclass(frozen=True)
class ForeignStore:
    """`x.name = ...` in the plugin with a receiver other than `self`."""

    path: str
    line: int
    func_site: tuple[str, int] | None  # the enclosing function's (path, def line); None at module level
    # what it is stored on (store_receiver): `self.input_ids` for `self.input_ids.cpu = ...`
    # and `self.input_ids.x[0].cpu = ...`; "" when it does not show
    receiver: str


def store_receiver(value: ast.expr) -> str:
    """What an attribute is stored on, as far as it shows: `self.input_ids` for
    `self.input_ids.cpu = ...` and for `self.batch.tables[0].cpu = ...` (an object reached from
    that field), the dotted name for another dotted receiver, "" for anything else (a call's
    result, `self.table().cpu = ...`, may be any object). Pure."""
    name = dotted(value)
    if name is not None:
        return name if not name.startswith("self.") else ".".join(name.split(".")[:2])
    node = value
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}"
        node = node.value
    return ""


def try_body_imports(imports: list[ImportUse]) -> dict[int, list[ImportUse]]:
    """Try id -> the core imports in that `try`'s body (those under its ImportError guard)."""
    out: dict[int, list[ImportUse]] = {}
    for use in imports:
        if use.ctx.guard is not None and use.ctx.guard[1] == "body":
            out.setdefault(use.ctx.guard[0], []).append(use)
    return out


def caught_loads(facts: "PluginFacts") -> dict[tuple[str, str], tuple[str, int]]:
    """Start-up edges (module, module it loads) made only inside tries whose handlers
    swallow every import failure (`except ImportError: pass`, `except Exception:` with no
    raise anywhere in it, `contextlib.suppress(ImportError)`; not `except
    ModuleNotFoundError`, which lets a missing name through): the loaded module's failure
    to import stops there. Each maps to one such try's (path, line). Pure."""
    out: dict[tuple[str, str], tuple[str, int]] = {}
    for edge, tries in facts.ref_guards.items():
        if tries and all(t is not None and t in facts.try_swallows for t in tries):
            out[edge] = facts.try_lines[min(t for t in tries if t is not None)]
    return out


def own_namespace_read(node: ast.Subscript) -> str | None:
    """`vars(C)["a"]` or `C.__dict__["a"]` as the dotted read `C.a`; None for anything else."""
    key = node.slice
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.isidentifier()):
        return None
    holder = node.value
    if isinstance(holder, ast.Call) and isinstance(holder.func, ast.Name) and holder.func.id == "vars" \
            and len(holder.args) == 1 and not holder.keywords:
        owner = dotted(holder.args[0])
    elif isinstance(holder, ast.Attribute) and holder.attr == "__dict__":
        owner = dotted(holder.value)
    else:
        return None
    return f"{owner}.{key.value}" if owner else None


@dataclass
class PluginFacts:
    imports: list[ImportUse] = field(default_factory=list)
    calls: list[CallUse] = field(default_factory=list)
    attr_reads: list[AttrRead] = field(default_factory=list)
    attr_stores: set[str] = field(default_factory=set)  # every `x.name = ...` target name in the plugin
    # name -> every store of it whose receiver is not `self` (`self.name = ...` sets the
    # plugin's own object)
    foreign_stores: dict[str, list[ForeignStore]] = field(default_factory=dict)
    # (plugin module, plugin module it imports or names in a dotted string, any scope, only
    # the branches that run) -> the guarded try of each place it does so (None: unguarded):
    # the edges of the start-up import graph (`refs`)
    ref_guards: dict[tuple[str, str], set[int | None]] = field(default_factory=dict)
    replacements: list[Replacement] = field(default_factory=list)
    classes: list[PluginClass] = field(default_factory=list)
    # id of an applied class-body patch's ClassDef -> its core target (classpatches.py)
    patch_targets: dict[int, str] = field(default_factory=dict)
    files: int = 0
    try_lines: dict[int, tuple[str, int]] = field(default_factory=dict)
    # branches of each guarded try that can stand in for a failed import (a handler
    # that re-raises cannot)
    try_branches: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # guarded tries with a handler that swallows every import failure (see
    # `_swallows_import_errors`): a load there stops a failure (`caught_loads`)
    try_swallows: set[int] = field(default_factory=set)
    # top-level package of every absolute import (any condition, any scope), counted
    # by imported name: tells which package the plugin expects core to provide
    imported_tops: Counter = field(default_factory=Counter)
    # (module, name) -> how each read of a module-level name is guarded: True under a
    # try/except ImportError or contextlib.suppress(ImportError), False otherwise
    name_reads: dict[tuple[str, str], set[bool]] = field(default_factory=dict)
    # every `vllm_version_is("X")` test the plugin evaluates: (path, line, X)
    version_tests: list[tuple[str, int, str, "Context"]] = field(default_factory=list)

    @property
    def refs(self) -> dict[str, set[str]]:
        """plugin module -> the plugin modules it imports or names (see `ref_guards`)."""
        out: dict[str, set[str]] = {}
        for src, dst in self.ref_guards:
            out.setdefault(src, set()).add(dst)
        return out


def flat_statements(body: list[ast.stmt]):
    """The statements of a body and of the blocks inside it (if/for/while/with/try), not
    of the functions or classes it defines."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                yield from flat_statements(getattr(stmt, part, []))
            for h in getattr(stmt, "handlers", []):
                yield from flat_statements(h.body)


# what a load's failure raises: a missing module (ModuleNotFoundError) or a missing name
# (plain ImportError); only a handler of one of these catches both
EVERY_IMPORT_ERROR = frozenset({"ImportError", "Exception", "BaseException"})


def _swallows_import_errors(handler: ast.ExceptHandler) -> bool:
    """The handler catches every import failure (a missing name as well as a missing module:
    `except ModuleNotFoundError` lets `cannot import name` through) and raises nowhere in its
    body (`if exc.name != "vllm": raise` re-raises the failures it does not expect); a
    function defined there does not run there."""
    if not _catches_import_error(handler, EVERY_IMPORT_ERROR):
        return False
    todo: list[ast.AST] = list(handler.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Raise):
            return False
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return True


def _catches_import_error(handler: ast.ExceptHandler, errors: frozenset[str] = IMPORT_ERRORS) -> bool:
    """The handler catches one of `errors` (a bare `except:` catches everything)."""
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((dotted(t) or "").split(".")[-1] in errors for t in types)


def _narrowing(node: ast.AST, types: dict) -> list[tuple[ast.AST, dict]] | None:
    """The parts of a conditional expression or an `and` with the types each is read under,
    where an `isinstance(name, C)` test narrows `name` for the part that runs when it holds;
    a comprehension's parts (`_comprehension_parts`); None for any other node."""
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        return _comprehension_parts(node, types)
    if isinstance(node, ast.IfExp) and (test := _isinstance_test(node.test)) is not None:
        return [(node.test, types), (node.body, {**types, test[0]: test[1]}), (node.orelse, types)]
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) \
            and any(_isinstance_test(v) is not None for v in node.values):
        out, current = [], types
        for value in node.values:
            out.append((value, current))
            if (test := _isinstance_test(value)) is not None:
                current = {**current, test[0]: test[1]}
        return out
    return None


def _element_of(target: ast.expr, it: ast.expr, types: dict) -> tuple[str, tuple[str, ...]] | None:
    """`for name in a.b:` with `a` typed (or `self`): (name, an element of `a.b`), else None."""
    path = dotted(it)
    if not (isinstance(target, ast.Name) and path and "." in path):
        return None
    root = path.split(".")[0]
    if root == target.id or not (root in types or root == "self"):
        return None
    return target.id, (f"={path}[]",)


def _loop_element(stmt: ast.For | ast.AsyncFor, types: dict) -> tuple[str, tuple[str, ...]] | None:
    """The loop target's type inside the body of `for name in a.b:`, where the body never
    rebinds `name`: an element of `a.b`, however often the function binds the name
    elsewhere (vLLM plugins loop twice with one name, over core's list and then over a
    local one). Not in the `else:` part, which runs after the last pass."""
    element = _element_of(stmt.target, stmt.iter, types)
    if element is None or any(element[0] in _stored_names(s) for s in stmt.body):
        return None
    return element


def _comprehension_parts(node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                         types: dict) -> list[tuple[ast.AST, dict]]:
    """A comprehension's parts with the types each is read under: the first iterable in the
    enclosing scope's; then each target shadows what it binds and, over `a.b` with `a`
    typed, is an element of `a.b` (`[t for t in cfg.kv_cache_tensors if t.shared_by]`)."""
    out: list[tuple[ast.AST, dict]] = []
    current = types
    for g in node.generators:
        out.append((g.iter, current))
        element = _element_of(g.target, g.iter, current)
        bound = _stored_names(g.target)
        current = {k: v for k, v in current.items() if k not in bound}
        if element is not None:
            current[element[0]] = element[1]
        out.append((g.target, current))
        out.extend((c, current) for c in g.ifs)
    out.extend((e, current) for e in ((node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)))
    return out


def _isinstance_test(test: ast.expr) -> tuple[str, tuple[str, ...]] | None:
    """`isinstance(name, X)` / `isinstance(name, (X, Y))`: (name, dotted classes)."""
    if not (isinstance(test, ast.Call) and dotted(test.func) == "isinstance" and len(test.args) == 2
            and isinstance(test.args[0], ast.Name)):
        return None
    cls = test.args[1]
    items = cls.elts if isinstance(cls, ast.Tuple) else [cls]
    names = tuple(dotted(i) for i in items)
    if not names or any(n is None for n in names):
        return None
    return test.args[0].id, names  # type: ignore[return-value]


def _bindings(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[Counter, list[ast.Assign]]:
    """One walk of a function: how often each name is bound or deleted in it, and its
    assignments of one value to one plain name (`x = ...`)."""
    stores: Counter = Counter()
    assigns: list[ast.Assign] = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            stores[n.id] += 1
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            assigns.append(n)
    return stores, assigns


def _self_aliases(stores: Counter, assigns: list[ast.Assign]) -> frozenset[str]:
    """Names the method binds once, to `self` or to `cast(T, self)` (`typing.cast`, `t.cast`)."""
    def is_self(value: ast.expr) -> bool:
        if isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] == "cast" \
                and len(value.args) == 2 and not value.keywords:
            value = value.args[1]
        return isinstance(value, ast.Name) and value.id == "self"
    return frozenset(n.targets[0].id for n in assigns  # type: ignore[attr-defined]
                     if is_self(n.value) and stores[n.targets[0].id] == 1  # type: ignore[attr-defined]
                     and n.targets[0].id not in ("self", "cls"))  # type: ignore[attr-defined]


_CATCHES_ATTRIBUTE_ERROR = frozenset({"AttributeError", "Exception", "BaseException"})


def _result_reads(fn: ast.FunctionDef | ast.AsyncFunctionDef, stores: Counter,
                  assigns: list[ast.Assign]) -> dict[int, tuple[tuple[str, int], ...]]:
    """id of a call node -> the attributes read off the name its result is bound to
    (`x = f(...)`, `x` bound once in the function and not a parameter), with the line of each
    first read after the binding. A read under a test that names `x` (`isinstance`, `hasattr`,
    a comparison: the plugin telling shapes apart), in a `try` whose handlers catch
    AttributeError, or in a nested function or class does not count."""
    a = fn.args
    params = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]}
    binds = {n.targets[0].id: n for n in assigns  # type: ignore[attr-defined]
             if isinstance(n.value, ast.Call) and stores[n.targets[0].id] == 1  # type: ignore[attr-defined]
             and n.targets[0].id not in params}  # type: ignore[attr-defined]
    if not binds:
        return {}
    reads: dict[str, dict[str, int]] = {name: {} for name in binds}

    def names_in(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    def visit(node: ast.AST, guarded: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and node is not fn:
            return
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            inner = guarded | names_in(node.test)
            visit(node.test, guarded)
            for part in (node.body, node.orelse):
                for child in part if isinstance(part, list) else [part]:
                    visit(child, inner)
            return
        if isinstance(node, ast.Try):
            caught = set()
            for h in node.handlers:
                kinds = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type] if h.type else []
                caught |= {(dotted(k) or "").split(".")[-1] for k in kinds} if kinds else {"BaseException"}
            inner = guarded | set(binds) if caught & _CATCHES_ATTRIBUTE_ERROR else guarded
            for child in node.body:
                visit(child, inner)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, guarded)
            return
        if isinstance(node, ast.BoolOp):  # `x is not None and x.attr`: the earlier operands test x
            seen: set[str] = set()
            for value in node.values:
                visit(value, guarded | frozenset(seen))
                seen |= names_in(value)
            return
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.value.id in binds and node.value.id not in guarded \
                and node.lineno > binds[node.value.id].lineno:
            reads[node.value.id].setdefault(node.attr, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    for stmt in fn.body:
        visit(stmt, frozenset())
    return {id(binds[name].value): tuple(sorted(found.items(), key=lambda kv: kv[1]))
            for name, found in reads.items() if found}


def _annotated_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, tuple[str, ...]]:
    """Parameters annotated with one class (`x: C`, `x: C | None`, `Optional[C]`) that the
    function never rebinds."""
    out: dict[str, tuple[str, ...]] = {}
    a = fn.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs:
        ann = arg.annotation
        if ann is None or arg.arg in ("self", "cls"):
            continue
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            sides = [x for x in (ann.left, ann.right) if not (isinstance(x, ast.Constant) and x.value is None)]
            ann = sides[0] if len(sides) == 1 else None
        elif isinstance(ann, ast.Subscript) and (dotted(ann.value) or "").split(".")[-1] == "Optional":
            ann = ann.slice
        name = dotted(ann) if ann is not None else None
        if name and name[:1].isupper() or (name and "." in name and name.split(".")[-1][:1].isupper()):
            out[arg.arg] = (name,)
    if out:  # the walk only where a parameter qualifies: most functions have none
        rebound = _stored_names(fn)
        out = {k: v for k, v in out.items() if k not in rebound}
    return out


def _derived_types(fn: ast.FunctionDef | ast.AsyncFunctionDef, types: dict) -> dict[str, tuple[str, ...]]:
    """Names bound once in the function from a typed expression: `for t in cfg.tensors:`
    (an element, `=cfg.tensors[]`) or `spec = cfg.speculative_config` (`=cfg.speculative_config`),
    with `cfg` a typed parameter or `self`. The path is resolved against core's annotations
    by the check; a name stored anywhere else in the function is not typed."""
    found: list[tuple[str, str]] = []
    stores: Counter = Counter()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores[n.id] += 1
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name):
            path = dotted(n.iter)
            if path and (path.split(".")[0] in types or path.startswith("self.")) and "." in path:
                found.append((n.target.id, f"={path}[]"))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, ast.Attribute):
            path = dotted(n.value)
            if path and (path.split(".")[0] in types or path.startswith("self.")):
                found.append((n.targets[0].id, f"={path}"))
    return {name: (path,) for name, path in found if stores[name] == 1 and name not in types}


def definition_time(stmt: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[ast.AST]:
    """The expressions a `def`/`class` statement evaluates where it stands, before any
    body runs: decorators, default values, class bases and keywords (`metaclass=`).
    Annotations are left out: under `from __future__ import annotations` they never run."""
    if isinstance(stmt, ast.ClassDef):
        return [*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)]
    a = stmt.args
    return [*stmt.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None)]


def _caught(handlers: list[ast.ExceptHandler]) -> frozenset[str]:
    names = set()
    for h in handlers:
        if h.type is None:
            names.add("BaseException")
            continue
        for t in h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]:
            names.add((dotted(t) or "").split(".")[-1])
    return frozenset(names)


def _literal_keys(value: ast.expr) -> list[str] | None:
    """The keys of `{"a": ...}` or `dict(a=...)` when all are literal strings."""
    if isinstance(value, ast.Dict):
        if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys):
            return [k.value for k in value.keys]  # type: ignore[union-attr]
        return None
    if isinstance(value, ast.Call) and dotted(value.func) == "dict" and not value.args \
            and all(k.arg for k in value.keywords):
        return [k.arg for k in value.keywords]  # type: ignore[misc]
    return None


def _string_options(expr: ast.expr, depth: int = 0) -> list[str] | None:
    """The strings `expr` can be: a string constant, or a conditional expression between
    such (each arm, whatever the test); None for anything else."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.IfExp) and depth < 4:
        body, orelse = _string_options(expr.body, depth + 1), _string_options(expr.orelse, depth + 1)
        return body + orelse if body is not None and orelse is not None else None
    return None


_HOLE = re.compile(r"\{\w*\}")
_TEMPLATE_HEAD = re.compile(r"(?:[A-Za-z_]\w*\.)+")  # `pkg.models.` before the first hole
_TEMPLATE_JOIN = re.compile(r"(?:\.[A-Za-z_]\w*)*\.")  # `.` or `.sub.` between two holes
_TEMPLATE_TAIL = re.compile(r"(?:\.[A-Za-z_]\w*)*")  # what may follow the last hole
TEMPLATE_HOLES_MAX = 3
TEMPLATE_NAMES_MAX = 4096  # partly filled names kept per hole


def _template_modules(text: str, mod: ModuleInfo, module) -> list[str]:
    """The plugin modules a dotted template names when each hole is filled with one of its
    module's string constants: vllm-mindspore's lazy model registry maps architectures to
    module names (`"Qwen2ForCausalLM": ("qwen2", "Qwen2ForCausalLM")`) and builds
    `"vllm_mindspore.model_executor.models.{}".format(name)`; vllm-omni's fills two,
    `f"vllm_omni.model_executor.models.{mod_folder}.{mod_relname}"`. Each filled part must
    name a module; what follows the last hole may be a name in it, and a `:` starts the
    object's name (`...{mod_relname}:{cls_name}`). `module(name)`: the plugin's index of that
    module (None when absent)."""
    pieces = _HOLE.split(text.split(":", 1)[0])
    if not 2 <= len(pieces) <= TEMPLATE_HOLES_MAX + 1 or mod.tree is None \
            or not _TEMPLATE_HEAD.fullmatch(pieces[0]) or not _TEMPLATE_TAIL.fullmatch(pieces[-1]) \
            or not all(_TEMPLATE_JOIN.fullmatch(p) for p in pieces[1:-1]):
        return []
    fills = sorted({n.value for n in ast.walk(mod.tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier()})
    names = [pieces[0]]
    for piece in pieces[1:]:
        names = [f"{head}{f}{piece}" for head in names for f in fills
                 if module(f"{head}{f}") is not None][:TEMPLATE_NAMES_MAX]
    return sorted(set(names))


def _fstring_template(node: ast.JoinedStr) -> str | None:
    """`f"vllm_gcu.models.{name}.register"` as the template `vllm_gcu.models.{}.register` when
    each of its (at most TEMPLATE_HOLES_MAX) parts is a plain name whose value is not known
    here (a loop variable over the module's table of module names); None for any other shape.
    Pure."""
    parts: list[str] = []
    holes = 0
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            parts.append(part.value.replace("{", "").replace("}", ""))
        elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) \
                and part.conversion == -1 and part.format_spec is None:
            parts.append("{}")
            holes += 1
        else:
            return None
    return "".join(parts) if 1 <= holes <= TEMPLATE_HOLES_MAX and len("".join(parts)) < 200 else None


def _fstring_texts(node: ast.JoinedStr, limit: int = 8) -> list[str]:
    """Every text an f-string can make when each of its parts is a string constant or a
    plain `{...}` of string options (`f'pkg{".v1" if v1 else ""}.worker.W'`); [] otherwise
    or past `limit` texts."""
    texts = [""]
    for part in node.values:
        if isinstance(part, ast.FormattedValue) and part.conversion == -1 and part.format_spec is None:
            options = _string_options(part.value)
        else:
            options = _string_options(part)
        if options is None:
            return []
        texts = [t + o for t in texts for o in options]
        if len(texts) > limit:
            return []
    return texts


def _suppresses_import_error(expr: ast.expr, errors: frozenset[str] = IMPORT_ERRORS) -> bool:
    """`contextlib.suppress(ImportError, ...)` (or `suppress(...)` imported by name)."""
    if not (isinstance(expr, ast.Call) and (dotted(expr.func) or "").split(".")[-1] == "suppress"):
        return False
    return any((dotted(a) or "").split(".")[-1] in errors for a in expr.args)


class _Scanner:
    def __init__(self, mod: ModuleInfo, env: Env, facts: PluginFacts) -> None:
        self.mod = mod
        self.env = env
        self.facts = facts

    def is_core(self, name: str) -> bool:
        return self.env.is_core(name)

    def block(self, body: list[ast.stmt], ctx: Context, scope: Scope, in_class: bool = False) -> None:
        for stmt in body:
            if scope.probes and isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                _forget_stored(scope, stmt)  # a later pass of the loop may have rebound it
            self.stmt(stmt, ctx, scope, in_class)
            _note_probe(scope, stmt)
            if isinstance(stmt, ast.If) and self.ends_block(stmt, scope):
                break  # `if vllm_version_is(X): return ...` taken: the rest never runs for this core
            if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], (ast.Return, ast.Raise,
                                                                                      ast.Continue)):
                ctx = ctx.probes(stmt.test)  # `if not hasattr(x, "a"): return`: the rest runs probed

    def ends_block(self, stmt: ast.If, scope: Scope) -> bool:
        """The branch this core takes returns or raises at its end."""
        if _isinstance_test(stmt.test) is not None:
            return False
        v = self.instance_flag(stmt.test, scope) or self.probe_flag(stmt.test, scope) \
            or evaluate(stmt.test, self.mod, scope.local_imports, self.env)
        if v.kind != DECIDED:
            return False
        taken = stmt.body if v.value else stmt.orelse
        return bool(taken) and isinstance(taken[-1], (ast.Return, ast.Raise))

    def stmt(self, stmt: ast.stmt, ctx: Context, scope: Scope, in_class: bool) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.targets[0], (ast.Tuple, ast.List)) \
                and not any(isinstance(e, ast.Starred) for e in stmt.targets[0].elts):
            self.unpacked[id(stmt.value)] = len(stmt.targets[0].elts)  # read when the call is
        if not ctx.type_checking:
            self.expressions(stmt, ctx, scope)
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self.facts.imported_tops[alias.name.split(".")[0]] += 1
                if scope is not self.top:
                    scope.local_imports[alias.asname or alias.name.split(".")[0]] = \
                        alias.name if alias.asname else alias.name.split(".")[0]
                if self.is_core(alias.name):
                    self.record(ImportUse(self.mod.path, stmt.lineno, alias.name, None, ctx, self.mod.name,
                                          self.top_func))
                elif not ctx.type_checking:
                    self.ref(alias.name, ctx=ctx)
        elif isinstance(stmt, ast.ImportFrom):
            src = absolute_module(self.mod.name, self.mod.is_package, stmt.level, stmt.module)
            if stmt.level == 0 and src:
                self.facts.imported_tops[src.split(".")[0]] += len(stmt.names)
            for alias in stmt.names:
                if scope is not self.top and alias.name != "*":
                    scope.local_imports[alias.asname or alias.name] = f"{src}.{alias.name}"
                if self.is_core(src):
                    self.record(ImportUse(self.mod.path, stmt.lineno, src,
                                          None if alias.name == "*" else alias.name, ctx, self.mod.name,
                                          self.top_func))
                elif src and not ctx.type_checking:
                    self.ref(src if alias.name == "*" else f"{src}.{alias.name}", src, ctx)
        elif isinstance(stmt, ast.If) and _isinstance_test(stmt.test) is not None:
            name, classes = _isinstance_test(stmt.test)  # type: ignore[misc]
            # a dict of its own: the reads keep the types they were made under until checked
            outer, scope.types = scope.types, {**scope.types, name: classes}
            self.block(stmt.body, ctx, scope, in_class)
            scope.types = outer
            self.block(stmt.orelse, ctx, scope, in_class)
        elif isinstance(stmt, ast.If):
            v = self.instance_flag(stmt.test, scope) or self.probe_flag(stmt.test, scope) \
                or evaluate(stmt.test, self.mod, scope.local_imports, self.env)
            if v.kind == TYPE_CHECKING:
                self.block(stmt.body, dataclasses.replace(ctx, type_checking=True), scope, in_class)
                self.block(stmt.orelse, ctx, scope, in_class)
            elif v.kind == DECIDED:
                self.block(stmt.body if v.value else stmt.orelse, ctx, scope, in_class)
            elif v.kind == UNDECIDABLE:
                inner = dataclasses.replace(ctx, undecidable=ctx.undecidable or v.why).probes(stmt.test)
                self.block(stmt.body, inner, scope, in_class)
                self.block(stmt.orelse, inner, scope, in_class)
            else:
                self.block(stmt.body, ctx.probes(stmt.test), scope, in_class)
                self.block(stmt.orelse, ctx.probes(stmt.test), scope, in_class)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            guarded = any(_catches_import_error(h) for h in stmt.handlers)
            # a handler that raises again catches nothing for good: what fails in the body still fails
            body_ctx = dataclasses.replace(ctx, catches=ctx.catches | _caught(
                [h for h in stmt.handlers if not reraises(h)]))
            if guarded:
                tid = len(self.facts.try_lines)
                self.facts.try_lines[tid] = (self.mod.path, stmt.lineno)
                self.block(stmt.body, dataclasses.replace(body_ctx, guard=(tid, "body"), loading_try=tid), scope,
                           in_class)
                self.facts.try_branches[tid] = ("body",) + tuple(
                    f"except{i}" for i, h in enumerate(stmt.handlers)
                    if _catches_import_error(h) and not any(isinstance(x, ast.Raise) for x in h.body))
                if any(_swallows_import_errors(h) for h in stmt.handlers):
                    self.facts.try_swallows.add(tid)
                for i, h in enumerate(stmt.handlers):
                    branch = dataclasses.replace(ctx, guard=(tid, f"except{i}")) \
                        if _catches_import_error(h) else ctx
                    self.block(h.body, branch, scope, in_class)
            else:
                where = (self.mod.path, stmt.lineno)
                self.block(stmt.body, dataclasses.replace(body_ctx, attempt=where, fallback=None), scope, in_class)
                for h in stmt.handlers:
                    fallback = where if handles(_caught([h]), "TypeError") else None
                    self.block(h.body, dataclasses.replace(ctx, attempt=None, fallback=fallback), scope, in_class)
            self.block(stmt.orelse, ctx, scope, in_class)
            self.block(stmt.finalbody, ctx, scope, in_class)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            outer = (self.top_func, self.method, self.func_site)
            self.func_site = (self.mod.path, stmt.lineno)
            if scope is self.top:
                self.top_func = stmt.name
            if in_class:
                self.method = stmt.name
            inner = scope.child(stmt.body)
            inner.types = _annotated_params(stmt)
            inner.types.update(_derived_types(stmt, inner.types))
            stores, assigns = _bindings(stmt)  # one walk, shared by the two readings below
            if in_class:
                inner.self_aliases = _self_aliases(stores, assigns)
            self.result_reads.update(_result_reads(stmt, stores, assigns))
            # a try around the definition does not run around the body
            self.block(stmt.body, dataclasses.replace(ctx, catches=frozenset(), attempt=None, fallback=None,
                                                      loading_try=None), inner)
            self.top_func, self.method, self.func_site = outer
        elif isinstance(stmt, ast.ClassDef):
            if not ctx.type_checking:
                self.facts.classes.append(PluginClass(self.mod.path, stmt.lineno, self.mod, stmt,
                                                      scope, ctx))
            self.class_stack.append(stmt)
            outer_method, self.method = self.method, None
            self.block(stmt.body, ctx, scope, in_class=True)
            self.method = outer_method
            self.class_stack.pop()
        elif isinstance(stmt, (ast.With, ast.AsyncWith)) and any(_suppresses_import_error(i.context_expr)
                                                                 for i in stmt.items):
            # `with contextlib.suppress(ImportError): from x import y` is a guard with an
            # empty handler: the import may fail, and then nothing happens
            tid = len(self.facts.try_lines)
            self.facts.try_lines[tid] = (self.mod.path, stmt.lineno)
            self.facts.try_branches[tid] = ("body", "suppressed")
            if any(_suppresses_import_error(i.context_expr, EVERY_IMPORT_ERROR) for i in stmt.items):
                self.facts.try_swallows.add(tid)
            self.block(stmt.body, dataclasses.replace(ctx, guard=(tid, "body"), loading_try=tid), scope, in_class)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)) and (element := _loop_element(stmt, scope.types)) is not None:
            # a dict of its own: the reads keep the types they were made under until checked
            outer, scope.types = scope.types, {**scope.types, element[0]: element[1]}
            self.block(stmt.body, ctx, scope, in_class)
            scope.types = outer
            self.block(stmt.orelse, ctx, scope, in_class)
        elif isinstance(stmt, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
            self.block(stmt.body, ctx, scope, in_class)
            self.block(getattr(stmt, "orelse", []), ctx, scope, in_class)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            self.track_kwdict(targets, stmt.value, ctx, scope)
            for t in targets:
                if isinstance(t, ast.Attribute):
                    self.replacement(t.value, t.attr, stmt.value, stmt.lineno, ctx, scope, in_class,
                                     stmt.end_lineno or stmt.lineno)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
                    and call.func.value.id in scope.kwdicts:
                name, keys = call.func.value.id, scope.kwdicts[call.func.value.id]
                if call.func.attr == "update" and not call.args and keys is not None and not ctx.undecidable \
                        and all(k.arg for k in call.keywords):
                    keys.extend(k.arg for k in call.keywords if k.arg not in ctx.probed)  # type: ignore[misc]
                    scope.kwguarded.setdefault(name, set()).update(
                        k.arg for k in call.keywords if k.arg in ctx.probed)  # type: ignore[misc]
                elif call.func.attr not in ("get", "items", "keys", "values", "copy"):
                    scope.kwdicts[name] = None
            if dotted(call.func) == "setattr" and len(call.args) == 3:
                attr_node = call.args[1]
                attr = None
                if isinstance(attr_node, ast.Constant) and isinstance(attr_node.value, str):
                    attr = attr_node.value
                elif isinstance(attr_node, ast.Name):
                    attr = scope.strings.get(attr_node.id)
                if attr is not None:
                    self.replacement(call.args[0], attr, call.args[2], stmt.lineno, ctx, scope, in_class,
                                     stmt.end_lineno or stmt.lineno)

    def probe_flag(self, test: ast.expr, scope: Scope) -> Verdict | None:
        """A feature probe for a successor name on a typed parameter, decided for this core
        (see conditions.successor_probe); None when it is not that."""
        if not scope.types:
            return None
        return successor_probe(test, scope.probes, scope.types, self.mod, scope.local_imports, self.env)

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

    def ref(self, name: str, fallback: str | None = None, ctx: Context | None = None) -> None:
        """An edge of the start-up graph to the plugin module `name` (or, when `name`
        is not a module, `fallback` or its longest module prefix), with the guarded try
        it sits in (see `caught_loads`)."""
        if name.split(".")[0] not in self.env.world.packages:
            return
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            candidate = ".".join(parts[:cut])
            if self.env.world.module(candidate) is not None:
                self.facts.ref_guards.setdefault((self.mod.name, candidate), set()).add(
                    ctx.loading_try if ctx is not None else None)
                return
            if candidate == fallback:
                return

    def expressions(self, stmt: ast.stmt, ctx: Context, scope: Scope) -> None:
        """Calls, dotted strings and import-time attribute reads in the expressions this
        statement evaluates where it stands (not in nested function bodies)."""
        if isinstance(stmt, ast.Try):
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            roots: list[ast.AST] = definition_time(stmt)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            roots = [i.context_expr for i in stmt.items]
        elif type(stmt) in HEADERS:
            roots = [getattr(stmt, f) for f in HEADERS[type(stmt)]]
        else:
            roots = [stmt]
        import_time = scope is self.top
        # each node with the local types it is read under: `x.a if isinstance(x, C) else y`
        # and `isinstance(x, C) and x.a` narrow x to C there, as `if isinstance(...)` does
        stack: list[tuple[ast.AST, dict]] = [(r, scope.types) for r in roots]
        subscripted: set[int] = set()  # attribute chains indexed where they stand
        while stack:
            node, types = stack.pop()
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
                subscripted.add(id(node.value))
            narrowed = _narrowing(node, types)
            if narrowed is not None:
                stack.extend(narrowed)
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if "." in text and len(text) < 200 and text.split(".")[0] in self.env.world.packages \
                        and all(p.isidentifier() for p in text.replace(":", ".").split(".")):
                    self.ref(text.replace(":", "."), ctx=ctx)
                elif "{" in text and len(text) < 200 and text.split(".")[0] in self.env.world.packages:
                    for name in _template_modules(text, self.mod, self.env.world.module):
                        self.ref(name, ctx=ctx)
                continue
            if isinstance(node, ast.JoinedStr):  # f'pkg{".v1" if x else ""}.mod.Cls': every text it can make
                for text in _fstring_texts(node):
                    if "." in text and len(text) < 200 and text.split(".")[0] in self.env.world.packages \
                            and all(p.isidentifier() for p in text.replace(":", ".").split(".")):
                        self.ref(text.replace(":", "."), ctx=ctx)
                template = _fstring_template(node)
                if template is not None and template.split(".")[0] in self.env.world.packages:
                    for name in _template_modules(template, self.mod, self.env.world.module):
                        self.ref(name, ctx=ctx)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.facts.name_reads.setdefault((self.mod.name, node.id), set()).add(ctx.guard is not None)
            if isinstance(node, ast.Call):
                self.call(node, ctx, scope)
            if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                self.facts.attr_stores.add(node.attr)
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    self.facts.foreign_stores.setdefault(node.attr, []).append(ForeignStore(
                        self.mod.path, node.lineno, self.func_site, store_receiver(node.value)))
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                expr = own_namespace_read(node)
                if expr is not None and expr.split(".")[0] not in ("self", "cls"):
                    self.facts.attr_reads.append(AttrRead(self.mod.path, node.lineno, expr, self.mod, ctx,
                                                          import_time, scope.local_imports, types, None, own=True,
                                                          site=self.func_site))
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                expr = dotted(node)
                if expr is not None:
                    head = expr.split(".")[0]
                    in_method = self.method is not None and bool(self.class_stack)
                    if import_time or head != "cls" and (head != "self" or in_method and expr.count(".") > 1):
                        self.facts.attr_reads.append(AttrRead(self.mod.path, node.lineno, expr, self.mod, ctx,
                                                              import_time, scope.local_imports, types,
                                                              self.class_stack[-1] if in_method else None,
                                                              site=self.func_site,
                                                              subscripted=id(node) in subscripted))
                    continue  # the longest chain only: its prefixes are checked with it
            stack.extend((child, types) for child in ast.iter_child_nodes(node))

    def spread_keys(self, value: ast.expr, scope: Scope) -> list[str] | None:
        """The keys a `**value` argument passes, when the gate can tell: a dictionary built
        here from literal keys, a literal dictionary, or a conditional expression between
        such whose test is settled for the core under test; else None."""
        while isinstance(value, ast.IfExp):  # a loop: a chain of them is upstream data
            v = evaluate(value.test, self.mod, scope.local_imports, self.env)
            if v.kind != DECIDED:
                return None
            value = value.body if v.value else value.orelse
        if isinstance(value, ast.Name):
            return scope.kwdicts.get(value.id)
        return _literal_keys(value)

    def track_kwdict(self, targets: list[ast.expr], value: ast.expr, ctx: Context, scope: Scope) -> None:
        if len(targets) != 1:
            return
        t = targets[0]
        if isinstance(t, ast.Name):
            keys = _literal_keys(value)
            scope.kwguarded.pop(t.id, None)
            if keys is not None and scope is not self.top:
                scope.kwdicts[t.id] = keys if not ctx.undecidable else None
            else:
                scope.kwdicts.pop(t.id, None)
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in scope.kwdicts:
            key = t.slice
            keys = scope.kwdicts[t.value.id]
            if keys is not None and isinstance(key, ast.Constant) and isinstance(key.value, str) \
                    and not ctx.undecidable:
                if key.value not in ctx.probed:  # a key set only after probing for it is guarded
                    keys.append(key.value)
                else:
                    scope.kwguarded.setdefault(t.value.id, set()).add(key.value)
            else:
                scope.kwdicts[t.value.id] = None

    def call(self, node: ast.Call, ctx: Context, scope: Scope) -> None:
        fn = node.func
        if isinstance(fn, ast.Subscript):  # a kernel launch `kernel[grid](...)`
            fn = fn.value
        func = dotted(fn)
        if func is None and isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Call) \
                and dotted(fn.value.func) == "super" and self.class_stack:
            args = fn.value.args
            if not args:
                func = f"super().{fn.attr}"
            elif dotted(args[0]) is not None:
                func = f"super({dotted(args[0])}).{fn.attr}"  # the MRO after that class
        if func is None:
            return
        if func.split(".")[-1] == "vllm_version_is" and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            self.facts.version_tests.append((self.mod.path, node.lineno, node.args[0].value, ctx))
        in_method = self.method is not None and bool(self.class_stack)
        written = ""
        if in_method and "." in func and func.split(".")[0] in scope.self_aliases:
            written, func = func, "self" + func[func.index("."):]
        if func.split(".")[0] in ("self", "cls") and not in_method:
            return
        shape = call_shape(node)
        if id(node) in self.unpacked:
            shape = dataclasses.replace(shape, unpacked=self.unpacked[id(node)])
        if id(node) in self.result_reads:
            shape = dataclasses.replace(shape, result_reads=self.result_reads[id(node)])
        spread = [self.spread_keys(k.value, scope) for k in node.keywords if k.arg is None]
        if spread and all(keys is not None for keys in spread):
            # `f(**kw)` with `kw` built here from literal keys, `f(**{"a": 1})`, or
            # `f(**({} if vllm_version_is("X") else {"a": 1}))` with the test settled for this
            # core: those are the keywords
            extra = tuple(k for keys in spread for k in keys)  # type: ignore[union-attr]
            shape = dataclasses.replace(shape, keywords=shape.keywords + tuple(
                k for k in extra if not (shape.launch and k in LAUNCH_OPTIONS)), dstar=False)
        if ctx.probed & set(shape.keywords):  # keywords passed after probing for them are guarded
            shape = dataclasses.replace(shape, keywords=tuple(k for k in shape.keywords if k not in ctx.probed))
        guarded = set(ctx.probed)
        for k in node.keywords:
            if k.arg is None and isinstance(k.value, ast.Name):
                guarded |= scope.kwguarded.get(k.value.id, set())
        if guarded:
            shape = dataclasses.replace(shape, guarded=frozenset(guarded))
        self.facts.calls.append(CallUse(self.mod.path, node.lineno, func, self.mod, scope.local_imports,
                                        shape, ctx,
                                        cls=self.class_stack[-1] if in_method else None,
                                        method=self.method if in_method else None,
                                        aliases=scope.aliases,
                                        receiver_types=scope.types.get(func.split(".")[0], ())
                                        if func.count(".") == 1 else (), written=written))

    def record(self, use: ImportUse) -> None:
        if not use.ctx.type_checking:
            self.facts.imports.append(use)

    def replacement(self, owner_expr: ast.expr, attr: str, value: ast.expr, line: int,
                    ctx: Context, scope: Scope, in_class: bool, end_line: int = 0) -> None:
        if ctx.type_checking:
            return
        name = dotted(owner_expr)
        if name is None:
            return
        head, dot, rest = name.partition(".")
        runtime = module_of(self.mod, scope.modules[head], scope.local_imports) \
            if head in scope.modules and head not in scope.local_imports else None
        if runtime is not None:
            owner: str | None = runtime + dot + rest  # `m = sys.modules.get("a.b")`; `m.f = ours`
        elif head in scope.aliases and head not in scope.local_imports:
            name = scope.aliases[head] + dot + rest
            owner = qualify(self.mod, name, scope.local_imports)
        elif head in ("self", "cls"):
            return
        else:
            owner = qualify(self.mod, name, scope.local_imports)
        if owner is None or not self.is_core(owner):
            return
        self.facts.replacements.append(Replacement(self.mod.path, line, owner, attr, value,
                                                   self.mod, scope, ctx, in_class, scope is self.top,
                                                   None if scope is self.top else self.func_site,
                                                   end_line=end_line))

    def run(self) -> None:
        assert self.mod.tree is not None
        # module-level aliases (`_orig = core_mod.f`) resolve calls in every function
        self.top = Scope().child(self.mod.tree.body)
        self.top_func: str | None = None
        self.method: str | None = None
        self.func_site: tuple[str, int] | None = None
        self.class_stack: list[ast.ClassDef] = []
        self.flag_memo: dict = {}
        self.off_switches: dict = {}
        self.unpacked: dict[int, int] = {}  # id of a call node -> how many names take its result
        self.result_reads: dict[int, tuple[tuple[str, int], ...]] = {}  # id of a call node -> reads of its result
        self.block(self.mod.tree.body, Context(), self.top)


def scan_module(mod: ModuleInfo, env: Env, facts: PluginFacts) -> None:
    if mod.tree is None:
        return
    facts.files += 1
    _Scanner(mod, env, facts).run()
