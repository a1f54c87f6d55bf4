"""Names bound to a module obtained at run time: `m = sys.modules.get("a.b")`,
`m = sys.modules["a.b"]`, `m = importlib.import_module("a.b")` (or `import_module`
imported by name). A replacement `m.f = ours` / `setattr(m, "f", ours)` then changes
the attribute of module `a.b`, as `a.b.f = ours` would.

Only a module written as a literal string (or a name bound once to one in the same
scope) counts: a computed name is not guessed. Pure: the scanner records the candidate
(`bound`), and the call it stands for is checked against the plugin module's own imports
(`module_of`), so a local function that happens to be called `import_module` is not one.
"""

from __future__ import annotations

import ast

from overlay.gate.index import ModuleInfo, dotted, qualify

# what the call (or the subscripted object) must denote in the plugin module
GETTERS = frozenset({"sys.modules.get", "importlib.import_module"})
SUBSCRIPTED = frozenset({"sys.modules"})


def bound(value: ast.expr, strings: dict[str, str]) -> tuple[str, str] | None:
    """(the callee or subscripted object as written, the module name) when `value`
    obtains a module by a literal name; None otherwise."""
    if isinstance(value, ast.Call) and len(value.args) >= 1 and not value.keywords:
        how, arg = dotted(value.func), value.args[0]
        if value.args[1:] and how is not None and how.endswith("import_module"):
            return None  # `import_module(".x", package)`: relative to a package
    elif isinstance(value, ast.Subscript):
        how, arg = dotted(value.value), value.slice
    else:
        return None
    if how is None:
        return None
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        name = arg.value
    elif isinstance(arg, ast.Name) and arg.id in strings:
        name = strings[arg.id]
    else:
        return None
    if not name or name.startswith(".") or not all(p.isidentifier() for p in name.split(".")):
        return None
    return (f"[]{how}" if isinstance(value, ast.Subscript) else how), name


def module_of(mod: ModuleInfo, record: tuple[str, str], local: dict[str, str] | None) -> str | None:
    """The module a recorded binding stands for in `mod`, or None when its callee is not
    `sys.modules.get`, `sys.modules[...]` or `importlib.import_module` there."""
    how, name = record
    subscripted = how.startswith("[]")
    how = how[2:] if subscripted else how
    denotes = qualify(mod, how, local)
    if denotes in (SUBSCRIPTED if subscripted else GETTERS):
        return name
    return None
