"""The plugin's own calls into core, checked against core's signatures.

Most of a vLLM bump's work is here: core changes a function, a classmethod, a
constructor or a kernel the plugin calls. For every call the scan recorded, the
callee is resolved to its core definition where that can be done statically:

- `f(...)`, `mod.f(...)`, `Class.meth(...)`, `orig(...)` for `orig = mod.f`, and
  Triton launches `kernel[grid](...)` (constexpr keywords included; launcher options
  and parameters a decorator fills are not counted as missing: launches.py);
- `super().meth(...)` and `super().__init__(...)` (a core `__init__` or the fields of a
  core dataclass) in a plugin class;
- `self.meth(...)` where `meth` comes from a core base class (nothing in the plugin's
  class, its plugin bases or its plugin subclasses defines it, nor assigns it);
- `self.attr.meth(...)` where the class builds `self.attr` from one class only
  (`self.attr = CoreClass(...)`, a factory whose return annotation names the class,
  or an annotation `self.attr: CoreClass = ...`), else typed through core's own code
  (typedcalls.py: `self.compilation_config` that only core's base `__init__` assigns).

A call that binds, arity fitting, positional arguments named like later parameters of
core's signature is shifted by a parameter core inserted (shifts.py).

A callee the plugin replaces (`mod.f = ours`, `Class.meth = ours`) is not judged: the
replacement runs instead, and is checked as one. Severity follows the module: a
break in a module on the start-up import chain is an error, elsewhere a warning.
Several calls of one callee in one plugin file make one finding naming their lines.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overlay.gate.captures import aliased, class_capture
from overlay.gate.findings import Finding, also_at
from overlay.gate.forwarders import forwards
from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, dataclass_options, dotted, inert_base, qualify
from overlay.gate.instances import plugin_function_reachable
from overlay.gate.launches import missing_in_launch
from overlay.gate.scan import CallUse, PluginFacts
from overlay.gate.shifts import shifted_positions
from overlay.gate.signature import Signature, accepts_call
from overlay.gate.typedcalls import typed_self_callee

# Method decorators under which the name is not a plain callable of that signature.
NOT_CALLABLE = frozenset({"property", "cached_property", "overload", "setter", "getter", "deleter",
                          "abstractproperty", "singledispatchmethod", "singledispatch"})


@dataclass(frozen=True)
class Callee:
    qualname: str  # core module.Class.meth or module.func
    sig: Signature  # as the call binds it (receiver dropped where it is implicit)
    path: str
    line: int
    how: str  # how the callee was found, for the reason


def _bound(sig: Signature, through_instance: bool) -> Signature:
    if sig.is_static:
        return sig
    if sig.is_classmethod or through_instance:
        return sig.bound()
    return sig


def _usable(sig: Signature) -> bool:
    return not (NOT_CALLABLE & set(sig.decorators))


def _builds_on_core(target: str | None) -> bool:
    """A class of another vLLM plugin (`vllm_ascend...`): not core, not the plugin under
    test, and built on core, so it may subclass core's classes."""
    top = (target or "").split(".")[0]
    return top.startswith("vllm_")


