"""The three checks: imports, overrides, replacements. Facts in, findings out."""

from __future__ import annotations

import ast
from collections import defaultdict
from typing import Callable

from overlay.gate.findings import Finding
from overlay.gate.index import ClassInfo, Lookup, ModuleInfo, TreeIndex, class_info, dotted, qualify
from overlay.gate.scan import Context, ImportUse, PluginFacts, Replacement
from overlay.gate.signature import CallShape, Signature, accepts_call, accepts_open_call, covers, from_ast

SKIP_METHOD_DECORATORS = frozenset({"property", "cached_property", "overload", "setter", "getter",
                                    "deleter", "abstractproperty"})


def _kind(ctx: Context, kind: str) -> str:
    return "undecidable" if ctx.undecidable else kind


def _why(ctx: Context, message: str) -> str:
    if ctx.undecidable:
        return f"{message}, under a condition the gate cannot decide: {ctx.undecidable}"
    return message


# ----------------------------------------------------------------------------- imports


def _missing_module(core: TreeIndex, module: str) -> Lookup:
    """A missing module, located at the deepest package of its path that core does have."""
    parts = module.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        parent = core.module(".".join(parts[:cut]))
        if parent is not None and parent.path:
            return Lookup("missing", module, parent.path, 0, reason=f"core has no module {module}")
    return Lookup("missing", module, "", 0, reason=f"core has no module {module}")


def _lookup_import(core: TreeIndex, use: ImportUse) -> Lookup:
    mod = core.module(use.module)
    if mod is None:
        return _missing_module(core, use.module)
    if use.name is None or use.name == "*":
        return Lookup("found", use.module, mod.path, 1, kind="module")
    return core.lookup(use.module, use.name)


def _import_finding(use: ImportUse, res: Lookup, kind: str, extra: str = "") -> Finding:
    what = f"from {use.module} import {use.name}" if use.name else f"import {use.module}"
    symbol = f"import:{use.module}:{use.name}" if use.name else f"import:{use.module}"
    message = f"`{what}` fails: {res.reason}{extra}"
    return Finding(_kind(use.ctx, kind), symbol, use.path, use.line, res.path, res.line,
                   _why(use.ctx, message))


def check_imports(facts: PluginFacts, core: TreeIndex) -> list[Finding]:
    findings: list[Finding] = []
    groups: dict[int, dict[str, list[tuple[ImportUse, Lookup]]]] = defaultdict(lambda: defaultdict(list))
    for use in facts.imports:
        res = _lookup_import(core, use)
        if use.ctx.guard is not None:
            tid, branch = use.ctx.guard
            groups[tid][branch].append((use, res))
            continue
        if res.status == "missing":
            findings.append(_import_finding(use, res, "import"))
        elif res.status == "undecidable":
            findings.append(_import_finding(use, res, "undecidable"))
    for tid, branches in groups.items():
        # A try/except ImportError is satisfied when any branch resolves completely;
        # a fallback branch with no core import at all (`X = None`) resolves trivially.
        if any(b not in branches for b in facts.try_branches.get(tid, ())):
            continue
        if any(all(r.status == "found" for _, r in results) for results in branches.values()):
            continue
        path, line = facts.try_lines[tid]
        undecided = any(r.status == "undecidable" for results in branches.values() for _, r in results)
        extra = f" (no branch of the try/except ImportError at {path}:{line} resolves)"
        for results in branches.values():
            for use, res in results:
                if res.status != "found":
                    findings.append(_import_finding(use, res, "undecidable" if undecided else "import",
                                                    extra))
    return findings


# ----------------------------------------------------------------------------- resolution helpers


def _linearize(world: TreeIndex, mod: ModuleInfo, cls: ClassInfo,
               local: dict[str, str] | None = None) -> list[tuple[ModuleInfo, ClassInfo] | None]:
    """Base classes in (approximate) method resolution order: depth-first, left to right."""
    out: list[tuple[ModuleInfo, ClassInfo] | None] = []
    seen: set[tuple[str, str]] = set()

    def bases_of(m: ModuleInfo, c: ClassInfo, loc: dict[str, str] | None):
        result = []
        for expr in c.bases:
            target = qualify(m, expr, loc) if expr else None
            found = world.resolve_dotted(target) if target else None
            result.append(found[1] if found and found[0] == "class" else None)
        return result

    def walk(m: ModuleInfo, c: ClassInfo, loc: dict[str, str] | None, depth: int) -> None:
        if depth > 12:
            return
        for b in bases_of(m, c, loc):
            if b is None:
                out.append(None)
                continue
            key = (b[0].name, b[1].name)
            if key in seen:
                continue
            seen.add(key)
            out.append(b)
            walk(b[0], b[1], None, depth + 1)

    walk(mod, cls, local, 0)
    return out


