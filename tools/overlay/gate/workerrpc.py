"""Worker methods core calls by name (`override` findings).

Core's engine and executors reach the worker through `collective_rpc("<method>", ...)`: the
worker wrapper looks the name up on the worker object (`getattr(worker, method)`), so a
worker class the platform names (`parallel_config.worker_cls = "vllm_metal.v1.worker.
MetalWorker"`) must answer every name core sends. When core starts sending one the plugin's
worker lacks (vLLM 0.16.0's executor sends `reset_encoder_cache`; 0.19.0's engine core
`update_max_model_len` after auto-fitting the context), or one core's worker base leaves to
a `NotImplementedError` stub (`sample_tokens`, sent after every step once asynchronous
scheduling is on), the call raises in the worker.

Judged: the plugin classes start-up modules assign to core's `worker_cls` field as dotted
strings (`parallel_config.worker_cls = "..."`, the class core builds as the worker), whose bases
reach a core class kept beside core's worker wrapper (a core class in the same module, outside the worker's
bases, whose `__getattr__` forwards the names it lacks to the worker); the names are the string constants core passes
as `collective_rpc`'s method, at call sites core's code can reach and no enclosing `try`
catches (AttributeError, NotImplementedError or RuntimeError). Names the wrapper answers itself
(`init_worker`, `adjust_rank`) are not the worker's. A class whose bases the gate cannot read,
or that defines `__getattr__`, may answer any name and is not judged.

The same calls bring back what each worker returns, and core may read it: vLLM 0.21.0's
`Executor.initialize_from_config` reads `.language_model` and `.encoder` of every worker's
`compile_or_warm_up_model()` result (a CompilationTimes), 0.17.x took `max()` of them. A plugin
override that returns nothing (vllm-metal, vllm-qaic, vllm-spyre), or a float where core reads
an attribute a float lacks (vllm-gaudi, vllm-rbln), fails there. Judged only where the gate can
name what the override returns (nothing; or a builtin scalar its annotation names) and core
reads each result's attributes, or computes with the results (`max`, `min`, `sum`).

Always a warning: every such call sits in core's engine or executors, on paths a
configuration chooses (asynchronous scheduling, speculative decoding, data parallelism, sleep
mode, an API call) that the gate does not decide; where the type checker reports the same
override (`--engine both`), the two agree and it is an error. Symbol
`override:<plugin module>.<worker class>.<method>`, one per method and class.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overlay.gate.aliascalls import _own_nodes
from overlay.gate.callers import Site, module_name
from overlay.gate.calls import _own_returns
from overlay.gate.checks import Evidence, _kind, _linearize, _reason, _why
from overlay.gate.findings import Finding
from overlay.gate.index import TreeIndex
from overlay.gate.platformstubs import caught_at
from overlay.gate.scan import PluginFacts
from overlay.gate.signature import dotted

RPC = "collective_rpc"
WORKER_FIELD = "worker_cls"  # ParallelConfig's field naming the class core builds as the worker
FORWARD = "__getattr__"  # the wrapper answers what it lacks from the worker
# what a handler must name to expect the missing name's or the stub's exception (core's
# run_method turns a missing name into NotImplementedError, a RuntimeError)
CATCHES = frozenset({"AttributeError", "NotImplementedError", "RuntimeError", "Exception", "BaseException"})
AGGREGATES = frozenset({"max", "min", "sum"})  # builtins that compute with every element
MAX_FOLD_DEPTH = 32  # deeper joins are not names: the file may nest beyond the recursion limit
MAX_SPELLINGS = 64  # strings a joined name may spell before the gate stops folding it
SCALARS = {"float": float, "int": int, "bool": bool, "str": str}  # return annotations the gate can read


def _last(node: ast.expr) -> str:
    """The last name of a dotted expression (`a.b.worker_cls` -> `worker_cls`), else ""."""
    return (dotted(node) or "").split(".")[-1]


def rpc_method(call: ast.Call) -> str | None:
    """The method name a `collective_rpc(...)` call sends, when it is a string constant:
    the first positional argument or `method=`. Pure."""
    args = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "method"]
    for a in args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.isidentifier():
            return a.value
    return None


@dataclass(frozen=True)
class ResultUse:
    """What core does with the list of per-worker results of one `collective_rpc` call."""
    attrs: frozenset[str]  # attributes it reads on each result (`t.language_model for t in times`)
    computed: bool  # it computes with the results (`max(times)`)


def result_use(tree: ast.Module, line: int) -> ResultUse | None:
    """What core does with the results of the `collective_rpc(...)` call at `line`: read
    directly or through the one name it is bound to in its function, each result's attributes
    in a loop or comprehension over them, or `max`/`min`/`sum` of them. None when core drops
    the results, or only stores or passes them on. Pure."""
    fn = call = None
    for node in ast.walk(tree):  # breadth first: the innermost function holding the call is found last
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = next((n for n in _own_nodes(node) if isinstance(n, ast.Call) and n.lineno == line
                          and isinstance(n.func, ast.Attribute) and n.func.attr == RPC), None)
            if found is not None:
                fn, call = node, found
    if fn is None or call is None:
        return None
    parent = {child: node for node in _own_nodes(fn) for child in ast.iter_child_nodes(node)}
    uses: list[ast.expr] = [call]
    bound = parent.get(call)
    target = (bound.targets[0] if isinstance(bound, ast.Assign) and len(bound.targets) == 1
              else bound.target if isinstance(bound, ast.AnnAssign) else None)
    if isinstance(target, ast.Name):
        uses = [n for n in _own_nodes(fn) if isinstance(n, ast.Name) and n.id == target.id
                and isinstance(n.ctx, ast.Load) and n.lineno >= call.lineno]
    attrs: set[str] = set()
    computed = False
    for use in uses:
        up = parent.get(use)
        if isinstance(up, (ast.comprehension, ast.For)) and up.iter is use and isinstance(up.target, ast.Name):
            scope = [parent.get(up)] if isinstance(up, ast.comprehension) else up.body
            attrs |= {a.attr for s in scope if s is not None for a in ast.walk(s) if isinstance(a, ast.Attribute)
                      and isinstance(a.value, ast.Name) and a.value.id == up.target.id and isinstance(a.ctx, ast.Load)}
        elif isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id in AGGREGATES and use in up.args:
            computed = True
    return ResultUse(frozenset(attrs), computed) if attrs or computed else None


def returned(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """What a method gives back, where the gate can name it: "None" when no `return` of its
    own body gives a value (it is no generator, and does not end by raising), else the builtin
    scalar its annotation names (`-> float`); None: not known. Pure."""
    returns = _own_returns(fn)
    if returns is None:  # a generator
        return None
    if not any(r.value is not None and not (isinstance(r.value, ast.Constant) and r.value.value is None)
               for r in returns):
        return None if not returns and isinstance(fn.body[-1], ast.Raise) else "None"
    return fn.returns.id if isinstance(fn.returns, ast.Name) and fn.returns.id in SCALARS else None


def _fails(gives: str, uses: list[ResultUse]) -> str:
    """What core does with the results that one which `gives` cannot stand, in words ("" when
    nothing fails): the attributes it reads that the value lacks, or computing with None. Pure."""
    attrs = sorted({a for u in uses for a in u.attrs if gives == "None" or not hasattr(SCALARS[gives], a)})
    said = [f"reads {', '.join('.' + a for a in attrs)} of each"] if attrs else []
    if gives == "None" and any(u.computed for u in uses):
        said.append("takes max()/min()/sum() of them")
    return " and ".join(said)


def _sent(ev: Evidence, world: TreeIndex) -> tuple[dict[str, list[Site]], dict[str, list[tuple[Site, ResultUse]]]]:
    """Method name -> the core call sites that send it, where core's code can run them; and
    the sites among them whose results core reads. Each core file's tree is walked once,
    whatever number of sites it holds."""
    by_path: dict[str, list[Site]] = {}
    for s in ev.callers.sites(RPC) or []:
        if not s.plugin and ev.callers.reachable(s)[0]:
            by_path.setdefault(s.path, []).append(s)
    out: dict[str, list[Site]] = {}
    reads: dict[str, list[tuple[Site, ResultUse]]] = {}
    for path, sites in by_path.items():
        mod = world.module(module_name(path))
        if mod is None or mod.tree is None:
            continue
        sent_at: dict[int, str] = {}
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == RPC:
                name = rpc_method(node)
                if name:
                    sent_at[node.lineno] = name
        for s in sites:
            name = sent_at.get(s.shape.line)
            if name and not caught_at(mod.tree, s.shape.line, CATCHES):
                out.setdefault(name, []).append(s)
                use = result_use(mod.tree, s.shape.line)
                if use is not None:
                    reads.setdefault(name, []).append((s, use))
    return out, reads


def _wrapper_names(world: TreeIndex, ev: Evidence, module: str, bases: set[str]) -> set[str] | None:
    """The names core's worker wrappers answer themselves: the methods and attributes of every
    class in `module`, outside `bases`, that forwards names it lacks (vLLM 0.10's V0 module
    keeps a delegating worker beside the wrapper), and the methods of core's subclasses of one,
    wherever they are defined (the Ray wrapper's `adjust_rank`, in a class defined under a
    `try`); None when the module keeps no forwarding class."""
    mod = world.module(module)
    found: set[str] | None = None
    wrappers: set[str] = set()
    for node in mod.tree.body if mod is not None and mod.tree is not None else ():
        if isinstance(node, ast.ClassDef) and node.name not in bases:
            cls = world.class_of(mod, node)
            if FORWARD in cls.methods:
                found = (found or set()) | set(cls.methods) | set(cls.attrs)
                wrappers.add(node.name)
    for name in sorted(wrappers):
        for path in ev.callers.mentions(name):
            other = world.module(module_name(path))
            for node in ast.walk(other.tree) if other is not None and other.tree is not None else ():
                if isinstance(node, ast.ClassDef) and any(_last(b) == name for b in node.bases):
                    found = (found or set()) | {n.name for n in node.body
                                                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return found


def folded(node: ast.expr | None, env: dict[str, set[str]], depth: int = 0) -> set[str] | None:
    """The strings an expression can be: string constants, a conditional of such, `+` and
    f-strings over them, and names `env` binds to such (`root + "." + name`); None where any
    part is not known, or the expression nests deeper than a name is ever spelled. Pure."""
    if depth > MAX_FOLD_DEPTH:
        return None
    if isinstance(node, ast.Constant):
        return {node.value} if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return env.get(node.id)
    parts: list[set[str] | None] = []
    if isinstance(node, ast.IfExp):
        body, orelse = folded(node.body, env, depth + 1), folded(node.orelse, env, depth + 1)
        return body | orelse if body is not None and orelse is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [folded(node.left, env, depth + 1), folded(node.right, env, depth + 1)]
    elif isinstance(node, ast.JoinedStr):
        parts = [folded(v.value, env, depth + 1) if isinstance(v, ast.FormattedValue) and v.conversion == -1
                 and v.format_spec is None else folded(v, env, depth + 1) for v in node.values]
    else:
        return None
    out = {""}
    for part in parts:
        if part is None or len(out) * len(part) > MAX_SPELLINGS:
            return None
        out = {a + b for a in out for b in part}
    return out


def _worker_values(node: ast.AST) -> list[ast.expr]:
    """The values a statement or keyword gives core's `worker_cls` field."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(_last(t) == WORKER_FIELD for t in targets) and node.value is not None:
            return [node.value]
    elif isinstance(node, ast.keyword) and node.arg == WORKER_FIELD:
        return [node.value]
    return []


