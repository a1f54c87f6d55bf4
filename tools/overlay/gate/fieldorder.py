"""Dataclass field order across core and plugin: a plugin `@dataclass` that extends a
core dataclass inherits core's fields first, in core's order. When core gives one of
them a default (`max_query_len: int | None = None`) and a field after it, the plugin's
or core's own, has none, `@dataclass` raises `TypeError: non-default argument ... follows
default argument` when the class is created, that is when its module is imported.

Reported under the key the type checker's engine uses for the same break (mypy's
`[misc] Attributes without a default cannot follow attributes with one`), so that both
engines agree on it. Keyword-only fields (`kw_only=True`, `KW_ONLY`, `field(kw_only=)`)
take no part in the order; `ClassVar`s and `field(init=False)` are no arguments;
`InitVar`s are; a subclass that redefines a base field keeps the base's place
(dataclasses' own rules, read by `checks._fields`). A dataclass with `init=False` builds
no `__init__`, so no order to break.
"""

from __future__ import annotations

import ast

from overlay.gate import checks
from overlay.gate.findings import Finding
from overlay.gate.index import TreeIndex, dataclass_options
from overlay.gate.scan import PluginFacts

RULE_MESSAGE = "Attributes without a default cannot follow attributes with one"
SYMBOL = f"type:misc:{RULE_MESSAGE}"


def _field_lines(cls) -> dict[str, int]:
    return {stmt.target.id: stmt.lineno for stmt in cls.fields
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)}


def order_break(world: TreeIndex, mod, cls, is_core, local=None):
    """(field without a default, (its owner's module, class), the defaulted field before it,
    (its owner's module, class)) for the first argument field of the dataclass `cls` that
    follows one with a default; None when the order holds, when `cls` is no dataclass
    with a generated `__init__`, when a base cannot be read, or when no core dataclass
    contributes a field (the plugin's own order is not core's contract)."""
    opts = dataclass_options(cls)
    if opts is None or opts.get("init") is False:
        return None
    chain = [(mod, cls)]
    for base in checks._linearize(world, mod, cls, local):
        if base is None:
            return None
        chain.append(base)
    order: dict[str, tuple[bool, bool, tuple]] = {}
    core_fields = False
    for m, c in reversed(chain):  # base fields first; a redefinition keeps its place
        c_opts = dataclass_options(c)
        if c_opts is None:
            continue
        for name, default, kw in checks._fields(c, c_opts.get("kw_only", False)) or []:
            order[name] = (default, kw, (m, c))
            core_fields = core_fields or is_core(m.name)
    if not core_fields:
        return None
    seen: tuple[str, tuple] | None = None
    for name, (default, kw, owner) in order.items():
        if kw:
            continue
        if default:
            seen = seen or (name, owner)
        elif seen is not None:
            return name, owner, seen[0], seen[1]
    return None


def check_field_order(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    """Plugin dataclasses whose fields, with core's first, put an argument without a
    default after one with a default: the class statement raises TypeError."""
    out: list[Finding] = []
    for pc in facts.classes:
        info = world.class_of(pc.module, pc.node)
        if not info.bases:
            continue
        found = order_break(world, pc.module, info, ev.is_core, pc.scope.local_imports)
        if found is None:
            continue
        name, (nmod, ncls), after, (dmod, dcls) = found
        line = _field_lines(info).get(name, pc.line) if ncls is info else pc.line
        core_mod, core_cls = (dmod, dcls) if ev.is_core(dmod.name) else (nmod, ncls)
        core_line = _field_lines(core_cls).get(after if core_cls is dcls else name, core_cls.line)
        why = (f"field '{name}' ({'this class' if ncls is info else f'core {nmod.name}.{ncls.name}'}) has no "
               f"default and follows '{after}', which has one ({dmod.name}.{dcls.name}): @dataclass raises "
               f"TypeError (non-default argument '{name}' follows default argument) when {info.name} is created")
        message = f"{RULE_MESSAGE}: {why}"
        out.append(Finding(checks._kind(pc.ctx, "type"), SYMBOL, pc.path, line, core_mod.path, core_line,
                           checks._why(pc.ctx, message), severity=checks._severity(pc.ctx, ev, pc.module.name),
                           reason=checks._reason(pc.ctx, ev, pc.module.name, "the class is created when its module "
                                                 "is imported"),
                           summary=f"[misc] {RULE_MESSAGE}: {info.name}.{name} follows defaulted {dcls.name}.{after}",
                           engine="hand"))
    return out