class _Resolver:
    def __init__(self, facts: PluginFacts, world: TreeIndex, ev) -> None:
        from overlay.gate.checks import _linearize
        self.facts = facts
        self.world = world
        self.ev = ev
        self.linearize = _linearize
        self.memo: dict = {}
        self._subclass_defs: dict[tuple[str, str], set[str]] | None = None
        self._mixers: dict[tuple[str, str], list] | None = None
        self._self_assigned: dict[int, set[str]] = {}
        self._self_assignments: dict[int, tuple] = {}
        self._receivers: dict[tuple[int, str], object] = {}

    def is_core(self, name: str) -> bool:
        return self.ev.is_core(name)

    def replaced(self, owner: str, attr: str) -> bool:
        return attr in self.ev.replaced.get(owner, ())

    # -- plugin classes

    def class_info(self, mod: ModuleInfo, node: ast.ClassDef) -> ClassInfo:
        return self.world.class_of(mod, node)

    def mro(self, mod: ModuleInfo, cls: ClassInfo, local: dict | None):
        """The classes after `cls` in its method resolution order (C3, as Python builds
        it: `class A(CoreB, PluginBase(CoreC))` puts PluginBase before CoreC); None for a
        base the gate cannot read. Falls back to depth-first order when C3 fails."""
        key = ("mro", mod.name, cls.name, cls.line)
        if key not in self.memo:
            self.memo[key] = None  # a cycle ends here
            order = self._c3(mod, cls, local, 0)
            self.memo[key] = [None if isinstance(x[0], str) else x for x in order[1:]] if order is not None \
                else self.linearize(self.world, mod, cls, local)
        found = self.memo[key]
        return found if found is not None else []

    def _bases(self, mod: ModuleInfo, cls: ClassInfo, local: dict | None) -> list:
        out = []
        for expr in cls.bases:
            if expr and inert_base(mod, expr, local):
                continue
            target = qualify(mod, expr, local) if expr else None
            found = self.world.resolve_dotted(target) if target else None
            out.append(found[1] if found and found[0] == "class" else None)
        return out

    def _base_names(self, mod: ModuleInfo, cls: ClassInfo, local: dict | None) -> list[str | None]:
        """The qualified names of `_bases`' classes, in the same order (None: not a name)."""
        return [qualify(mod, expr, local) if expr else None
                for expr in cls.bases if not (expr and inert_base(mod, expr, local))]

    def _c3(self, mod: ModuleInfo, cls: ClassInfo, local: dict | None, depth: int):
        if depth > 12:
            return None
        seqs = []
        heads = []
        for i, (b, target) in enumerate(zip(self._bases(mod, cls, local), self._base_names(mod, cls, local))):
            if b is None:
                # "?!": a class of another vLLM plugin (vllm-omni's NPU runners inherit
                # vllm-ascend's NPUModelRunner) may subclass core's classes, so C3 may put
                # it before them
                marker = ("?!" if _builds_on_core(target) else "?", f"{mod.name}.{cls.name}#{i}", target or "?")
                seqs.append([marker])
                heads.append(marker)
                continue
            sub = self._c3(b[0], b[1], None, depth + 1)
            if sub is None:
                return None
            seqs.append(sub)
            heads.append(b)
        seqs.append(heads)
        out = [(mod, cls)]
        seqs = [list(x) for x in seqs if x]

        def ident(x):
            return x if isinstance(x[0], str) else (x[0].name, x[1].name)

        while seqs:
            for seq in seqs:
                head = ident(seq[0])
                if not any(head in [ident(y) for y in other[1:]] for other in seqs):
                    break
            else:
                return None  # no consistent order
            picked = seq[0]
            if not isinstance(picked[0], str) and self.is_core(picked[0].name):
                # an unread class that may subclass this core class would come before it
                pending = next((y for x in seqs for y in x if isinstance(y[0], str) and y[0] == "?!"), None)
                picked = pending if pending is not None else picked
            out.append(picked)
            seqs = [[y for y in x if ident(y) != ident(picked)] for x in seqs]
            seqs = [x for x in seqs if x]
        return out

    def subclass_defs(self) -> dict[tuple[str, str], set[str]]:
        """(module, class) of a plugin class -> names its plugin subclasses define:
        `self.meth(...)` in the base may run one of those instead."""
        if self._subclass_defs is None:
            out: dict[tuple[str, str], set[str]] = {}
            for pc in self.facts.classes:
                info = self.class_info(pc.module, pc.node)
                if not info.bases:
                    continue
                own = set(info.methods) | set(info.attrs) | self.self_assigned(pc.node)
                for b in self.mro(pc.module, info, pc.scope.local_imports):
                    if b is not None and not self.is_core(b[0].name):
                        out.setdefault((b[0].name, b[1].name), set()).update(own)
            self._subclass_defs = out
        return self._subclass_defs

    def mixers(self, mod: ModuleInfo, info: ClassInfo) -> list:
        """The method resolution orders (the class first) of the plugin classes that have the
        plugin class `info` in theirs and a core class after it: what `self` is in a mixin
        with no core base of its own."""
        if self._mixers is None:
            out: dict[tuple[str, str], list] = {}
            for pc in self.facts.classes:
                cinfo = self.class_info(pc.module, pc.node)
                if not cinfo.bases:
                    continue
                order = [(pc.module, cinfo)] + list(self.mro(pc.module, cinfo, pc.scope.local_imports))
                if not any(b is not None and self.is_core(b[0].name) for b in order):
                    continue
                for b in order[1:]:
                    if b is not None and not self.is_core(b[0].name):
                        out.setdefault((b[0].name, b[1].name), []).append(order)
            self._mixers = out
        return self._mixers.get((mod.name, info.name), [])

    def self_assignments(self, node: ast.ClassDef) -> dict[str, list[tuple[ast.expr | None, ast.expr | None]]]:
        """attr -> (value, annotation) of every `self.attr = ...` / `self.attr: T = ...` in
        the class, in `ast.walk` order. One walk per class: asked for each attribute of
        each call through `self.attr`."""
        found = self._self_assignments.get(id(node))
        if found is None or found[0] is not node:
            out: dict[str, list[tuple[ast.expr | None, ast.expr | None]]] = {}
            for n in ast.walk(node):
                if isinstance(n, ast.Assign):
                    targets, value, ann = n.targets, n.value, None
                elif isinstance(n, ast.AnnAssign):
                    targets, value, ann = [n.target], n.value, n.annotation
                else:
                    continue
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        out.setdefault(t.attr, []).append((value, ann))
            found = (node, out)
            self._self_assignments[id(node)] = found
        return found[1]

    def self_assigned(self, node: ast.ClassDef | None) -> set[str]:
        """Names a class's methods assign on `self` (`self.forward = self.forward_npu`)."""
        if node is None:
            return set()
        if id(node) not in self._self_assigned:
            names = set()
            for n in ast.walk(node):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] \
                    if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        names.add(t.attr)
            self._self_assigned[id(node)] = names
        return self._self_assigned[id(node)]

    def method_in_mro(self, chain, meth: str, how: str) -> Callee | None:
        """The first class of `chain` that defines `meth`, when that is a core method the
        plugin does not replace; None when a plugin class, an unknown base or a plain
        attribute comes first."""
        via = []
        for b in chain:
            if b is None:
                return None
            bmod, bcls = b
            core = self.is_core(bmod.name)
            if not core and meth in bcls.methods and forwards(bcls.node, meth) \
                    and meth not in self.self_assigned(bcls.node):
                via.append(bcls.name)
                continue  # it hands the call on unchanged (`super().m(*args, **kwargs)`)
            if not core and (meth in bcls.methods or meth in bcls.attrs or meth in self.self_assigned(bcls.node)):
                return None
            if via:
                how += f", through {', '.join(via)}"
            if meth in bcls.methods:
                sig = bcls.methods[meth]
                if not _usable(sig) or self.replaced(f"{bmod.name}.{bcls.name}", meth):
                    return None
                return Callee(f"{bmod.name}.{bcls.name}.{meth}", _bound(sig, True), bmod.path, sig.line, how)
            if meth in bcls.attrs:
                return None
        return None

    # -- the callee of one call

    def callee(self, use: CallUse) -> Callee | None:
        if use.func.startswith("super(") and not use.func.startswith("super()"):
            return self.explicit_super_callee(use)
        head, _, rest = use.func.partition(".")
        if head == "super()":
            return self.super_callee(use, rest)
        capture = class_capture(use)
        if capture is not None:
            return self.captured_callee(use, *capture)
        if head in ("self", "cls"):
            if use.cls is None:
                return None
            parts = rest.split(".")
            if len(parts) == 1:
                return self.self_callee(use, parts[0])
            found = self.attr_callee(use, parts[0], parts[1]) if len(parts) == 2 and head == "self" else None
            if found is None and head == "self" and self._receivers.get((id(use.cls), parts[0])) is None:
                found = typed_self_callee(self, use, parts)  # typed through core's code
            return found
        if use.receiver_types and "." in use.func and use.func.split(".")[0] not in use.local:
            return self.typed_callee(use)
        return self.named_callee(use)

    def typed_callee(self, use: CallUse) -> Callee | None:
        """`x.meth(...)` where `x` is a parameter annotated as a class, or narrowed by
        `isinstance(x, (A, B))`: judged when every class resolves, in core, to the same
        core method (one signature for all of them)."""
        meth = use.func.split(".")[1]
        callees = []
        for expr in use.receiver_types:
            cls = self.class_named(use.module, expr, use.local)
            if cls is None or not self.is_core(cls[0].name):
                return None
            callees.append(self.method_in_mro([cls] + list(self.mro(cls[0], cls[1], None)), meth,
                                              f"{use.func.split('.')[0]} is a {expr}"))
        return _one_signature(callees)

    def explicit_super_callee(self, use: CallUse) -> Callee | None:
        """`super(X, self).meth(...)`: the first definer after X in the class's order."""
        inner, _, meth = use.func[len("super("):].partition(").")
        if use.cls is None or "." in meth:
            return None
        info = self.class_info(use.module, use.cls)
        order = [(use.module, info)] + list(self.mro(use.module, info, use.local))
        target = self.class_named(use.module, inner, use.local)
        if target is None:
            return None
        idents = [None if b is None else (b[0].name, b[1].name) for b in order]
        key = (target[0].name, target[1].name)
        if key not in idents:
            return None
        return self.method_in_mro(order[idents.index(key) + 1:], meth, f"super({inner}, self).{meth} in {info.name}")

    def super_callee(self, use: CallUse, meth: str) -> Callee | None:
        from overlay.gate.checks import constructor_signature
        info = self.class_info(use.module, use.cls)  # type: ignore[arg-type]
        chain = self.mro(use.module, info, use.local)
        if meth == "__init__":
            via = []
            for b in chain:
                if b is None:
                    return None
                bmod, bcls = b
                if not self.is_core(bmod.name):
                    if _passes_construction_on(bcls):
                        via.append(bcls.name)  # no constructor of its own, or one that only forwards
                        continue
                    return None  # a plugin base's own constructor
                if self.replaced(f"{bmod.name}.{bcls.name}", "__init__"):
                    return None
                found = constructor_signature(self.world, bmod, bcls, self.is_core)
                if found is None or not found[1]:
                    return None
                return Callee(f"{bmod.name}.{bcls.name}.__init__", found[0], bmod.path, bcls.line,
                              f"super().__init__ in {info.name}"
                              + (f", through {', '.join(via)}" if via else ""))
            return None
        return self.method_in_mro(chain, meth, f"super().{meth} in {info.name}")

    def self_callee(self, use: CallUse, meth: str) -> Callee | None:
        node = use.cls
        assert node is not None
        info = self.class_info(use.module, node)
        if meth in info.methods or meth in info.attrs or meth in self.self_assigned(node):
            return None
        if meth in self.subclass_defs().get((use.module.name, info.name), set()):
            return None  # a plugin subclass may define it: the call may go there
        target = self.facts.patch_targets.get(id(node))
        if target is not None:  # a class-body patch: `self` is the target's object
            found = self.world.resolve_dotted(target)
            if found is None or found[0] != "class":
                return None
            tmod, tcls = found[1]  # type: ignore[misc]
            return self.method_in_mro([(tmod, tcls)] + self.mro(tmod, tcls, None), meth,
                                      f"self.{meth} in {info.name}, which patches core's {tcls.name}")
        chain = self.mro(use.module, info, use.local)
        if any(b is not None and self.is_core(b[0].name) for b in chain):
            return self.method_in_mro(chain, meth, f"self.{meth} in {info.name}, inherited from core")
        if any(b is None for b in chain):
            return None
        # a mixin: `self` is an instance of each plugin class that mixes it into core classes;
        # judged only when all of them resolve the name to one and the same core signature
        return _one_signature([self.method_in_mro(order, meth, f"self.{meth} in the mixin {info.name}, which "
                                                               f"{order[0][1].name} mixes into core's classes")
                               for order in self.mixers(use.module, info)])

    def attr_callee(self, use: CallUse, attr: str, meth: str) -> Callee | None:
        node = use.cls
        assert node is not None
        key = (id(node), attr)
        if key not in self._receivers:
            self._receivers[key] = self.receiver_class(use.module, node, attr, use.local)
        found = self._receivers[key]
        if found is None:
            return None
        kmod, kcls, how = found  # type: ignore[misc]
        if not self.is_core(kmod.name):
            if meth in kcls.methods or meth in kcls.attrs:
                return None
        chain = [(kmod, kcls)] + list(self.mro(kmod, kcls, None))
        return self.method_in_mro(chain, meth, f"self.{attr} is {how}")

    def receiver_class(self, mod: ModuleInfo, node: ast.ClassDef, attr: str, local: dict | None):
        """(module, class, how) when every assignment of `self.attr` in the class builds
        one and the same class, else None."""
        classes = set()
        how = ""
        for value, ann in self.self_assignments(node).get(attr, ()):
            found = None
            if ann is not None and dotted(ann):
                found = self.class_named(mod, dotted(ann), local)  # type: ignore[arg-type]
                h = f"annotated {dotted(ann)}"
            if found is None and isinstance(value, ast.Call) and dotted(value.func):
                found, h = self.built_by(mod, dotted(value.func), local)  # type: ignore[arg-type]
            if found is None:
                return None
            classes.add((found[0].name, found[1].name))
            how = h
            result = found
        if len(classes) != 1:
            return None
        return result[0], result[1], how

    def class_named(self, mod: ModuleInfo, expr: str, local: dict | None):
        target = qualify(mod, expr, local)
        obj = self.world.resolve_dotted(target) if target else None
        return obj[1] if obj is not None and obj[0] == "class" else None

    def built_by(self, mod: ModuleInfo, func: str, local: dict | None):
        """The class a call builds: a class called directly, or a function whose return
        annotation names one class."""
        target = qualify(mod, func, local)
        obj = self.world.resolve_dotted(target) if target else None
        if obj is None:
            return None, ""
        if obj[0] == "class":
            return obj[1], f"built as {func}(...)"
        if obj[0] == "func":
            fmod, sig = obj[1]  # type: ignore[misc]
            ret = _return_annotation(fmod, sig)
            if ret:
                cls = self.class_named(fmod, ret, None)
                if cls is not None:
                    return cls, f"returned by {func}(...) -> {ret}"
        return None, ""

    def captured_callee(self, use: CallUse, expr: str, through_instance: bool) -> Callee | None:
        """A call through a class-level capture (captures.py): core's function or method."""
        if use.cls is not None and expr.split(".")[-1] in self.self_assigned(use.cls):
            return None  # the instance may hold something else under that name
        target = qualify(use.module, expr, use.local)
        obj = self.world.resolve_dotted(target) if target else None
        if obj is None or obj[0] not in ("func", "method"):
            return None
        found: tuple = obj[1]  # type: ignore[assignment]  # (module, sig) or (module, class, sig)
        owner: ModuleInfo = found[0]
        signature: Signature = found[-1]
        qualname = ".".join([owner.name, *([found[1].name] if len(found) == 3 else []), signature.name])
        if not self.is_core(owner.name) or not _usable(signature):
            return None
        return Callee(qualname, _bound(signature, through_instance), owner.path, signature.line,
                      f"{use.func} holds core's {expr}, captured in the class body")

    def named_callee(self, use: CallUse) -> Callee | None:
        # `orig = mod.f` / `orig = Cls.meth` captured core's own object, before any patch of it
        func, captured = aliased(use)
        target = qualify(use.module, func, use.local)
        if target is None:
            return None
        key = (target, captured)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None
        owner, _, attr = target.rpartition(".")
        if not captured and owner and self.replaced(owner, attr):
            # the name is read from a module where the plugin installs its own object
            # (`fla.ops.chunk_gated_delta_rule = ours`, then `from fla.ops import ...`):
            # which one a call gets depends on import order, so no call of core's is proven
            return None
        obj = self.world.resolve_dotted(target)
        if obj is None:
            return None
        kind, val = obj
        result = None
        if kind == "func":
            fmod, sig = val  # type: ignore[misc]
            if self.is_core(fmod.name) and _usable(sig) and len(fmod.bindings.get(sig.name, [])) == 1 \
                    and (captured or not self.replaced(fmod.name, sig.name)):
                result = Callee(f"{fmod.name}.{sig.name}", sig, fmod.path, sig.line, f"{func} is core's")
        elif kind == "method":
            cmod, ccls, sig = val  # type: ignore[misc]
            if self.is_core(cmod.name) and _usable(sig) \
                    and (captured or not self.replaced(f"{cmod.name}.{ccls.name}", sig.name)):
                result = Callee(f"{cmod.name}.{ccls.name}.{sig.name}", _bound(sig, False), cmod.path, sig.line,
                                f"{func} is core's")
        self.memo[key] = result
        return result


