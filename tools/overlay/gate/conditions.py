"""Evaluating the plugin's conditions on core, where they can be read statically.

An `if` whose test asks about core (`vllm_version_is(...)`, `hasattr/getattr` on a
core module or class, `importlib.util.find_spec("vllm.x") is not None`) decides which branch runs against a given core. The gate
evaluates it against the core tree under test: a decided test checks only the
branch that runs; a test it cannot decide checks both branches and reports any
failure there as *undecidable*, never as a pass. Any other test (`is_310p()`,
environment switches) is not about core: both branches are checked as usual.

One environment switch is about core: `VLLM_USE_V1`, which chose between core's V0 and V1
engines. On a core without a V0 engine (see `v1_only`) the switch's false branch never runs:
the switch reads true, or reading it raises before either branch.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable

from overlay.gate.index import ModuleInfo, TreeIndex, dataclass_options, dotted, qualify

PLAIN = "plain"  # not about core
DECIDED = "decided"
UNDECIDABLE = "undecidable"
TYPE_CHECKING = "type-checking"


@dataclass(frozen=True)
class Verdict:
    kind: str  # plain | decided | undecidable | type-checking
    value: bool | None = None  # for decided
    why: str = ""  # for undecidable: what could not be decided


def normalize_version(text: str) -> tuple:
    """A comparable form of a PEP 440-ish version: release numbers, then the rest."""
    text = text.strip().lstrip("vV")
    m = re.match(r"^(\d+(?:\.\d+)*)(.*)$", text)
    if not m:
        return (text,)
    release = tuple(int(x) for x in m.group(1).split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    return release + ((m.group(2).split("+")[0],) if m.group(2) else ())


def core_version(index: TreeIndex, package: str = "vllm") -> str | None:
    """The core release version, from a generated `_version.py` or an sdist's PKG-INFO."""
    for path in (f"{package}/_version.py", f"{package}/version.py"):
        data = index.source.read(path)
        if data:
            m = re.search(rb"""^(?:__version__|version)\s*(?::[^=]*)?=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""",
                          data, re.M)
            if m:
                return m.group(1).decode()
    data = index.source.read("PKG-INFO")
    if data:
        m = re.search(rb"^Version:\s*(\S+)", data, re.M)
        if m:
            return m.group(1).decode()
    return None


@dataclass
class Env:
    """What a condition is evaluated against."""

    world: TreeIndex  # resolves plugin and core names
    is_core: Callable[[str], bool]
    version: str | None
    # module name -> {flag name: verdict} for module-level flags (see module_flags)
    flags: dict = field(default_factory=dict)
    # whether any core file mentions an identifier at all (text search): a class whose
    # bases are built at run time still cannot have an attribute no core file names
    core_mentions: Callable[[str], bool] | None = None
    # qualified name -> (module, def node) of a plugin function conditions call, or None
    defs: dict = field(default_factory=dict)


def module_flags(mod: ModuleInfo, env: Env) -> dict[str, Verdict]:
    """Simple module-level flags that hold a condition on core, such as
    `_V2_SUPPORTED = not vllm_version_is("0.24.0")` or `HAS_X = hasattr(core_mod, "X")`:
    assigned once, at the top level of the module, from a test the gate can evaluate.
    An `if _V2_SUPPORTED:` then runs (or skips) exactly as the test would."""
    cached = env.flags.get(mod.name)
    if cached is not None:
        return cached
    env.flags[mod.name] = {}  # a cycle through imported flags ends here
    out: dict[str, Verdict] = {}
    if mod.tree is not None:
        for stmt in mod.tree.body:
            if not (isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None):
                continue
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            name = targets[0].id
            if len(mod.bindings.get(name, [])) != 1:
                continue  # reassigned somewhere: not a simple flag
            v = evaluate(stmt.value, mod, {}, env)
            if v.kind in (DECIDED, UNDECIDABLE):
                out[name] = v
    env.flags[mod.name] = out
    return out


