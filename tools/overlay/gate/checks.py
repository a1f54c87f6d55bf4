"""The checks: imports, overrides, replacements, constructor calls, import-time
attribute reads. Facts in, findings out.

Each finding gets a severity from the evidence (see findings.SEVERITIES): a break on
the start-up import chain or at a core call site that can run is an `error`; one in
an opt-in module, one with no visible core caller (judged against the declared
signature) or one under a condition the gate cannot decide is a `warning`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
import dataclasses
from dataclasses import dataclass
from typing import Callable

from overlay.gate.aliascalls import constructor_calls, module_alias_calls
from overlay.gate.captures import aliased
from overlay.gate.classreads import certainly_unset, class_of, namespace
from overlay.gate.classuses import function_class_uses
from overlay.gate.callers import COMMON, Callers, Site, module_name
from overlay.gate.conditions import unknown_bases_in_core
from overlay.gate.findings import NO_CORE_CALLER, Finding, also_at
from overlay.gate import instances
from overlay.gate.index import (ClassInfo, Lookup, ModuleInfo, TreeIndex, absolute_module, dataclass_options, dotted,
                                inert_base, qualify)
from overlay.gate.modalias import module_alias
from overlay.gate import nonebound
from overlay.gate.namedsites import named_sites, plugin_built
from overlay.gate.pinnedflags import Pin, blocked, pin_finder
from overlay.gate.scan import Context, ImportUse, PluginFacts, Replacement, supplied_at_load, try_body_imports
from overlay.gate.signature import (CallShape, Param, Signature, accepts_call, accepts_open_call, covers,
                                    from_ast)
from overlay.gate.startup import Startup
from overlay.gate.supercalls import super_calls
from overlay.gate.torchbases import torch_module_lacks

SKIP_METHOD_DECORATORS = frozenset({"property", "cached_property", "overload", "setter", "getter",
                                    "deleter", "abstractproperty"})


@dataclass(frozen=True)
class Evidence:
    """What decides severity and reason: the start-up graph and core's callers."""

    startup: Startup
    callers: Callers
    is_core: Callable[[str], bool]
    replaced: dict  # core module -> names the plugin replaces there (module attributes)
    env: object = None  # conditions.Env
    # names of the plugin's platform classes (what its vllm.platform_plugins entry point
    # returns): core's `current_platform` is an instance of one of them
    platform: frozenset = frozenset()
    # the plugin's classes registered for core ops (oot.RegisteredOp): building such an op
    # makes the plugin's class
    oot: tuple = ()
    # subclasses.Subclasses over both trees (which classes define a name, and below what)
    classes: object = None


def _severity(ctx: Context, ev: Evidence, module: str, error: bool = True) -> str:
    if ctx.undecidable or not error or not ev.startup.reached(module):
        return "warning"
    return "error"


def _kind(ctx: Context, kind: str) -> str:
    return "undecidable" if ctx.undecidable else kind


def _why(ctx: Context, message: str) -> str:
    if ctx.undecidable:
        return f"{message}, under a condition the gate cannot decide: {ctx.undecidable}"
    return message


def _reason(ctx: Context, ev: Evidence, module: str, evidence: str) -> str:
    parts = [evidence] if evidence else []
    parts.append(ev.startup.chain(module))
    if ctx.undecidable:
        parts.append(f"condition not decidable: {ctx.undecidable}")
    return "; ".join(parts)


# ----------------------------------------------------------------------------- imports


def _missing_module(core: TreeIndex, module: str) -> Lookup:
    where = core.imported_at(module)
    if where is not None:
        return Lookup("undecidable", module, where[0], where[1], kind="no-module",
                      reason=f"core's source tree has no module {module}, but core's own code imports it "
                             f"({where[0]}:{where[1]}): its build installs it (not proven missing)")
    return Lookup("missing", module, "", 0, kind="no-module", reason=f"core has no module {module}")


def lookup_import(core: TreeIndex, use: ImportUse) -> Lookup:
    mod = core.module(use.module)
    if mod is None:
        return _missing_module(core, use.module)
    if use.name is None or use.name == "*":
        return Lookup("found", use.module, mod.path, 1, kind="module")
    return core.lookup(use.module, use.name)


def _import_findings(pairs: list[tuple[ImportUse, Lookup]], ev: Evidence, extra: str = "",
                     undecided: bool = False) -> list[Finding]:
    """One finding per failing name, except a missing module: one finding per import
    statement (every name it imports fails the same way)."""
    out: list[Finding] = []
    done_modules: set[tuple[str, int, str]] = set()
    for use, res in pairs:
        kind = "undecidable" if (undecided or res.status == "undecidable") else "import"
        modname = use.mod_name
        if res.kind == "no-module":
            key = (use.path, use.line, use.module)
            if key in done_modules:
                continue
            done_modules.add(key)
            names = [u.name for u, r in pairs if (u.path, u.line, u.module) == key and u.name]
            what = f"from {use.module} import {', '.join(names)}" if names else f"import {use.module}"
            symbol = f"import:{use.module}"
            summary = f"core has no module {use.module}"
        else:
            what = f"from {use.module} import {use.name}" if use.name else f"import {use.module}"
            symbol = f"import:{use.module}:{use.name}" if use.name else f"import:{use.module}"
            summary = res.reason
        verb = "binds None" if res.kind == "none" else "fails"  # the import runs; a use of None breaks
        message = f"`{what}` {verb}: {res.reason}{extra}"
        severity = "warning" if kind == "undecidable" else _severity(use.ctx, ev, modname)
        caught = ev.startup.caught_at(modname) if use.func is None else None
        evidence = ""
        if caught is not None:  # it fails while the module loads, into a handler that swallows it
            severity = "warning"
            message += (f"; {modname} is loaded only where the failure is swallowed, so it silently "
                        "does not load (what it defines or replaces is not used)")
            evidence = f"its load fails into the try at {caught[0]}:{caught[1]}, whose handler swallows it"
        out.append(Finding(_kind(use.ctx, kind), symbol, use.path, use.line, res.path, res.line,
                           _why(use.ctx, message), severity=severity,
                           reason=_reason(use.ctx, ev, modname, evidence), summary=summary))
    return out


def _called_only_guarded(facts: PluginFacts, use: ImportUse) -> bool:
    """The import sits in a module-level function that the module only ever names under
    a guard (`with contextlib.suppress(ImportError): install_patch()`): its ImportError
    is caught where the function is called."""
    if use.func is None:
        return False
    if facts.name_reads.get((use.mod_name, use.func)) != {True}:
        return False
    # another module may import it and call it unguarded: any unguarded read of the
    # name anywhere in the plugin keeps the import a plain one
    return not any(False in reads for (mod, name), reads in facts.name_reads.items()
                   if name == use.func and mod != use.mod_name)


def _none_breaking_use(ev: Evidence, use: ImportUse) -> int | None:
    """The first line where the plugin uses a name core's module `__getattr__` answers with
    None as an object: in the importing module, or anywhere when another plugin module
    imports the name from it (its uses there are not read: the import line stands)."""
    world = ev.env.world if ev.env is not None else None
    mod = world.module(use.mod_name) if world is not None else None
    if mod is None or mod.tree is None:
        return use.line
    local = next((a.asname or a.name for node in ast.walk(mod.tree)
                  if isinstance(node, ast.ImportFrom) and node.lineno == use.line
                  for a in node.names if a.name == use.name), None)
    if local is None:
        return use.line
    for path, i in ev.callers.all_files():  # re-exported: another module's uses count too
        if not ev.callers.trees[i][3] or path == use.path or local.encode() not in ev.callers.text(path, i):
            continue
        other = world.module(module_name(path))
        if other is None or other.tree is None or any(
                isinstance(n, ast.ImportFrom) and absolute_module(other.name, other.is_package, n.level, n.module)
                == use.mod_name and any(a.name == local for a in n.names) for n in ast.walk(other.tree)):
            return use.line
    return nonebound.breaking_use(mod.tree, local)


