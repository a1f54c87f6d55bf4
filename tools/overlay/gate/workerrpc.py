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

Always a warning: every such call sits in core's engine or executors, on paths a
configuration chooses (asynchronous scheduling, speculative decoding, data parallelism, sleep
mode, an API call) that the gate does not decide. Symbol
`override:<plugin module>.<worker class>.<method>`, one per method and class.
"""

from __future__ import annotations

import ast

from overlay.gate.callers import Site, module_name
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


def _sent(ev: Evidence, world: TreeIndex) -> dict[str, list[Site]]:
    """Method name -> the core call sites that send it, where core's code can run them. Each
    core file's tree is walked once, whatever number of sites it holds."""
    by_path: dict[str, list[Site]] = {}
    for s in ev.callers.sites(RPC) or []:
        if not s.plugin and ev.callers.reachable(s)[0]:
            by_path.setdefault(s.path, []).append(s)
    out: dict[str, list[Site]] = {}
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
    return out


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


def worker_names(trees) -> set[str]:
    """The dotted names the given module trees assign to core's `worker_cls` field (an
    attribute or a name of that name, or a `worker_cls=` keyword), every string constant of
    the value (`"a.W" if v1 else "b.W"`). Pure."""
    out: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree) if tree is not None else ():
            values = []
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_last(t) == WORKER_FIELD for t in targets) and node.value is not None:
                    values.append(node.value)
            elif isinstance(node, ast.keyword) and node.arg == WORKER_FIELD:
                values.append(node.value)
            out |= {c.value for v in values for c in ast.walk(v)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and "." in c.value}
    return out


def check_worker_rpcs(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    findings: list[Finding] = []
    modules = (world.module(name) for name in ev.startup.parent)
    named = worker_names(m.tree for m in modules if m is not None)
    workers = [pc for pc in facts.classes if f"{pc.module.name}.{pc.node.name}" in named]
    sent = _sent(ev, world) if workers else {}
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
