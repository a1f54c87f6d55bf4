"""A static index of a Python tree: modules, the names they bind, classes, signatures.

Modules are parsed on first use only, so a gate run reads just the core files the
plugin actually depends on (and their re-export chains). What counts as a name of a
module is what `from M import name` would find at run time, read statically:
- anything bound at module level (def, class, assignment, import; inside `if`/`try`
  blocks too: the gate does not guess which branch of core's own code runs),
- a submodule or subpackage of a package,
- names pulled in by `from X import *` (X's `__all__`, else its public names),
- names a module-level `__getattr__` serves from a table it reads statically
  (`if name in TABLE`, `name == "x"`, `TABLE[name]`); a `__getattr__` whose table
  cannot be read makes every missing name *undecidable* rather than missing; one that can
  end without raising answers every other name with None (`Lookup.kind == "none"`).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from overlay.gate.signature import CallShape, Signature, call_shape, dotted, from_ast  # noqa: F401 (dotted re-exported)
from overlay.gate.source import TreeSource

MAX_HOPS = 12  # re-export chains longer than this are treated as undecidable


@dataclass(frozen=True)
class Binding:
    kind: str  # def | class | assign | import | from
    line: int
    target: str | None = None  # import: module; from: absolute module
    attr: str | None = None  # from: the imported name
    type_checking: bool = False  # bound only under `if TYPE_CHECKING:`: absent at run time


@dataclass
class ClassInfo:
    name: str
    line: int
    bases: tuple[str | None, ...]  # dotted expressions in module scope; None = not static
    methods: dict[str, Signature]
    attrs: set[str]  # everything bound in the class body
    decorators: tuple[str, ...]
    node: ast.ClassDef | None = None
    fields: list = field(default_factory=list)  # annotated statements of the body (dataclass fields)
    _self_calls: dict[str, list[tuple[str, CallShape]]] | None = None
    _super_ids: set = field(default_factory=set)
    _cls_ids: set = field(default_factory=set)  # calls through `cls.` (the class, not an instance)

    def declares(self, name: str) -> bool:
        """The class body binds `name`: a method, a class attribute, or an annotated field
        (a dataclass field without a default leaves no class attribute, but is the instance's)."""
        return name in self.methods or name in self.attrs \
            or any(isinstance(f.target, ast.Name) and f.target.id == name for f in self.fields)

    def self_calls(self, name: str, include_super: bool = True) -> list[tuple[str, CallShape]]:
        """Calls `self.name(...)`, `cls.name(...)`, `super().name(...)` in this class's
        methods, each with the method it sits in. Without `include_super`, only calls
        that a subclass's override receives (`super().name` in a core class goes to a
        class above it, never to a plugin subclass)."""
        if not include_super:
            self.self_calls(name)
            return [(e, c) for e, c in self.self_calls(name) if id(c) not in self._super_ids]
        if self._self_calls is None:
            self._self_calls = {}
            self._super_ids = set()
            self._cls_ids = set()
            for stmt in _module_level(self.node.body if self.node else []):
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                partials = _self_partials(stmt)
                for node, enclosing in calls_in(stmt):
                    if isinstance(node.func, ast.Name) and node.func.id in partials:
                        attr, bound = partials[node.func.id]
                        self._self_calls.setdefault(attr, []).append((stmt.name, _after(bound, call_shape(node, enclosing))))
                        continue
                    if not isinstance(node.func, ast.Attribute):
                        continue
                    recv = node.func.value
                    is_super = isinstance(recv, ast.Call) and dotted(recv.func) == "super"
                    if (isinstance(recv, ast.Name) and recv.id in ("self", "cls")) or is_super:
                        shape = call_shape(node, enclosing)
                        if is_super:
                            self._super_ids.add(id(shape))
                        elif recv.id == "cls":
                            self._cls_ids.add(id(shape))
                        self._self_calls.setdefault(node.func.attr, []).append((stmt.name, shape))
        return self._self_calls.get(name, [])

    def through_class(self, call: CallShape) -> bool:
        """Is this call of `self_calls` spelled `cls.name(...)`? On a plain method that is an
        unbound call: its first argument is the instance (`cls._maybe_apply_model_mapping(instance)`
        in `SupportsQuant.__new__`)."""
        return id(call) in self._cls_ids


def _self_partials(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, tuple[str, CallShape]]:
    """Local names a method binds once, to `functools.partial(self.meth, *args, **kw)`:
    name -> (meth, the shape of the arguments bound there). Core's CUDA-graph capture calls
    `dummy_run = functools.partial(self._dummy_run, ...)` then `dummy_run(n, num_active_loras=k)`,
    which a subclass's `_dummy_run` receives."""
    stores: dict[str, int] = {}
    found: dict[str, tuple[str, CallShape]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores[node.id] = stores.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and dotted(node.value.func) in ("functools.partial", "partial") \
                and node.value.args and isinstance(node.value.args[0], ast.Attribute) \
                and isinstance(node.value.args[0].value, ast.Name) and node.value.args[0].value.id in ("self", "cls") \
                and not any(isinstance(a, ast.Starred) for a in node.value.args):
            bound = ast.Call(func=node.value.func, args=node.value.args[1:], keywords=node.value.keywords)
            ast.copy_location(bound, node.value)
            found[node.targets[0].id] = (node.value.args[0].attr, call_shape(bound))
    return {name: v for name, v in found.items() if stores.get(name) == 1}


def _after(bound: CallShape, call: CallShape) -> CallShape:
    """The shape of a call through a partial: its bound arguments, then the call's own."""
    return CallShape(line=call.line, npos=bound.npos + call.npos, keywords=tuple(dict.fromkeys(bound.keywords + call.keywords)),
                     star=call.star, dstar=bound.dstar or call.dstar, cannot_hold=call.cannot_hold,
                     pos_names=bound.pos_names + call.pos_names)


@dataclass
class ModuleInfo:
    name: str  # dotted module name
    path: str  # file path inside the tree ('' for a namespace package)
    is_package: bool
    tree: ast.Module | None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)
    all_names: tuple[str, ...] | None = None
    lazy_names: dict[str, str | None] = field(default_factory=dict)  # name -> "mod:attr" target
    lazy_open: bool = False  # a __getattr__ we cannot read: anything may exist
    # the module's __getattr__ may end without raising: a name it does not serve is None
    lazy_none: int = 0  # the line of that __getattr__ (0: it raises for every other name)
    functions: dict[str, Signature] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    syntax_error: str | None = None
    skipped: str | None = None  # the file is there but was not read (the source says why)
    _calls: dict[str, list[CallShape]] | None = None

    def bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)

    def calls(self, name: str) -> list[CallShape]:
        """Call sites in this module that call `name(...)` by its bare name."""
        if self._calls is None:
            self._calls = {}
            if self.tree is not None:
                for node, enclosing in calls_in(self.tree):
                    if isinstance(node.func, ast.Name):
                        self._calls.setdefault(node.func.id, []).append(call_shape(node, enclosing))
        return self._calls.get(name, [])

    def attr_calls(self, alias_names: set[str], name: str) -> list[CallShape]:
        """Call sites `alias.name(...)` where alias is one of `alias_names`."""
        out: list[CallShape] = []
        if self.tree is None:
            return out
        for node in ast.walk(self.tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == name and dotted(node.func.value) in alias_names):
                out.append(call_shape(node))
        return out


