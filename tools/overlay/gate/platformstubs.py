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
plugin itself runs the core code holding the call: a function plugin code calls (its worker
calls `set_random_seed`), a method a plugin class inherits without overriding (its worker
runs core's `Worker.init_device`), or a method of a core class a plugin module names as a
dotted string (`worker_cls = "vllm.v1.worker.gpu_worker.Worker"`). A call reached only
through core's own code is a warning, since the gate's reachability of
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
from overlay.gate.scan import PluginFacts, _caught
from overlay.gate.startup import loaded_strings

RECEIVER = "current_platform"
# what a handler must name to expect the stub's exception (a bare `except:` reads as BaseException)
CATCHES = frozenset({"NotImplementedError", "Exception", "BaseException", "RuntimeError"})


def caught_at(tree: ast.AST | None, line: int, catches: frozenset[str] = CATCHES) -> bool:
    """Does a `try` whose body holds `line` have a handler naming one of `catches` (or a bare
    `except:`)? By default the stub's exception. Pure."""
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Try) and node.body and \
                node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno):
            if _caught(node.handlers) & catches:
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


def platform_names(facts: PluginFacts, platform: frozenset[str]) -> frozenset[str]:
    """The entry point's class names, and the classes a module-level alias of one of them
    picks from (`MacaPlatform = MxsmlMacaPlatform if mxsml_available else NonMxsml...`)."""
    names = set(platform)
    modules = {pc.module.name: pc.module for pc in facts.classes}
    for mod in modules.values():
        for stmt in mod.tree.body if mod.tree is not None else ():
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id in platform for t in stmt.targets):
                names |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and n.id[:1].isupper()}
    return frozenset(names)


class _PluginRuns:
    """Which core code the plugin itself runs: a core function plugin code calls
    (`set_random_seed(seed)` in the plugin's worker), or a core method it runs calls; a core
    method inherited by a plugin class, none of whose plugin classes defines it (vllm-kunlun's
    worker runs core's `Worker.init_device`); a method of a core class a plugin module names as a dotted string
    (`worker_cls = "vllm.v1.worker.gpu_worker.Worker"` in vllm-metax's platform)."""

    def __init__(self, facts: PluginFacts, world: TreeIndex, ev: Evidence) -> None:
        self.ev = ev
        self.inherited: dict[tuple[str, str], list[set[str]]] = {}
        self.named: set[str] = set()
        for pc in facts.classes:
            cls = world.class_of(pc.module, pc.node)
            defined = set(cls.methods)
            for base in _linearize(world, pc.module, cls, pc.scope.local_imports):
                if base is None:
                    break
                if ev.is_core(base[0].name):
                    self.inherited.setdefault((base[0].name, base[1].name), []).append(set(defined))
                defined |= set(base[1].methods)
        # the dotted names the modules start-up loads spell out
        self.named = {s for s in loaded_strings(world.module(name) for name in ev.startup.parent)
                      if "." in s and len(s) < 200}

    def runs(self, site: Site, depth: int = 0) -> bool:
        """`depth` 0: a core function also runs when core code the plugin runs calls it
        (vllm-metax names core's `Worker`, whose `init_device` calls `set_random_seed`);
        one such hop."""
        if site.func is None:
            return False
        if site.cls is None:
            callers = self.ev.callers.sites(site.func, limit=COMMON) or []
            return any(s.plugin for s in callers) or depth == 0 and any(
                not s.plugin and s.cls is not None and s.func != site.func and self.runs(s, 1) for s in callers)
        if f"{site.module}.{site.cls}" in self.named:
            return True
        return any(site.func not in defined for defined in self.inherited.get((site.module, site.cls), []))


def check_platform_stubs(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    findings: list[Finding] = []
    platform = ev.platform  # with the classes an alias picks from (engine: platform_names)
    runs = _PluginRuns(facts, world, ev) if platform else None
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
                direct = [s for s in calls if runs is not None and runs.runs(s)]
                calls = direct or calls
                where = ", ".join(s.where() for s in calls[:2])
                message = (f"{cls.name} does not define {hook}; core calls current_platform.{hook}(...) at "
                           f"{where}, and core's {bcls.name}.{hook} only raises NotImplementedError")
                findings.append(Finding(
                    _kind(pc.ctx, "override"), f"override:{pc.module.name}.{cls.name}.{hook}", pc.path,
                    cls.line, bmod.path, sig.line, _why(pc.ctx, message),
                    severity=_severity(pc.ctx, ev, pc.module.name, bool(direct)),
                    reason=_reason(pc.ctx, ev, pc.module.name, f"core calls it at {calls[0].where()}" + (
                        ", which the plugin runs" if direct else ", reached only through core's own code")),
                    summary=f"{cls.name} lacks {hook}, which core calls on current_platform "
                            f"({bcls.name}.{hook} raises NotImplementedError)"))
    return findings
