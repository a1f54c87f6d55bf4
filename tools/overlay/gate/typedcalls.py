"""`self.a.meth(...)` where `self.a` is typed through core's own code (calls.py's callee).

The call check judged `self.attr.meth(...)` only where the plugin class itself builds
`self.attr` from one class. A plugin runner that inherits core's `__init__` never assigns
`self.compilation_config`: core's `GPUModelRunner.__init__` does
(`self.compilation_config = vllm_config.compilation_config`, `vllm_config: VllmConfig`),
so `self.compilation_config.resolve_cudagraph_mode_and_sizes(...)` calls
`CompilationConfig`'s method. Here a `self.attr` that no plugin class of the hierarchy
assigns is typed by the classes after it in its order (`receivers.py`'s rules on each of
their `self.attr = ...`: one typed path, annotation or core constructor for all of them);
a base the gate cannot read, or one with `attr` as a class member or property, leaves it
untyped. Longer paths (`self.a.b.meth`) follow core's annotations from there. The method
is then core's when no plugin subclass of the class defines it.
"""

from __future__ import annotations

import ast

from overlay.gate.index import ModuleInfo
from overlay.gate.receivers import Receivers, Typed


class InheritedReceivers(Receivers):
    """Receivers whose `self.attr` falls back on what the class's bases assign."""

    def __init__(self, world, is_core, linearize) -> None:
        super().__init__(world, is_core, linearize)
        self._inherited: dict = {}

    def self_attr(self, mod: ModuleInfo, cls_node: ast.ClassDef | None, attr: str, depth: int) -> Typed | None:
        found = super().self_attr(mod, cls_node, attr, depth)
        if found is not None or cls_node is None or attr in self.assignments(cls_node):
            return found
        key = (id(cls_node), attr)
        if key not in self._inherited:
            self._inherited[key] = None  # a cycle ends here
            self._inherited[key] = self._from_bases(mod, cls_node, attr, depth)
        return self._inherited[key]

    def _from_bases(self, mod: ModuleInfo, cls_node: ast.ClassDef, attr: str, depth: int) -> Typed | None:
        info = self.world.class_of(mod, cls_node)
        if attr in info.methods or attr in info.attrs:
            return None
        typed: list[Typed] = []
        for b in self.linearize(self.world, mod, info):
            if b is None or b[1].node is None:
                return None  # a base the gate cannot read may assign it
            bmod, bcls = b
            if attr in bcls.methods or attr in bcls.attrs:
                return None  # a property, a method or a class attribute: not an instance's field
            if attr in self.assignments(bcls.node):
                t = super().self_attr(bmod, bcls.node, attr, depth + 1)
                if t is None:
                    return None
                typed.append(Typed(t.mod, t.cls, t.many, f"{t.how} in core's {bcls.name}"))
        kinds = {(t.mod.name, t.cls.name, t.many) for t in typed}
        return typed[0] if len(kinds) == 1 else None


def typed_self_callee(resolver, use, parts: list[str]):
    """The core method `self.<parts>(...)` calls, through a receiver typed as above; None
    when the receiver is not typed or the method is not core's to judge."""
    from overlay.gate.checks import _linearize, _subclass_has
    if use.cls is None or len(parts) < 2:
        return None
    recv = resolver.memo.get("typed-receivers")
    if recv is None:
        recv = resolver.memo["typed-receivers"] = InheritedReceivers(resolver.world, resolver.is_core, _linearize)
    path = "self." + ".".join(parts[:-1])
    t = recv.path(use.module, path, None, use.local, use.cls)
    if t is None or t.many or not resolver.is_core(t.mod.name):
        return None
    meth = parts[-1]
    memo = resolver.memo.setdefault("typed-subclass", {})
    if _subclass_has(resolver.facts, resolver.world, (t.mod, t.cls), meth, memo):
        return None  # the object may be the plugin's subclass, with its own method
    chain = [(t.mod, t.cls)] + list(resolver.mro(t.mod, t.cls, None))
    return resolver.method_in_mro(chain, meth, f"`{path}` is a {t.cls.name}: {t.how}")
