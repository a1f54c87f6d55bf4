"""Abstract methods a plugin class leaves unimplemented (`override` findings).

A class whose hierarchy has `ABC` as a base (or `metaclass=ABCMeta`) cannot be
instantiated while any name declared `@abstractmethod` in it is, in the class's method
resolution order, first found abstract: `TypeError: Can't instantiate abstract class ...`.
When core adds an abstract method to a base the plugin implements (0.25.0's
`WeightTransferEngine.start_weight_update`), every plugin subclass breaks where it is built.

Which plugin classes are judged: the concrete ones, taken as those that declare no abstract
method themselves and that no plugin class derives from (an intermediate plugin base may
leave methods to its subclasses, which are judged in its place). A hierarchy with a base the
gate cannot read (other than `ABC`, `Generic`, `object`: `index.inert_base`) is not judged:
that base may implement the method. A name any class before the abstract declaration
defines in its body (a method, a class attribute, a field), anywhere in the hierarchy (the
order is not computed: a shared base may come later in C3), implements it.

An abstract static or class method is judged only where something calls the class by name
(`Cls(...)`): a class of such methods is often used as a namespace, never instantiated (an
attention backend: core's own `GDNAttentionBackend` leaves `get_impl_cls` abstract too).

Like every hand check this reads one core: against the declared core the plugin's classes
instantiate (the plugin runs there), so a method abstract there is not missing there; what
the new core added is what `--baseline declared` keeps. Severity: an error where the class's
module is on the start-up chain and the plugin builds it or names it as a value (a call
`Cls(...)`, a registry entry `"Cls"`), else a warning. Symbol
`override:<plugin module>.<class>.<method>`, one finding per missing method.
"""

from __future__ import annotations

import ast
import re

from overlay.gate.callers import without_quoted_annotations
from overlay.gate.checks import Evidence, _kind, _reason, _severity, _why
from overlay.gate.findings import Finding
from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, inert_base, qualify
from overlay.gate.scan import PluginFacts

ABSTRACT = "abstractmethod"
ABC_NAMES = frozenset({"abc.ABC"})
ABCMETA_NAMES = frozenset({"abc.ABCMeta"})


def _declares_abstract(cls: ClassInfo) -> bool:
    return any(ABSTRACT in {d.split(".")[-1] for d in sig.decorators} for sig in cls.methods.values())


def _hierarchy(world: TreeIndex, mod: ModuleInfo, cls: ClassInfo, local: dict | None):
    """([(module, class)] in depth-first order from `cls`, whether the hierarchy is an ABC),
    or None when a base cannot be read."""
    out: list[tuple[ModuleInfo, ClassInfo]] = []
    seen: set[tuple[str, str]] = set()
    abc = False

    def walk(m: ModuleInfo, c: ClassInfo, loc: dict | None, depth: int) -> bool:
        nonlocal abc
        if depth > 12:
            return False
        key = (m.name, c.name)
        if key in seen:
            return True
        seen.add(key)
        out.append((m, c))
        if c.node is not None:
            for kw in c.node.keywords:
                if kw.arg == "metaclass" and qualify(m, ast.unparse(kw.value), loc) in ABCMETA_NAMES:
                    abc = True
        for expr in c.bases:
            if expr is None:
                return False
            if inert_base(m, expr, loc):
                abc = abc or qualify(m, expr, loc) in ABC_NAMES
                continue
            target = qualify(m, expr, loc)
            found = world.resolve_dotted(target) if target else None
            if found is None or found[0] != "class":
                return False
            bmod, bcls = found[1]  # type: ignore[misc]
            if not walk(bmod, bcls, None, depth + 1):
                return False
        return True

    if not walk(mod, cls, local, 0):
        return None
    return out, abc