def _flag(name: str, mod: ModuleInfo, local: dict[str, str], env: Env) -> Verdict | None:
    """The verdict a module-level flag holds (in this module or imported from another
    module of the plugin), or None when `name` is not such a flag."""
    if name in local:
        target = local[name]
    elif "." not in name and name in mod.bindings:
        b = mod.bindings[name]
        if len(b) != 1:
            return None
        if b[0].kind == "assign":
            return module_flags(mod, env).get(name)
        if b[0].kind != "from" or not b[0].target or not b[0].attr:
            return None
        target = f"{b[0].target}.{b[0].attr}"
    else:
        return None
    owner, _, attr = target.rpartition(".")
    if not owner or env.is_core(owner):
        return None
    other = env.world.module(owner)
    if other is None or other is mod:
        return None
    return module_flags(other, env).get(attr)


def _core_target(expr: ast.expr, mod: ModuleInfo, local: dict[str, str], env: Env) -> str | None:
    name = dotted(expr)
    if name is None:
        return None
    target = qualify(mod, name, local)
    if target is None or not env.is_core(target):
        return None
    return target


V0_SWITCH = "VLLM_USE_V1"  # core's switch between its V0 and V1 engines (`vllm.envs`)
V0_ENGINE = "vllm.engine.llm_engine"  # where core's V0 engine was; an alias of V1's since 0.11.0
V1_ENGINE = "vllm.v1.engine.llm_engine"


def v1_only(env: Env) -> bool:
    """Does core lack a V0 engine? True when `vllm.engine.llm_engine.LLMEngine` is V1's class
    (0.11.0 on: `LLMEngine = V1LLMEngine`, imported from V1's engine module), or when only
    V1's engine module exists; False when it is a class of its own (0.10.2 and before) or
    the gate cannot tell."""
    mod = env.world.module(V0_ENGINE)
    if mod is None:
        return env.world.module(V1_ENGINE) is not None
    binds = mod.bindings.get("LLMEngine", [])
    if len(binds) != 1 or mod.tree is None:
        return False
    target = None
    if binds[0].kind == "from" and binds[0].target and binds[0].attr:
        target = f"{binds[0].target}.{binds[0].attr}"
    elif binds[0].kind == "assign":
        value = next((s.value for s in mod.tree.body if isinstance(s, ast.Assign) and s.lineno == binds[0].line
                      and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)), None)
        name = dotted(value) if value is not None else None
        target = qualify(mod, name, {}) if name else None
    return target == f"{V1_ENGINE}.LLMEngine"


def _v0_switch(test: ast.expr, mod: ModuleInfo, local: dict[str, str]) -> bool:
    """Is `test` a read of the V0/V1 switch: `envs.VLLM_USE_V1` on any env module (core's or
    the plugin's own, which may pass core's variables through), or the name imported from one?"""
    if isinstance(test, ast.Attribute):
        return test.attr == V0_SWITCH
    if isinstance(test, ast.Name) and test.id == V0_SWITCH:
        target = qualify(mod, test.id, local)
        return target is not None and target.endswith("." + V0_SWITCH)
    return False


def _has(env: Env, target: str, attr: str) -> Verdict:
    """Does core object `target` have attribute `attr`?"""
    obj = env.world.resolve_dotted(target)
    if obj is None:
        mod = env.world.module(target)
        if mod is None:
            return Verdict(UNDECIDABLE, why=f"cannot resolve {target} in core")
        obj = ("module", mod)
    kind, val = obj
    if kind == "module":
        assert isinstance(val, ModuleInfo)
        res = env.world.lookup(val.name, attr)
        if res.status == "undecidable":
            return Verdict(UNDECIDABLE, why=res.reason)
        return Verdict(DECIDED, res.status == "found")
    if kind == "class":
        mod, cls = val  # type: ignore[misc]
        if env.world.class_member(mod, cls, attr) is not None:
            return Verdict(DECIDED, True)
        if any(b is None for b in _all_bases(env.world, mod, cls)):
            if env.core_mentions is not None and unknown_bases_in_core(env, mod, cls) \
                    and not env.core_mentions(attr):
                return Verdict(DECIDED, False)  # no core file names it: no base can define it
            return Verdict(UNDECIDABLE, why=f"{target} has a base class outside the core tree")
        return Verdict(DECIDED, False)
    return Verdict(UNDECIDABLE, why=f"{target} is not a module or class")


