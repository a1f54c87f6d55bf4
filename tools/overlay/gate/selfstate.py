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
from dataclasses import dataclass
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


def _super_start(world: TreeIndex, mod: ModuleInfo, call: ast.Call, chain) -> int | None:
    """Where `super(X, self)` starts looking: the chain position after X's; None when X is
    not a class of the chain or the second argument is not the method's `self`."""
    if len(call.args) != 2 or not isinstance(call.args[1], ast.Name) or call.args[1].id != "self":
        return None
    j = _chain_index(world, mod, call.args[0], chain)
    return None if j is None else j + 1


def _named_init_target(world: TreeIndex, chain, i: int) -> int | None:
    """Where chain[i]'s `__init__` hands over when it names a base outright and never calls
    `super(...).__init__`: the index in `chain` of the one class whose `__init__` runs next,
    named by every `X.__init__(self, ...)` (vllm-metax's `DeviceCommunicatorBase.__init__(self,
    ...)` in a subclass of `CudaCommunicator`), or by every `super(X, self).__init__` (the class
    after X: vllm-ascend's `AscendFusedMoE` skips `FusedMoE.__init__` so); None when it calls
    `super().__init__`, names no class of the chain, or names several."""
    mod, cls = chain[i]
    targets = set()
    for fn in _init_functions(cls):
        for n in ast.walk(fn):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"):
                continue
            recv = n.func.value
            if _is_super(recv) and not recv.args:
                return None  # super().__init__ runs the next class, as always
            # super(X, self).__init__ starts after X; X.__init__(self) runs X's
            j = _super_start(world, mod, recv, chain) if _is_super(recv) else _chain_index(world, mod, recv, chain)
            if j == i + 1:
                return None
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
            found.add(k + 1 if not recv.args else _super_start(world, mod, recv, chain))
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


def _call_guarded(site, meth: str, obj: TheObject) -> str | None:
    """Why a `self.meth(...)` call at `site`, in the caller's class of the object's chain,
    does not run on the plugin's object: a plain flag guard of `reads` (an enclosing `if`,
    an earlier operand, an early exit) that holds, see `_holds`; None when it may run or the
    caller cannot be read."""
    k = obj.position(site.module, site.cls)
    fn = _functions(obj.chain[k][1]).get(site.func) if k is not None and site.func else None
    me = _self_name(fn) if fn is not None else None
    if me is None or site.receiver != "self":
        return None
    # only a plain flag proven off or unset: a nested test's state alone proves nothing here
    whys = [_held(tuple(g for g in guards if g.flag is not None), obj.unset, obj.off)
            for attr, line, called, guards in reads(fn, me, flow=True)
            if attr == meth and called and line == site.shape.line]
    return whys[0] if whys and all(whys) else None


@dataclass(frozen=True)
class TheObject:
    """The plugin's object whose skipped `__init__` is judged: its class and bases (`chain`,
    (ModuleInfo, ClassInfo) pairs), the fields only the skipped `__init__` sets (`unset`),
    the flags off on it (`_off_flags`), the (name, module, class) of each definition that
    runs on it (`_running_methods`), and every attribute name the plugin stores on another
    object than `self` (`PluginFacts.foreign_stores`)."""
    world: TreeIndex
    chain: list
    unset: dict
    off: dict
    running: frozenset
    stored: frozenset

    def position(self, module: str, cls: str | None) -> int | None:
        return next((j for j, (m, c) in enumerate(self.chain) if (m.name, c.name) == (module, cls)), None)


def _runs_here(site, obj: TheObject) -> bool:
    """Does a `self.meth(...)` call at `site`, in a class of the chain, run on the object? Not
    when the method holding it is a definition that never runs there: one the plugin
    overrides without handing over to it (core's `FusedMoE.forward` under vllm-ascend's
    `AscendFusedMoE.forward`), or a skipped `__init__`. A call in a nested function or
    outside a method of the class counts, as before."""
    k = obj.position(site.module, site.cls)
    if k is None or not site.func or site.func not in _functions(obj.chain[k][1]) or not _mro_prefix(obj.chain, k):
        return True  # not a method of the chain's class, or where the chain is not the MRO: may run
    return (site.func, site.module, site.cls) in obj.running


