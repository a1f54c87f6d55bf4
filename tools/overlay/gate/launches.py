"""What a Triton launch of a core kernel must pass. Pure.

`kernel[grid](...)` binds its arguments to the `@triton.jit` function's parameters as a
call does (the launcher's own options aside, `signature.LAUNCH_OPTIONS`): a parameter
without a default that the launch leaves out raises TypeError, constexprs included
(0.26.0's `_compute_slot_mapping_kernel` gained `KV_CACHE_BLOCK_SIZE` and
`BLOCKS_PER_KV_BLOCK`). Decorators may fill parameters by name: `triton.heuristics({...})`
the keys of its literal mapping, `triton.autotune(configs=[triton.Config({...}), ...])` the
keys of its configs' literal mappings. Where the gate cannot read what a decorator fills (a
mapping or config list built elsewhere, a decorator other than these), nothing is missing.
"""

from __future__ import annotations

import ast

from overlay.gate.index import ModuleInfo
from overlay.gate.signature import CallShape, Signature, decorator_name

KNOWN_DECORATORS = frozenset({"jit", "heuristics", "autotune"})


def kernel_def(mod: ModuleInfo, sig: Signature) -> ast.FunctionDef | None:
    """The module-level definition `sig` was read from."""
    for stmt in ast.walk(mod.tree) if mod.tree is not None else ():
        if isinstance(stmt, ast.FunctionDef) and stmt.name == sig.name and stmt.lineno == sig.line:
            return stmt
    return None


def _literal_keys(node: ast.expr) -> set[str] | None:
    if not isinstance(node, ast.Dict) or any(not (isinstance(k, ast.Constant) and isinstance(k.value, str))
                                             for k in node.keys):
        return None
    return {k.value for k in node.keys}  # type: ignore[union-attr]


def _config_keys(configs: ast.expr) -> set[str] | None:
    """Every name the configs' mappings set: a list (or a comprehension) of
    `triton.Config({...}, ...)` calls with literal keys, else None."""
    if isinstance(configs, (ast.List, ast.Tuple)):
        items = list(configs.elts)
    elif isinstance(configs, ast.ListComp):
        items = [configs.elt]
    else:
        return None
    keys: set[str] = set()
    for item in items:
        if not (isinstance(item, ast.Call) and decorator_name(item.func) == "Config" and item.args):
            return None
        found = _literal_keys(item.args[0])
        if found is None:
            return None
        keys |= found
    return keys


def filled_by_decorators(node: ast.FunctionDef) -> set[str] | None:
    """The parameters the kernel's decorators fill, None when that cannot be read (or the
    function is no `@triton.jit` kernel)."""
    names = [decorator_name(d) for d in node.decorator_list]
    if "jit" not in names or not set(names) <= KNOWN_DECORATORS:
        return None
    filled: set[str] = set()
    for dec, name in zip(node.decorator_list, names):
        if name == "jit":
            continue
        if not isinstance(dec, ast.Call):
            return None
        if name == "heuristics":
            found = _literal_keys(dec.args[0]) if len(dec.args) == 1 and not dec.keywords else None
        else:
            configs = dec.args[0] if dec.args else next((k.value for k in dec.keywords if k.arg == "configs"), None)
            found = _config_keys(configs) if configs is not None else None
        if found is None:
            return None
        filled |= found
    return filled


def missing_in_launch(mod: ModuleInfo, sig: Signature, shape: CallShape) -> list[str]:
    """Why the launch `shape` of core's kernel `sig` (defined in `mod`) raises for a
    parameter it leaves out; empty when it passes them all or the gate cannot tell."""
    if not shape.launch or shape.star or shape.dstar:
        return []
    node = kernel_def(mod, sig)
    filled = filled_by_decorators(node) if node is not None else None
    if filled is None:
        return []
    given = {p.name for p in sig.positional[:shape.npos]} | set(shape.keywords) | filled
    missing = [p.name for p in sig.positional + sig.kwonly if not p.has_default and p.name not in given]
    if not missing:
        return []
    return ["is missing required argument(s) " + ", ".join(f"'{m}'" for m in missing)
            + " (no decorator of the kernel fills them)"]