def _scope_worker_names(scope: ast.AST, outer: dict[str, set[str]], out: set[str]) -> None:
    own = list(_own_nodes(scope))
    env = dict(outer)
    for _ in range(2):  # a name bound from another bound later in the body
        for node in own:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    value = folded(node.value, env)
                    if value is not None:
                        env[targets[0].id] = value
    for node in own:
        for value in _worker_values(node):
            names = folded(value, env)
            out |= ({n for n in names if "." in n} if names is not None else
                    {c.value for c in ast.walk(value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                     and "." in c.value and c.value.strip(".")})
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _scope_worker_names(node, env, out)


def worker_names(trees) -> set[str]:
    """The dotted names the given module trees assign to core's `worker_cls` field (an
    attribute or a name of that name, or a `worker_cls=` keyword): every string the value can
    be, joined from constants and the names its scope binds to them (`root + "." + name`,
    `"a.W" if v1 else "b.W"`); where a part is not known, the dotted constants in it. Pure."""
    out: set[str] = set()
    for tree in trees:
        if tree is not None:
            _scope_worker_names(tree, {}, out)
    return out


def check_worker_rpcs(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    findings: list[Finding] = []
    modules = (world.module(name) for name in ev.startup.parent)
    named = worker_names(m.tree for m in modules if m is not None)
    workers = [pc for pc in facts.classes if f"{pc.module.name}.{pc.node.name}" in named]
    sent, reads = _sent(ev, world) if workers else ({}, {})
    judged: set[tuple[str, str, str]] = set()  # (module, class, method): workers may share a plugin base
    # (core module, core bases) -> the names core's wrappers answer there: workers sharing core's
    # bases (vllm-ascend's NPUWorker, XliteWorker, NPUWorker310) share the answer
    answers: dict[tuple[str, frozenset[str]], set[str] | None] = {}
    for pc in workers:
        cls = world.class_of(pc.module, pc.node)
        mro = _linearize(world, pc.module, cls, pc.scope.local_imports)
        if None in mro:
            continue  # a base the gate cannot read may define any name
        classes = [(pc.module, cls)] + [b for b in mro if b is not None]
        if any(FORWARD in c.methods for _, c in classes):
            continue
        names = frozenset(c.name for m, c in classes if ev.is_core(m.name))  # core's bases of it
        answered = []
        for m in sorted({m.name for m, _ in classes if ev.is_core(m.name)}):
            if (m, names) not in answers:
                answers[(m, names)] = _wrapper_names(world, ev, m, names)
            if answers[(m, names)] is not None:
                answered.append(answers[(m, names)])
        if not answered:
            continue  # not a worker core dispatches names to
        wrapper = set().union(*answered)
        findings += _results_read(pc, classes, reads, ev, judged)
        for method, sites in sorted(sent.items()):
            if method in wrapper or method.startswith("__"):
                continue
            owner = next(((m, c) for m, c in classes if method in c.methods or method in c.attrs), None)
            if owner is not None:
                m, c = owner
                sig = c.methods.get(method)
                if not ev.is_core(m.name) or sig is None or (sig.raises or "").split(".")[-1] != "NotImplementedError":
                    continue
                what = f"core's {c.name}.{method} only raises NotImplementedError"
                core_path, core_line = m.path, sig.line
            else:
                what = f"no class of {cls.name}'s bases defines it"
                core_path, core_line = sites[0].path, sites[0].shape.line
            where = ", ".join(s.where() for s in sites[:2])
            message = (f"{cls.name} does not define {method}; core sends it to every worker by name "
                       f"(collective_rpc(\"{method}\", ...) at {where}), and {what}")
            findings.append(Finding(
                _kind(pc.ctx, "override"), f"override:{pc.module.name}.{cls.name}.{method}", pc.path,
                cls.line, core_path, core_line, _why(pc.ctx, message), severity="warning",
                reason=_reason(pc.ctx, ev, pc.module.name,
                               f"core sends it at {sites[0].where()}, on a path a configuration chooses"),
                summary=f"{cls.name} lacks {method}, which core calls on every worker by name"))
    return findings


def _results_read(pc, classes, reads: dict[str, list[tuple[Site, ResultUse]]], ev: Evidence,
                  judged: set[tuple[str, str, str]]) -> list[Finding]:
    """The worker's plugin overrides that give back what core cannot read (module docstring)."""
    out: list[Finding] = []
    for method, used in sorted(reads.items()):
        owner = next(((m, c) for m, c in classes if method in c.methods or method in c.attrs), None)
        if owner is None or ev.is_core(owner[0].name) or owner[1].node is None:
            continue
        m, c = owner
        if (m.name, c.name, method) in judged:
            continue
        judged.add((m.name, c.name, method))
        fn = next((n for n in reversed(c.node.body) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and n.name == method), None)
        gives = returned(fn) if fn is not None else None
        fails = _fails(gives, [u for _, u in used]) if gives is not None else ""
        if not fails:
            continue
        site = used[0][0]
        what = "nothing" if gives == "None" else f"a {gives}"
        message = (f"{c.name}.{method} returns {what}, but core {fails}: the results of every worker's "
                   f"{method}, from collective_rpc(\"{method}\") at {site.where()}")
        out.append(Finding(
            _kind(pc.ctx, "override"), f"override:{m.name}.{c.name}.{method}", m.path, fn.lineno,
            site.path, site.shape.line, _why(pc.ctx, message), severity="warning",
            reason=_reason(pc.ctx, ev, m.name, f"core reads the results at {site.where()}, on a path a "
                                               "configuration chooses"),
            summary=f"{c.name}.{method} returns {what}, which core reads from every worker by name"))
    return out
