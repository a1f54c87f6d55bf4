"""`self.x` reads whose attribute core's class will not have on the plugin's objects.

Two shapes, one question (does anything set `x` on this object?):

- **Base `__init__` skipped.** A plugin subclass of a core class whose `__init__` never
  calls the base's (`super().__init__` or `Base.__init__(self, ...)`) leaves every
  attribute that only core's `__init__` assigns unset. A core method the subclass inherits
  (does not override) that reads such an attribute raises AttributeError on the plugin's
  object. Counted only where nothing else provides the name: no class of the hierarchy
  has it as a method, class attribute, dataclass field or property, no core method other
  than `__init__` assigns it, the plugin's classes never assign it, no plugin code stores
  an attribute of that name anywhere, and the reading method does not name it as a
  string (`hasattr(self, "x")`, `getattr(self, "x", None)`). An error where the plugin
  class's module is loaded at start-up and something calls the reading method by name.
- **Reads in a replacement method.** A plugin function installed as a method of a core
  class (`FusedInputNorm.forward = ours`) runs with `self` an instance of that class, so
  its `self.x` reads resolve against it: members, class attributes, properties, every
  `self.x = ...` of its methods and, for a torch module, the names its methods register
  (`register_buffer`, `register_parameter`, `register_module`, `add_module`). A name none
  of these provide is an error where the patch is installed on a start-up path. Not
  counted where the gate cannot see the whole class (a base it cannot read, other than
  `torch.nn.Module`, whose own instance data is `training` and private names; its
  methods are only called), where the class answers any name (`__getattr__`), where a
  core subclass or a plugin subclass provides the name (the object may be one), or where
  the plugin stores an attribute of that name anywhere.

The hand engine gates one core at a time, so neither check compares with the declared
core; `--baseline declared` (and `make gate`) drops what the declared pairing already has.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Callable

from overlay.gate import checks
from overlay.gate.findings import Finding, also_at
from overlay.gate.guards import Guard, reads, strings
from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, dotted, inert_base, qualify
from overlay.gate.receivers import DYNAMIC, HARMLESS_BASES, self_assignments
from overlay.gate.scan import PluginFacts
from overlay.gate.supercalls import super_calls
from overlay.gate.torchbases import TORCH_MODULES

TORCH_MODULE_DATA = frozenset({"training", "dump_patches", "call_super_init", "T_destination"})
REGISTERS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})


def _functions(cls: ClassInfo) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The class body's own functions by name (the last definition wins, as at run time)."""
    out = {}
    for stmt in cls.node.body if cls.node is not None else ():
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
    return out


def _self_name(fn) -> str | None:
    if any((dotted(d) or "").split(".")[-1] in ("staticmethod", "classmethod") for d in fn.decorator_list):
        return None
    args = fn.args.posonlyargs + fn.args.args
    return args[0].arg if args else None


def _registered(cls: ClassInfo) -> set[str]:
    """Names the class's methods register on the module (`self.register_buffer("w", ...)`)."""
    out = set()
    for n in ast.walk(cls.node) if cls.node is not None else ():
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in REGISTERS \
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            out.add(n.args[0].value)
    return out


def _members(cls: ClassInfo) -> set[str]:
    """What the class statement itself binds: methods, class attributes, fields. A
    Protocol's bare annotations (`num_redundant_experts: int` in core's MixtureOfExperts)
    declare what implementers set; they bind nothing."""
    names = set(cls.methods) | set(cls.attrs)
    names |= {f.target.id for f in cls.fields if isinstance(f.target, ast.Name)}
    if any(b is not None and b.split(".")[-1] == "Protocol" for b in cls.bases):
        bare = {f.target.id for f in cls.fields
                if isinstance(f, ast.AnnAssign) and f.value is None and isinstance(f.target, ast.Name)}
        bound = {t.id for stmt in (cls.node.body if cls.node is not None else ())
                 if isinstance(stmt, ast.Assign) for t in stmt.targets if isinstance(t, ast.Name)}
        names -= bare - bound - set(cls.methods)
    return names