def check_imports(facts: PluginFacts, core: TreeIndex, ev: Evidence) -> list[Finding]:
    findings: list[Finding] = []
    groups: dict[int, dict[str, list[tuple[ImportUse, Lookup]]]] = defaultdict(lambda: defaultdict(list))
    plain: list[tuple[ImportUse, Lookup]] = []
    # a function's `from mod import x` runs after the plugin loaded and set `mod.x`
    supplied = supplied_at_load(facts)
    for use in facts.imports:
        if use.func is not None and use.name is not None and f"{use.module}.{use.name}" in supplied:
            continue
        res = lookup_import(core, use)
        if use.ctx.guard is not None:
            tid, branch = use.ctx.guard
            groups[tid][branch].append((use, res))
            continue
        if res.status != "found" and not _called_only_guarded(facts, use):
            if res.kind == "none":  # the import binds None: only a use that needs an object breaks
                line = _none_breaking_use(ev, use)
                if line is None:
                    continue
                res = dataclasses.replace(res, reason=f"{res.reason}, and {use.path}:{line} uses it as an object")
            plain.append((use, res))
    findings += _import_findings(plain, ev)
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
        failing = [(u, r) for results in branches.values() for u, r in results if r.status != "found"]
        findings += _import_findings(failing, ev, extra, undecided)
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
            if expr and inert_base(m, expr, loc):
                continue
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
        sig = _init_signature(world, r.module, world.class_of(r.module, node), r.scope.local_imports)
        return (name, sig) if sig is not None else None
    target = qualify(r.module, name, r.scope.local_imports)
    if target is None:
        return None
    sig = _callable_signature(world, world.resolve_dotted(target))
    return (name, sig) if sig is not None else None




# ----------------------------------------------------------------------------- call-site evidence

# Constructors are called by whoever instantiates the subclass, which is the plugin
# itself; core constructs plugin classes only through replacements (checked there).
CONSTRUCTORS = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__",
                          "__class_getitem__"})


@dataclass(frozen=True)
class Problem:
    """Why a plugin callable fails core's contract at one place."""

    core_path: str
    core_line: int
    problems: tuple[str, ...]
    evidence: str  # which core caller (or why none is visible)
    visible: bool  # a core call site that can run: the break is real when it runs
    # only an interface declaration differs (the core method raises NotImplementedError
    # and nothing calls it in sight): worth knowing, not a break
    interface: bool = False


def _call_problems(sig: Signature, declared: Signature | None, call: CallShape) -> list[str]:
    """Why `sig` fails one core call site. A call passing `*args`/`**kwargs` may pass
    any parameter the core callee declares (`declared`), so that is checked too."""
    problems = accepts_call(sig, call)
    if declared is not None and (call.star or call.dstar):
        problems += accepts_open_call(sig, declared, call)
    if declared is not None and problems and problems[0].startswith("takes "):
        # name what changed: the parameters core declares that the plugin's callable lacks
        have = {p.name for p in sig.positional + sig.kwonly}
        absent = [p.name for p in declared.positional if p.name not in have]
        if absent:
            problems[0] += " (it lacks core parameter(s) " + ", ".join(f"'{n}'" for n in absent) + ")"
    return problems


def _foreign_sites(meth: str, class_names: set[str], ev: Evidence) -> list[Site]:
    """Core calls `obj.meth(...)` through another object whose type core states as a
    class of the hierarchy (`self.scheduler: SchedulerInterface = ...` then
    `self.scheduler.schedule(...)`), in code that can run."""
    return [s for s in ev.callers.typed_sites(meth, class_names, COMMON) if ev.callers.reachable(s)[0]]


def _dispatch_names(meth: str, core_classes: list[tuple[ModuleInfo, ClassInfo]]) -> tuple[str, ...]:
    """The names through which core calls `meth`: itself; and `forward` for `forward_oot`
    below a class whose generic `forward(*args, **kwargs)` dispatches to it (vLLM's
    CustomOp runs `forward_oot` on an out-of-tree platform)."""
    dispatcher = any("forward" in c.methods and "forward_oot" in c.methods and c.methods["forward"].vararg is not None
                     for _, c in core_classes)
    return (meth, "forward") if meth == "forward_oot" and dispatcher else (meth,)


def _running_classes(core_classes: list[tuple[ModuleInfo, ClassInfo]], plugin_names: set[str],
                     ev: Evidence) -> list[tuple[ModuleInfo, ClassInfo]]:
    """The core classes whose objects, built by core, run the plugin's method: for a
    replacement (no plugin class), the replaced class; for an override, only the core ops
    the plugin class is registered for out of tree (core's `Op(...)` then builds the
    plugin's class). Elsewhere core builds its own class and runs its own method (vLLM
    0.12.0's Qwen3-Omni vision block builds core's Qwen2_5_VisionAttention, not the
    plugin's subclass); a plugin object that core's inherited methods hold is
    heldobjects.py's."""
    if not plugin_names:
        return core_classes[:1]
    return [c for op in ev.oot if op.plugin[1].name in plugin_names for c in op.core]


def _module_call_sites(core_classes: list[tuple[ModuleInfo, ClassInfo]], ev: Evidence) -> list[tuple[Site, str]]:
    """Core calls an object of the hierarchy itself (`self.model(...)` where core builds
    `self.model = DeepseekV2Model(...)`): a torch module's call runs `forward` with those
    arguments. In code that can run; each with the name it is called by."""
    classes = {(m.name, c.name) for m, c in core_classes}
    if not classes:
        return []
    return [(s, name) for s, name in ev.callers.typed_object_calls(classes, COMMON) if ev.callers.reachable(s)[0]]


def _on_platform(meth: str, plugin_names: set[str], owner: str | None, ev: Evidence) -> bool:
    """Is the plugin's method the one `current_platform.meth` runs: a method of the entry
    point's class or of its plugin bases, or of a plugin base class the platform class
    inherits it from (vllm-metax's `MacaPlatformBase`, below which the entry point picks
    `mxsmlPlatform` or `NonmxsmlMetaxPlatform`), where the platform class does not define
    `meth` itself. `owner`: the plugin class whose method it is."""
    if plugin_names & ev.platform:
        return True
    if ev.classes is None or not ev.platform or owner is None:
        return False
    below = ev.classes.hierarchy({owner}) & ev.platform
    if not below:
        return False
    defining = {cls for cls, _ in ev.classes.members(meth)}
    return any(p not in defining for p in below)


def _platform_sites(meth: str, declared: Signature, ev: Evidence) -> list[Site]:
    """Core calls `current_platform.meth(...)` (vllm.platforms) that core's own signature
    takes, in code that can run: `current_platform` is the plugin's platform class once the
    plugin is loaded."""
    return [s for s in ev.callers.sites(meth, limit=COMMON) or []
            if not s.plugin and s.receiver == "current_platform" and not accepts_call(declared, s.shape)
            and ev.callers.reachable(s)[0]]


NOT_TYPES = frozenset({"None", "Optional", "Union", "Any", "Callable", "ClassVar", "Final"})


class _PluginObject:
    """Which core methods can run on an object of the plugin's class: not the ones its
    class defines, and only those some live code calls on it (its own core methods
    through `self`, other code through a receiver that may hold it, plugin code).

    `live(meth)` answers (live, why, certain). A chain that rests on a call through a
    receiver whose type nothing states (`self.drafter.propose(...)`) is live but not
    certain: such a finding is a warning, since that receiver may never hold this class.
    """

    def __init__(self, core_classes, plugin_defined: set[str], names: set[str], ev: Evidence) -> None:
        self.core_classes = core_classes
        self.plugin_defined = plugin_defined
        self.names = names  # class names of the hierarchy (plugin and core)
        self.ev = ev
        self.memo: dict[str, tuple[bool, str, bool]] = {}

    def live(self, meth: str, depth: int = 0) -> tuple[bool, str, bool]:
        if meth in self.plugin_defined:
            return False, f"{meth} is overridden by the plugin", True
        if meth.startswith("__") and meth.endswith("__"):
            return True, "called implicitly", True
        if depth >= 3:
            return True, "depth limit", True
        if meth in self.memo:
            return self.memo[meth]
        self.memo[meth] = (True, "recursive", True)
        result = self._live(meth, depth)
        self.memo[meth] = result
        return result

    def _live(self, meth: str, depth: int) -> tuple[bool, str, bool]:
        callers = self.ev.callers
        uncertain: tuple[bool, str, bool] | None = None
        for mod, cls in self.core_classes:
            for enclosing, call in cls.self_calls(meth):
                if enclosing == meth:
                    continue
                ok, why, certain = self.live(enclosing, depth + 1)
                if ok:
                    found = (True, f"called at {mod.path}:{call.line} in {cls.name}.{enclosing}", certain)
                    if certain:
                        return found
                    uncertain = uncertain or found
        sites = callers.sites(meth, limit=COMMON)
        if sites is None:
            return True, f"{meth} is called in many files", True
        for s in sites:
            if s.narrowed and not (s.narrowed & self.names):
                continue  # under `isinstance(receiver, Other)`: not this class
            # `Base.meth(self, ...)` in a method of the hierarchy is `super().meth(...)` spelled out
            explicit_base = s.receiver in self.names and s.cls in self.names
            if s.receiver in ("self", "cls", "super") or explicit_base:
                if s.plugin and s.cls in self.names and callers.reachable(s)[0]:
                    return True, f"called at {s.where()}", True
                continue  # another class's own method of that name (the hierarchy is above)
            if not s.plugin and self._holds_core_object(s):
                continue
            if not callers.reachable(s)[0]:
                continue
            typed = {n for n in callers.receiver_types(s.path, 1 if s.plugin else 0).get(s.receiver, set())
                     if n[:1].isupper() and n not in NOT_TYPES}
            if (typed and typed <= self.names) or s.narrowed & self.names:
                return True, f"called at {s.where()}", True
            how = "a receiver typed as one of several classes" if typed & self.names else "an untyped receiver"
            uncertain = uncertain or (True, f"called through {how} at {s.where()}", False)
        if uncertain is not None:
            return uncertain
        if callers.passed_as_value(meth):
            return True, f"{meth} is passed around as a value", False
        where = sorted({s.where() for s in sites})[:2]
        if not where and not any(cls.self_calls(meth) for _, cls in self.core_classes):
            return True, f"no caller of {meth} found by name (it may be called dynamically)", False
        return False, f"nothing live calls {meth}" + (f" (callers: {', '.join(where)})" if where else ""), True

    def _holds_core_object(self, s: Site) -> bool:
        """The receiver is only ever built from core classes the plugin does not replace
        in that module (`self.model_runner = GPUModelRunnerV1(...)`): it never holds the
        plugin's object."""
        built = self.ev.callers.receiver_builds(s.path, 0).get(s.receiver)
        if not built:
            return False
        # core's hierarchy classes by name may be built as the plugin's (registered out of
        # tree); a plugin class's name is the plugin's only where core does not bind it
        core_names = {c.name for _, c in self.core_classes}
        return not (built & (self.ev.replaced.get(s.module, set()) | core_names)) \
            and not plugin_built(self.ev, s.module, built, self.names - core_names)


