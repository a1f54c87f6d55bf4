"""Core calling a method through a module global the plugin replaced with its class.

`runner.Batch = AscendBatch` rebinds the global `Batch` of core module `runner`: every
`Batch.make_dummy(...)` / `Batch.split(obj, ...)` that module's code runs then calls the
plugin class's method, not core's. The override check cannot see such a call (its
receiver is a class name, not an object typed as the hierarchy), so it is checked here,
at each core call site in the rebound module that can run (callers.reachable), against
the method the plugin class defines (itself or a plugin base before core in its order):

- a classmethod takes the class implicitly, a staticmethod nothing, a plain method called
  through the class takes the receiver as its first argument;
- only a call core's own method accepts counts (otherwise the call was meant for
  something else, or core's own code fails it too).

An error where the rebinding runs on a path the plugin loads (the replacement's own
condition and start-up decide, as for every replacement).
"""

from __future__ import annotations

import ast

from overlay.gate.findings import Finding
from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, dotted, qualify
from overlay.gate.scan import PluginFacts, Replacement
from overlay.gate.signature import Signature, accepts_call


def _as_called(sig: Signature) -> Signature:
    """The signature a call through the class binds (`Cls.meth(...)`)."""
    return sig.bound() if sig.is_classmethod else sig


def _plugin_class(world: TreeIndex, r: Replacement, is_core) -> tuple[ModuleInfo, ClassInfo] | None:
    name = dotted(r.value)
    if name is None:
        return None
    node = r.scope.defs.get(name) if "." not in name else None
    if node is not None:
        return (r.module, world.class_of(r.module, node)) if isinstance(node, ast.ClassDef) else None
    target = qualify(r.module, name, r.scope.local_imports)
    obj = world.resolve_dotted(target) if target else None
    if obj is None or obj[0] != "class" or is_core(obj[1][0].name):  # type: ignore[index]
        return None
    return obj[1]  # type: ignore[return-value]


def _methods(world: TreeIndex, mod: ModuleInfo, cls: ClassInfo, is_core):
    """{method: (plugin class, its signature, core's signature or None)}: the methods a
    call through the class reaches in plugin code, with the core method each stands for."""
    from overlay.gate.checks import _linearize
    chain = [(mod, cls)] + _linearize(world, mod, cls)
    plugin: dict[str, tuple[str, Signature]] = {}
    core: dict[str, Signature] = {}
    in_core = False
    for b in chain:
        if b is None:
            break  # an unknown base: what comes after it is not known
        bmod, bcls = b
        in_core = in_core or is_core(bmod.name)
        for meth, sig in bcls.methods.items():
            if in_core:
                core.setdefault(meth, sig)
            elif meth not in plugin and meth not in core:
                plugin[meth] = (bcls.name, sig)
    return {m: (owner, sig, core.get(m)) for m, (owner, sig) in plugin.items()
            if not (m.startswith("__") and m.endswith("__"))}


def check_replaced_globals(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    from overlay.gate.checks import _call_problems, _kind, _reason, _severity, _why
    out: list[Finding] = []
    for r in facts.replacements:
        if r.in_class or r.ctx.type_checking or not ev.is_core(r.owner):
            continue
        owner = world.resolve_dotted(r.owner)
        if owner is None or owner[0] != "module":
            continue
        cmod: ModuleInfo = owner[1]  # type: ignore[assignment]
        found = _plugin_class(world, r, ev.is_core)
        if found is None:
            continue
        pmod, pcls = found
        for meth, (defined_in, sig, core_sig) in sorted(_methods(world, pmod, pcls, ev.is_core).items()):
            if core_sig is None or sig.is_static != core_sig.is_static \
                    or sig.is_classmethod != core_sig.is_classmethod:
                continue  # not standing in for a core method core calls this way
            called, declared = _as_called(sig), _as_called(core_sig)
            for site in ev.callers.core_sites(cmod.path, meth):
                if site.receiver != r.attr or accepts_call(declared, site.shape):
                    continue
                if not ev.callers.reachable(site)[0]:
                    continue
                problems = _call_problems(called, declared, site.shape)
                if not problems:
                    continue
                message = (f"the plugin replaces {r.owner}.{r.attr} with {pcls.name}, so core's "
                           f"{r.attr}.{meth}(...) at {site.where()} runs {defined_in}.{sig.render()}, and it "
                           + "; ".join(problems))
                evidence = f"core calls it at {site.where()}, through the module global the plugin replaced"
                out.append(Finding(_kind(r.ctx, "replacement"), f"replacement:{r.owner}.{r.attr}", r.path, r.line,
                                   cmod.path, site.shape.line, _why(r.ctx, message),
                                   severity=_severity(r.ctx, ev, r.module.name, True),
                                   reason=_reason(r.ctx, ev, r.module.name, evidence),
                                   summary=f"{r.attr}.{meth}(...) runs {defined_in}.{meth}, which {problems[0]}"))
    return out