def _init_signature(world: TreeIndex, mod: ModuleInfo, cls: ClassInfo,
                    local: dict[str, str] | None = None) -> Signature | None:
    """How calling the class binds its arguments: its (inherited) __init__, receiver dropped."""
    if "dataclass" in {d.split(".")[-1] for d in cls.decorators}:
        return None  # generated __init__
    if "__init__" in cls.methods:
        return cls.methods["__init__"].bound()
    for base in _linearize(world, mod, cls, local):
        if base is None:
            return None  # an unknown base may define __init__
        if "dataclass" in {d.split(".")[-1] for d in base[1].decorators}:
            return None
        if "__init__" in base[1].methods:
            return base[1].methods["__init__"].bound()
        if "__new__" in base[1].methods:
            return None
    return None


def _callable_signature(world: TreeIndex, obj: tuple[str, object] | None) -> Signature | None:
    if obj is None:
        return None
    kind, val = obj
    if kind == "func":
        return val[1]  # type: ignore[index]
    if kind == "class":
        mod, cls = val  # type: ignore[misc]
        return _init_signature(world, mod, cls)
    return None


def _value_signature(world: TreeIndex, r: Replacement) -> tuple[str, Signature] | None:
    """(display name, signature as called) of the callable a replacement installs."""
    v = r.value
    if isinstance(v, ast.Lambda):
        return "<lambda>", from_ast(v)
    name = dotted(v)
    if name is None:
        return None
    node = r.scope.defs.get(name)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return name, from_ast(node)
    if isinstance(node, ast.ClassDef):
        sig = _init_signature(world, r.module, class_info(node), r.scope.local_imports)
        return (name, sig) if sig is not None else None
    target = qualify(r.module, name, r.scope.local_imports)
    if target is None:
        return None
    sig = _callable_signature(world, world.resolve_dotted(target))
    return (name, sig) if sig is not None else None


# ----------------------------------------------------------------------------- overrides

# Constructors are called by whoever instantiates the subclass, which is the plugin
# itself; core constructs plugin classes only through replacements (checked there).
CONSTRUCTORS = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__",
                          "__class_getitem__"})


def _method_problems(plugin_sig: Signature, core_sig: Signature,
                     core_classes: list[tuple[ModuleInfo, ClassInfo]], meth: str,
                     plugin_defined: set[str]) -> list[tuple[str, int, str]]:
    """(core path, core line, problem) for a plugin method standing in for a core one.

    The contract is what core passes: the calls `self.meth(...)` that core's own
    classes make, except from methods the plugin also replaces (those calls never
    run). Without such a call site, a public method must accept everything core
    declares; a private one has no visible core caller and nothing is required.
    """
    out: list[tuple[str, int, str]] = []
    seen_call = False
    bound = plugin_sig if plugin_sig.is_static else plugin_sig.bound()
    declared = core_sig if core_sig.is_static else core_sig.bound()
    for mod, cls in core_classes:
        for enclosing, call in cls.self_calls(meth):
            seen_call = True  # core has a caller: the call sites are the whole contract
            if enclosing in plugin_defined:
                continue  # ... except those in methods the plugin replaces: they never run
            problems = _call_problems(bound, declared, call)
            if problems:
                out.append((mod.path, call.line, f"core calls it at {mod.path}:{call.line} and it "
                            + "; ".join(problems)))
    if seen_call:
        return out
    if meth.startswith("_") and not meth.startswith("__"):
        return out
    if core_sig.vararg is not None or core_sig.kwarg is not None:
        return out  # a generic core signature: it promises nothing about parameters
    if core_sig.never_called:
        return out  # core's own body only raises: no caller can rely on its parameters
    core_path = next((m.path for m, c in core_classes if c.methods.get(meth) is core_sig), "")
    # No visible caller: what core declares is the contract, by position and kind;
    # a renamed parameter only matters to a caller passing it by keyword (seen above).
    problems = covers(plugin_sig, core_sig, names=False)
    if not problems:
        return []
    return [(core_path, core_sig.line, "no core call site is visible and it " + "; ".join(problems))]


def _call_problems(sig: Signature, declared: Signature | None, call: CallShape) -> list[str]:
    """Why `sig` fails one core call site. A call passing `*args`/`**kwargs` may pass
    any parameter the core callee declares (`declared`), so that is checked too."""
    problems = accepts_call(sig, call)
    if declared is not None and (call.star or call.dstar):
        problems += accepts_open_call(sig, declared, call)
    return problems