def foreign_base_first(facts: PluginFacts, world: TreeIndex, ev, mod: ModuleInfo, node: ast.ClassDef,
                       local: dict | None, meth: str) -> str | None:
    """The base from another vLLM plugin that C3 puts before the first class of `node`'s order
    defining `meth` (a `self.meth(...)` there may reach that plugin's override, which the gate
    cannot read), or None."""
    resolver = _Resolver(facts, world, ev)
    order = resolver._c3(mod, resolver.class_info(mod, node), local, 0) or []
    for x in order[1:]:
        if isinstance(x[0], str):
            if x[0] == "?!":
                return x[2]
            continue
        if meth in x[1].methods:
            return None
    return None


def _passes_construction_on(cls: ClassInfo) -> bool:
    """A plugin class in a constructor's way that leaves the arguments to the class after
    it: no `__init__`/`__new__` of its own (or an `__init__` that only forwards `*args,
    **kwargs` to `super().__init__`), no class decorator (a dataclass or one that may
    build a constructor), no `__init__` bound in its body otherwise."""
    if "__new__" in cls.attrs or cls.decorators or dataclass_options(cls) is not None:
        return False
    if "__init__" in cls.methods:
        return forwards(cls.node, "__init__")
    return "__init__" not in cls.attrs


def _return_annotation(mod: ModuleInfo, sig: Signature) -> str | None:
    """The dotted return annotation of a module-level function (quotes stripped)."""
    if mod.tree is None:
        return None
    for stmt in mod.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == sig.name \
                and stmt.lineno == sig.line and stmt.returns is not None:
            ret = stmt.returns
            if isinstance(ret, ast.Constant) and isinstance(ret.value, str):
                return ret.value if ret.value.replace(".", "").replace("_", "").isalnum() else None
            return dotted(ret)
    return None