def _a_base_built_outright(site, obj: TheObject) -> bool:
    """The call's receiver is `self.attr`, and the plugin class holding the call sets
    `self.attr` only to `C(...)`, C a base of the object's class: that object is a C, never
    the plugin's subclass (vllm-ascend 0.9.2rc1's pangu_moe builds `self.experts =
    FusedMoE(...)`, so its `self.experts.forward_impl(...)` runs on core's FusedMoE, not on
    AscendFusedMoE; no judged hierarchy has a `__new__` that could hand back another class,
    see `_judgeable`). Not when the plugin stores anything under C's name or the attribute's
    (a module patch `layer.FusedMoE = AscendFusedMoE`, an object swapped in later), or the
    holder is core's (which the plugin may patch in ways not read here)."""
    recv = site.receiver
    if not site.plugin or site.cls is None or not recv.startswith("self.") or recv.count(".") != 1 \
            or recv[5:] in obj.stored:
        return False
    mod = obj.world.module(site.module)
    holder = mod.classes.get(site.cls) if mod is not None else None
    sets = self_assignments(holder.node).get(recv[5:]) if holder is not None and holder.node is not None else None
    if not sets:
        return False
    for _, stmt in sets:
        value = stmt.value
        if not isinstance(value, ast.Call) or dotted(value.func) is None:
            return False
        j = _chain_index(obj.world, mod, value.func, obj.chain)
        if not j or obj.chain[j][1].name in obj.stored:
            return False
    return True


DEPTH = 3  # how many callers up `_live` follows a core method's own liveness


def _caller_runs(ev, site, meth: str, obj: TheObject, depth: int, seen: frozenset) -> tuple[str, str | None]:
    """For a `self.meth(...)` call inside core method B of the chain that runs on the object:
    ("yes", None) when B itself is called where it runs (`_live` on B, `depth` levels up at
    most); ("yes", why) when every such call of B is under a guard that holds (`_holds`), so
    this call is too; ("constructor", None) when only core constructors call B; ("", None)
    when nothing that runs on the object calls B (vllm-ascend's AscendFusedMoE overrides
    `forward`, the one caller of core's `forward_impl` on the layer, so
    `forward_impl_chunked`, called only by `forward_impl`, never runs either). A dunder
    method, a call outside a method, a plugin caller, the depth reached, or a B passed
    around as a value (`hooks = [self._promote]`): ("yes", None), as before."""
    b = site.func
    if site.plugin or not b or b == meth or b in seen or depth >= DEPTH or b.startswith("__") and b.endswith("__"):
        return "yes", None
    k = obj.position(site.module, site.cls)
    if k is None or b not in _functions(obj.chain[k][1]):
        return "yes", None
    if ev.callers.passed_as_value(b):
        return "yes", None  # passed around (a callback, a registry): may run from anywhere
    answer, why = _live(ev, b, obj, depth + 1, seen | {meth})
    if answer == "yes":
        return answer, why and f"called from {b}, {why}"
    return (answer if answer == "constructor" else ""), None


def _live(ev, meth: str, obj: TheObject | None = None, depth: int = 0,
          seen: frozenset = frozenset()) -> tuple[str, str | None]:
    """("yes", None): some call of `meth` (found by name in both trees) sits in code that
    can run, not in a core method the plugin overrides or replaces (the skipped `__init__`
    among them); ("yes", why): every such call is a `self.meth(...)` of this object's
    classes under a guard that holds on it (`_holds`); ("constructor", None): the only such
    calls sit in core constructors, which run only if their class is built on a path the
    plugin runs, which a search by name cannot tell (vLLM has two GPUModelRunner classes);
    ("dead", where and why): every one sits in code that cannot run (`Callers.reachable`);
    ("", None): none. With `obj`, a `self.meth(...)` in a class outside its chain runs on
    that class's objects, not on this one: it does not count; nor does one inside a method
    that never runs on this object (`_runs_here`) or that nothing running on it calls
    (`_caller_runs`), nor one on an attribute that holds a base built outright
    (`_a_base_built_outright`)."""
    answer, whys, dead = "", [], None
    mine = None if obj is None else frozenset((m.name, c.name) for m, c in obj.chain)
    for site in ev.callers.sites(meth) or ():
        if mine is not None and site.receiver in ("self", "cls") and (site.module, site.cls) not in mine:
            continue
        if obj is not None and (site.receiver == "self" and not _runs_here(site, obj)
                                or _a_base_built_outright(site, obj)):
            continue
        ok, why = ev.callers.reachable(site)
        if ok and (site.plugin or site.func != "__init__" or why != IMPLICIT):
            caller, caller_why = _caller_runs(ev, site, meth, obj, depth, seen) \
                if obj is not None and site.receiver == "self" else ("yes", None)
            if caller != "yes":
                answer = answer or caller
                continue
            guarded = caller_why or (_call_guarded(site, meth, obj) if obj is not None and not site.plugin else None)
            if guarded is None:
                return "yes", None
            whys.append(guarded)
        elif ok:
            answer = "constructor"
        elif not ok and dead is None:
            dead = f"{site.where()}: {why}"
    if whys:
        return "yes", whys[0]
    return ("dead", dead) if not answer and dead is not None else (answer, None)


