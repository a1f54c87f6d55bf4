"""Platform hooks the plugin's platform leaves to core's `NotImplementedError` stub
(`override` findings).

Core's `Platform` declares hooks each platform implements, their bodies only raising
`NotImplementedError`; core code calls them on `current_platform`, which is the plugin's
platform class once the plugin is loaded. When core starts calling one the plugin's
platform does not define (vLLM 0.20.0's `set_random_seed` calls
`current_platform.manual_seed_all(seed)`; 0.17.0's model runner reads the SM count through
`current_platform.num_compute_units()`), every such call raises on the plugin's platform.

Judged: the plugin's platform classes (what its `vllm.platform_plugins` entry point returns);
a hook is a method of a core class in the platform's bases whose body only raises
`NotImplementedError` and that no plugin class before it defines (nor a class attribute of
that name). A core call `current_platform.<hook>(...)` counts where its code can run and no
enclosing `try` catches `NotImplementedError` (or `Exception`): core then expects some
platforms to lack it. An error where the platform's module is on the start-up chain and the
plugin itself calls the core function holding the call (its worker calls `set_random_seed`);
a call reached only through core's own code is a warning, since the gate's reachability of
core code over-approximates (0.21.0's `get_current_memory_usage` sits in a memory profiler the
HPU worker never enters). The entry point's class may be a module-level alias choosing
between classes (`MacaPlatform = A if ok else B`): both are judged. Symbol `override:<plugin module>.<platform class>.<hook>`, one per hook and class.
"""

from __future__ import annotations

import ast

from overlay.gate.callers import COMMON, Site, module_name
from overlay.gate.checks import Evidence, _kind, _linearize, _reason, _severity, _why
from overlay.gate.findings import Finding
from overlay.gate.index import TreeIndex
from overlay.gate.scan import PluginFacts

RECEIVER = "current_platform"
# what a handler must name to expect the stub's exception (a bare `except:` too)
CATCHES = frozenset({"NotImplementedError", "Exception", "BaseException", "RuntimeError"})


def _catches(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "")) in CATCHES for t in types)


def caught_at(tree: ast.AST | None, line: int) -> bool:
    """Does a `try` whose body holds `line` catch the stub's exception? Pure."""
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Try) and node.body and \
                node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno):
            if any(_catches(h) for h in node.handlers):
                return True
    return False


def _live_calls(hook: str, ev: Evidence, world_core) -> list[Site]:
    sites = ev.callers.sites(hook, limit=COMMON) or []
    out = []
    for s in sites:
        if s.plugin or s.receiver != RECEIVER or not ev.callers.reachable(s)[0]:
            continue
        mod = world_core(module_name(s.path))
        if mod is None or caught_at(mod.tree, s.shape.line):
            continue
        out.append(s)
    return out


def _platform_names(facts: PluginFacts, platform: frozenset[str]) -> set[str]:
    """The entry point's class names, and the classes a module-level alias of one of them
    picks from (`MacaPlatform = MxsmlMacaPlatform if mxsml_available else NonMxsml...`)."""
    names = set(platform)
    modules = {pc.module.name: pc.module for pc in facts.classes}
    for mod in modules.values():
        for stmt in mod.tree.body if mod.tree is not None else ():
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id in platform for t in stmt.targets):
                names |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and n.id[:1].isupper()}
    return names


def _called_by_plugin(site: Site, ev: Evidence) -> bool:
    """Does plugin code call the core function holding `site` (`set_random_seed(seed)` in
    the plugin's worker)? Then the stub runs whenever that plugin code does."""
    if site.cls is not None or site.func is None:
        return False
    return any(s.plugin for s in ev.callers.sites(site.func, limit=COMMON) or [])


def check_platform_stubs(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    findings: list[Finding] = []
    platform = _platform_names(facts, ev.platform) if ev.platform else set()
    for pc in facts.classes:
        if pc.node.name not in platform:
            continue
        cls = world.class_of(pc.module, pc.node)
        mro = _linearize(world, pc.module, cls, pc.scope.local_imports)
        defined = set(cls.methods) | set(cls.attrs)
        for base in mro:
            if base is None:
                break  # a base the gate cannot read may define any hook
            bmod, bcls = base
            if not ev.is_core(bmod.name):
                defined |= set(bcls.methods) | set(bcls.attrs)
                continue
            for hook, sig in bcls.methods.items():
                if hook in defined or hook.startswith("__"):
                    continue
                defined.add(hook)  # the first core class to define it decides
                if (sig.raises or "").split(".")[-1] != "NotImplementedError":
                    continue
                calls = _live_calls(hook, ev, world.module)
                if not calls:
                    continue
                # certain where the plugin itself calls the core function holding the call;
                # else core's own code must reach it, which the gate over-approximates
                direct = [s for s in calls if _called_by_plugin(s, ev)]
                calls = direct or calls
                where = ", ".join(s.where() for s in calls[:2])
                message = (f"{cls.name} does not define {hook}; core calls current_platform.{hook}(...) at "
                           f"{where}, and core's {bcls.name}.{hook} only raises NotImplementedError")
                findings.append(Finding(
                    _kind(pc.ctx, "override"), f"override:{pc.module.name}.{cls.name}.{hook}", pc.path,
                    cls.line, bmod.path, sig.line, _why(pc.ctx, message),
                    severity=_severity(pc.ctx, ev, pc.module.name, bool(direct)),
                    reason=_reason(pc.ctx, ev, pc.module.name, f"core calls it at {calls[0].where()}" + (
                        ", which the plugin calls" if direct else ", reached only through core's own code")),
                    summary=f"{cls.name} lacks {hook}, which core calls on current_platform "
                            f"({bcls.name}.{hook} raises NotImplementedError)"))
    return findings