# Bases that add no attributes a plugin would probe for.
NEUTRAL_BASES = frozenset({"object", "ABC", "abc.ABC", "Protocol", "typing.Protocol", "Generic",
                           "typing.Generic", "NamedTuple", "typing.NamedTuple", "enum.Enum", "Enum"})


def unknown_bases_in_core(env: Env, mod: ModuleInfo, cls, depth: int = 0) -> bool:
    """Every base the gate cannot read is still a core name (a class core builds at run
    time, `Adapter = make_adapter(...)`), not a third-party class (`torch.nn.Module`),
    which may define anything."""
    for expr, b in zip(cls.bases, env.world.bases(mod, cls)):
        if b is None:
            if expr in NEUTRAL_BASES:
                continue
            target = qualify(mod, expr) if expr else None
            if target is None or not env.is_core(target):
                return False
        elif depth < 12 and not unknown_bases_in_core(env, b[0], b[1], depth + 1):
            return False
    return True


def _all_bases(world: TreeIndex, mod: ModuleInfo, cls, depth: int = 0) -> list:
    """Every base class up the hierarchy; None for one outside the tree."""
    out = []
    for expr, b in zip(cls.bases, world.bases(mod, cls)):
        if b is None and expr in NEUTRAL_BASES:
            continue
        out.append(b)
        if b is not None and depth < 12:
            out.extend(_all_bases(world, b[0], b[1], depth + 1))
    return out


def _str_arg(call: ast.Call, i: int) -> str | None:
    if len(call.args) > i and isinstance(call.args[i], ast.Constant) and isinstance(call.args[i].value, str):
        return call.args[i].value
    return None


def _is_find_spec(call: ast.Call) -> bool:
    return (dotted(call.func) or "").split(".")[-1] == "find_spec"


def version_equality(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Is `fn` a predicate "core's version equals my argument" (vllm-gcu's
    `is_vllm_equal(target)`: `vllm.__version__`'s base version `==` the target's)? One
    parameter, a read of some `.__version__`, and every value it returns an `==` comparison or a
    constant False (its `except` branch). Pure."""
    params = fn.args.posonlyargs + fn.args.args
    if len(params) != 1 or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        return False
    nodes = list(ast.walk(fn))
    if not any(isinstance(n, ast.Attribute) and n.attr == "__version__" for n in nodes):
        return False
    returns = [n.value for n in nodes if isinstance(n, ast.Return)]
    equal = [r for r in returns if isinstance(r, ast.Compare) and len(r.ops) == 1 and isinstance(r.ops[0], ast.Eq)]
    rest = [r for r in returns if r not in equal]
    return bool(equal) and all(isinstance(r, ast.Constant) and r.value is False for r in rest)


def _plugin_def(fn: str, mod: ModuleInfo, local: dict[str, str], env: Env) \
        -> tuple[ModuleInfo, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The module-level `def` of the plugin function a call in `mod` names, with its module;
    None for a core name or anything else. Looked up once per name a module spells
    (`is_310p()` is asked in hundreds of conditions)."""
    if not fn or env.is_core(fn):
        return None
    target = qualify(mod, fn, local)
    if target is None:
        return None
    if target not in env.defs:
        env.defs[target] = None
        found = env.world.resolve_dotted(target)
        if found is not None and found[0] == "func":
            fmod, sig = found[1]  # type: ignore[misc]
            node = next((n for n in (fmod.tree.body if fmod.tree is not None else ())
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and n.name == sig.name and n.lineno == sig.line), None)
            if node is not None:
                env.defs[target] = (fmod, node)
    return env.defs[target]


def _equality_predicate(fn: str, mod: ModuleInfo, local: dict[str, str], env: Env) -> bool:
    """Does the plugin function `fn` names compare core's version for equality?"""
    found = _plugin_def(fn, mod, local, env)
    return found is not None and version_equality(found[1])


def _dataclass_field_names(env: Env, mod: ModuleInfo, cls) -> frozenset[str] | None:
    """The keys of a core class's `__dataclass_fields__`: every name annotated in the body of
    each dataclass in its hierarchy (ClassVar, InitVar and KW_ONLY pseudo-fields and
    `field(init=False)` included, as Python keeps them). None where the gate cannot tell: a base outside the
    tree, or no dataclass anywhere in the hierarchy (then the read raises instead)."""
    chain = [(mod, cls)] + _all_bases(env.world, mod, cls)
    if any(link is None for link in chain):
        return None
    built = [c for _, c in chain if dataclass_options(c) is not None]
    if not built:
        return None
    return frozenset(stmt.target.id for c in built for stmt in c.fields
                     if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name))


