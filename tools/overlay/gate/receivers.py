"""What a plugin expression is, read through core's own annotations.

The plugin reaches most core objects through other core objects: `vllm_config:
VllmConfig` is a parameter's annotation, `vllm_config.speculative_config` is a field
core annotates `SpeculativeConfig | None`, `kv_cache_config.kv_cache_tensors` a field
annotated `list[KVCacheTensor]`, `self.spec = vllm_config.speculative_config` an
attribute the plugin class binds from one. Each step here follows what core declares:

- a root name: a parameter annotated with a class (scan's `Scope.types`), a name bound
  once from a typed path (`=cfg.x`, `=cfg.xs[]` for a loop over it), or `self.attr` where
  every `self.attr = ...` of the plugin class is one typed path, one annotation or one
  core constructor call;
- an attribute of a core class instance: its annotation in the class body (dataclass
  fields, class-level annotations) or `self.attr: T = ...` in its methods, `Optional`/
  `| None` dropped, `list[T]`/`Sequence[T]`/`tuple[T, ...]` an element type for loops.

Only core classes are followed, and only where the annotation names one class the
index resolves. Anything else ends the path: the gate says nothing about it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, dotted, qualify

CONTAINERS = frozenset({"list", "List", "Sequence", "Iterable", "Iterator", "tuple", "Tuple", "set", "Set",
                        "frozenset", "FrozenSet", "MutableSequence", "Collection"})
HARMLESS_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})
DYNAMIC = frozenset({"__getattr__", "__getattribute__"})
MAX_DEPTH = 8


@dataclass(frozen=True)
class Typed:
    """An instance of a core class (`many`: a container of such instances)."""

    mod: ModuleInfo
    cls: ClassInfo
    many: bool = False
    how: str = ""  # the path that typed it, for the message


def _strip_optional(ann: ast.expr | None) -> ast.expr | None:
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        sides = [x for x in (ann.left, ann.right) if not (isinstance(x, ast.Constant) and x.value is None)]
        return _strip_optional(sides[0]) if len(sides) == 1 else None
    if isinstance(ann, ast.Subscript) and (dotted(ann.value) or "").split(".")[-1] == "Optional":
        return _strip_optional(ann.slice)
    return ann


def self_assignments(cls_node: ast.ClassDef) -> dict[str, list[tuple[ast.AST, ast.AST]]]:
    """attr -> (function, statement) for every `self.attr: T = ...` and `self.attr = ...`
    in the class's functions, in the order `Receivers.self_attr` reads them: each function
    of the class (nested ones too, again on their own) breadth first, its statements
    breadth first. One walk of the class answers every attribute (pure)."""
    out: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
    for fn in ast.walk(cls_node):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.AnnAssign):
                target = dotted(n.target)
                if target and target.startswith("self."):
                    out.setdefault(target[5:], []).append((fn, n))
            elif isinstance(n, ast.Assign):
                attrs = dict.fromkeys(t[5:] for t in map(dotted, n.targets) if t and t.startswith("self."))
                for attr in attrs:
                    out.setdefault(attr, []).append((fn, n))
    return out


class Receivers:
    def __init__(self, world: TreeIndex, is_core, linearize) -> None:
        self.world = world
        self.is_core = is_core
        self.linearize = linearize
        self._self_memo: dict = {}
        # id(class node) -> (the node, kept alive while its id is a key; its self_assignments)
        self._assigned: dict[int, tuple[ast.AST, dict]] = {}

    def assignments(self, cls_node: ast.ClassDef) -> dict[str, list[tuple[ast.AST, ast.AST]]]:
        """`self_assignments(cls_node)`, walked once per class (a core runner class is
        thousands of lines, and every `self.x.meth(...)` call asks)."""
        if id(cls_node) not in self._assigned:
            self._assigned[id(cls_node)] = (cls_node, self_assignments(cls_node))
        return self._assigned[id(cls_node)][1]

    # -- classes and their members

    def class_named(self, mod: ModuleInfo, expr: str, local: dict | None) -> tuple[ModuleInfo, ClassInfo] | None:
        target = qualify(mod, expr, local)
        obj = self.world.resolve_dotted(target) if target else None
        return obj[1] if obj is not None and obj[0] == "class" else None  # type: ignore[return-value]

    def annotated(self, mod: ModuleInfo, ann: ast.expr | None, local: dict | None, how: str) -> Typed | None:
        ann = _strip_optional(ann)
        many = False
        if isinstance(ann, ast.Subscript) and (dotted(ann.value) or "").split(".")[-1] in CONTAINERS:
            inner = ann.slice
            if isinstance(inner, ast.Tuple):
                elts = [e for e in inner.elts if not (isinstance(e, ast.Constant) and e.value is Ellipsis)]
                if len(elts) != 1:
                    return None
                inner = elts[0]
            ann, many = _strip_optional(inner), True
        name = dotted(ann) if ann is not None else None
        found = self.class_named(mod, name, local) if name else None
        if found is None or not self.is_core(found[0].name):
            return None
        return Typed(found[0], found[1], many, how)

    def chain(self, t: Typed) -> list[tuple[ModuleInfo, ClassInfo]] | None:
        """The class and its bases, None when a base cannot be read (it may define anything)."""
        out = [(t.mod, t.cls)] + [b for b in self.linearize(self.world, t.mod, t.cls) if b is not None]
        for mod, cls in out:
            for expr in cls.bases:
                if expr is None:
                    return None
                if expr.split(".")[-1] not in HARMLESS_BASES and self.class_named(mod, expr, None) is None:
                    return None
        return out

    def member(self, t: Typed, attr: str) -> tuple[str, ast.expr | None, tuple[ModuleInfo, ClassInfo] | None]:
        """('found', annotation or None, owner), ('missing', None, None) when core's class
        and every base certainly lack it, ('unknown', None, None) when the gate cannot tell."""
        chain = self.chain(t)
        if chain is None:
            return "unknown", None, None
        if any(DYNAMIC & set(cls.methods) for _, cls in chain):
            return "unknown", None, None
        for mod, cls in chain:
            for f in cls.fields:
                if isinstance(f.target, ast.Name) and f.target.id == attr:
                    return "found", f.annotation, (mod, cls)
            if attr in cls.methods or attr in cls.attrs:
                return "found", None, (mod, cls)
            ann = self._self_annotation(cls, attr)
            if ann is not False:
                return "found", ann, (mod, cls)  # type: ignore[return-value]
        return "missing", None, None

    def _self_annotation(self, cls: ClassInfo, attr: str):
        """The annotation of `self.attr: T = ...` in the class's methods (None when only
        assigned without one); False when the class never assigns it."""
        key = (id(cls.node), attr)
        if key not in self._self_memo:
            found: object = False
            for n in ast.walk(cls.node) if cls.node is not None else ():
                if isinstance(n, ast.AnnAssign) and dotted(n.target) == f"self.{attr}":
                    found = n.annotation
                    break
                if isinstance(n, (ast.Assign, ast.AugAssign)):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    if any(dotted(x) == f"self.{attr}" for x in targets):
                        found = None
            self._self_memo[key] = found
        return self._self_memo[key]

    def step(self, t: Typed, attr: str, how: str) -> Typed | None:
        status, ann, owner = self.member(t, attr)
        if status != "found" or ann is None or owner is None:
            return None
        return self.annotated(owner[0], ann, None, how)

    # -- plugin expressions

    def root(self, mod: ModuleInfo, name: str, types: dict | None, local: dict | None, cls_node,
             depth: int = 0) -> Typed | None:
        if depth > MAX_DEPTH or not types or name not in types or len(types[name]) != 1:
            return None
        expr = types[name][0]
        if not expr.startswith("="):
            found = self.class_named(mod, expr, local)
            if found is None or not self.is_core(found[0].name):
                return None
            return Typed(found[0], found[1], False, f"{name}: {expr}")
        path = expr[1:]
        many = path.endswith("[]")
        t = self.path(mod, path[:-2] if many else path, types, local, cls_node, depth + 1)
        if t is None or t.many != many:
            return None
        return Typed(t.mod, t.cls, False, f"{name} from {path}")

    def self_attr(self, mod: ModuleInfo, cls_node: ast.ClassDef | None, attr: str, depth: int) -> Typed | None:
        """`self.attr` of a plugin class: every assignment in the class types it as one core class."""
        if cls_node is None or depth > MAX_DEPTH:
            return None
        key = ("self", id(cls_node), attr)
        if key in self._self_memo:
            return self._self_memo[key]
        self._self_memo[key] = None  # a cycle ends here
        from overlay.gate.scan import _annotated_params
        found: list[Typed | None] = []
        params_of: dict[int, dict] = {}
        for fn, n in self.assignments(cls_node).get(attr, ()):
            if isinstance(n, ast.AnnAssign):
                found.append(self.annotated(mod, n.annotation, None, f"self.{attr}: {dotted(n.annotation)}"))
            else:
                value = n.value
                if isinstance(value, ast.Call) and dotted(value.func):
                    got = self.class_named(mod, dotted(value.func), None)  # type: ignore[arg-type]
                    found.append(Typed(got[0], got[1], False, f"self.{attr} = {dotted(value.func)}(...)")
                                 if got and self.is_core(got[0].name) else None)
                elif isinstance(value, ast.Attribute) and dotted(value):
                    params = params_of.get(id(fn))
                    if params is None:
                        params = params_of[id(fn)] = _annotated_params(fn)
                    path = dotted(value)
                    found.append(None if path.startswith(f"self.{attr}") else  # type: ignore[union-attr]
                                 self.path(mod, path, params, None, cls_node, depth + 1))  # type: ignore[arg-type]
                else:
                    found.append(None)
        kinds = {(t.mod.name, t.cls.name, t.many) if t else None for t in found}
        result = found[0] if len(kinds) == 1 and None not in kinds else None
        self._self_memo[key] = result
        return result

    def path(self, mod: ModuleInfo, path: str, types: dict | None, local: dict | None, cls_node,
             depth: int = 0) -> Typed | None:
        """The core class instance `a.b.c` is, following annotations, or None."""
        parts = path.split(".")
        if parts[0] == "self":
            if len(parts) < 2:
                return None
            t = self.self_attr(mod, cls_node, parts[1], depth)
            rest = parts[2:]
        else:
            t = self.root(mod, parts[0], types, local, cls_node, depth)
            rest = parts[1:]
        for attr in rest:
            if t is None or t.many:
                return None
            t = self.step(t, attr, f"{path}")
        return t

    def missing(self, mod: ModuleInfo, expr: str, types: dict | None, local: dict | None, cls_node):
        """(receiver path, Typed, attribute) for the first attribute of `expr` that the core
        class its receiver is typed as certainly lacks; None otherwise."""
        parts = expr.split(".")
        start = 2 if parts[0] == "self" else 1
        for cut in range(start, len(parts)):
            recv = ".".join(parts[:cut])
            t = self.path(mod, recv, types, local, cls_node)
            if t is None or t.many:
                return None
            status, _, _ = self.member(t, parts[cut])
            if status == "missing":
                return recv, t, parts[cut]
            if status != "found":
                return None
        return None