def _contract(plugin_sig: Signature, core_sig: Signature, core_classes: list[tuple[ModuleInfo, ClassInfo]],
              meth: str, plugin_defined: set[str], ev: Evidence, plugin_names: set[str],
              owner: str | None = None, pin: Callable[[str], Pin | None] | None = None) -> list[Problem]:
    """Where a plugin method standing in for a core one fails what core passes.

    The contract is core's calls that can run: `self.meth(...)` in core's own classes
    (except in methods the plugin also defines, and in methods nothing live calls),
    else `obj.meth(...)` through other objects in core files naming the hierarchy.
    A call under a guard of its receiver's flag that the plugin's class pins to a value
    failing it (`pin`, see pinnedflags) cannot run with the plugin's object.
    With neither, a public method must accept everything core declares (a warning:
    no caller is in sight); a private one has no visible caller and nothing is required.
    """
    out: list[Problem] = []
    bound = plugin_sig if plugin_sig.is_static else plugin_sig.bound()
    declared = core_sig if core_sig.is_static else core_sig.bound()
    live_call = False
    dead_calls: list[str] = []
    names = plugin_names | {c.name for _, c in core_classes}
    obj = _PluginObject(core_classes, plugin_defined, names, ev)
    seen_call = False
    called_as = _dispatch_names(meth, core_classes)
    for mod, cls in core_classes:
        for name, enclosing, call in ((name, *c) for name in called_as
                                      for c in cls.self_calls(name, include_super=False)):
            seen_call = True  # core has callers: those that can run are the whole contract
            if enclosing in plugin_defined:
                continue  # the plugin's own method runs instead: this call never does
            ok, why, certain = obj.live(enclosing)
            if ok and pin is not None:
                pinned = blocked(ev.callers.function_at(mod.path, 0, call.line), "self", name, call.line, pin)
                ok, why = (False, pinned) if pinned else (ok, why)
            if not ok:
                dead_calls.append(f"{mod.path}:{call.line} ({why})")
                continue
            live_call = True
            unbound = cls.through_class(call) and not (plugin_sig.is_static or plugin_sig.is_classmethod)
            problems = (_call_problems(plugin_sig, core_sig, call) if unbound  # `cls.meth(instance)`: self passed
                        else _call_problems(bound, declared, call))
            if problems:
                out.append(Problem(mod.path, call.line, tuple(problems),
                                   f"core calls it at {mod.path}:{call.line} in {cls.name}.{enclosing}"
                                   f" ({enclosing}: {why})", certain))
    if live_call:
        return out
    core_names = {c.name for _, c in core_classes}
    on_platform = _on_platform(meth, plugin_names, owner, ev)
    sites = [(s, meth) for s in _platform_sites(meth, declared, ev)] if on_platform else []
    sites = sites or [(s, name) for name in called_as for s in _foreign_sites(name, core_names, ev)]
    roots = {c.name for _, c in core_classes if meth in c.methods}
    sites = sites or [(s, meth) for s in named_sites(meth, declared, roots, plugin_names, ev)]
    if "forward" in called_as:
        sites += _module_call_sites(_running_classes(core_classes, plugin_names, ev), ev)
    for s, name in sites:
        if accepts_call(declared, s.shape):
            continue  # core's own method fails it too: the call is meant for another class
        pinned = blocked(ev.callers.function_at(s.path, 1 if s.plugin else 0, s.shape.line), s.receiver, name,
                         s.shape.line, pin) if pin is not None else None
        if pinned:
            dead_calls.append(f"{s.where()} ({pinned})")
            continue
        live_call = True
        problems = _call_problems(bound, declared, s.shape)
        if problems:
            out.append(Problem(s.path, s.shape.line, tuple(problems),
                               f"core calls it as {s.spelled(name)} at {s.where()}", True))
    if live_call or seen_call:
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
    if problems:
        evidence = "no core call site is visible; checked against the declared signature"
        if dead_calls:
            evidence += "; core's own calls cannot run: " + ", ".join(dead_calls[:3])
        interface = (core_sig.raises or "").split(".")[-1] == "NotImplementedError"
        if interface:
            evidence += " (an interface core declares by raising NotImplementedError)"
        out.append(Problem(core_path, core_sig.line, tuple(problems), evidence, False, interface))
    return out


def _summary(subject: str, p: Problem) -> str:
    more = f" (+{len(p.problems) - 1} more)" if len(p.problems) > 1 else ""
    where = "" if p.visible else f" (declared interface; {NO_CORE_CALLER})" if p.interface \
        else f" (declared; {NO_CORE_CALLER})"
    return f"{subject} {p.problems[0]}{more}{where}"


# ----------------------------------------------------------------------------- overrides