def calls_in(root: ast.AST) -> Iterable[tuple[ast.Call, Signature | None]]:
    """Every call under `root`, with the signature of the innermost function it sits in."""
    stack: list[tuple[ast.AST, Signature | None]] = [(root, None)]
    while stack:  # an explicit stack: deep expression chains would overflow recursion
        node, enclosing = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            enclosing = from_ast(node)
        if isinstance(node, ast.Call):
            yield node, enclosing
        children = list(ast.iter_child_nodes(node))
        stack.extend((child, enclosing) for child in reversed(children))  # source order


def absolute_module(current: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute module of `from <level dots><module> import ...` inside `current`."""
    if level == 0:
        return module or ""
    parts = current.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[:len(parts) - (level - 1)]
    base = ".".join(parts)
    if module:
        return f"{base}.{module}" if base else module
    return base


def _str_items(node: ast.expr) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return items
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return None


def _dict_targets(node: ast.expr) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                target = v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None
                out[k.value] = target
    else:
        for name in _str_items(node) or []:
            out[name] = None
    return out


# A branch decider: for the test of an `if`, True (only the body runs), False (only the
# `else`), None (cannot tell: both are read). The plugin's index decides its
# `vllm_version_is(...)` and capability tests against the core under test, so a name
# defined under both branches binds to the one that core runs (conditions.branch_decider).
Decide = Callable[[ast.expr], "bool | None"]


def _module_level(body: Iterable[ast.stmt], decide: Decide | None = None) -> Iterable[ast.stmt]:
    """Statements executed at module level, through if/try/with/for blocks."""
    for stmt, _ in _module_level_tc(body, decide=decide):
        yield stmt


def is_type_checking(test: ast.expr) -> bool:
    return dotted(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _module_level_tc(body: Iterable[ast.stmt], tc: bool = False,
                     decide: Decide | None = None) -> Iterable[tuple[ast.stmt, bool]]:
    """Like _module_level, each statement with whether it runs only for type checkers
    (inside the body of an `if TYPE_CHECKING:`, which is False at run time)."""
    for stmt in body:
        yield stmt, tc
        if isinstance(stmt, ast.If):
            taken = decide(stmt.test) if decide is not None and not is_type_checking(stmt.test) else None
            if taken is not False:
                yield from _module_level_tc(stmt.body, tc or is_type_checking(stmt.test), decide)
            if taken is not True:
                yield from _module_level_tc(stmt.orelse, tc, decide)
        elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.AsyncWith)):
            yield from _module_level_tc(stmt.body, tc, decide)
            yield from _module_level_tc(getattr(stmt, "orelse", []), tc, decide)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            yield from _module_level_tc(stmt.body, tc, decide)
            for h in stmt.handlers:
                yield from _module_level_tc(h.body, tc, decide)
            yield from _module_level_tc(stmt.orelse, tc, decide)
            yield from _module_level_tc(stmt.finalbody, tc, decide)


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def class_info(node: ast.ClassDef, decide: Decide | None = None) -> ClassInfo:
    """What a class body defines. With `decide`, only the branches of its `if`s that run
    (a method defined twice under `if vllm_version_is(...)`/`else` is the one that core
    runs); fields are the annotated names in the branches that run, in order."""
    methods: dict[str, Signature] = {}
    attrs: set[str] = set()
    for stmt in _module_level(node.body, decide):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            attrs.add(stmt.name)
            sig = from_ast(stmt)
            if "overload" in sig.decorators:
                continue
            if stmt.name in methods and any(d.endswith("setter") or d == "deleter"
                                            for d in sig.decorators):
                continue
            methods[stmt.name] = sig
        elif isinstance(stmt, ast.ClassDef):
            attrs.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                attrs.update(_target_names(t))
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            attrs.update(_target_names(stmt.target))
    # dataclass fields: the class body's own annotations, and those under an `if` the
    # decider settles (an undecided `if` adds none, as before)
    fields = [s for s in _decided_body(node.body, decide) if isinstance(s, ast.AnnAssign)]
    # a subscripted generic base (`Engine[Info]`, `Generic[T]`) is its class: the
    # subscript only parametrises it
    bases = tuple(dotted(b.value if isinstance(b, ast.Subscript) else b) for b in node.bases)
    decorators = tuple(dotted(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list)
    return ClassInfo(node.name, node.lineno, bases, methods, attrs, decorators, node, fields=fields)


def _decided_body(body: list[ast.stmt], decide: Decide | None) -> Iterable[ast.stmt]:
    for stmt in body:
        if isinstance(stmt, ast.If) and decide is not None and not is_type_checking(stmt.test):
            taken = decide(stmt.test)
            if taken is not None:
                yield from _decided_body(stmt.body if taken else stmt.orelse, decide)
                continue
        yield stmt


def unknown_module(name: str, path: str, is_package: bool, *, syntax_error: str | None = None,
                   skipped: str | None = None) -> ModuleInfo:
    """A module that is there but whose content the gate cannot know (it does not parse,
    or its file was not read): every name asked of it is undecidable, never missing."""
    mod = ModuleInfo(name, path, is_package, None, syntax_error=syntax_error, skipped=skipped)
    mod.lazy_open = True
    return mod


def parse_module(name: str, path: str, is_package: bool, data: bytes,
                 decide: "Callable[[ast.expr, ModuleInfo], bool | None] | None" = None,
                 asts: dict | None = None) -> ModuleInfo:
    """Index one module. `asts`: syntax trees shared by content (sha1 of the bytes), so
    a file both cores (or every step of a bisection) hold is parsed once; the gate never
    modifies a tree. Hostile content (a 100,000-term expression, an `elif` chain thousands
    long, a file too large to hold parsed) makes a module that does not parse, with its
    reason, never a traceback."""
    try:
        digest = hashlib.sha1(data).hexdigest() if asts is not None else ""
        tree = asts.get(digest) if asts is not None else None
        if tree is None:
            tree = ast.parse(data, filename=path)
            if asts is not None:
                asts[digest] = tree
        return _index_module(name, path, is_package, tree, decide)
    except (SyntaxError, ValueError) as exc:
        return unknown_module(name, path, is_package, syntax_error=str(exc))
    except RecursionError:
        return unknown_module(name, path, is_package, syntax_error="nested too deeply")
    except MemoryError:
        return unknown_module(name, path, is_package, syntax_error="too large to parse")


def _index_module(name: str, path: str, is_package: bool, tree: ast.Module,
                  decide: "Callable[[ast.expr, ModuleInfo], bool | None] | None") -> ModuleInfo:
    mod = ModuleInfo(name, path, is_package, tree)
    getattr_defs: list[ast.FunctionDef] = []
    literals: dict[str, ast.expr] = {}
    local_decide = (lambda test: decide(test, mod)) if decide is not None else None
    for stmt, tc in _module_level_tc(tree.body, decide=local_decide):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mod.bind(stmt.name, Binding("def", stmt.lineno, type_checking=tc))
            mod.functions.setdefault(stmt.name, from_ast(stmt))
            if stmt.name == "__getattr__":
                getattr_defs.append(stmt)
        elif isinstance(stmt, ast.ClassDef):
            mod.bind(stmt.name, Binding("class", stmt.lineno, type_checking=tc))
            mod.classes.setdefault(stmt.name, class_info(stmt, local_decide))
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    mod.bind(alias.asname, Binding("import", stmt.lineno, alias.name, type_checking=tc))
                else:
                    top = alias.name.split(".")[0]
                    mod.bind(top, Binding("import", stmt.lineno, top, type_checking=tc))
        elif isinstance(stmt, ast.ImportFrom):
            src = absolute_module(name, is_package, stmt.level, stmt.module)
            for alias in stmt.names:
                if alias.name == "*":
                    if not tc:
                        mod.star_imports.append(src)
                else:
                    mod.bind(alias.asname or alias.name,
                             Binding("from", stmt.lineno, src, alias.name, type_checking=tc))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            for t in targets:
                for n in _target_names(t):
                    mod.bind(n, Binding("assign", stmt.lineno, type_checking=tc))
                    if value is not None and isinstance(t, ast.Name):
                        literals[n] = value
                        if n == "__all__":
                            items = _str_items(value)
                            if items is not None:
                                mod.all_names = tuple(items) if not isinstance(stmt, ast.AugAssign) \
                                    else (mod.all_names or ()) + tuple(items)
    for fn in getattr_defs:
        _read_lazy_table(mod, fn, literals)
    return mod


def serves_none(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Can the module `__getattr__` `fn` return None (end without raising, `return`,
    `return None`) for some name? Then `from M import X` binds None for any X it does
    not serve (see gate/nonebound.py for which uses survive that)."""
    going, none = _flow(fn.body)
    return going or none


def _flow(body: list[ast.stmt]) -> tuple[bool, bool]:
    """(may run past the end of `body`, may return None inside it)."""
    none = False
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return False, none or stmt.value is None or (isinstance(stmt.value, ast.Constant)
                                                         and stmt.value.value is None)
        if isinstance(stmt, ast.Raise):
            return False, none
        if isinstance(stmt, ast.If):
            # an `elif` chain is walked as one statement: it may be thousands long
            branches, last = [], stmt
            while True:
                branches.append(last.body)
                if not (len(last.orelse) == 1 and isinstance(last.orelse[0], ast.If)):
                    break
                last = last.orelse[0]
            parts = [_flow(b) for b in branches] + [_flow(last.orelse) if last.orelse else (True, False)]
            none = none or any(n for _, n in parts)
            if not any(g for g, _ in parts):
                return False, none
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            parts = [_flow(stmt.body + stmt.orelse)] + [_flow(h.body) for h in stmt.handlers]  # type: ignore[attr-defined]
            none = none or any(n for _, n in parts)
            if stmt.finalbody:  # type: ignore[attr-defined]
                final_goes, final_none = _flow(stmt.finalbody)  # type: ignore[attr-defined]
                none = none or final_none
                if not final_goes:
                    return False, none
            if not any(g for g, _ in parts):
                return False, none
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            g, n = _flow(stmt.body)
            none = none or n
            if not g:
                return False, none
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):  # the loop may run no time
            none = none or _flow(stmt.body)[1] or _flow(stmt.orelse)[1]
        elif isinstance(stmt, ast.Match):
            flows = [_flow(c.body) for c in stmt.cases]
            none = none or any(n for _, n in flows)
    return True, none