def check_overrides(facts: PluginFacts, world: TreeIndex, is_core: Callable[[str], bool]) -> list[Finding]:
    findings: list[Finding] = []
    for pc in facts.classes:
        cls = class_info(pc.node)
        if not cls.bases:
            continue
        mro = _linearize(world, pc.module, cls, pc.scope.local_imports)
        core_classes = [b for b in mro if b is not None and is_core(b[0].name)]
        if not core_classes:
            continue
        plugin_defined = set(cls.methods)
        for b in mro:
            if b is None or is_core(b[0].name):
                break
            plugin_defined |= set(b[1].methods)
        for meth, sig in cls.methods.items():
            if meth in CONSTRUCTORS or SKIP_METHOD_DECORATORS & set(sig.decorators):
                continue
            for base in mro:
                if base is None:
                    break  # an unknown class may define it first: do not guess
                bmod, bcls = base
                if meth not in bcls.methods:
                    if meth in bcls.attrs:
                        break
                    continue
                if not is_core(bmod.name):
                    break  # overrides a plugin method: checked where that one overrides core
                core_sig = bcls.methods[meth]
                if SKIP_METHOD_DECORATORS & set(core_sig.decorators):
                    break
                if (sig.is_static, sig.is_classmethod) != (core_sig.is_static, core_sig.is_classmethod):
                    break
                for core_path, core_line, problem in _method_problems(sig, core_sig, core_classes, meth,
                                                                      plugin_defined):
                    message = (f"{cls.name}.{sig.render()} overrides {bcls.name}.{core_sig.render()} "
                               f"({bmod.name}) but {problem}")
                    findings.append(Finding(_kind(pc.ctx, "override"),
                                            f"override:{pc.module.name}.{cls.name}.{meth}",
                                            pc.path, sig.line, core_path, core_line,
                                            _why(pc.ctx, message)))
                break
    return findings


# ----------------------------------------------------------------------------- replacements


def check_replacements(facts: PluginFacts, world: TreeIndex, core: TreeIndex) -> list[Finding]:
    findings: list[Finding] = []
    replaced: dict[str, set[str]] = defaultdict(set)
    for r in facts.replacements:
        replaced[r.owner].add(r.attr)
    for r in facts.replacements:
        owner = world.resolve_dotted(r.owner)
        if owner is None:
            continue  # the owner's own import is checked (and reported) by the import check
        symbol = f"replacement:{r.owner}.{r.attr}"
        kind, val = owner
        if kind == "module":
            findings.extend(_module_replacement(r, val, symbol, world, core))  # type: ignore[arg-type]
        elif kind == "class":
            findings.extend(_method_replacement(r, val, symbol, world, replaced[r.owner]))  # type: ignore[arg-type]
    return findings


def _module_replacement(r: Replacement, mod: ModuleInfo, symbol: str, world: TreeIndex,
                        core: TreeIndex) -> list[Finding]:
    res = core.lookup(mod.name, r.attr)
    if res.status != "found":
        return []  # a new module attribute: nothing in core calls it
    value = _value_signature(world, r)
    if value is None:
        return []
    vname, vsig = value
    out: list[Finding] = []
    # A module attribute replaced at run time is seen by the code that looks it up
    # through that module's globals: the bare-name calls inside the module itself.
    calls = mod.calls(r.attr)
    core_sig = _callable_signature(world, world.resolve(mod.name, r.attr))
    for call in calls:
        problems = _call_problems(vsig, core_sig, call)
        if problems:
            message = (f"{vname}{vsig.render()[len(vsig.name):]} replaces {r.owner}.{r.attr}, "
                       f"but core calls it at {mod.path}:{call.line} and it " + "; ".join(problems))
            out.append(Finding(_kind(r.ctx, "replacement"), symbol, r.path, r.line, mod.path,
                               call.line, _why(r.ctx, message)))
    if not calls:
        if core_sig is not None and not core_sig.never_called:
            problems = covers(vsig, core_sig, receiver=False, names=False)
            if problems:
                message = (f"{vname}{vsig.render()[len(vsig.name):]} replaces {r.owner}.{r.attr}"
                           f"{core_sig.render()[len(core_sig.name):]} but " + "; ".join(problems))
                out.append(Finding(_kind(r.ctx, "replacement"), symbol, r.path, r.line, mod.path,
                                   core_sig.line, _why(r.ctx, message)))
    return out


def _method_replacement(r: Replacement, owner: tuple[ModuleInfo, ClassInfo], symbol: str,
                        world: TreeIndex, replaced: set[str]) -> list[Finding]:
    mod, cls = owner
    member = world.class_member(mod, cls, r.attr)
    if member is None or member[0] != "method":
        return []  # a new attribute (or a plain value): nothing in core calls it yet
    core_mod, core_cls, core_sig = member[1]  # type: ignore[misc]
    if SKIP_METHOD_DECORATORS & set(core_sig.decorators):
        return []
    value = _value_signature(world, r)
    if value is None:
        return []
    vname, vsig = value
    core_classes = [(mod, cls)] + [b for b in _linearize(world, mod, cls) if b is not None]
    out = []
    for core_path, core_line, problem in _method_problems(vsig, core_sig, core_classes, r.attr, replaced):
        message = (f"{vname}{vsig.render()[len(vsig.name):]} replaces {core_cls.name}.{core_sig.render()} "
                   f"({core_mod.name}) but {problem}")
        out.append(Finding(_kind(r.ctx, "replacement"), symbol, r.path, r.line, core_path, core_line,
                           _why(r.ctx, message)))
    return out