@dataclass(frozen=True)
class UnsetRead:
    """A read, in a core method that runs on the object, of a field only a skipped `__init__`
    (or a helper only it calls) sets."""
    attr: str
    meth: str  # the reading method
    mod: ModuleInfo  # where the reading method is defined
    cls: ClassInfo
    line: int
    setter: tuple[ModuleInfo, ClassInfo]  # the skipped class that sets it
    cond: str | None  # why the read may not run (its own guard, else its callers')
    live: tuple[str, str | None]  # `_live` of the reading method
    called_under: str | None  # the callers' guard, when that is the reason
    via: str | None  # the class whose override reaches the reading method through a base call

    @property
    def error(self) -> bool:
        return self.cond is None and self.live[0] == "yes"


def _unset_reads(facts: PluginFacts, world: TreeIndex, ev, chain, core_classes, store_counts,
                 replaced: frozenset[str] = frozenset()) -> list[UnsetRead]:
    """Every read of a field unset on the object: `chain` is its class and bases, whose core
    `core_classes` never run their `__init__`; `replaced` names the plugin installs on the
    object's class (their core definitions do not run, and they provide the name)."""
    skipped_keys = {(m.name, c.name) for m, c in core_classes}
    called = _self_calls_in_init(core_classes)
    helpers = {(m.name, c.name): _init_helpers(ev, c, skipped_keys, called) for m, c in core_classes}
    avail: set[str] = set(replaced)
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
        return []
    live: dict[str, tuple[str, str | None]] = {}
    off = _off_flags(facts, chain, skipped_keys, ev.is_core, store_counts)
    runs = [r for r in _running_methods(world, chain) if r[0] not in replaced]
    obj = TheObject(world, chain, init_only, off, frozenset((meth, mod.name, cls.name) for meth, (mod, cls), _ in runs),
                    frozenset(facts.foreign_stores))
    out = []
    for meth, (mod, cls), via_super in runs:
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
                live[meth] = _live(ev, meth, obj)
            cond = _held(guards, init_only, off)
            # the read's own guard, else its callers'
            called_under = None if cond or live[meth][0] != "yes" else live[meth][1]
            out.append(UnsetRead(attr, meth, mod, cls, line, init_only[attr], cond or called_under, live[meth],
                                 called_under, via_super))
    return out


def _evidence(u: UnsetRead, severity: str, started: bool, on: str) -> str:
    """Why the read runs or may not run, for the finding's reason."""
    evidence = f"core's {u.cls.name}.{u.meth} reads it"
    if u.called_under is not None:
        evidence += f", and every call of {u.meth} that runs on {on} is {u.called_under}"
    elif u.cond is not None:
        evidence += f" only {u.cond}"
    elif severity == "warning" and started:
        if u.live[0] == "constructor":
            evidence += (", called only from core constructors, whose classes the gate cannot show are built "
                         "on a path the plugin runs")
        elif u.live[0] == "dead":
            evidence += f", and no call of it can run ({u.live[1]})"
        else:
            evidence += ", and nothing calls it by name"
    return evidence


def _setter(u: UnsetRead) -> tuple[str, int]:
    """(`__init__`, or the helper only `__init__` calls, as the message names it; its line)."""
    imod, icls = u.setter
    first_set = self_assignments(icls.node)[u.attr][0]
    name = "__init__" if first_set[0].name == "__init__" else f"{first_set[0].name}, which only __init__ calls,"
    return name, first_set[1].lineno


def _store_counter(facts: PluginFacts) -> Callable[[], Counter]:
    """`_attribute_stores` of the plugin, made once, when a class first needs it."""
    counted: list[Counter] = []

    def store_counts() -> Counter:
        if not counted:
            counted.append(_attribute_stores(facts))
        return counted[0]
    return store_counts