def _one_signature(callees: list[Callee | None]) -> Callee | None:
    """The first callee when every candidate resolved and all share one signature; else None
    (which runs depends on the object, and they disagree or one is unknown)."""
    if not callees or any(c is None for c in callees):
        return None
    return callees[0] if len({c.sig.render() for c in callees}) == 1 else None  # type: ignore[union-attr]


def _own_returns(fn: ast.AST) -> list[ast.Return] | None:
    """The function's own return statements (not those of functions nested in it); None
    for a generator, whose call returns no tuple at all."""
    out: list[ast.Return] = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return None
        if isinstance(node, ast.Return):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


# the builtin types a return annotation may name: an instance has exactly their attributes
BUILTIN_RESULTS = {"tuple": tuple, "Tuple": tuple, "list": list, "List": list, "dict": dict, "Dict": dict,
                   "set": set, "Set": set, "frozenset": frozenset, "FrozenSet": frozenset, "str": str,
                   "int": int, "float": float, "bool": bool, "bytes": bytes}


def _callee_def(world: TreeIndex, callee: Callee) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The core function's definition node (None where its module is not read from source)."""
    if not callee.path.endswith(".py"):
        return None
    from overlay.gate.callers import module_name
    mod = world.module(module_name(callee.path))
    if mod is None or mod.tree is None or mod.path != callee.path:
        return None
    return next((n for n in ast.walk(mod.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.lineno == callee.line and n.name == callee.qualname.rsplit(".", 1)[-1]), None)


def result_problems(world: TreeIndex, callee: Callee, shape) -> list[str]:
    """`x = core_f(...)` then `x.attr`, where core's `f` declares it returns a builtin type
    (`-> tuple[...]`, `-> None`, ...) that has no `attr`: AttributeError wherever the read runs
    (0.12.0's `_get_cache_missing_items` came to return a tuple). A core class, a union or an
    annotation the gate cannot read says nothing (a subclass may answer)."""
    if not shape.result_reads:
        return []
    fn = _callee_def(world, callee)
    ann = fn.returns if fn is not None else None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return []
    if ann is None:
        return []
    if isinstance(ann, ast.Constant) and ann.value is None:
        kind: type | None = type(None)
    else:
        name = dotted(ann.value if isinstance(ann, ast.Subscript) else ann) or ""
        kind = BUILTIN_RESULTS.get(name.removeprefix("typing."))
    if kind is None:
        return []
    missing = [(attr, line) for attr, line in shape.result_reads if not hasattr(kind, attr)]
    if not missing:
        return []
    attr, line = missing[0]
    return [f"returns {ast.unparse(ann)}, which has no attribute '{attr}' (the plugin reads it off the result "
            f"at line {line}: AttributeError)"]


def unpack_problems(world: TreeIndex, callee: Callee, shape) -> list[str]:
    """`a, b = core_f(...)` where every return of core's `f` is a tuple display of another
    length: unpacking raises ValueError on every call (`get_computed_blocks` came to return
    three values)."""
    if shape.unpacked is None:
        return []
    fn = _callee_def(world, callee)
    returns = _own_returns(fn) if fn is not None else None
    if not returns or any(not isinstance(r.value, ast.Tuple) or any(isinstance(e, ast.Starred) for e in r.value.elts)
                          for r in returns):
        return []
    lengths = {len(r.value.elts) for r in returns}  # type: ignore[union-attr]
    if len(lengths) != 1 or shape.unpacked in lengths:
        return []
    (n,) = lengths
    return [f"returns {n} values, which the plugin unpacks into {shape.unpacked} names (ValueError)"]


def launch_problems(world: TreeIndex, callee: Callee, shape) -> list[str]:
    """A Triton launch of a core kernel: the required parameters it leaves out (launches.py)."""
    if not shape.launch:
        return []
    found = world.resolve_dotted(callee.qualname)
    if found is None or found[0] != "func":
        return []
    fmod, sig = found[1]  # type: ignore[misc]
    return missing_in_launch(fmod, sig, shape)


def _unreachable(use: CallUse, ev, memo: dict) -> str:
    """Why the plugin method holding `use` cannot be called ("" when it can, or when
    the call sits at module level or in a plain function)."""
    if use.cls is None or use.method is None:
        return ""
    ok, why = plugin_function_reachable(ev.callers, use.module.name, use.cls.name, use.method, memo=memo)
    return "" if ok else f"{use.cls.name}.{use.method} cannot run: {why}"


def _group(grouped: dict, use: CallUse, callee: Callee, problems: list[str], ev, reach: dict) -> None:
    from overlay.gate.checks import _kind, _severity
    symbol = f"call:{callee.qualname}"
    severity = _severity(use.ctx, ev, use.module.name)
    dead = _unreachable(use, ev, reach)
    if dead:
        severity = "warning"
        problems = [*problems[:-1], f"{problems[-1]} ({dead})"]
    grouped.setdefault((_kind(use.ctx, "call"), symbol, use.path, severity), []).append((use, callee, problems))


def check_calls(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    from overlay.gate.checks import _reason, _why
    resolver = _Resolver(facts, world, ev)
    reach: dict = {}  # plugin function -> (reachable, why), shared by its calls
    grouped: dict[tuple, list[tuple[CallUse, Callee, list[str]]]] = {}
    # callees a try body calls in a way this core accepts: a call of the same callee in that
    # try's `except TypeError:` handler is the plugin's fallback for another core, and runs
    # only when the attempt raised (`try: get_rope(**new) except TypeError: get_rope(old=...)`)
    accepted_attempts: set[tuple[tuple[str, int], str]] = set()
    fallbacks: list[tuple[CallUse, Callee, list[str]]] = []
    for use in facts.calls:
        if use.ctx.type_checking:
            continue
        callee = resolver.callee(use)
        if callee is None:
            continue
        problems = (accepts_call(callee.sig, use.shape) + launch_problems(world, callee, use.shape)
                    or shifted_positions(callee.sig, use.shape) or unpack_problems(world, callee, use.shape)
                    or result_problems(world, callee, use.shape))
        if use.ctx.attempt is not None and not problems:
            accepted_attempts.add((use.ctx.attempt, callee.qualname))
        if use.ctx.handles("TypeError"):
            continue  # a TypeError there is caught (`try: ... except (TypeError|Exception):`)
        if problems and use.ctx.fallback is not None:
            fallbacks.append((use, callee, problems))
            continue
        if not problems:
            continue
        _group(grouped, use, callee, problems, ev, reach)
    for use, callee, problems in fallbacks:
        if (use.ctx.fallback, callee.qualname) not in accepted_attempts:
            _group(grouped, use, callee, problems, ev, reach)
    out: list[Finding] = []
    for (kind, symbol, path, severity), items in grouped.items():
        use, callee, problems = items[0]
        short = callee.qualname.rsplit(".", 2)
        shown = ".".join(short[-2:]) if len(short) > 2 and short[-2][:1].isupper() else short[-1]
        spelled = (use.written or use.func) + ("[...]" if use.shape.launch else "")
        lines = sorted({u.line for u, _, _ in items})
        more = also_at(lines)
        message = (f"{spelled}(...) calls core's {callee.qualname}{callee.sig.render()[len(callee.sig.name):]} "
                   f"({callee.how}) and it " + "; ".join(problems) + more)
        evidence = f"the plugin calls it at {use.path}:{use.line}"
        out.append(Finding(kind, symbol, use.path, use.line, callee.path, callee.line, _why(use.ctx, message),
                           severity=severity, reason=_reason(use.ctx, ev, use.module.name, evidence),
                           summary=f"{spelled}(...): {shown} {problems[0]}"
                                   + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")))
    return out