def _read_lazy_table(mod: ModuleInfo, fn: ast.FunctionDef, literals: dict[str, ast.expr]) -> None:
    """Names a module-level `__getattr__(name)` serves, where they can be read statically."""
    if serves_none(fn):
        mod.lazy_none = fn.lineno
    if not fn.args.args:
        mod.lazy_open = True
        return
    param = fn.args.args[0].arg
    found = False
    for node in ast.walk(fn):
        table: ast.expr | None = None
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == param:
            for op, comp in zip(node.ops, node.comparators):
                if isinstance(op, ast.In):
                    table = comp
                elif isinstance(op, ast.Eq) and isinstance(comp, ast.Constant) and isinstance(comp.value, str):
                    mod.lazy_names[comp.value] = None
                    found = True
        elif (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name)
              and node.slice.id == param):
            table = node.value
        if table is None:
            continue
        if isinstance(table, ast.Call) and isinstance(table.func, ast.Attribute) \
                and table.func.attr in ("keys", "values", "items"):
            table = table.func.value
        if isinstance(table, ast.Name) and table.id in literals:
            table = literals[table.id]
        entries = _dict_targets(table)
        if entries or isinstance(table, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
            mod.lazy_names.update(entries)
            found = True
    if not found:
        mod.lazy_open = True


# ----------------------------------------------------------------------------- lookups


@dataclass(frozen=True)
class Lookup:
    """The answer to 'does module M have name N?'."""

    status: str  # found | missing | undecidable
    module: str  # where the name was finally found (or looked for)
    path: str
    line: int
    kind: str = ""  # def | class | assign | module | lazy | ...
    reason: str = ""


_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b|import[ \t]+([\w.]+))", re.MULTILINE)


