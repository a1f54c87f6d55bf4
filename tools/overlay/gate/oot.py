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

from overlay.gate.aliascalls import constructor_calls
from overlay.gate.callers import module_name
from overlay.gate.findings import Finding
from overlay.gate.index import ClassInfo, ModuleInfo, absolute_module, dotted, qualify
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


@dataclass(frozen=True)
class RegisteredOp:
    """A plugin class registered for a core op, with the core classes of that name."""

    reg: Registration
    plugin: tuple[ModuleInfo, ClassInfo]
    core: tuple[tuple[ModuleInfo, ClassInfo], ...]

    @property
    def core_names(self) -> frozenset[str]:
        """The core ops ("module.Class") building which makes the plugin's class."""
        return frozenset(f"{m.name}.{self.reg.op}" for m, _ in self.core)


def _str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _named(node: ast.expr) -> str | None:
    return dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None


def registrations(mod: ModuleInfo) -> list[Registration]:
    """The op registrations a plugin module writes (see the module docstring)."""
    calls: list[Registration] = []
    tables: list[Registration] = []  # count only in a module that calls register_oot
    seen_call = False
    for node in ast.walk(mod.tree) if mod.tree is not None else ():
        if isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "register_oot":
            seen_call = True
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            cls = kw.get("_decorated_op_cls") or (node.args[0] if node.args else None)
            name = _str(kw.get("name")) or (_str(node.args[1]) if len(node.args) > 1 else None)
            written = _named(cls) if cls is not None else None
            if name and written:
                calls.append(Registration(name, written, mod, node.lineno))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                name, written = _str(key), _named(value)
                if name and written:
                    tables.append(Registration(name, written, mod, value.lineno))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            name, written = _str(node.targets[0].slice), _named(node.value)
            if name and written:
                tables.append(Registration(name, written, mod, node.lineno))
    return calls + tables if seen_call else []


def _local_imports(mod: ModuleInfo) -> list[tuple[int, int, dict[str, str]]]:
    """(first line, last line, imports) of each function of the module that imports
    (registrations import their classes where they register them, absolutely or relatively:
    vllm-qaic's `from .mm_encoder_attention import QAicMMEncoderAttention`)."""
    out = []
    for fn in ast.walk(mod.tree) if mod.tree is not None else ():
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = {a.asname or a.name: f"{absolute_module(mod.name, mod.is_package, node.level, node.module)}"
                                         f".{a.name}"
                     for node in ast.walk(fn) if isinstance(node, ast.ImportFrom) and (node.module or node.level)
                     for a in node.names}
            if names:
                out.append((fn.lineno, fn.end_lineno or fn.lineno, names))
    return out


def registered(facts, world, ev) -> tuple[RegisteredOp, ...]:
    """Each op registration whose class resolves to a class of the plugin's own, once per
    (op, class), with the core classes of the op's name."""
    out = []
    seen: set[tuple[str, str]] = set()
    names = set(facts.refs) | {pc.module.name for pc in facts.classes}
    for mod in filter(None, (world.module(n) for n in sorted(names))):
        if ev.is_core(mod.name):
            continue
        regs = registrations(mod)
        scopes = _local_imports(mod) if regs else []
        for reg in regs:
            local: dict[str, str] = {}
            for first, last, imports in scopes:
                if first <= reg.line <= last:
                    local.update(imports)
            head = reg.cls.split(".")[0]
            target = (local[head] + reg.cls[len(head):]) if head in local else qualify(mod, reg.cls, local)
            found = world.resolve_dotted(target) if target else None
            if found is None or found[0] != "class" or ev.is_core(found[1][0].name):
                continue
            pmod, pcls = found[1]
            if (reg.op, f"{pmod.name}.{pcls.name}") not in seen:
                seen.add((reg.op, f"{pmod.name}.{pcls.name}"))
                out.append(RegisteredOp(reg, (pmod, pcls), tuple(_core_ops(ev, world, reg.op))))
    return tuple(out)


def check_oot_ops(facts, world, ev) -> list[Finding]:
    """`ev.oot`: the registrations (`registered`), read once per run."""
    from overlay.gate.checks import _call_problems, _kind, _reason, _severity, _why, constructor_signature
    out: list[Finding] = []
    for op in ev.oot:
        reg, (pmod, pcls) = op.reg, op.plugin
        plugin_sig = constructor_signature(world, pmod, pcls, ev.is_core)
        ctx = next((c.ctx for c in facts.classes if c.module is pmod and c.node.name == pcls.name), None)
        if plugin_sig is None or ctx is None:
            continue
        for cmod, ccls in op.core:
            core_sig = constructor_signature(world, cmod, ccls, ev.is_core)
            problems = []
            for s in constructor_calls(ev.callers, cmod, reg.op, OP_FILES_LIMIT, world=world, aliases=False) or []:
                if s.shape.star or s.shape.dstar or not ev.callers.reachable(s)[0]:
                    continue  # what `*args`/`**kwargs` carry is not read: nothing is proven
                if core_sig is not None and accepts_call(core_sig[0], s.shape):
                    continue  # core's own op does not take it either: not this op's call
                found = _call_problems(plugin_sig[0], core_sig[0] if core_sig else plugin_sig[0], s.shape)
                if found:
                    problems.append((s, found))
            if not problems:
                continue
            s, first = problems[0]
            init = pcls.methods.get("__init__")
            more = f" (and {len(problems) - 1} more core call(s))" if len(problems) > 1 else ""
            message = (f"{pcls.name} is registered for core's op {reg.op} ({cmod.name}), so core's "
                       f"{reg.op}(...) at {s.where()} builds it, and its __init__ " + "; ".join(first) + more)
            out.append(Finding(
                _kind(ctx, "override"), f"override:{pmod.name}.{pcls.name}.__init__", pmod.path,
                init.line if init else pcls.line, s.path, s.shape.line, _why(ctx, message),
                severity=_severity(ctx, ev, pmod.name, True),
                reason=_reason(ctx, ev, pmod.name, f"registered at {reg.module.path}:{reg.line}; core builds "
                                                    f"{reg.op} at {s.where()}"),
                summary=f"{pcls.name}.__init__ (registered for {reg.op}) {first[0]}"
                        + (f" (+{len(first) - 1} more)" if len(first) > 1 else "")))
    return out


def _core_ops(ev, world, name: str) -> list[tuple[ModuleInfo, ClassInfo]]:
    """Core classes named `name`, in the core files that name it, that the registry swaps:
    the class or a base the gate reads defines both `__new__` and `register_oot` (CustomOp,
    PluggableLayer). A class of the same name that derives from neither (vLLM 0.28.0's
    `class RotaryEmbedding(nn.Module)` inside an audio encoder) is built as written."""
    from overlay.gate.checks import _linearize
    out = []
    index = ev.callers.trees[0][2]
    for path in ev.callers.mentions(name):
        mod = index.module(module_name(path))
        if mod is not None and mod.path == path and name in mod.classes:
            cls = mod.classes[name]
            chain = [(mod, cls)] + [b for b in _linearize(world, mod, cls) if b is not None]
            if any({"__new__", "register_oot"} <= set(c.methods) for _, c in chain):
                out.append((mod, cls))
    return out