def _unpacked(cls: ClassInfo, skipped: frozenset[str]) -> set[str]:
    """`self.x` set by unpacking (`self.groups, self.ok, _ = init(...)`, `for self.i in ...`,
    `with ... as self.x`), which `self_assignments` (one value per attribute, for its type)
    leaves out; `self.x += 1` reads first and sets nothing new. Functions named in
    `skipped` never run: what they set is left out."""
    out: set[str] = set()
    for fn in ast.walk(cls.node) if cls.node is not None else ():
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name in skipped:
            continue
        augmented = {id(n.target) for n in ast.walk(fn) if isinstance(n, ast.AugAssign)}
        for n in ast.walk(fn):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and id(n) not in augmented \
                    and isinstance(n.value, ast.Name) and n.value.id == "self":
                out.add(n.attr)
    return out


def provides(cls: ClassInfo, skip_init: bool = False, helpers: frozenset[str] = frozenset()) -> set[str]:
    """Every name an instance of `cls` gets from the class itself: its members, what its
    functions assign to `self.x` (outside `__init__` and the `helpers` only it calls, with
    `skip_init`), unpacking included, and register."""
    skipped = frozenset({"__init__"} | helpers) if skip_init else frozenset()
    names = _members(cls) | _registered(cls) | _unpacked(cls, skipped)
    for attr, sites in self_assignments(cls.node).items() if cls.node is not None else ():
        if any(fn.name not in skipped for fn, _ in sites):
            names.add(attr)
    return names


def _bases_known(world: TreeIndex, chain: list[tuple[ModuleInfo, ClassInfo]]) -> tuple[bool, bool]:
    """(every base readable or harmless, some base is torch's nn.Module)."""
    torch = False
    for mod, cls in chain:
        for expr in cls.bases:
            if expr is None:
                return False, torch
            target = qualify(mod, expr, None)
            found = world.resolve_dotted(target) if target else None
            if found is not None and found[0] == "class":
                continue
            if target in TORCH_MODULES:
                torch = True
            elif expr.split(".")[-1] not in HARMLESS_BASES:
                return False, torch
    return True, torch


def _chain(world: TreeIndex, mod: ModuleInfo, cls: ClassInfo, local=None) -> list[tuple[ModuleInfo, ClassInfo]]:
    """The class and the bases the gate can read (`_bases_known` tells whether that is all)."""
    return [(mod, cls)] + [b for b in checks._linearize(world, mod, cls, local) if b is not None]


# ----------------------------------------------------------------------------- (a) base __init__ skipped