class TreeIndex:
    """Modules of one tree, parsed on demand and cached by content key."""

    def __init__(self, source: TreeSource, cache: dict[str, ModuleInfo] | None = None, *,
                 packages: frozenset[str] = frozenset(), other: "TreeIndex | None" = None,
                 decide: "Callable[[ast.expr, ModuleInfo], bool | None] | None" = None,
                 variant: str = "", asts: dict | None = None) -> None:
        self.source = source
        self.asts = asts
        # `decide` settles `if` tests while a module is indexed (see Decide); what it
        # answers depends on the core under test, so the cache key carries `variant`
        self.decide = decide
        self.variant = variant
        self._loading: set[str] = set()
        self._modules: dict[str, ModuleInfo | None] = {}
        self._parsed = cache if cache is not None else {}
        self.files_read: set[str] = set()
        self.files_indexed: set[str] = set()  # read and indexed here, not found in the cache
        # Modules outside `packages` are answered by `other` (the plugin's index
        # delegates core modules to the core's), so one resolver spans both trees.
        self.packages = packages
        self.other = other
        self._imported: dict[str, tuple[str, int]] | None = None

    # -- modules

    def imported_modules(self) -> dict[str, tuple[str, int]]:
        """Every module this tree's own code imports (by its import statements' text, any
        scope, tests aside), with the first place that does; read once. A module core imports
        that its source tree lacks is one its build installs (vLLM's `vllm/vllm_flash_attn/
        layers/` comes from the flash-attention build, not the sdist)."""
        if self._imported is None:
            found: dict[str, tuple[str, int]] = {}
            for top in sorted(self.packages):
                for path in self.source.py_files(top):
                    if "/tests/" in f"/{path}":
                        continue
                    data = self.source.read(path) or b""
                    for m in _IMPORT_LINE.finditer(data):
                        name = (m.group(1) or m.group(2)).decode("ascii", "replace")
                        found.setdefault(name, (path, data.count(b"\n", 0, m.start()) + 1))
            self._imported = found
        return self._imported

    def imported_at(self, name: str) -> tuple[str, int] | None:
        """Where the tree that owns module `name` imports it in its own code (`imported_modules`),
        delegated to `other` as `module` is; None when it does not."""
        if self.other is not None and name.split(".")[0] not in self.packages:
            return self.other.imported_at(name)
        return self.imported_modules().get(name) if name.split(".")[0] in self.packages else None

    def module(self, name: str) -> ModuleInfo | None:
        if self.other is not None and name.split(".")[0] not in self.packages:
            return self.other.module(name)
        if name in self._modules:
            return self._modules[name]
        if name in self._loading:
            return None  # asked for while it is being indexed (a decider's cycle): not known yet
        self._loading.add(name)
        try:
            mod = self._load(name)
        finally:
            self._loading.discard(name)
        self._modules[name] = mod
        return mod

    def _load(self, name: str) -> ModuleInfo | None:
        if not name or any(not p.isidentifier() for p in name.split(".")):
            return None
        rel = name.replace(".", "/")
        for path, is_pkg in ((f"{rel}/__init__.py", True), (f"{rel}.py", False)):
            # content and path (which fix the module's name): a file two trees hold
            # unchanged is indexed once (the forward view's releases, bisect's steps)
            # A module whose indexing asked the decider nothing (no `if` at module or
            # class level) is the same for every core: it is kept under `@any`.
            base = f"{self.source.key(path)}:{path}"
            key = base + self.variant
            for known in ((base + "@any", key) if self.variant else (key,)):
                cached = self._parsed.get(known)
                if cached is not None and cached.name == name:
                    self.files_read.add(path)
                    return cached
            data = self.source.read(path)
            if data is None:
                why = self.source.skipped.get(path)
                if why is None:
                    continue
                mod = unknown_module(name, path, is_pkg, skipped=why)
                self._parsed[key] = mod
                return mod
            self.files_read.add(path)
            self.files_indexed.add(path)
            asked = [0]
            decide = self.decide
            if decide is not None:
                def counted(test, mod, _decide=decide):
                    asked[0] += 1
                    return _decide(test, mod)
                decide = counted
            mod = parse_module(name, path, is_pkg, data, decide, self.asts)
            self._parsed[base + "@any" if self.variant and not asked[0] else key] = mod
            return mod
        if self.source.is_dir(rel):  # a namespace package (no __init__.py)
            return ModuleInfo(name, "", True, None)
        return None

    def class_of(self, mod: ModuleInfo, node: ast.ClassDef) -> ClassInfo:
        """ClassInfo of a class statement of `mod` (any scope), read as the index reads
        classes: through the branches the decider settles."""
        known = mod.classes.get(node.name)
        if known is not None and known.node is node:
            return known
        decide = self.decide
        return class_info(node, (lambda test: decide(test, mod)) if decide is not None else None)

    def has_module(self, name: str) -> bool:
        return self.module(name) is not None

    # -- names

    def lookup(self, module: str, name: str, _hops: int = 0, _seen: frozenset = frozenset()) -> Lookup:
        mod = self.module(module)
        if mod is None:
            return Lookup("missing", module, "", 0, reason=f"module {module} does not exist")
        if _hops > MAX_HOPS or (module, name) in _seen:
            return Lookup("undecidable", module, mod.path, 0, reason="re-export chain too long")
        seen = _seen | {(module, name)}
        all_bindings = mod.bindings.get(name, [])
        bindings = [b for b in all_bindings if not b.type_checking]
        if bindings:
            b = _preferred(bindings)
            return Lookup("found", module, mod.path, b.line, kind=b.kind)
        if mod.is_package and self.has_module(f"{module}.{name}"):
            sub = self.module(f"{module}.{name}")
            return Lookup("found", f"{module}.{name}", sub.path if sub else "", 1, kind="module")
        if name in mod.lazy_names:
            return Lookup("found", module, mod.path, 0, kind="lazy")
        for star in mod.star_imports:
            star_mod = self.module(star)
            if star_mod is None:
                continue
            if star_mod.all_names is not None and name not in star_mod.all_names:
                continue
            if star_mod.all_names is None and name.startswith("_"):
                continue
            res = self.lookup(star, name, _hops + 1, seen)
            if res.status != "missing":
                return res
        if mod.lazy_open:
            why = "it has a __getattr__ whose names cannot be read statically"
            if mod.syntax_error:
                why = f"it does not parse ({mod.syntax_error})"
            elif mod.skipped:
                why = f"its file was not read (it {mod.skipped})"
            return Lookup("undecidable", module, mod.path, 0, reason=f"{module}: {why}")
        if mod.lazy_none:
            return Lookup("missing", module, mod.path, mod.lazy_none, kind="none",
                          reason=f"{module} has no name '{name}' and its module __getattr__ "
                                 f"(line {mod.lazy_none}) ends without raising for it: the name is None")
        if all_bindings:
            return Lookup("missing", module, mod.path, all_bindings[0].line,
                          reason=f"{module} binds '{name}' only under `if TYPE_CHECKING:`, for type "
                                 "checkers: at run time the name does not exist")
        return Lookup("missing", module, mod.path, 0,
                      reason=f"{module} has no name '{name}'")

    # -- definitions (following imports)

    def resolve(self, module: str, name: str, _hops: int = 0) -> tuple[str, object] | None:
        """The definition behind `module.name`: ('func', (ModuleInfo, Signature)),
        ('class', (ModuleInfo, ClassInfo)), ('module', ModuleInfo) or None."""
        if _hops > MAX_HOPS:
            return None
        mod = self.module(module)
        if mod is None:
            return None
        bindings = mod.bindings.get(name, [])
        for b in sorted(bindings, key=lambda b: b.kind not in ("def", "class")):
            if b.kind == "def" and name in mod.functions:
                return "func", (mod, mod.functions[name])
            if b.kind == "class" and name in mod.classes:
                return "class", (mod, mod.classes[name])
            if b.kind == "from" and b.target is not None and b.attr is not None:
                if self.has_module(f"{b.target}.{b.attr}") and not self._binds(b.target, b.attr):
                    return "module", self.module(f"{b.target}.{b.attr}")
                return self.resolve(b.target, b.attr, _hops + 1)
            if b.kind == "import" and b.target is not None:
                sub = self.module(b.target)
                return ("module", sub) if sub is not None else None
        if bindings:
            return None  # bound by an assignment: no static definition to follow
        if mod.is_package and self.has_module(f"{module}.{name}"):
            return "module", self.module(f"{module}.{name}")
        target = mod.lazy_names.get(name)
        if target and ":" in target:
            lazy_mod, attr = target.split(":", 1)
            if lazy_mod.startswith("."):
                level = len(lazy_mod) - len(lazy_mod.lstrip("."))
                lazy_mod = absolute_module(module, mod.is_package, level, lazy_mod.lstrip(".") or None)
            return self.resolve(lazy_mod, attr, _hops + 1)
        for star in mod.star_imports:
            found = self.resolve(star, name, _hops + 1)
            if found is not None:
                return found
        return None

    def _binds(self, module: str, name: str) -> bool:
        mod = self.module(module)
        return bool(mod and name in mod.bindings)

    def resolve_dotted(self, dotted_name: str) -> tuple[str, object] | None:
        """Resolve `a.b.C.meth` by the longest module prefix, then attributes."""
        parts = dotted_name.split(".")
        for cut in range(len(parts), 0, -1):
            modname = ".".join(parts[:cut])
            mod = self.module(modname)
            if mod is None:
                continue
            current: tuple[str, object] | None = ("module", mod)
            for attr in parts[cut:]:
                current = self.member(current, attr)
                if current is None:
                    return None
            return current
        return None

    def member(self, obj: tuple[str, object] | None, attr: str) -> tuple[str, object] | None:
        if obj is None:
            return None
        kind, val = obj
        if kind == "module":
            assert isinstance(val, ModuleInfo)
            return self.resolve(val.name, attr)
        if kind == "class":
            mod, cls = val  # type: ignore[misc]
            found = self.class_member(mod, cls, attr)
            if found is not None:
                return found
        return None

    def class_member(self, mod: ModuleInfo, cls: ClassInfo, attr: str,
                     _depth: int = 0) -> tuple[str, object] | None:
        """('method', (ModuleInfo, ClassInfo, Signature)) or ('attr', ...) through bases."""
        if attr in cls.methods:
            return "method", (mod, cls, cls.methods[attr])
        if attr in cls.attrs:
            return "attr", (mod, cls, None)
        if _depth > MAX_HOPS:
            return None
        for base in self.bases(mod, cls):
            if base is None:
                continue
            bmod, bcls = base
            found = self.class_member(bmod, bcls, attr, _depth + 1)
            if found is not None:
                return found
        return None

    def bases(self, mod: ModuleInfo, cls: ClassInfo) -> list[tuple[ModuleInfo, ClassInfo] | None]:
        """The class's bases resolved in its own module; None where not resolvable here."""
        out: list[tuple[ModuleInfo, ClassInfo] | None] = []
        for expr in cls.bases:
            if expr is None:
                out.append(None)
                continue
            head, _, rest = expr.partition(".")
            res = self.resolve(mod.name, head)
            if res is None and head in mod.classes:
                res = "class", (mod, mod.classes[head])
            for attr in rest.split(".") if rest else []:
                res = self.member(res, attr)
            if res is not None and res[0] == "class":
                out.append(res[1])  # type: ignore[arg-type]
            else:
                out.append(None)
        return out