def _parameter_names(env: Env, target: str, positional_only: bool) -> frozenset[str] | None:
    """The parameter names `inspect.signature(target).parameters` holds (with
    `positional_only`, the `args` of `inspect.getfullargspec`), for a core function or a
    method read through its class; None where a decorator may change what inspect reports,
    or `target` is no function."""
    found = env.world.resolve_dotted(target)
    if found is None or found[0] not in ("func", "method"):
        return None
    sig = found[1][-1]  # type: ignore[index]
    if any(d not in PLAIN_METHOD_DECORATORS for d in sig.decorators):
        return None  # a wrapper may report another signature
    if sig.is_classmethod and not positional_only:
        sig = sig.bound()  # read through its class a classmethod is bound: signature drops `cls`
        # (getfullargspec keeps a bound argument)
    names = [p.name for p in sig.positional]
    if not positional_only:
        names += [x for x in (sig.vararg, sig.kwarg) if x] + [p.name for p in sig.kwonly]
    return frozenset(names)


def _unwrap_names(expr: ast.expr) -> ast.expr:
    """`set(x)`, `list(x)`, `x.keys()` hold the names `x` holds."""
    while True:
        if isinstance(expr, ast.Call) and not expr.keywords and len(expr.args) == 1 \
                and dotted(expr.func) in ("set", "list", "tuple", "frozenset"):
            expr = expr.args[0]
        elif isinstance(expr, ast.Call) and not expr.args and not expr.keywords \
                and isinstance(expr.func, ast.Attribute) and expr.func.attr == "keys":
            expr = expr.func.value
        else:
            return expr


def member_probe(test: ast.Compare, mod: ModuleInfo, local: dict[str, str], env: Env) -> Verdict | None:
    """`"x" in C.__dataclass_fields__`, `"x" in inspect.signature(f).parameters` (also
    `.parameters.keys()`, `set(...)` of it) and `"x" in inspect.getfullargspec(f).args`, with
    `not in`, decided from core's source where `C`/`f` is a core class/function the index
    reads whole. None otherwise: the test stays a probe of the name (Context.probed)."""
    if not (len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn))
            and isinstance(test.left, ast.Constant) and isinstance(test.left.value, str)):
        return None
    name, holder = test.left.value, _unwrap_names(test.comparators[0])
    names: frozenset[str] | None = None
    if isinstance(holder, ast.Attribute) and holder.attr == "__dataclass_fields__":
        target = _core_target(holder.value, mod, local, env)
        found = env.world.resolve_dotted(target) if target else None
        if found is not None and found[0] == "class":
            names = _dataclass_field_names(env, *found[1])  # type: ignore[misc]
    elif isinstance(holder, ast.Attribute) and holder.attr in ("parameters", "args") \
            and isinstance(holder.value, ast.Call) and len(holder.value.args) == 1 and not holder.value.keywords:
        inspector = qualify(mod, dotted(holder.value.func) or "", local)
        wanted = {"parameters": "inspect.signature", "args": "inspect.getfullargspec"}[holder.attr]
        target = _core_target(holder.value.args[0], mod, local, env)
        if inspector == wanted and target is not None:
            names = _parameter_names(env, target, positional_only=holder.attr == "args")
    if names is None:
        return None
    return Verdict(DECIDED, (name in names) != isinstance(test.ops[0], ast.NotIn))


MAX_PREDICATE_DEPTH = 3