def _init_functions(cls: ClassInfo) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every `__init__` of the class statement, a version branch's included (`if
    vllm_version_is(...): def __init__ ...`)."""
    out = []
    todo = list(cls.node.body) if cls.node is not None else []
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, (ast.If, ast.Try)):
            todo += [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", []),
                     *(s for h in getattr(stmt, "handlers", []) for s in h.body)]
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__init__":
            out.append(stmt)
    return out


def _calls_base_init(mod: ModuleInfo, cls: ClassInfo) -> bool:
    """Some `__init__` of the class statement calls a base's that runs core's:
    `super().__init__(...)` or `Base.__init__(self, ...)`. One that calls only torch's
    `nn.Module.__init__(self)`, named outright, skips every core class between
    (vllm-ascend's CustomDeepseekV2ForCausalLM below core's DeepseekV2ForCausalLM)."""
    inits = _init_functions(cls)
    if "__init__" not in super_calls(cls.node) and not any(
            "__init__" in super_calls(ast.ClassDef(name="_", bases=[], keywords=[], body=[fn], decorator_list=[]))
            for fn in inits):
        return False
    explicit = [n.func.value for fn in inits for n in ast.walk(fn)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"]
    return not explicit or not all((name := dotted(e)) is not None and qualify(mod, name, None) in TORCH_MODULES
                                   for e in explicit)


def _one_base(mod: ModuleInfo, cls: ClassInfo) -> bool:
    """At most one base that counts (`checks._linearize` leaves inert ones out)."""
    return len([e for e in cls.bases if not (e and inert_base(mod, e, None))]) <= 1


def _mro_prefix(chain, upto: int) -> bool:
    """chain[:upto + 1] is the method resolution order's start: `checks._linearize` walks
    bases depth first, which is the MRO only along a single line of bases (a diamond such as
    vllm-ascend's `AscendEagleProposer(EagleProposer, AscendSpecDecodeBaseProposer)` puts
    core's shared base before the plugin's second one)."""
    return all(_one_base(m, c) for m, c in chain[:upto])


def _is_super(expr: ast.expr) -> bool:
    """`super()` or `super(X, self)`, the receiver of a base call."""
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super"


def _chain_index(world: TreeIndex, mod: ModuleInfo, expr: ast.expr, chain) -> int | None:
    """The position in `chain` of the class `expr` names in `mod` (`Base` in `Base.m(self)`),
    None when it names no class of the chain."""
    name = dotted(expr)
    target = qualify(mod, name, None) if name else None
    found = world.resolve_dotted(target) if target else None
    if found is None or found[0] != "class":
        return None
    key = (found[1][0].name, found[1][1].name)  # type: ignore[index]
    return next((j for j, (m, c) in enumerate(chain) if (m.name, c.name) == key), None)


def _named_init_target(world: TreeIndex, chain, i: int) -> int | None:
    """Where chain[i]'s `__init__` hands over when it names a base outright and never calls
    `super(...).__init__`: the index in `chain` of the one class whose `__init__` runs next,
    named by every `X.__init__(self, ...)` (vllm-metax's `DeviceCommunicatorBase.__init__(self,
    ...)` in a subclass of `CudaCommunicator`); None when it calls `super().__init__` or
    `super(X, self).__init__` (not judged, see below), names no class of the chain, or names
    several."""
    mod, cls = chain[i]
    targets = set()
    for fn in _init_functions(cls):
        for n in ast.walk(fn):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"):
                continue
            recv = n.func.value
            if _is_super(recv):
                # super().__init__ runs the next class, as always; super(X, self) starts after X, but
                # judging it put 12 false errors on vllm-ascend 0.9.0 ... 0.10.0 (AscendFusedMoE skips
                # FusedMoE.__init__ and overrides forward; core's forward_impl reads what it skipped,
                # and the liveness check, one call deep, took forward_impl's own caller as running)
                return None
            j = _chain_index(world, mod, recv, chain)
            if j is None or j <= i or not _mro_prefix(chain, j):
                return None
            targets.add(j)
    return targets.pop() if len(targets) == 1 else None


def _skipped_core(chain, is_core, world: TreeIndex | None = None) -> tuple[ClassInfo, list] | None:
    """(the plugin class whose `__init__` stops the chain, the core classes after it whose
    `__init__` therefore never runs); None when core's `__init__` runs. A plugin `__init__`
    that names a deeper base's `__init__` outright skips the core classes between."""
    i = 0
    while i < len(chain):
        mod, cls = chain[i]
        if "__init__" not in cls.methods:
            i += 1
            continue
        if is_core(mod.name):
            return None
        if _calls_base_init(mod, cls):
            j = _named_init_target(world, chain, i) if world is not None else None
            between = [(m, c) for m, c in chain[i + 1:j] if is_core(m.name) and "__init__" in c.methods] \
                if j is not None else []
            if between:
                return cls, between
            i = j if j is not None else i + 1
            continue
        rest = [(m, c) for m, c in chain[i + 1:] if is_core(m.name)]
        return (cls, rest) if rest else None
    return None


def _self_calls_in_init(classes) -> set[str]:
    """Names the `__init__`s of `classes` call on `self` (`self._init_fp8_state()`)."""
    return {n.func.attr for _, c in classes for fn in _init_functions(c) for n in ast.walk(fn)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}


def _init_helpers(ev, cls: ClassInfo, skipped: set[tuple[str, str]], candidates: set[str]) -> frozenset[str]:
    """Methods of a skipped core class that only skipped `__init__`s call (`self._init_fp8_state()`
    from `__init__`): on the plugin's object they never run either. A method called anywhere
    else (core or plugin, by name) may run; too many callers to read proves nothing. Only
    `candidates` (what those `__init__`s call on `self`, `_self_calls_in_init`) are looked up."""
    out = set()
    for name in _functions(cls).keys() & candidates:
        if name == "__init__" or name.startswith("__") and name.endswith("__"):
            continue
        sites = ev.callers.sites(name, limit=20)
        if sites and all(not site.plugin and site.func == "__init__" and (site.module, site.cls) in skipped
                         and site.receiver == "self" for site in sites):
            out.add(name)
    return frozenset(out)


def _base_call_from(world: TreeIndex, chain, k: int, name: str) -> int | None:
    """Where chain[k]'s `name` hands over to a base's: k + 1 for `super().name(...)`, the
    index of X for `X.name(self, ...)` (vllm-ascend's `BaseLayerWithLoRA.set_mapping(self,
    ...)` skips the core class between); None when it calls no base's, names a class
    outside the chain, or hands over in more than one way."""
    mod, cls = chain[k]
    fn = _functions(cls).get(name)
    if fn is None or cls.node is None or name not in super_calls(cls.node):
        return None
    found: set[int | None] = set()
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name):
            continue
        recv = n.func.value
        if _is_super(recv):
            found.add(k + 1 if not recv.args else None)
        elif isinstance(recv, (ast.Name, ast.Attribute)) and n.args and isinstance(n.args[0], ast.Name) \
                and n.args[0].id == "self":
            found.add(_chain_index(world, mod, recv, chain))
    return found.pop() if len(found) == 1 else None


def _running_methods(world: TreeIndex, chain):
    """(name, (ModuleInfo, ClassInfo) of a definition that runs on the object, the class
    whose override reaches it through a base call, or None): the first definition of each
    name in `chain`, and each next one a definition hands over to (`super().m(...)`: the next
    definition; `Base.m(self, ...)`: the first from Base on), along a line of bases where the
    chain is the MRO (`_mro_prefix`)."""
    names: dict[str, None] = {}
    for _, cls in chain:
        names.update(dict.fromkeys(_functions(cls)))
    for name in names:
        via, start = None, 0
        while start < len(chain):
            k = next((j for j in range(start, len(chain)) if name in _functions(chain[j][1])), None)
            if k is None or via is not None and not _mro_prefix(chain, k):
                break  # no further definition, or the MRO's next one is not known here
            mod, cls = chain[k]
            yield name, (mod, cls), via
            nxt = _base_call_from(world, chain, k, name)
            if nxt is None or nxt <= k:
                break
            via, start = via or cls.name, nxt


IMPLICIT = "called implicitly"  # Callers.function_reachable's answer for a dunder method


def _falsy(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _attribute_stores(facts: PluginFacts) -> Counter:
    """How many times the plugin's classes store each attribute name (`x.name = ...`, any
    receiver, any form), for `_off_flags`: one walk of every plugin class."""
    return Counter(n.attr for pc in facts.classes for n in ast.walk(pc.node)
                   if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store))


def _off_flags(facts: PluginFacts, chain, skipped, is_core, store_counts: Callable[[], Counter]) -> dict[str, str]:
    """flag -> where the plugin's object gets it, for each attribute that is off on it: the
    plugin's classes of `chain` store it only as a false constant (`self.defer_block_free =
    False`, at least once, no other store, no name string that `setattr` could use), no
    other plugin class and no plugin code on another object stores it (`store_counts`, see
    `_attribute_stores`), and no core class of the chain provides it otherwise (a class
    attribute, a method other than a skipped `__init__`)."""
    stores: dict[str, list[str]] = {}
    for m, c in chain:
        if is_core(m.name) or c.node is None:
            continue
        for attr, sites in self_assignments(c.node).items():
            stores.setdefault(attr, []).extend(
                f"{m.path}:{stmt.lineno}" for _, stmt in sites
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _falsy(stmt.value))
    out: dict[str, str] = {}
    for flag, where in stores.items():
        if not where or store_counts()[flag] != len(where) or flag in facts.foreign_stores \
                or any(flag in strings(c.node) for m, c in chain if not is_core(m.name) and c.node is not None) \
                or any(flag in provides(c, skip_init=(m.name, c.name) in skipped) for m, c in chain if is_core(m.name)):
            continue
        out[flag] = f"False ({where[0]})"
    return out


def _holds(guard: Guard, unset, off: dict[str, str]) -> str | None:
    """Why the read under `guard` does not run on the plugin's object, as evidence; None
    when the guard proves nothing there (see `Guard`)."""
    if guard.flag is None:
        return f"under `{guard.text}`, the object's own state, which the gate does not evaluate"
    if guard.flag in unset:
        return f"under `{guard.text}`, and {guard.flag} is itself unset on the plugin's object: reading it raises first"
    if guard.value and guard.flag in off:
        return f"under `{guard.text}`, and the plugin's object sets {guard.flag} only to {off[guard.flag]}"
    return None


def _held(guards: tuple[Guard, ...], unset, off) -> str | None:
    return next((why for g in guards if (why := _holds(g, unset, off)) is not None), None)


def _call_guarded(site, meth: str, chain, unset, off) -> str | None:
    """Why a `self.meth(...)` call at `site`, in the caller's class of `chain`
    ((ModuleInfo, ClassInfo) pairs), does not run on the plugin's object: a plain flag
    guard of `reads` (an enclosing `if`, an earlier operand, an early exit) that holds, see
    `_holds`; None when it may run or the caller cannot be read."""
    owner = next((c for m, c in chain if (m.name, c.name) == (site.module, site.cls)), None)
    fn = _functions(owner).get(site.func) if owner is not None and site.func else None
    me = _self_name(fn) if fn is not None else None
    if me is None or site.receiver != "self":
        return None
    # only a plain flag proven off or unset: a nested test's state alone proves nothing here
    whys = [_held(tuple(g for g in guards if g.flag is not None), unset, off)
            for attr, line, called, guards in reads(fn, me, flow=True)
            if attr == meth and called and line == site.shape.line]
    return whys[0] if whys and all(whys) else None


def _live(ev, meth: str, chain=None, unset=frozenset(), off: dict[str, str] | None = None) -> tuple[str, str | None]:
    """("yes", None): some call of `meth` (found by name in both trees) sits in code that
    can run, not in a core method the plugin overrides or replaces (the skipped `__init__`
    among them); ("yes", why): every such call is a `self.meth(...)` of this object's
    classes under a guard that holds on it (`_holds`); ("constructor", None): the only such
    calls sit in core constructors, which run only if their class is built on a path the
    plugin runs, which a search by name cannot tell (vLLM has two GPUModelRunner classes);
    ("dead", where and why): every one sits in code that cannot run (`Callers.reachable`);
    ("", None): none. With `chain` ((ModuleInfo, ClassInfo) of the object's class and its
    bases), a `self.meth(...)` in a class outside it runs on that class's objects, not on
    this one: it does not count."""
    answer, whys, dead = "", [], None
    mine = None if chain is None else frozenset((m.name, c.name) for m, c in chain)
    for site in ev.callers.sites(meth) or ():
        if mine is not None and site.receiver in ("self", "cls") and (site.module, site.cls) not in mine:
            continue
        ok, why = ev.callers.reachable(site)
        if ok and (site.plugin or site.func != "__init__" or why != IMPLICIT):
            guarded = _call_guarded(site, meth, chain, unset, off or {}) if chain is not None and not site.plugin \
                else None
            if guarded is None:
                return "yes", None
            whys.append(guarded)
        elif ok and not whys:
            answer = "constructor"
        elif not ok and dead is None:
            dead = f"{site.where()}: {why}"
    if whys:
        return "yes", whys[0]
    return ("dead", dead) if not answer and dead is not None else (answer, None)


def check_skipped_init(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    grouped: dict[tuple, list] = {}
    counted: list[Counter] = []  # `_attribute_stores`, made once, when a class first needs it

    def store_counts() -> Counter:
        if not counted:
            counted.append(_attribute_stores(facts))
        return counted[0]

    for pc in facts.classes:
        info = world.class_of(pc.module, pc.node)
        if not info.bases:
            continue
        chain = _chain(world, pc.module, info, pc.scope.local_imports)
        if not _bases_known(world, chain)[0]:
            continue
        if any((DYNAMIC | {"__new__", "__setstate__"}) & set(c.methods) for _, c in chain):
            continue
        skipped = _skipped_core(chain, ev.is_core, world)
        if skipped is None:
            continue
        stopper, core_classes = skipped
        skipped_keys = {(m.name, c.name) for m, c in core_classes}
        called = _self_calls_in_init(core_classes)
        helpers = {(m.name, c.name): _init_helpers(ev, c, skipped_keys, called) for m, c in core_classes}
        avail: set[str] = set()
        for mod, cls in chain:
            key = (mod.name, cls.name)
            avail |= provides(cls, skip_init=key in skipped_keys, helpers=helpers.get(key, frozenset()))
        init_only: dict[str, tuple[ModuleInfo, ClassInfo]] = {}
        for mod, cls in core_classes:
            unrun = {"__init__"} | helpers[(mod.name, cls.name)]
            for attr, sites in self_assignments(cls.node).items() if cls.node is not None else ():
                if attr not in avail and attr not in facts.attr_stores and all(fn.name in unrun for fn, _ in sites):
                    init_only.setdefault(attr, (mod, cls))
        if not init_only:
            continue
        live: dict[str, tuple[str, str | None]] = {}
        off = _off_flags(facts, chain, skipped_keys, ev.is_core, store_counts)
        for meth, (mod, cls), via_super in _running_methods(world, chain):
            if not ev.is_core(mod.name) or meth.startswith("__") and meth.endswith("__"):
                continue
            fn = _functions(cls)[meth]
            me = _self_name(fn)
            if me is None:
                continue
            named = strings(fn)
            for attr, line, _, guards in reads(fn, me, flow=True):
                if attr not in init_only or attr in named:
                    continue
                if meth not in live:
                    live[meth] = _live(ev, meth, chain, init_only, off)
                cond = _held(guards, init_only, off)
                # the read's own guard, else its callers'
                called_under = None if cond or live[meth][0] != "yes" else live[meth][1]
                cond = cond or called_under
                severity = checks._severity(pc.ctx, ev, pc.module.name, error=cond is None and live[meth][0] == "yes")
                symbol = f"attribute:{mod.name}.{cls.name}.{attr}"
                grouped.setdefault((checks._kind(pc.ctx, "attribute"), symbol, pc.path, severity), []).append(
                    (pc, info, stopper, meth, mod, cls, line, init_only[attr], cond, live[meth], called_under,
                     via_super))
    out = []
    for (kind, symbol, path, severity), items in grouped.items():
        pc, info, stopper, meth, mod, cls, line, (imod, icls), cond, (alive, dead), called_under, via = items[0]
        attr = symbol.rsplit(".", 1)[-1]
        methods = sorted({f"{item[5].name}.{item[3]}" + (f" (through {item[11]}'s super() call)" if item[11] else "")
                          for item in items})
        first_set = self_assignments(icls.node)[attr][0]
        setter = "__init__" if first_set[0].name == "__init__" else f"{first_set[0].name}, which only __init__ calls,"
        why = (f"{info.name} runs core's {', '.join(methods)}, which read(s) self.{attr}; only core's "
               f"{icls.name}.{setter} sets it ({imod.path}:{first_set[1].lineno}), and {stopper.name}.__init__ "
               f"never runs {icls.name}.__init__ nor sets it: AttributeError on the plugin's object")
        evidence = f"core's {cls.name}.{meth} reads it"
        if called_under is not None:
            evidence += f", and every call of {meth} that runs on the plugin's object is {called_under}"
        elif cond is not None:
            evidence += f" only {cond}"
        elif severity == "warning" and ev.startup.reached(pc.module.name):
            if alive == "constructor":
                evidence += (", called only from core constructors, whose classes the gate cannot show are built "
                             "on a path the plugin runs")
            elif alive == "dead":
                evidence += f", and no call of it can run ({dead})"
            else:
                evidence += ", and nothing calls it by name"

        p = checks.Problem(mod.path, line, (why,), evidence, True)
        out.append(Finding(kind, symbol, path, pc.line, mod.path, line, checks._why(pc.ctx, why),
                           severity=severity, reason=checks._reason(pc.ctx, ev, pc.module.name, p.evidence),
                           summary=f"{info.name} skips {icls.name}.__init__, and "
                                   + (f"{cls.name}.{meth}, which {via} calls through super(), "
                                      if via else f"inherited {cls.name}.{meth} ") + f"reads self.{attr}"))
    return out


# ----------------------------------------------------------------------------- (c) reads in replacement methods


def _core_subclasses_provide(world: TreeIndex, ev, owner: tuple[ModuleInfo, ClassInfo], memo: dict) -> set[str]:
    """Names core classes deriving directly from `owner` provide (the object may be one)."""
    key = (owner[0].name, owner[1].name)
    if key not in memo:
        names: set[str] = set()
        for path in ev.callers.mentions(owner[1].name):
            modname = path[:-3].replace("/", ".").removesuffix(".__init__")
            mod = world.module(modname)
            for cls in mod.classes.values() if mod is not None and mod.path == path else ():
                for expr in cls.bases:
                    target = qualify(mod, expr, None) if expr else None
                    found = world.resolve_dotted(target) if target else None
                    if found is not None and found[0] == "class" and \
                            (found[1][0].name, found[1][1].name) == key:  # type: ignore[index]
                        names |= provides(cls)
        memo[key] = names
    return memo[key]


def _installer(r, facts: PluginFacts) -> tuple[str, bool] | None:
    """For a replacement made inside a module-level function (`def install_patch(): C.m =
    ours`): (that function's name, whether the plugin calls it in a branch that runs);
    None when it is made at import."""
    if r.at_import or r.module.tree is None:
        return None
    for stmt in r.module.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and stmt.lineno <= r.line <= (stmt.end_lineno or stmt.lineno):
            name = stmt.name
            return name, any(u.func == name or u.func.endswith("." + name) for u in facts.calls)
    return None


def check_replacement_reads(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    grouped: dict[tuple, list] = {}
    sub_memo: dict = {}
    core_memo: dict = {}
    for r in facts.replacements:
        if r.in_class or r.attr in ("__init__", "__new__"):
            continue
        owner = world.resolve_dotted(r.owner)
        if owner is None or owner[0] != "class":
            continue
        cmod, ccls = owner[1]  # type: ignore[misc]
        sig = ccls.methods.get(r.attr)
        if not ev.is_core(cmod.name) or sig is None or sig.is_static or sig.is_classmethod:
            continue  # only a core instance method's replacement runs with `self` the object
        found = checks._patch_function(r, world)
        if found is None or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        fpath, fn = found
        me = _self_name(fn)
        if me is None:
            continue
        chain = _chain(world, cmod, ccls)
        if any(DYNAMIC & set(c.methods) for _, c in chain):
            continue
        known, torch = _bases_known(world, chain)
        if not known:
            continue  # a base the gate cannot read (other than nn.Module) may define anything
        avail: set[str] = set()
        for m, cls in chain:
            avail |= provides(cls)
            # what the plugin itself installs on the class (`C.helper = ours`, a class-body patch's names)
            avail |= ev.replaced.get(f"{m.name}.{cls.name}", set())
        named = strings(fn)
        assigned = set(self_assignments(ast.ClassDef(name="_", bases=[], keywords=[], body=[fn],
                                                     decorator_list=[])))
        for attr, line, called, guards in reads(fn, me):
            cond = guards[0].text if guards else None
            if attr in avail or attr in named or attr in assigned or attr in facts.attr_stores:
                continue
            if attr.startswith("_") or (torch and (called or attr in TORCH_MODULE_DATA)):
                continue
            if attr in _core_subclasses_provide(world, ev, (cmod, ccls), core_memo) \
                    or checks._subclass_has(facts, world, (cmod, ccls), attr, sub_memo):
                continue
            installer = _installer(r, facts)
            severity = checks._severity(r.ctx, ev, r.module.name,
                                        error=cond is None and (installer is None or installer[1]))
            symbol = f"attribute:{cmod.name}.{ccls.name}.{attr}"
            grouped.setdefault((checks._kind(r.ctx, "attribute"), symbol, fpath, severity), []).append(
                (r, fn, line, cmod, ccls, cond))
    out = []
    for (kind, symbol, path, severity), items in grouped.items():
        r, fn, line, cmod, ccls, cond = items[0]
        attr = symbol.rsplit(".", 1)[-1]
        lines = sorted({i[2] for i in items})
        more = also_at(lines)
        what = "member, attribute, property or registered buffer/parameter" if _bases_known(
            world, [(cmod, ccls)])[1] else "member, attribute or property"
        why = (f"{fn.name} is installed as {ccls.name}.{r.attr} ({r.path}:{r.line}), so self is a {ccls.name}, "
               f"and core's {ccls.name} and its bases have no {what} '{attr}'{more}")
        evidence = f"{ccls.name}.{r.attr} runs the plugin's function"
        installer = _installer(r, facts)
        if installer is not None and not installer[1]:
            evidence += f", but nothing calls {installer[0]}, which installs it, in a branch that runs"
        if cond is not None:
            evidence += f"; read only under `{cond}`, the object's own state, which the gate does not evaluate"
        p = checks.Problem(cmod.path, ccls.line, (why,), evidence, True)
        out.append(Finding(kind, symbol, path, lines[0], cmod.path, ccls.line, checks._why(r.ctx, f"`self.{attr}` "
                           f"is read when the method runs: {why}"), severity=severity,
                           reason=checks._reason(r.ctx, ev, r.module.name, p.evidence),
                           summary=f"read of {ccls.name}.{attr} in the replacement {ccls.name}.{r.attr}: core's "
                                   f"{ccls.name} has no attribute '{attr}'"))
    return out


def check_self_state(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    return check_skipped_init(facts, world, ev) + check_replacement_reads(facts, world, ev)
