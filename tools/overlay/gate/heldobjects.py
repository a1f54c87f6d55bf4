"""Core's inherited methods calling a module the plugin's object holds.

A plugin subclass of a core model puts its own module where core's `__init__` put core's
(`self.model = CustomDeepseekV2Model(...)` in `CustomDeepseekV2ForCausalLM.__init__`).
Core's `forward`, which the subclass inherits, then calls `self.model(input_ids, positions,
intermediate_tensors, inputs_embeds)` on the plugin's module: a torch module's call runs its
`forward`, the plugin's own, which must take what core passes (vLLM 0.8.4 dropped
`kv_caches, attn_metadata` from every model's forward; the plugin's did not).

Counted where every assignment of `self.attr` in the plugin class builds one plugin class
whose `forward` the plugin defines (an override of a core `forward` too: the override check
holds it only to core's calls of ops core builds as the plugin's class, out of tree), the
core method holding the call is not one the plugin overrides or replaces, and something can call it (`checks._PluginObject`, as for
overrides). The finding names the plugin's `forward`, as an override core calls
differently: `override:<module>.<class>.forward`.
"""

from __future__ import annotations

import ast

from overlay.gate import checks
from overlay.gate.findings import Finding
from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, dotted, qualify
from overlay.gate.receivers import self_assignments
from overlay.gate.scan import PluginFacts
from overlay.gate.signature import accepts_call
from overlay.gate.supercalls import super_calls


def _built_class(world: TreeIndex, pc, sites, is_core) -> tuple[ModuleInfo, ClassInfo] | None:
    """The one plugin class every assignment `self.attr = Cls(...)` of the class builds."""
    found: set[tuple[str, str]] = set()
    target = None
    for _, stmt in sites:
        value = getattr(stmt, "value", None)
        name = dotted(value.func) if isinstance(value, ast.Call) else None
        if not name:
            return None
        qualified = qualify(pc.module, name, pc.scope.local_imports)
        resolved = world.resolve_dotted(qualified) if qualified else None
        if resolved is None or resolved[0] != "class" or is_core(resolved[1][0].name):  # type: ignore[index]
            return None
        target = resolved[1]
        found.add((target[0].name, target[1].name))  # type: ignore[index]
    return target if len(found) == 1 else None  # type: ignore[return-value]


def check_held_objects(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    out: list[Finding] = []
    for pc in facts.classes:
        info = world.class_of(pc.module, pc.node)
        if not info.bases:
            continue
        mro = checks._linearize(world, pc.module, info, pc.scope.local_imports)
        core_classes = [b for b in mro if b is not None and ev.is_core(b[0].name)]
        if not core_classes:
            continue
        plugin_defined = set(info.methods) - super_calls(pc.node)
        for b in mro:
            if b is None or ev.is_core(b[0].name):
                break
            plugin_defined |= set(b[1].methods) - (super_calls(b[1].node) if b[1].node else set())
        names = {info.name} | {c.name for _, c in core_classes}
        live_of = checks._PluginObject(core_classes, plugin_defined, names, ev)
        for attr, sites in sorted(self_assignments(pc.node).items()):
            held = _built_class(world, pc, sites, ev.is_core)
            if held is None:
                continue
            hmod, hcls = held
            member = world.class_member(hmod, hcls, "forward")
            if member is None or member[0] != "method":
                continue
            fmod, fcls, fsig = member[1]  # type: ignore[misc]
            if ev.is_core(fmod.name) or fsig.raises is not None:
                continue  # core's own forward: its contract is core's to keep
            bound = fsig if fsig.is_static else fsig.bound()
            for mod, cls in core_classes:
                for enclosing, call in cls.self_calls(attr, include_super=False):
                    if enclosing in plugin_defined:
                        continue  # the plugin's own method runs instead
                    ok, why, certain = live_of.live(enclosing)
                    if not ok:
                        continue
                    problems = accepts_call(bound, call)
                    if not problems:
                        continue
                    message = (f"{fcls.name}.{fsig.render()} runs where core's {cls.name}.{enclosing} calls "
                               f"self.{attr}(...) at {mod.path}:{call.line}: {info.name} builds self.{attr} = "
                               f"{hcls.name}(...), and it " + "; ".join(problems))
                    evidence = f"core calls it as self.{attr}(...) at {mod.path}:{call.line} in {cls.name}.{enclosing}" \
                               f" ({enclosing}: {why})"
                    out.append(Finding(
                        checks._kind(pc.ctx, "override"), f"override:{fmod.name}.{fcls.name}.forward",
                        fmod.path, fsig.line, mod.path, call.line, checks._why(pc.ctx, message),
                        severity=checks._severity(pc.ctx, ev, fmod.name, certain),
                        reason=checks._reason(pc.ctx, ev, fmod.name, evidence),
                        summary=f"{fcls.name}.forward {problems[0]} (core's {cls.name}.{enclosing} calls "
                                f"self.{attr}(...))"))
    return out