def _implemented(chain, name: str) -> bool:
    """Does any class of the hierarchy define `name` other than as an abstract method? (Any
    class, not only those before the declaration: the order here is depth-first, and C3
    may put a shared base later; a concrete definition anywhere is not judged missing.)"""
    for _, c in chain:
        sig = c.methods.get(name)
        if sig is not None and ABSTRACT not in {d.split(".")[-1] for d in sig.decorators}:
            return True
        if sig is None and name in c.attrs:
            return True
    return False


def _plugin_names_bare(ev: Evidence, name: str) -> bool:
    """A plugin file names `name` as a value by itself (`= Name`, `(Name,`, "Name"), not as
    an attribute of a module (`core_mod.Name.get_moe_method(...)` is core's class), nor in a
    quoted annotation (`-> "Name":`, vllm-metax's `get_moe_method`), which passes nothing."""
    word = re.escape(name.encode())
    bare = re.compile(rb"(?<![.\w])" + word + rb"\b(?!\s*[(\[.])|[\"']" + word + rb"[\"']")
    return any(ev.callers.trees[i][3] and bare.search(without_quoted_annotations(ev.callers.code(path, i)))
               for path, i in ev.callers.value_uses(name))


def check_abstract_methods(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    is_core = ev.is_core
    classes = [(pc, world.class_of(pc.module, pc.node)) for pc in facts.classes]
    derived: set[tuple[str, str]] = set()  # plugin classes some plugin class derives from
    for pc, cls in classes:
        for b in world.bases(pc.module, cls):
            if b is not None and not is_core(b[0].name):
                derived.add((b[0].name, b[1].name))
    findings: list[Finding] = []
    for pc, cls in classes:
        if not cls.bases or (pc.module.name, cls.name) in derived or _declares_abstract(cls):
            continue
        found = _hierarchy(world, pc.module, cls, pc.scope.local_imports)
        if found is None or not found[1]:
            continue
        chain = found[0]
        abstract: dict[str, tuple[ModuleInfo, ClassInfo]] = {}
        for m, c in chain[1:]:
            if not is_core(m.name):
                continue
            for name, sig in c.methods.items():
                if ABSTRACT in {d.split(".")[-1] for d in sig.decorators}:
                    abstract.setdefault(name, (m, c))
        if not abstract:
            continue
        sites = ev.callers.sites(cls.name)
        called = bool(sites)
        built = called or ev.callers.passed_as_value(cls.name)
        if any(c.name == cls.name for m, c in chain[1:] if is_core(m.name)) \
                and not any(cls.name in attrs for attrs in ev.replaced.values()):
            # the plugin's class shadows core's class of its name (vllm-metax's
            # CompressedTensorsMoEMethod, used only for its static get_moe_method): core's
            # own `Name(...)` builds core's class, so only the plugin's uses say it is built
            called = sites is None or any(s.plugin for s in sites)
            built = called or _plugin_names_bare(ev, cls.name)
        for name in sorted(abstract):
            if _implemented(chain, name):
                continue
            dmod, dcls = abstract[name]
            sig = dcls.methods[name]
            if (sig.is_static or sig.is_classmethod) and not called:
                continue  # a class used as a namespace of static/class methods (a backend)
            evidence = (f"the plugin builds or registers {cls.name}" if built
                        else f"nothing in sight builds {cls.name} by name")
            message = (f"{cls.name} does not implement {name}, abstract in {dcls.name} ({dmod.name}): "
                       f"instantiating {cls.name} raises TypeError (can't instantiate abstract class)")
            findings.append(Finding(
                _kind(pc.ctx, "override"), f"override:{pc.module.name}.{cls.name}.{name}", pc.path,
                cls.line, dmod.path, sig.line, _why(pc.ctx, message),
                severity=_severity(pc.ctx, ev, pc.module.name, built),
                reason=_reason(pc.ctx, ev, pc.module.name, evidence),
                summary=f"{cls.name} lacks {name}, abstract in core's {dcls.name}: it cannot be instantiated"))
    return findings