def _predicate_body(fn: str, mod: ModuleInfo, local: dict[str, str], env: Env) \
        -> tuple[ast.expr, ModuleInfo, dict[str, str]] | None:
    """A plugin helper that only answers a question (`def has_x() -> bool: return <test>`,
    no parameters, imports allowed before the return): its test, its module and the names
    its own imports bind. None for anything else."""
    found = _plugin_def(fn, mod, local, env) if "." not in fn else None
    if found is None or isinstance(found[1], ast.AsyncFunctionDef):
        return None
    fmod, node = found
    a = node.args
    if a.posonlyargs or a.args or a.kwonlyargs or a.vararg or a.kwarg or node.decorator_list:
        return None
    body = node.body[1:] if node.body and isinstance(node.body[0], ast.Expr) \
        and isinstance(node.body[0].value, ast.Constant) else node.body
    imports: dict[str, str] = {}
    for stmt in body[:-1]:
        if isinstance(stmt, ast.Import):
            imports.update({a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                            for a in stmt.names})
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            imports.update({a.asname or a.name: f"{stmt.module}.{a.name}" for a in stmt.names})
        else:
            return None
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    return body[-1].value, fmod, imports


def evaluate(test: ast.expr, mod: ModuleInfo, local: dict[str, str], env: Env, depth: int = 0) -> Verdict:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = evaluate(test.operand, mod, local, env, depth)
        return Verdict(DECIDED, not v.value) if v.kind == DECIDED else v
    if isinstance(test, ast.BoolOp):
        parts = [evaluate(v, mod, local, env, depth) for v in test.values]
        short = isinstance(test.op, ast.Or)  # the value that decides the whole expression
        if any(p.kind == DECIDED and p.value is short for p in parts):
            return Verdict(DECIDED, short)
        if all(p.kind == DECIDED for p in parts):
            return Verdict(DECIDED, not short)
        undecided = [p for p in parts if p.kind == UNDECIDABLE]
        if undecided:
            return undecided[0]
        return Verdict(PLAIN)
    name = dotted(test) or ""
    if name in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
        return Verdict(TYPE_CHECKING)
    if _v0_switch(test, mod, local) and v1_only(env):
        return Verdict(DECIDED, True)
    if isinstance(test, ast.Name):
        flag = _flag(test.id, mod, local, env)
        return flag if flag is not None else Verdict(PLAIN)
    if isinstance(test, ast.Compare):
        probe = member_probe(test, mod, local, env)
        if probe is not None:
            return probe
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
        inner = evaluate(test.left, mod, local, env, depth)
        if inner.kind == DECIDED and isinstance(test.left, ast.Call) \
                and (dotted(test.left.func) == "getattr" or _is_find_spec(test.left)):
            return Verdict(DECIDED, inner.value if isinstance(test.ops[0], ast.IsNot) else not inner.value)
        return inner if inner.kind == UNDECIDABLE else Verdict(PLAIN)
    if not isinstance(test, ast.Call):
        return Verdict(PLAIN)
    fn = dotted(test.func) or ""
    if fn.split(".")[-1] == "vllm_version_is" or _equality_predicate(fn, mod, local, env):
        want = _str_arg(test, 0)
        if want is None:
            return Verdict(UNDECIDABLE, why="vllm_version_is() with a non-literal argument")
        if env.version is None:
            return Verdict(UNDECIDABLE, why=f"vllm_version_is({want!r}): the core tree's version "
                                            "is unknown (pass --core-version)")
        return Verdict(DECIDED, normalize_version(env.version) == normalize_version(want))
    if _is_find_spec(test):
        # importlib.util.find_spec("core.module"): truthy when core has that module
        name = _str_arg(test, 0)
        if name is None or not env.is_core(name):
            return Verdict(PLAIN)
        return Verdict(DECIDED, env.world.module(name) is not None)
    if fn in ("hasattr", "getattr") and len(test.args) >= 2:
        attr = _str_arg(test, 1)
        target = _core_target(test.args[0], mod, local, env)
        if target is None:
            return Verdict(PLAIN)
        if attr is None:
            return Verdict(UNDECIDABLE, why=f"{fn}({target}, <non-literal>)")
        if fn == "getattr" and len(test.args) < 3:
            return Verdict(PLAIN)  # raises instead of answering: not a condition on core
        v = _has(env, target, attr)
        if v.kind == UNDECIDABLE:
            return Verdict(UNDECIDABLE, why=f"{fn}({target}, {attr!r}): {v.why}")
        return v
    if not test.args and not test.keywords and depth < MAX_PREDICATE_DEPTH:
        helper = _predicate_body(fn, mod, local, env)
        if helper is not None:
            inner = evaluate(helper[0], helper[1], helper[2], env, depth + 1)
            if inner.kind == DECIDED:
                return inner  # only a decided answer: the call itself is no test of core otherwise
    return Verdict(PLAIN)