def check_overrides(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    is_core = ev.is_core
    findings: list[Finding] = []
    for pc in facts.classes:
        cls = world.class_of(pc.module, pc.node)
        if not cls.bases:
            continue
        mro = _linearize(world, pc.module, cls, pc.scope.local_imports)
        core_classes = [b for b in mro if b is not None and is_core(b[0].name)]
        if not core_classes:
            continue
        plugin_defined = set(cls.methods) - super_calls(pc.node)
        classes = ev.classes
        pin = pin_finder([(pc.module, cls), *mro], is_core, facts.attr_stores,
                         lambda owner, flag: classes is None
                         or classes.defined_below(owner, flag, plugin_only=True) is not None)
        for b in mro:
            if b is None or is_core(b[0].name):
                break
            plugin_defined |= set(b[1].methods) - (super_calls(b[1].node) if b[1].node else set())
        for meth, sig in cls.methods.items():
            if meth in CONSTRUCTORS or SKIP_METHOD_DECORATORS & set(sig.decorators):
                continue
            if sig.raises is not None:
                continue  # the plugin's method only raises: it is not meant to be called
            below: str | None = None  # the plugin class between this one and core that defines it too
            for base in mro:
                if base is None:
                    break  # an unknown class may define it first: do not guess
                bmod, bcls = base
                if meth not in bcls.methods:
                    if meth in bcls.attrs:
                        break
                    continue
                if not is_core(bmod.name):
                    # overrides a plugin method (checked where that one overrides core): core's
                    # own calls on this object still reach this one, the declaration does not bind it
                    below = below or bcls.name
                    continue
                core_sig = bcls.methods[meth]
                if SKIP_METHOD_DECORATORS & set(core_sig.decorators):
                    break
                if (sig.is_static, sig.is_classmethod) != (core_sig.is_static, core_sig.is_classmethod):
                    break
                plugin_names = {cls.name} | {b[1].name for b in mro if b is not None and not is_core(b[0].name)}
                for p in _contract(sig, core_sig, core_classes, meth, plugin_defined, ev, plugin_names, cls.name,
                                   pin):
                    if below is not None and not p.visible:
                        continue  # past the plugin's own override, only a core call that can run counts
                    message = (f"{cls.name}.{sig.render()} overrides {bcls.name}.{core_sig.render()} "
                               f"({bmod.name}{f', below {below}.{meth}' if below else ''}) but "
                               f"{p.evidence.split(';')[0]} and it " + "; ".join(p.problems))
                    findings.append(Finding(
                        _kind(pc.ctx, "override"), f"override:{pc.module.name}.{cls.name}.{meth}",
                        pc.path, sig.line, p.core_path, p.core_line, _why(pc.ctx, message),
                        severity="info" if p.interface else _severity(pc.ctx, ev, pc.module.name, p.visible),
                        reason=_reason(pc.ctx, ev, pc.module.name, p.evidence),
                        summary=_summary(f"{cls.name}.{meth}", p)))
                break
    return findings


# ----------------------------------------------------------------------------- replacements


def check_replacements(facts: PluginFacts, world: TreeIndex, core: TreeIndex, ev: Evidence) -> list[Finding]:
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
            findings.extend(_module_replacement(r, val, symbol, world, core, ev))  # type: ignore[arg-type]
        elif kind == "class":
            findings.extend(_method_replacement(r, val, symbol, world, replaced[r.owner], ev))  # type: ignore[arg-type]
    return findings


def _subject(value: str, replaced: str) -> str:
    """`factory (for ModelCudaGraphManager)`; just the name when it is the same."""
    return value if replaced.split(".")[-1] == value else f"{value} (for {replaced})"


def _replacement_finding(r: Replacement, symbol: str, subject: str, message: str, p: Problem,
                         ev: Evidence) -> Finding:
    return Finding(_kind(r.ctx, "replacement"), symbol, r.path, r.line, p.core_path, p.core_line,
                   _why(r.ctx, message),
                   severity="info" if p.interface else _severity(r.ctx, ev, r.module.name, p.visible),
                   reason=_reason(r.ctx, ev, r.module.name, p.evidence), summary=_summary(subject, p))


def _module_replacement(r: Replacement, mod: ModuleInfo, symbol: str, world: TreeIndex,
                        core: TreeIndex, ev: Evidence) -> list[Finding]:
    res = core.lookup(mod.name, r.attr)
    if res.status == "missing":
        return _missing_target(r, mod.path, 0, f"core module {mod.name} has no '{r.attr}'", ev, world)
    if res.status != "found":
        return []
    value = _value_signature(world, r)
    if value is None:
        return []
    vname, vsig = value
    if vsig.raises is not None:
        return []
    shown = f"{vname}{vsig.render()[len(vsig.name):]}"
    out: list[Finding] = []
    # A module attribute replaced at run time is seen by the code that looks it up
    # through that module's globals: the bare-name calls inside the module itself
    # (`name(...)`, `name[grid](...)`), where they can run.
    core_sig = _callable_signature(world, world.resolve(mod.name, r.attr))
    dead_calls = []
    live = False
    for site in ev.callers.core_sites(mod.path, r.attr) + module_alias_calls(ev.callers, mod, r.attr):
        if site.receiver != "":
            continue
        ok, why = ev.callers.reachable(site)
        if not ok:
            dead_calls.append(f"{site.where()} ({why})")
            continue
        live = True
        problems = _call_problems(vsig, core_sig, site.shape)
        if problems:
            p = Problem(mod.path, site.shape.line, tuple(problems), f"core calls it at {site.where()}", True)
            message = (f"{shown} replaces {r.owner}.{r.attr}, but core calls it at {mod.path}:{site.shape.line}"
                       f" and it " + "; ".join(problems))
            out.append(_replacement_finding(r, symbol, _subject(vname, r.attr), message, p, ev))
    if not live and not dead_calls and core_sig is not None and not core_sig.never_called:
        problems = covers(vsig, core_sig, receiver=False, names=False)
        if problems:
            evidence = "no core call site in the module is visible; checked against the declared signature"
            if dead_calls:
                evidence += "; core's own calls cannot run: " + ", ".join(dead_calls[:3])
            p = Problem(mod.path, core_sig.line, tuple(problems), evidence, False)
            message = (f"{shown} replaces {r.owner}.{r.attr}{core_sig.render()[len(core_sig.name):]} but "
                       + "; ".join(problems))
            out.append(_replacement_finding(r, symbol, _subject(vname, r.attr), message, p, ev))
    return out


def _missing_target(r: Replacement, core_path: str, core_line: int, why: str, ev: Evidence,
                    world: TreeIndex) -> list[Finding]:
    """A patch of a core attribute that core does not have does nothing: core never looks
    the name up. Only the plugin's own callables count as patches (a saved original or a
    marker, `Cls._orig_x = Cls.x`, is not one). A name the plugin reads back itself (a
    helper it adds) is not reported. A name some core file still mentions is reported
    only where core moved the function (`_moved_target`); otherwise it may be looked up
    dynamically. A name no core file mentions is a warning: the reason says whether it
    runs at import time."""
    if r.in_class or ev.callers.plugin_reads(r.attr):
        return []
    value = dotted(r.value)
    if not isinstance(r.value, ast.Lambda) and (value is None or _value_signature(world, r) is None
                                                 or ev.is_core(qualify(r.module, value, r.scope.local_imports) or "")):
        return []
    mentioned = ev.callers.mentions(r.attr)
    if mentioned:
        return _moved_target(r, core_path, why, ev, mentioned)
    message = (f"the plugin assigns {r.owner}.{r.attr}, but {why} and no core file names it: "
               "the patch does nothing (core renamed or removed what it patched)")
    # A warning, also at start-up: nothing raises (core never looks the name up), and on
    # the release-bump evaluation 12 of 13 such findings were no-ops nothing reached.
    severity = "warning"
    evidence = _assigned_when(r)
    return [Finding(_kind(r.ctx, "patch-target"), f"patch-target:{r.owner}.{r.attr}", r.path, r.line,
                    core_path, core_line, _why(r.ctx, message), severity=severity,
                    reason=_reason(r.ctx, ev, r.module.name, evidence),
                    summary=f"patch of {r.owner.rsplit('.', 1)[-1]}.{r.attr} does nothing: {why}")]


def _assigned_when(r: Replacement) -> str:
    """When a patch is made, as a finding's evidence says it."""
    if r.installed_by:
        return f"installed by {r.installed_by} when the plugin loads"
    return "assigned when the module is imported" if r.at_import else \
        "assigned inside a function (when it runs is not known)"


def _patch_function(r: Replacement, world: TreeIndex) -> tuple[str, ast.AST] | None:
    """(plugin path, def node) of the plugin function a replacement installs."""
    name = dotted(r.value)
    if name is None:
        return None
    node = r.scope.defs.get(name) if "." not in name else None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return r.path, node
    target = qualify(r.module, name, r.scope.local_imports)
    obj = world.resolve_dotted(target) if target else None
    if obj is None or obj[0] != "func":
        return None
    fmod, sig = obj[1]  # type: ignore[misc]
    for stmt in fmod.tree.body if fmod.tree is not None else ():
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.lineno == sig.line:
            return fmod.path, stmt
    return None


def fold_dead_patches(found: list[Finding], facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    """Code reachable only through a patch whose core target is gone never runs: the
    findings inside the function such a patch installs (and nothing else in the plugin
    names) are folded into the one `patch-target` finding, which lists them."""
    dead = {(f.plugin_path, f.plugin_line): f for f in found if f.kind == "patch-target"}
    if not dead:
        return found
    by_value: dict[tuple[str, int], list[Finding]] = {}
    spans: dict[tuple[str, int], tuple[str, int, int, str]] = {}
    for r in facts.replacements:
        f = dead.get((r.path, r.line))
        fn = _patch_function(r, world) if f is not None else None
        if fn is None or getattr(fn[1], "name", None) is None:
            continue
        path, node = fn
        key = (path, node.lineno)  # type: ignore[attr-defined]
        by_value.setdefault(key, []).append(f)  # type: ignore[arg-type]
        spans[key] = (path, node.lineno, node.end_lineno or node.lineno, node.name)  # type: ignore[attr-defined]
    out = list(found)
    for key, patches in by_value.items():
        path, first, last, name = spans[key]
        # named only by its def and by the dead patches that install it (imports aside):
        # anything else may run it through another path
        if ev.callers.plugin_uses(name) > 1 + len(patches):
            continue
        inside = [f for f in out if f.plugin_path == path and first <= f.plugin_line <= last
                  and f.kind != "patch-target"]
        if not inside:
            continue
        out = [f for f in out if f not in inside]
        listed = ", ".join(sorted({f.symbol for f in inside}))
        for p in patches:
            folded = dataclasses.replace(p, message=p.message + f"; {len(inside)} finding(s) inside {name}, which "
                                         f"only this patch installs, never run and are folded here: {listed}")
            out[out.index(p)] = folded
    return out


# a module-level `def name(` (or `async def`) in a core file's text
_TOP_LEVEL_DEF = r"^(?:async[ \t]+)?def[ \t]+%s[ \t]*\("


def _moved_target(r: Replacement, core_path: str, why: str, ev: Evidence,
                  mentioned: list[str]) -> list[Finding]:
    """The patched name is gone from its module but one other core module now defines it
    at module level: core moved the function, and the plugin's replacement no longer
    reaches the code core runs. An error where the assignment runs on the start-up
    chain (the patch was meant to be in force from the start); a name defined in
    several modules, or not defined as a function anywhere, says nothing certain."""
    import re

    word = re.compile((_TOP_LEVEL_DEF % re.escape(r.attr)).encode(), re.M)
    defs = [p for p in mentioned if p != core_path and word.search(ev.callers.text(p, 0))]
    if len(defs) != 1:
        return []
    moved_to = defs[0]
    message = (f"the plugin assigns {r.owner}.{r.attr}, but {why}; core now defines {r.attr} in {moved_to}: "
               "the patch does not reach the function core runs")
    evidence = _assigned_when(r)
    return [Finding(_kind(r.ctx, "patch-target"), f"patch-target:{r.owner}.{r.attr}", r.path, r.line,
                    moved_to, 0, _why(r.ctx, message),
                    severity=_severity(r.ctx, ev, r.module.name, error=r.at_import),
                    reason=_reason(r.ctx, ev, r.module.name, evidence),
                    summary=f"patch of {r.owner.rsplit('.', 1)[-1]}.{r.attr} misses it: core moved it to {moved_to}")]


def check_version_guards(facts: PluginFacts, ev: Evidence) -> list[Finding]:
    """`vllm_version_is("0.25.0")` matches one release exactly: gated against a later
    patch release of the same series (0.25.1), the test is false and the other branch
    runs, whatever API that release keeps. A warning per guard and file, naming the
    branch the core under test takes."""
    from overlay.gate.conditions import normalize_version
    version = getattr(ev.env, "version", None)
    if not version:
        return []
    have = normalize_version(version)
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for path, line, want, ctx in facts.version_tests:
        w = normalize_version(want)
        if (path, want) in seen or w == have or len(w) < 2 or len(have) < 2 or w[:2] != have[:2] \
                or not all(isinstance(x, int) for x in w + have) or w > have:
            continue
        seen.add((path, want))
        message = (f"vllm_version_is({want!r}) is an exact match: core {version} is a later release of the "
                   f"same series, so the test is false and the branch for other releases runs "
                   f"(the `else` of an `if vllm_version_is({want!r})`)")
        out.append(Finding("version-guard", f"version-guard:{want}", path, line, "", 0, message,
                           severity="warning", reason="exact-match release guard",
                           summary=f"vllm_version_is({want!r}) does not hold for {version}: "
                                   "the other branch runs"))
    return out


def _method_replacement(r: Replacement, owner: tuple[ModuleInfo, ClassInfo], symbol: str,
                        world: TreeIndex, replaced: set[str], ev: Evidence) -> list[Finding]:
    mod, cls = owner
    member = world.class_member(mod, cls, r.attr)
    # A name a core class lacks is not judged: the plugin extends core classes with
    # methods of its own (vllm-ascend adds a parser's helpers to DeepSeekV4ToolParser),
    # which no static reading tells from a patch of a renamed method.
    if member is None or member[0] != "method":
        return []  # a plain value: nothing in core calls it
    core_mod, core_cls, core_sig = member[1]  # type: ignore[misc]
    if SKIP_METHOD_DECORATORS & set(core_sig.decorators):
        return []
    value = _value_signature(world, r)
    if value is None:
        return []
    vname, vsig = value
    if vsig.raises is not None:
        return []
    core_classes = [(mod, cls)] + [b for b in _linearize(world, mod, cls) if b is not None]
    out = []
    built = _construction_contract(vsig, core_sig, mod, cls, ev) if r.attr == "__init__" else None
    for p in built if built is not None else _contract(vsig, core_sig, core_classes, r.attr, replaced, ev, set()):
        message = (f"{vname}{vsig.render()[len(vsig.name):]} replaces {core_cls.name}.{core_sig.render()} "
                   f"({core_mod.name}) but {p.evidence.split(';')[0]} and it " + "; ".join(p.problems))
        out.append(_replacement_finding(r, symbol, _subject(vname, f"{core_cls.name}.{r.attr}"), message, p, ev))
    return out


def _construction_contract(vsig: Signature, core_sig: Signature, mod: ModuleInfo, cls: ClassInfo,
                           ev: Evidence) -> list[Problem] | None:
    """A replaced `__init__` runs where core builds the class: `Cls(...)` and calls through
    a local alias of it (`attn_cls = Cls if c else Other; attn_cls(...)`, aliascalls.py).
    The problems at those calls that can run; None when no such call can run (the other
    evidence decides)."""
    sites = constructor_calls(ev.callers, mod, cls.name, COMMON)
    live = [s for s in sites or [] if ev.callers.reachable(s)[0]]
    if not live:
        return None
    out = []
    for s in live:
        problems = _call_problems(vsig.bound(), core_sig.bound(), s.shape)
        if problems:
            out.append(Problem(s.path, s.shape.line, tuple(problems), f"core calls it at {s.where()}", True))
    return out


# ----------------------------------------------------------------------------- constructor calls


def _fields(cls: ClassInfo, kw_only: bool) -> list[tuple[str, bool, bool]] | None:
    """(name, has default, keyword-only) of a dataclass's own fields, in order."""
    out = []
    kw = kw_only
    for stmt in cls.fields:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        ann = ast.unparse(stmt.annotation) if stmt.annotation is not None else ""
        if ann.split("[")[0].split(".")[-1] == "KW_ONLY":
            kw = True
            continue
        if "ClassVar" in ann.split("[")[0]:
            continue
        default, this_kw = stmt.value is not None, kw
        v = stmt.value
        if isinstance(v, ast.Call) and (dotted(v.func) or "").split(".")[-1] == "field":
            opts = {k.arg: k.value for k in v.keywords if k.arg}
            init = opts.get("init")
            if isinstance(init, ast.Constant) and init.value is False:
                continue
            default = "default" in opts or "default_factory" in opts
            kwo = opts.get("kw_only")
            if isinstance(kwo, ast.Constant) and isinstance(kwo.value, bool):
                this_kw = kwo.value
        out.append((stmt.target.id, default, this_kw))
    return out


def constructor_signature(world: TreeIndex, mod: ModuleInfo, cls: ClassInfo, is_core: Callable[[str], bool],
                          local: dict[str, str] | None = None) -> tuple[Signature, bool] | None:
    """How calling the class binds its arguments, and whether core defines that
    binding (a core `__init__`, or dataclass fields core declares). None when the gate
    cannot tell (an unknown base, `__new__`, a dataclass without a generated `__init__`)."""
    # an unreadable base (torch.nn.Module) matters only if the walk reaches it: a class
    # that writes its own __init__ before it is built by that __init__
    chain: list[tuple[ModuleInfo, ClassInfo] | None] = [(mod, cls), *_linearize(world, mod, cls, local)]
    dataclasses: list[tuple[ModuleInfo, ClassInfo, dict[str, bool]]] = []
    for link in chain:
        if link is None:
            return None
        m, c = link
        opts = dataclass_options(c)
        # @dataclass never replaces an __init__ its class body defines (vllm.sequence's
        # IntermediateTensors writes its own, with a default the fields do not show)
        if opts is not None and "__init__" not in c.methods:
            if opts.get("init") is False:
                return None
            dataclasses.append((m, c, opts))
            continue
        if "__new__" in c.methods:
            return None
        if "__init__" in c.methods:
            if dataclasses:
                return None  # a hand-written __init__ under generated ones: too clever to guess
            return c.methods["__init__"].bound(), is_core(m.name)
    if not dataclasses:
        return None
    fields: dict[str, tuple[bool, bool]] = {}
    for m, c, opts in reversed(dataclasses):  # base fields first; a redefinition keeps its place
        for name, default, kw in _fields(c, opts.get("kw_only", False)) or []:
            fields[name] = (default, kw)
    args = tuple(Param(n, d) for n, (d, kw) in fields.items() if not kw)
    kwonly = tuple(Param(n, d) for n, (d, kw) in fields.items() if kw)
    sig = Signature(name=cls.name, line=cls.line, posonly=(), args=args, vararg=None, kwonly=kwonly, kwarg=None)
    return sig, any(is_core(m.name) for m, _, _ in dataclasses)


def _bound_after_replacement(use, target: str, ev: Evidence) -> bool:
    """Does `use` call a core module's global the plugin replaces (`mod.Cls = AscendCls`),
    looked up when the call runs: imported inside the function, or read off the module
    (`mod.Cls(...)`)? Then what it builds is the plugin's class, not core's. A name a
    module-level import bound stays core's when that import ran first (import order)."""
    owner, _, name = target.rpartition(".")
    if name not in ev.replaced.get(owner, ()):
        return False
    head = use.func.split(".", 1)[0]
    return head in (use.local or {}) or "." in use.func


def check_constructors(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    """Plugin calls of classes whose constructor core defines (a core class, or a plugin
    subclass that inherits core's `__init__` or extends core's dataclass fields)."""
    findings: list[Finding] = []
    memo: dict[str, tuple[Signature, bool, str, str, int] | None] = {}
    built_as_plugin = {name for op in ev.oot for name in op.core_names}  # oot.RegisteredOp
    for use in facts.calls:
        target = qualify(use.module, aliased(use)[0], use.local)  # `_Orig = mod.Cls`: core's class
        if target is None:
            continue
        if _bound_after_replacement(use, target, ev):
            continue  # the name is the plugin's own class when this line runs
        if target not in memo:
            memo[target] = None
            obj = world.resolve_dotted(target)
            if obj is not None and obj[0] == "class":
                cmod, ccls = obj[1]  # type: ignore[misc]
                chain = [(cmod, ccls)] + [b for b in _linearize(world, cmod, ccls) if b is not None]
                if any("__init__" in ev.replaced.get(f"{m.name}.{c.name}", ()) for m, c in chain):
                    continue  # the plugin installs its own __init__ (checked as a replacement)
                if f"{cmod.name}.{ccls.name}" in built_as_plugin:
                    continue  # a core op the plugin registers its own class for: that class is built
                found = constructor_signature(world, cmod, ccls, ev.is_core)
                if found is not None and found[1]:
                    memo[target] = (found[0], found[1], f"{cmod.name}.{ccls.name}", cmod.path, ccls.line)
        known = memo[target]
        if known is None:
            continue
        sig, _, qualname, cpath, cline = known
        problems = accepts_call(sig, use.shape)
        if not problems:
            continue
        short = qualname.rsplit(".", 1)[-1]
        message = (f"{use.func}(...) constructs {qualname}{sig.render()[len(sig.name):]}, whose constructor "
                   f"core defines, and it " + "; ".join(problems))
        p = Problem(cpath, cline, tuple(problems), f"the plugin calls it at {use.path}:{use.line}", True)
        findings.append(Finding(_kind(use.ctx, "constructor"), f"constructor:{use.module.name}:{qualname}",
                                use.path, use.line, cpath, cline, _why(use.ctx, message),
                                severity=_severity(use.ctx, ev, use.module.name),
                                reason=_reason(use.ctx, ev, use.module.name, p.evidence),
                                summary=_summary(f"{short}(...)", p)))
    return findings


# ----------------------------------------------------------------------------- reachability: alternatives


def platform_alternatives(facts: PluginFacts, world: TreeIndex, is_core: Callable[[str], bool], callers: Callers):
    """A function (module, class) -> reason or None: is the core class another
    platform's implementation of an interface the plugin implements itself? Core's
    `Worker(WorkerBase)` (the GPU worker) beside the plugin's `NPUWorker(WorkerBase)`:
    core picks one worker class per platform, and the plugin's platform names its own.
    Computed, never listed: the class derives directly from a core base that a plugin
    class also derives from directly; no plugin class has it in its bases; the plugin
    imports it nowhere; and no file of either tree calls it by name (nothing constructs it
    directly). A core class deriving from such a class on the same terms (`XPUWorker(Worker)`)
    is another platform's too. Code in such a class does not run with the plugin, so core's
    call sites there are no evidence against it."""
    direct: dict[tuple[str, str], list[str]] = {}  # core base -> plugin classes right below it
    in_mro: set[tuple[str, str]] = set()
    for pc in facts.classes:
        info = world.class_of(pc.module, pc.node)
        for expr in info.bases:
            target = qualify(pc.module, expr, pc.scope.local_imports) if expr else None
            found = world.resolve_dotted(target) if target else None
            if found and found[0] == "class" and is_core(found[1][0].name):  # type: ignore[index]
                bmod, bcls = found[1]  # type: ignore[misc]
                direct.setdefault((bmod.name, bcls.name), []).append(info.name)
        for b in _linearize(world, pc.module, info, pc.scope.local_imports):
            if b is not None:
                in_mro.add((b[0].name, b[1].name))
    imported = {(u.module, u.name) for u in facts.imports}
    shapes: dict[tuple[str, str], str | None] = {}
    memo: dict[tuple[str, str], str | None] = {}
    kept: dict[tuple[str, str], bool] = {}

    def class_at(module: str, cls: str):
        mod = world.module(module)
        return mod, (mod.classes.get(cls) if mod is not None else None)

    def alternative_shape(module: str, cls: str) -> str | None:
        """Why the class has another platform's shape, judged on the hierarchy alone: it
        derives directly from a core base a plugin class derives from directly, or
        specialises (through core classes) one that does. Whether the class in between is
        live is no matter: V0's `XPUWorker(Worker)` is another platform's worker even where
        the plugin builds V0's `MultiStepWorker(Worker)`, which keeps `Worker` live."""
        key = (module, cls)
        if key in shapes:
            return shapes[key]
        shapes[key] = None
        mod, info = class_at(module, cls)
        if info is None:
            return None
        for expr in info.bases:
            target = qualify(mod, expr, None) if expr else None  # type: ignore[arg-type]
            found = world.resolve_dotted(target) if target else None
            if found and found[0] == "class":
                base = (found[1][0].name, found[1][1].name)  # type: ignore[index]
                if base in direct:
                    shapes[key] = (f"{cls} is core's own {base[1]} for another platform: the plugin runs its "
                                   f"{', '.join(sorted(set(direct[base])))} instead")
                    break
                inner = alternative_shape(*base) if is_core(base[0]) else None
                if inner:
                    shapes[key] = f"{cls} specialises {base[1]}, which does not run with the plugin: {inner}"
                    break
        return shapes[key]

    def kept_live(module: str, cls: str) -> bool:
        """A core subclass of the class, picked, called where it can run or imported by the
        plugin, runs its methods (each judged on its own, and its own subclasses too)."""
        for sub_module, sub in instances.derived_by_name(callers, cls):
            if sub_module is None or not is_core(sub_module) \
                    or not instances.may_derive_from(callers, sub_module, sub, module, cls):
                continue
            key = (sub_module, sub)
            if key not in kept:
                kept[key] = False  # while deciding: a cycle proves nothing
                kept[key] = key in imported or key in in_mro \
                    or any(callers.reachable(s)[0] for s in callers.sites(sub) or []) \
                    or instances.picked_by_name(callers, sub_module, sub) is not None \
                    or kept_live(sub_module, sub)
            if kept[key]:
                return True
        return False

    def why(module: str, cls: str) -> str | None:
        key = (module, cls)
        if key in memo:
            return memo[key]
        memo[key] = None
        _, info = class_at(module, cls)
        if info is None or key in in_mro or key in imported or callers.sites(cls):
            return None
        shape = alternative_shape(module, cls)
        if shape is None or instances.picked_by_name(callers, module, cls) is not None or kept_live(module, cls):
            return None
        memo[key] = shape
        return shape

    return why


# ----------------------------------------------------------------------------- import-time attribute reads


def _missing_attribute(world: TreeIndex, expr: str, ev: Evidence) -> tuple[str, str, int, str, bool] | None:
    """(owner, path, line, why, certain in a function body) when the dotted core name `expr`
    fails to resolve at a part core certainly lacks; None when it resolves or the gate cannot
    tell. A module's or a plain function's missing name is certain whenever the read runs; a
    class may get attributes at run time that no static reading sees."""
    parts = expr.split(".")
    for cut in range(len(parts), 0, -1):
        mod = world.module(".".join(parts[:cut]))
        if mod is not None:
            break
    else:
        return None
    current: tuple[str, object] = ("module", mod)
    owner = ".".join(parts[:cut])
    for attr in parts[cut:]:
        if attr.startswith("__") and attr.endswith("__"):
            return None
        kind, val = current
        if kind == "module":
            m = val  # type: ignore[assignment]
            res = world.lookup(m.name, attr)  # type: ignore[attr-defined]
            if res.status == "missing":
                return owner, m.path, 0, res.reason, True  # type: ignore[attr-defined]
            if res.status != "found":
                return None
            nxt = world.resolve(m.name, attr)  # type: ignore[attr-defined]
        elif kind == "func":
            fmod, sig = val  # type: ignore[misc]
            # an undecorated def is a plain function object: it has no attribute but the
            # ones core sets on it (`f.kind = ...`), whenever the read runs
            if sig.decorators or ev.callers.stores(attr):
                return None
            return owner, fmod.path, sig.line, (f"core's {owner.rsplit('.', 1)[-1]} is a function "
                                                f"(not a class), which has no attribute '{attr}'"), True
        elif kind == "class":
            cmod, ccls = val  # type: ignore[misc]
            nxt = world.class_member(cmod, ccls, attr)
            if nxt is None:
                bases = _linearize(world, cmod, ccls)
                if any(b is None for b in bases) and (ev.callers.mentions(attr) or not (unknown_bases_in_core(
                        ev.env, cmod, ccls) or torch_module_lacks(world, cmod, ccls, bases, attr))):
                    return None  # a base the gate cannot read may define it (torchbases.py: nn.Module)
                why = f"class {ccls.name} has no attribute '{attr}'"
                if any(b is None for b in bases):
                    why += (" (nor does torch's nn.Module, its base" if not unknown_bases_in_core(ev.env, cmod, ccls)
                            else " (its bases are built at run time") + ", and no core file mentions the name)"
                return owner, cmod.path, ccls.line, why, False
            if nxt[0] != "class":
                return None
        else:
            return None
        if nxt is None:
            return None
        current = nxt
        owner = f"{owner}.{attr}"
    return None


def _missing_from_own_namespace(world: TreeIndex, target: str) -> tuple | None:
    """For `vars(C)["a"]`: (owner, path, line, why, certain) when core's class C resolves and
    `a` is bound only by a base, or only as an annotation (so not in C's own `__dict__`)."""
    owner, _, attr = target.rpartition(".")
    held = class_of(world, owner)
    if held is None or attr in namespace(held[1]):
        return None
    cmod, ccls = held
    where = "a base class" if world.class_member(cmod, ccls, attr) is not None else "no class"
    why = (f"class {ccls.name} binds no '{attr}' in its own body ({where} defines it), so `vars()` of it "
           f"has no key '{attr}'")
    return owner, cmod.path, ccls.line, why, False


def _subclass_has(facts: PluginFacts, world: TreeIndex, owner: tuple[ModuleInfo, ClassInfo], attr: str,
                  memo: dict) -> bool:
    """A plugin class below core's `owner` defines `attr` (in its body, or as `self.attr = `
    in a method): the object may be that subclass."""
    key = (owner[0].name, owner[1].name, attr)

    def sets(info: ClassInfo) -> bool:
        return info.declares(attr) or (info.node is not None and any(
            isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Store)
            and dotted(n.value) == "self" for n in ast.walk(info.node)))

    if key not in memo:
        memo[key] = False
        for pc in facts.classes:
            info = world.class_of(pc.module, pc.node)
            chain_key = ("chain", id(pc.node))  # each class's order, once for every (owner, attr)
            if chain_key not in memo:
                memo[chain_key] = _linearize(world, pc.module, info, pc.scope.local_imports)
            chain = memo[chain_key]
            if not any(b is not None and (b[0].name, b[1].name) == key[:2] for b in chain):
                continue
            # the subclass's own body, or a plugin base beside core's (`class
            # ArcticEngineArgs(EngineArgs, ArcticArgs)`: the fields come from ArcticArgs)
            if sets(info) or any(b is not None and b[0].name.split(".")[0] in world.packages and sets(b[1])
                                 for b in chain):
                memo[key] = True
                break
    return memo[key]


def _is_protocol(recv, typed) -> bool:
    """Whether the receiver's class is a typing Protocol (vLLM 0.8.5 types
    `additional_config` as `SupportsHash`; the object is the user's dict)."""
    chain = recv.chain(typed)
    return chain is not None and any(b is not None and b.split(".")[-1].split("[")[0] == "Protocol"
                                     for _, cls in chain for b in cls.bases)


def _sets_by_name(recv, typed, memo: dict[int, bool]) -> bool:
    """Whether a class of the receiver's chain sets attributes by a computed name
    (`setattr(self, k, v)`, `self.__dict__`, its own `__setattr__`), or the chain is unknown."""
    chain = recv.chain(typed)
    if chain is None:
        return True
    for _, cls in chain:
        if id(cls) not in memo:
            memo[id(cls)] = "__setattr__" in cls.methods or any(
                (isinstance(n, ast.Call) and dotted(n.func) == "setattr" and n.args and dotted(n.args[0]) == "self"
                 and not (len(n.args) > 1 and isinstance(n.args[1], ast.Constant)))
                or (isinstance(n, ast.Attribute) and n.attr == "__dict__" and dotted(n.value) == "self")
                for n in (ast.walk(cls.node) if cls.node is not None else ()))
        if memo[id(cls)]:
            return True
    return False


def check_typed_reads(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    """Reads in function bodies through receivers typed by core's annotations
    (`kv_cache_tensor.shared_by` for `for kv_cache_tensor in kv_cache_config.kv_cache_tensors`
    with `kv_cache_config: KVCacheConfig`; `vllm_config.speculative_config.use_dspark`) of
    an attribute the core class and its bases certainly lack: no member, field or
    `self.x` assignment of that name, no `__getattr__`, no base the gate cannot read, no
    core file storing or probing the name (`.name = `, `setattr(o, "name", v)`; for a class
    that sets attributes by computed name, no core file mentioning it at all), no plugin
    subclass defining it and no plugin code assigning it to an object other than its own
    (`self.name = ` sets the plugin's object). A read after probing for the name (`hasattr`, `getattr(...)`) or
    inside `try: ... except AttributeError` is not one."""
    from overlay.gate.receivers import Receivers
    recv = Receivers(world, ev.is_core, _linearize)
    grouped: dict[tuple, list] = {}
    sub_memo: dict = {}
    search_memo: dict[tuple[str, str], bool] = {}
    setter_memo: dict[int, bool] = {}
    below = None  # core's and the plugin's subclass graph, read only when a case needs it
    for read in facts.attr_reads:
        if read.import_time:
            continue
        head = read.expr.split(".")[0]
        if not (read.types and head in read.types) and not (head == "self" and read.cls is not None):
            continue
        if read.ctx.type_checking or read.ctx.handles("AttributeError"):
            continue
        found = recv.missing(read.module, read.expr, read.types, read.local, read.cls)
        if found is None:
            continue
        path, typed, attr = found
        if attr in read.ctx.probed or attr in facts.foreign_stores:
            continue
        # a class that sets attributes by computed name may hold any name core mentions;
        # for the others, only a core store of the name (`.attr = `, "attr") could add it
        if _is_protocol(recv, typed):
            continue  # a Protocol names what a structural match must have, not all it may have
        search = "mentions" if _sets_by_name(recv, typed, setter_memo) else "stores"
        if (search, attr) not in search_memo:
            search_memo[(search, attr)] = bool(getattr(ev.callers, search)(attr))
        if search_memo[(search, attr)] or _subclass_has(facts, world, (typed.mod, typed.cls), attr, sub_memo):
            continue
        if search == "stores" and ev.callers.mentions(attr):
            # core names it but never stores it: a core subclass that defines it may be the object
            if below is None:
                from overlay.gate.subclasses import Subclasses
                below = ev.classes or Subclasses(tuple(t[0] for t in ev.callers.trees))
            if below.defined_below(typed.cls.name, attr):
                continue
        owner = f"{typed.mod.name}.{typed.cls.name}"
        severity = _severity(read.ctx, ev, read.module.name)
        grouped.setdefault((_kind(read.ctx, "attribute"), f"attribute:{owner}.{attr}", read.path, severity),
                           []).append((read, path, typed, search))
    findings: list[Finding] = []
    for (kind, symbol, plugin_path, severity), items in grouped.items():
        read, path, typed, search = items[0]
        attr = symbol.rsplit(".", 1)[-1]
        lines = sorted({r.line for r, _, _, _ in items})
        more = also_at(lines)
        unset = "no core file mentions the name" if search == "mentions" else "no core file sets the name"
        why = (f"`{path}` is a {typed.cls.name} ({typed.how}), and core's {typed.cls.name} and its bases have no "
               f"attribute '{attr}' ({unset})")
        message = f"`{read.expr}` is read when the function runs: {why}{more}"
        p = Problem(typed.mod.path, typed.cls.line, (why,), "read in a function body", True)
        findings.append(Finding(kind, symbol, plugin_path, read.line, typed.mod.path, typed.cls.line,
                                _why(read.ctx, message), severity=severity,
                                reason=_reason(read.ctx, ev, read.module.name, p.evidence),
                                summary=f"read of {typed.cls.name}.{attr}: core's {typed.cls.name} has no "
                                        f"attribute '{attr}'"))
    return findings


def check_tensor_field_reads(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    """`self.positions.gpu` in a plugin class whose `positions` core now sets to a plain
    tensor (tensorfields.py): an attribute a tensor lacks, or a tensor method indexed or read
    into. A read after probing for the name or inside `try: ... except AttributeError` (or
    TypeError) is not one, nor one of a name the plugin stores on the field or on an object
    it may be (tensorfields.stored_on_field)."""
    from overlay.gate.tensorfields import TensorFields, core_stores_on, stored_on_field, tensor_misuse
    fields = None
    grouped: dict[tuple, list] = {}
    for read in facts.attr_reads:
        if read.import_time or read.cls is None:
            continue
        parts = read.expr.split(".")
        if parts[0] != "self" or len(parts) < 3:
            continue
        if read.ctx.type_checking or read.ctx.handles("AttributeError") or read.ctx.handles("TypeError"):
            continue
        why = tensor_misuse(parts[2:], read.subscripted)
        if why is None or parts[2] in read.ctx.probed \
                or stored_on_field({x.receiver for x in facts.foreign_stores.get(parts[2], ())}, parts[1]):
            continue
        if fields is None:
            fields = TensorFields(world, ev.is_core, _linearize, facts.classes)
        field = fields.field(read.module, read.cls, parts[1])
        if field is None or core_stores_on(fields, field, parts[2]):
            continue
        owner = f"{field.owner[0].name}.{field.owner[1].name}"
        severity = _severity(read.ctx, ev, read.module.name)
        grouped.setdefault((_kind(read.ctx, "attribute"), f"attribute:{owner}.{parts[1]}.{parts[2]}", read.path,
                            severity), []).append((read, field, why))
    findings: list[Finding] = []
    for (kind, symbol, plugin_path, severity), items in grouped.items():
        read, field, why = items[0]
        lines = sorted({r.line for r, _, _ in items})
        more = also_at(lines)
        owner_mod, owner_cls = field.owner
        sets = f"core's {owner_cls.name} sets `self.{field.attr} = {field.source}` ({owner_mod.path}:{field.line})"
        message = f"`{read.expr}` is used when the function runs: {sets}, a plain tensor, and {why}{more}"
        findings.append(Finding(kind, symbol, plugin_path, read.line, owner_mod.path, field.line,
                                _why(read.ctx, message), severity=severity,
                                reason=_reason(read.ctx, ev, read.module.name, "used in a function body"),
                                summary=f"{owner_cls.name}.{field.attr} is a plain tensor: {why}"))
    return findings


def check_class_uses(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    """A core name the plugin subclasses, tests with isinstance or matches as a class pattern
    that core defines as a plain function (classuses.py): one finding per import it rests on,
    keyed by that import when it binds the name itself."""
    findings: list[Finding] = []
    for use, named, target, sites, fmod, sig in function_class_uses(facts, world, ev.is_core):
        short = target.rsplit(".", 1)[-1]
        why = f"core's {short} is a function (not a class), at {fmod.path}:{sig.line}"
        hows = "; ".join(s.how for s in sites[:4]) + (f" (+{len(sites) - 4} more)" if len(sites) > 4 else "")
        message = f"the plugin uses `{sites[0].expr}` as a class ({hows}), and {why}: that raises TypeError"
        if named:
            symbol, path, line = f"import:{use.module}:{use.name}", use.path, use.line
        else:
            symbol, path, line = f"attribute:{target}", use.path, sites[0].line
        findings.append(Finding(_kind(use.ctx, "import" if named else "attribute"), symbol, path, line,
                                fmod.path, sig.line, _why(use.ctx, message),
                                severity=_severity(use.ctx, ev, use.mod_name),
                                reason=_reason(use.ctx, ev, use.mod_name, "used as a class"),
                                summary=f"{short} used as a class: {why}"))
    return findings


def check_attributes(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    findings: list[Finding] = check_typed_reads(facts, world, ev) + check_tensor_field_reads(facts, world, ev) \
        + check_class_uses(facts, world, ev)
    memo: dict[str, tuple | None] = {}
    # names the plugin itself sets on a core module or class when its module is imported
    # (`mamba_utils.extra = extra`): a read of one when a function runs (after start-up's
    # patches) is the plugin's own name. A store in a function does not count: it may come
    # after the read (`orig = mod.x; mod.x = wrapper`).
    supplied = supplied_at_load(facts)
    # ... and where a function stores it (`parallel_state._ORIG_TP = parallel_state._TP`):
    # a read in another function, or earlier in another one's body, may come after that store
    # (the gate cannot order them; the name is the plugin's), but one before the store in
    # the same function (`orig = mod.x; mod.x = wrapper`) comes first
    stored_later: dict[str, list[Replacement]] = {}
    for r in facts.replacements:
        if not r.in_class and not r.at_import:
            stored_later.setdefault(f"{r.owner}.{r.attr}", []).append(r)

    def stored_before(read, name: str) -> bool:
        # a read in the storing statement itself (`m.f = wrap(\n    m.f)`) or before it comes first
        return any(not (r.func_site is not None and r.func_site == read.site
                        and max(r.line, r.end_line) >= read.line)
                   for r in stored_later.get(name, ()))
    replaced_at: dict[str, set[tuple[str, int]]] = {}  # name -> where the plugin replaces it
    for r in facts.replacements:
        replaced_at.setdefault(r.attr, set()).add((r.path, r.line))
    rebound = {f"{r.owner}.{r.attr}" for r in facts.replacements if not r.in_class}  # `mod.Cls = PluginCls`
    try_imports = try_body_imports(facts.imports)
    untaken: dict[int, bool] = {}

    def untaken_fallback(ctx: Context) -> bool:
        """In the `except ImportError:` branch of a try whose core imports this core has."""
        if ctx.guard is None or ctx.guard[1] == "body" or not try_imports.get(ctx.guard[0]):
            return False
        tid = ctx.guard[0]
        if tid not in untaken:
            untaken[tid] = all(lookup_import(world, u).status == "found" for u in try_imports[tid])
        return untaken[tid]

    def plugin_sets(read, attr: str) -> bool:
        """Could the plugin have set `attr` on some object before `read` runs? Only a store
        later in the reading function itself (`orig = vars(C)["a"]; C.a = new`) cannot; a
        replacement that is no such store (`setattr(C, "a", new)`) may run anywhere."""
        sites = facts.foreign_stores.get(attr, ())
        if replaced_at.get(attr, set()) - {(x.path, x.line) for x in sites}:
            return True
        return any(not (x.func_site is not None and x.func_site == read.site and x.line > read.line) for x in sites)

    for read in facts.attr_reads:
        if read.ctx.probed and read.expr.split(".")[-1] in read.ctx.probed:
            continue  # read after probing for it (`if hasattr(mod, "x"): mod.x`)
        target = qualify(read.module, read.expr, read.local)
        if target is None and read.expr.split(".")[0] not in (read.local or {}):
            head, _, rest = read.expr.partition(".")
            alias = module_alias(read.module, head, world)  # `compile_mod = decorators`
            target = f"{alias}.{rest}" if alias and rest else None
        if target is None or not ev.is_core(target):
            continue
        if target not in memo:
            memo[target] = _missing_attribute(world, target, ev)
        missing = memo[target]
        if missing is None and read.own:
            missing = _missing_from_own_namespace(world, target)
        if missing is None:
            continue
        owner, path, line, why, certain = missing
        if read.ctx.handles("KeyError" if read.own else "AttributeError"):
            continue  # `try: ... except (AttributeError|Exception):` handles it
        stored = f"{owner}.{target[len(owner) + 1:].split('.')[0]}"
        if not read.import_time and (stored in supplied or stored_before(read, stored)):
            continue  # (at import, `orig = mod.x` before the plugin's `mod.x = new` still fails)
        head = read.expr.split(".")[0]
        bound = qualify(read.module, head, read.local) if head != read.expr else None
        if bound is not None and bound != target and ev.is_core(bound):
            if bound not in memo:
                memo[bound] = _missing_attribute(world, bound, ev)
            if memo[bound] is not None:
                continue  # the import binding `head` fails first, and is that break
        attr = target[len(owner) + 1:].split(".")[0]
        if not read.import_time and not certain:
            held = class_of(world, owner)  # in a function body a class may have got it at run time
            if held is None or owner in rebound or untaken_fallback(read.ctx):
                continue  # (a class the plugin rebinds may be its own, with the name)
            chain = [held, *_linearize(world, *held)]
            if not certainly_unset(chain, attr, ev.callers.stores, ev.callers.mentions,
                                   lambda name: plugin_sets(read, name)):
                continue
            why += " (no core file sets the name, and no plugin code sets it before this read)"
        when = "when the module is imported" if read.import_time else "when the function runs"
        message = f"`{read.expr}` is read {when}, and {why}"
        p = Problem(path, line, (why,), "read at import time" if read.import_time else
                    "read in a function body", True)
        findings.append(Finding(_kind(read.ctx, "attribute"), f"attribute:{owner}.{attr}", read.path, read.line,
                                path, line, _why(read.ctx, message),
                                severity=_severity(read.ctx, ev, read.module.name),
                                reason=_reason(read.ctx, ev, read.module.name, p.evidence),
                                summary=f"{'import-time ' if read.import_time else ''}read of "
                                        f"{owner.rsplit('.', 1)[-1]}.{attr}: {why}"))
    return findings
