"""Out-of-tree custom ops: a plugin class registered for a core op's name is what core builds.

vLLM's `CustomOp.register_oot(_decorated_op_cls=AscendFusedMoE, name="FusedMoE")` makes
`CustomOp.__new__` build the plugin's class wherever core writes `FusedMoE(...)`: every
constructor call core makes of its op reaches the plugin class's `__init__`, with core's
arguments. vllm-ascend 0.10.1rc1's `AscendFusedMoE(routed_scaling_fator=...)` (a typo) met
0.10.2's MoE models passing `routed_scaling_factor=`; 0.10.2rc1's lacked the
`is_sequence_parallel` 0.11.0 passes.

Registrations are read as the plugin writes them: a `register_oot(...)` call naming the
class and the op (`_decorated_op_cls=` / `name=`, or the first two positionals), and, in a
module that calls `register_oot`, string-keyed dictionaries of op name -> plugin class
(`REGISTERED_ASCEND_OPS = {"FusedMoE": AscendFusedMoE}`, `.update({...})`,
`REGISTERED_ASCEND_OPS["X"] = AscendX`) that a loop hands to it. A core op is the core
class of that name that core builds; its constructor calls that can run are the contract.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overlay.gate.callers import module_name
from overlay.gate.findings import Finding
from overlay.gate.index import ModuleInfo, dotted, qualify
from overlay.gate.signature import accepts_call

# Ops are named in many core files (FusedMoE in 59 of vLLM 0.10.2's): the search is over the
# files naming the op, for a few dozen ops, so it may look further than the callers' usual limit.
OP_FILES_LIMIT = 400


@dataclass(frozen=True)
class Registration:
    op: str  # core class name the registration stands in for
    cls: str  # the plugin class as written where it is registered
    module: ModuleInfo
    line: int


def _str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def registrations(mod: ModuleInfo) -> list[Registration]:
    """The op registrations a plugin module writes (see the module docstring)."""
    if mod.tree is None or not any(isinstance(n, ast.Call) and (dotted(n.func) or "").endswith("register_oot")
                                   for n in ast.walk(mod.tree)):
        return []
    out: list[Registration] = []
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "register_oot":
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            cls = kw.get("_decorated_op_cls") or (node.args[0] if node.args else None)
            name = _str(kw.get("name")) or (_str(node.args[1]) if len(node.args) > 1 else None)
            if name and isinstance(cls, (ast.Name, ast.Attribute)) and dotted(cls):
                out.append(Registration(name, dotted(cls) or "", mod, node.lineno))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                name = _str(key)
                if name and isinstance(value, (ast.Name, ast.Attribute)) and dotted(value):
                    out.append(Registration(name, dotted(value) or "", mod, value.lineno))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            name = _str(node.targets[0].slice)
            if name and isinstance(node.value, (ast.Name, ast.Attribute)) and dotted(node.value):
                out.append(Registration(name, dotted(node.value) or "", mod, node.lineno))
    return out


def _local_imports(mod: ModuleInfo, line: int) -> dict[str, str]:
    """Imports inside the function that holds `line` (registrations import their classes
    where they register them)."""
    out: dict[str, str] = {}
    for fn in ast.walk(mod.tree) if mod.tree is not None else ():
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.lineno <= line <= (fn.end_lineno or fn.lineno):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for a in node.names:
                        out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def registered(facts, world, ev) -> list[tuple[Registration, ModuleInfo, object]]:
    """(registration, plugin module, plugin class) for each op registration whose class
    resolves to a class of the plugin's own; one per (op, class)."""
    out = []
    seen: set[tuple[str, str]] = set()
    names = set(facts.refs) | {pc.module.name for pc in facts.classes}
    for mod in filter(None, (world.module(n) for n in sorted(names))):
        if ev.is_core(mod.name):
            continue
        for reg in registrations(mod):
            local = _local_imports(mod, reg.line)
            head = reg.cls.split(".")[0]
            target = (local[head] + reg.cls[len(head):]) if head in local else qualify(mod, reg.cls, local)
            found = world.resolve_dotted(target) if target else None
            if found is None or found[0] != "class" or ev.is_core(found[1][0].name):
                continue
            pmod, pcls = found[1]
            if (reg.op, f"{pmod.name}.{pcls.name}") not in seen:
                seen.add((reg.op, f"{pmod.name}.{pcls.name}"))
                out.append((reg, pmod, pcls))
    return out


