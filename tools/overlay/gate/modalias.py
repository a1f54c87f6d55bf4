"""A plugin name that stands for a core module: `compile_mod = decorators` (or `= vllm.a.b`)
at module level, where the value is a core module. Reads `compile_mod.NAME` then look
`NAME` up in that module (read by the attribute check).

Only a name the module binds exactly once, by that one assignment, and that no function
parameter, loop, `with ... as`, other assignment or `global`/`del` anywhere in the module
binds: otherwise a read of it may be of something else."""

from __future__ import annotations

import ast

from overlay.gate.index import ModuleInfo, TreeIndex, dotted, qualify

_MEMO: dict[tuple[int, str], tuple[object, str | None]] = {}


def module_alias(mod: ModuleInfo, head: str, world: TreeIndex) -> str | None:
    """The core module `head` stands for in `mod`, or None."""
    if mod.tree is None:
        return None
    bindings = mod.bindings.get(head, [])
    if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].type_checking:
        return None
    key = (id(mod.tree), head)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is mod.tree:
        return hit[1]
    found = _alias(mod, head, world)
    if len(_MEMO) > 50000:
        _MEMO.clear()
    _MEMO[key] = (mod.tree, found)
    return found


def _alias(mod: ModuleInfo, head: str, world: TreeIndex) -> str | None:
    value = None
    for stmt in mod.tree.body:  # type: ignore[union-attr]
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id == head:
            value = stmt.value
    if not isinstance(value, (ast.Name, ast.Attribute)):
        return None
    stores = 0
    for n in ast.walk(mod.tree):  # type: ignore[arg-type]
        if isinstance(n, ast.Name) and n.id == head and isinstance(n.ctx, (ast.Store, ast.Del)):
            stores += 1
        elif isinstance(n, ast.arg) and n.arg == head:
            return None
        elif isinstance(n, (ast.Global, ast.Nonlocal)) and head in n.names:
            return None
        elif isinstance(n, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.split(".")[0]) == head
                                                                  for a in n.names):
            return None
    if stores != 1:
        return None
    target = qualify(mod, dotted(value) or "", None)
    if target is None or world.module(target) is None:
        return None
    return target