def _preferred(bindings: list[Binding]) -> Binding:
    for b in bindings:
        if b.kind in ("def", "class"):
            return b
    return bindings[0]


# Bases that give a subclass nothing its lookups, its constructor or its attributes would
# find (`ABC` only marks abstract methods, `Generic[T]` only parametrises): a class deriving
# from them is as readable as one without them.
INERT_BASES = frozenset({"abc.ABC", "typing.Generic", "typing_extensions.Generic"})


def inert_base(mod: ModuleInfo, expr: str, local: dict[str, str] | None = None) -> bool:
    """Is the base expression `expr` in `mod` one of INERT_BASES (or `object`)?"""
    if expr == "object" and "object" not in mod.bindings and not (local and "object" in local):
        return True
    return qualify(mod, expr, local) in INERT_BASES


def dataclass_options(cls: ClassInfo) -> dict[str, bool] | None:
    """The keyword options of a class's @dataclass decorator ({} when bare), None
    when it is not a dataclass."""
    if cls.node is None:
        return None
    for d in cls.node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (dotted(target) or "").split(".")[-1] != "dataclass":
            continue
        opts: dict[str, bool] = {}
        if isinstance(d, ast.Call):
            for kw in d.keywords:
                if kw.arg and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool):
                    opts[kw.arg] = kw.value.value
        return opts
    return None


def qualify(mod: ModuleInfo, expr: str, local: dict[str, str] | None = None) -> str | None:
    """The absolute dotted name an expression like `alias.attr` denotes in `mod`.

    `local` maps names bound by imports inside the enclosing function(s).
    """
    head, _, rest = expr.partition(".")
    base: str | None = None
    if local and head in local:
        base = local[head]
    else:
        bindings = mod.bindings.get(head)
        if bindings:
            b = _preferred(bindings)
            if b.kind == "from" and b.target is not None:
                base = f"{b.target}.{b.attr}" if b.target else b.attr
            elif b.kind == "import":
                base = b.target
            elif b.kind in ("def", "class"):
                base = f"{mod.name}.{head}"
    if base is None:
        return None
    return f"{base}.{rest}" if rest else base