def _judgeable(world: TreeIndex, chain) -> bool:
    """Can an unset field be proven on objects of this hierarchy? Not with a base the gate
    cannot read (other than nn.Module), nor where `__getattr__`, `__getattribute__`,
    `__new__` or `__setstate__` may give the object state its `__init__` does not."""
    return _bases_known(world, chain)[0] \
        and not any((DYNAMIC | {"__new__", "__setstate__"}) & set(c.methods) for _, c in chain)


def _installed_on_core(r, world: TreeIndex, ev):
    """(core module, core class, plugin path, function, its `self` name) for a replacement
    that installs a plugin function on a core class (`C.m = ours`); None for anything else
    (a class-body assignment, a module attribute, a plugin class, a value that is no
    function the gate can read, a function without `self`)."""
    if r.in_class:
        return None
    owner = world.resolve_dotted(r.owner)
    if owner is None or owner[0] != "class":
        return None
    cmod, ccls = owner[1]  # type: ignore[misc]
    if not ev.is_core(cmod.name):
        return None
    found = checks._patch_function(r, world)
    if found is None or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    fpath, fn = found
    me = _self_name(fn)
    return None if me is None else (cmod, ccls, fpath, fn, me)


def check_skipped_init(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    grouped: dict[tuple, list] = {}
    store_counts = _store_counter(facts)
    for pc in facts.classes:
        info = world.class_of(pc.module, pc.node)
        if not info.bases:
            continue
        chain = _chain(world, pc.module, info, pc.scope.local_imports)
        if not _judgeable(world, chain):
            continue
        skipped = _skipped_core(chain, ev.is_core, world)
        if skipped is None:
            continue
        stopper, core_classes = skipped
        for u in _unset_reads(facts, world, ev, chain, core_classes, store_counts):
            severity = checks._severity(pc.ctx, ev, pc.module.name, error=u.error)
            symbol = f"attribute:{u.mod.name}.{u.cls.name}.{u.attr}"
            grouped.setdefault((checks._kind(pc.ctx, "attribute"), symbol, pc.path, severity), []).append(
                (pc, info, stopper, u))
    out = []
    for (kind, symbol, path, severity), items in grouped.items():
        pc, info, stopper, u = items[0]
        imod, icls = u.setter
        methods = sorted({f"{i[3].cls.name}.{i[3].meth}" + (f" (through {i[3].via}'s super() call)" if i[3].via else "")
                          for i in items})
        setter, set_line = _setter(u)
        why = (f"{info.name} runs core's {', '.join(methods)}, which read(s) self.{u.attr}; only core's "
               f"{icls.name}.{setter} sets it ({imod.path}:{set_line}), and {stopper.name}.__init__ "
               f"never runs {icls.name}.__init__ nor sets it: AttributeError on the plugin's object")
        evidence = _evidence(u, severity, ev.startup.reached(pc.module.name), "the plugin's object")
        p = checks.Problem(u.mod.path, u.line, (why,), evidence, True)
        out.append(Finding(kind, symbol, path, pc.line, u.mod.path, u.line, checks._why(pc.ctx, why),
                           severity=severity, reason=checks._reason(pc.ctx, ev, pc.module.name, p.evidence),
                           summary=f"{info.name} skips {icls.name}.__init__, and "
                                   + (f"{u.cls.name}.{u.meth}, which {u.via} calls through super(), "
                                      if u.via else f"inherited {u.cls.name}.{u.meth} ") + f"reads self.{u.attr}"))
    return out


def _replacement_skips(world: TreeIndex, mod: ModuleInfo, fn, me: str, chain, is_core) -> list | None:
    """The core classes of `chain` whose `__init__` never runs when `fn` replaces chain[0]'s:
    every one, when `fn` hands `self` to nothing; those before X, when its only hand-over is
    `X.__init__(self, ...)` with X a class of the chain (`nn.Module.__init__(self)`, torch's,
    runs none of core's). None (not judged) when it calls `super()`, passes `self` on as a
    first argument any other way (`original_init(self, ...)`, `helper(self)`), or names
    several classes; nor when it calls a method on `self` that no core class of the chain
    defines (`self._orig_init(...)`, the original saved on the class)."""
    targets = set()
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Name) and n.func.id == "super":
            return None
        if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == me \
                and not any(n.func.attr in _functions(c) for m, c in chain if is_core(m.name)):
            return None  # `self._orig_init(...)`: a saved original (arctic-inference's class-body patches)
        if not (n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == me):
            continue
        if not (isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"):
            return None
        name = dotted(n.func.value)
        if name is not None and qualify(mod, name, None) in TORCH_MODULES:
            continue
        j = _chain_index(world, mod, n.func.value, chain)
        if j is None or j == 0 or not _mro_prefix(chain, j):
            return None
        targets.add(j)
    if len(targets) > 1:
        return None
    upto = targets.pop() if targets else len(chain)
    return [(m, c) for m, c in chain[:upto] if is_core(m.name) and "__init__" in c.methods]


def check_replaced_init(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    """A plugin function installed as a core class's `__init__` (`EagleProposer.__init__ =
    __custom_init__`) that hands over to no other `__init__` leaves unset every field only
    the class's own `__init__` chain sets: a core method of the class that reads one raises
    AttributeError on every instance (vllm-rbln 0.10.2.post2's custom EagleProposer init
    against 0.18.0's `load_model`, reading `parallel_drafting`). The same reads, liveness and
    guards as `check_skipped_init`, with the core class as the object's class."""
    grouped: dict[tuple, list] = {}
    store_counts = _store_counter(facts)
    for r in facts.replacements:
        installed = _installed_on_core(r, world, ev) if r.attr == "__init__" else None
        if installed is None:
            continue
        cmod, ccls, fpath, fn, me = installed
        chain = _chain(world, cmod, ccls)
        if not _judgeable(world, chain):
            continue
        # names in the function resolve in its own module: judged only where that is the replacement's
        core_classes = _replacement_skips(world, r.module, fn, me, chain, ev.is_core) if fpath == r.path else None
        if not core_classes:
            continue
        replaced = frozenset(ev.replaced.get(f"{cmod.name}.{ccls.name}", set()))
        installer = _installer(r, facts)
        for u in _unset_reads(facts, world, ev, chain, core_classes, store_counts, replaced):
            severity = checks._severity(r.ctx, ev, r.module.name,
                                        error=u.error and (installer is None or installer[1]))
            symbol = f"attribute:{u.mod.name}.{u.cls.name}.{u.attr}"
            grouped.setdefault((checks._kind(r.ctx, "attribute"), symbol, fpath, severity), []).append(
                (r, fn, cmod, ccls, installer, u))
    out = []
    for (kind, symbol, path, severity), items in grouped.items():
        r, fn, cmod, ccls, installer, u = items[0]
        imod, icls = u.setter
        methods = sorted({f"{i[5].cls.name}.{i[5].meth}" for i in items})
        setter, set_line = _setter(u)
        why = (f"{fn.name} is installed as {ccls.name}.__init__ ({r.path}:{r.line}) and runs no other __init__; "
               f"core's {', '.join(methods)} read(s) self.{u.attr}, which only core's {icls.name}.{setter} sets "
               f"({imod.path}:{set_line}), and {fn.name} does not: AttributeError on every {ccls.name}")
        evidence = _evidence(u, severity, ev.startup.reached(r.module.name), f"a {ccls.name}")
        if installer is not None and not installer[1]:
            evidence += f"; nothing calls {installer[0]}, which installs it, in a branch that runs"
        p = checks.Problem(u.mod.path, u.line, (why,), evidence, True)
        out.append(Finding(kind, symbol, path, fn.lineno, u.mod.path, u.line, checks._why(r.ctx, why),
                           severity=severity, reason=checks._reason(r.ctx, ev, r.module.name, p.evidence),
                           summary=f"the replacement {ccls.name}.__init__ skips {icls.name}.__init__, and "
                                   f"{u.cls.name}.{u.meth} reads self.{u.attr}"))
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
        installed = _installed_on_core(r, world, ev) if r.attr not in ("__init__", "__new__") else None
        if installed is None:
            continue
        cmod, ccls, fpath, fn, me = installed
        sig = ccls.methods.get(r.attr)
        if sig is None or sig.is_static or sig.is_classmethod:
            continue  # only a core instance method's replacement runs with `self` the object
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
    return check_skipped_init(facts, world, ev) + check_replaced_init(facts, world, ev) \
        + check_replacement_reads(facts, world, ev)