def registered_ops(facts, world, ev) -> frozenset[str]:
    """The core ops ("module.Class") the plugin registers a class of its own for."""
    return frozenset(f"{cmod.name}.{reg.op}" for reg, _, _ in registered(facts, world, ev)
                     for cmod, _ in _core_ops(world, ev, reg.op))


def check_oot_ops(facts, world, ev) -> list[Finding]:
    from overlay.gate.checks import _call_problems, _kind, _reason, _severity, _why, constructor_signature
    out: list[Finding] = []
    for reg, pmod, pcls in registered(facts, world, ev):
        mod = reg.module
        plugin_sig = constructor_signature(world, pmod, pcls, ev.is_core)
        if plugin_sig is None:
            continue
        for cmod, ccls in _core_ops(world, ev, reg.op):
            core_sig = constructor_signature(world, cmod, ccls, ev.is_core)
            sites = _builds(world, ev, cmod, reg.op)
            problems = []
            for s in sites:
                if s.shape.star or s.shape.dstar or not ev.callers.reachable(s)[0]:
                    continue  # what `*args`/`**kwargs` carry is not read: nothing is proven
                if core_sig is not None and accepts_call(core_sig[0], s.shape):
                    continue  # core's own op does not take it either: not this op's call
                found_problems = _call_problems(plugin_sig[0], core_sig[0] if core_sig else plugin_sig[0], s.shape)
                if found_problems:
                    problems.append((s, found_problems))
            if not problems:
                continue
            s, first = problems[0]
            init = pcls.methods.get("__init__")
            more = f" (and {len(problems) - 1} more core call(s))" if len(problems) > 1 else ""
            message = (f"{pcls.name} is registered for core's op {reg.op} ({cmod.name}), so core's "
                       f"{reg.op}(...) at {s.where()} builds it, and its __init__ " + "; ".join(first) + more)
            ctx = next((c.ctx for c in facts.classes if c.module is pmod and c.node.name == pcls.name), None)
            if ctx is None:
                continue
            out.append(Finding(
                _kind(ctx, "override"), f"override:{pmod.name}.{pcls.name}.__init__", pmod.path,
                init.line if init else pcls.line, s.path, s.shape.line, _why(ctx, message),
                severity=_severity(ctx, ev, pmod.name, True),
                reason=_reason(ctx, ev, pmod.name, f"registered at {mod.path}:{reg.line}; core builds "
                                                    f"{reg.op} at {s.where()}"),
                summary=f"{pcls.name}.__init__ (registered for {reg.op}) {first[0]}"
                        + (f" (+{len(first) - 1} more)" if len(first) > 1 else "")))
    return out


def _builds(world, ev, mod: ModuleInfo, name: str) -> list:
    """Core calls `Op(...)` / `m.Op(...)` whose name resolves, through any re-export
    (`from ...layers.fused_moe import FusedMoE`), to core's op `mod.name`."""
    files = ev.callers.mentions(name)
    if len(files) > OP_FILES_LIMIT:
        return []
    index = ev.callers.trees[0][2]
    out = []
    for path in files:
        fmod = index.module(module_name(path))
        if fmod is None or fmod.path != path:
            continue
        for s in ev.callers.core_sites(path, name):
            if s.receiver in ("self", "cls", "super", "?"):
                continue
            target = qualify(fmod, f"{s.receiver}.{name}" if s.receiver else name)
            found = world.resolve_dotted(target) if target else None
            if found and found[0] == "class" and found[1][0].name == mod.name and found[1][1].name == name:
                out.append(s)
    return out


def _core_ops(world, ev, name: str) -> list[tuple[ModuleInfo, object]]:
    """Core classes named `name`, in the core files that name it."""
    out = []
    index = ev.callers.trees[0][2]
    for path in ev.callers.mentions(name):
        mod = index.module(module_name(path))
        if mod is None or mod.path != path or name not in mod.classes:
            continue
        out.append((mod, mod.classes[name]))
    return out