def getattr_probe(value: ast.expr) -> tuple[str, str] | None:
    """(receiver, name) for `getattr(receiver, "name", None)` on a plain local name: a value
    that is None exactly when the object lacks the name (a feature probe)."""
    if not (isinstance(value, ast.Call) and dotted(value.func) == "getattr" and len(value.args) == 3
            and not value.keywords and isinstance(value.args[0], ast.Name)
            and isinstance(value.args[1], ast.Constant) and isinstance(value.args[1].value, str)
            and isinstance(value.args[2], ast.Constant) and value.args[2].value is None):
        return None
    return value.args[0].id, value.args[1].value


# decorators after which a method looked up on an instance is still a bound function
PLAIN_METHOD_DECORATORS = frozenset({"staticmethod", "classmethod", "abstractmethod", "abc.abstractmethod",
                                     "override", "typing.override", "typing_extensions.override"})


def successor_probe(test: ast.expr, probes: dict[str, tuple[str, str]], types: dict[str, tuple[str, ...]],
                    mod: ModuleInfo, local: dict[str, str], env: Env) -> Verdict | None:
    """A feature probe for a successor name on a typed object, decided: `if v is None:` (or
    `not v`, `v is not None`, `v`) after `v = getattr(obj, "new", None)`, or `hasattr(obj,
    "new")`, where `obj` is a parameter annotated with one core class that defines `new` as a
    plain method: getattr then returns the bound method, never None, so the test is decided
    (the fallback reading the old name does not run on this core). None where that is not
    certain: another test, an untyped object, a property (it may return None), no such method."""
    negate, node = False, test
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        negate, node = True, node.operand
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and isinstance(node.left, ast.Name) and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None):
        probe, when_present = probes.get(node.left.id), isinstance(node.ops[0], ast.IsNot)
    elif isinstance(node, ast.Name):
        probe, when_present = probes.get(node.id), True
    elif (isinstance(node, ast.Call) and dotted(node.func) == "hasattr" and len(node.args) == 2
          and not node.keywords and isinstance(node.args[0], ast.Name)
          and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        probe, when_present = (node.args[0].id, node.args[1].value), True
    else:
        return None
    if probe is None or len(types.get(probe[0], ())) != 1:
        return None
    target = qualify(mod, types[probe[0]][0], local)
    if target is None or not env.is_core(target):
        return None
    found = env.world.resolve_dotted(target)
    if found is None or found[0] != "class":
        return None
    member = env.world.class_member(*found[1], probe[1])  # type: ignore[misc]
    if member is None or member[0] != "method":
        return None
    sig = member[1][2]  # type: ignore[index]
    if any(d not in PLAIN_METHOD_DECORATORS for d in sig.decorators):
        return None  # a property, a cached property or a wrapper may answer None
    return Verdict(DECIDED, when_present != negate)


def decide_branch(test: ast.expr, mod: ModuleInfo, env: Env) -> bool | None:
    """Which branch of `if test:` runs against this core, for indexing the plugin while
    its module is still being read: True (body), False (else), None (not decided; the
    index then reads both, as before). Module-level flags are evaluated afresh (the
    module is only partly indexed), never cached."""
    fresh = Env(world=env.world, is_core=env.is_core, version=env.version, flags={},
                core_mentions=env.core_mentions)
    v = evaluate(test, mod, {}, fresh)
    return bool(v.value) if v.kind == DECIDED else None
