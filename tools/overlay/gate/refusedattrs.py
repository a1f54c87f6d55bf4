"""Class attributes core now refuses: a plugin class that sets a name core raises on.

When core retires a class-level switch it often keeps reading it for a release, to fail
loudly rather than ignore it: vLLM 0.13.0's `supports_multimodal(model)` reads
`multimodal_cpu_fields = getattr(model, "multimodal_cpu_fields", None)` and raises
ValueError ("no longer effective ... remove the override from your model") when it is
not None. A plugin model class that still sets the attribute fails model inspection.

Judged here: a class attribute the plugin's class body binds to a literal value, on a
class with core classes in its method resolution order; against functions of those core
classes' modules that read the same name off a parameter (`v = getattr(p, "NAME", d)`,
then `if <test of v>:`, or the `getattr`/`hasattr` in the test itself) and whose branch
for the test raises. The test is evaluated on the plugin's value (`is None`, `is not
None`, `is True`/`is False`, `==`/`!=` a literal, truthiness, `not`); a value or a test
the gate cannot evaluate is no finding. The function must have a core caller the gate does
not rule out (core runs it: the refusal is core's), and the report names that function.
Pure: reads the index's syntax trees.
"""

from __future__ import annotations

import ast
from collections import Counter

from overlay.gate import checks
from overlay.gate.findings import Finding
from overlay.gate.index import TreeIndex, dotted
from overlay.gate.scan import PluginFacts

UNKNOWN = object()


def _literal(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _probe(node: ast.expr, name: str) -> bool:
    """`getattr(x, "name", ...)` or `hasattr(x, "name")`."""
    return (isinstance(node, ast.Call) and dotted(node.func) in ("getattr", "hasattr") and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and node.args[1].value == name)


def _evaluate(test: ast.expr, value, subject) -> object:
    """The test's truth with `subject` (a predicate on AST nodes) standing for the plugin's
    value; UNKNOWN where it cannot say."""
    if subject(test):
        if isinstance(test, ast.Call) and dotted(test.func) == "hasattr":
            return True
        return bool(value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _evaluate(test.operand, value, subject)
        return UNKNOWN if inner is UNKNOWN else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and subject(test.left):
        if isinstance(test.left, ast.Call) and dotted(test.left.func) == "hasattr":
            return UNKNOWN
        other = _literal(test.comparators[0])
        if other is UNKNOWN:
            return UNKNOWN
        op = test.ops[0]
        if isinstance(op, ast.Is):
            return value is other if other in (None, True, False) else UNKNOWN
        if isinstance(op, ast.IsNot):
            return value is not other if other in (None, True, False) else UNKNOWN
        if isinstance(op, ast.Eq):
            return value == other
        if isinstance(op, ast.NotEq):
            return value != other
    return UNKNOWN


def _raises(body: list[ast.stmt]) -> ast.Raise | None:
    """The `raise` the branch ends in at its own level (a bare re-raise is no refusal)."""
    for stmt in body:
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            return stmt
        if isinstance(stmt, (ast.Return, ast.Continue, ast.Break)):
            return None
    return None


def refusals(tree: ast.Module, name: str) -> list[tuple[str, ast.If, ast.Raise, object]]:
    """(function, the `if`, its `raise`, which test nodes stand for the value) for each function of a core module
    that raises on the class attribute `name` read off one of its parameters."""
    return refusals_by_name(tree).get(name, [])


def refusals_by_name(tree: ast.Module) -> dict[str, list[tuple[str, ast.If, ast.Raise, object]]]:
    """Every refusal of a core module, by the attribute name it reads: one walk of the module,
    and a closer look only at the functions that read a parameter's attribute by a literal
    name (`getattr(p, "NAME", ...)`, `hasattr(p, "NAME")`)."""
    out: dict[str, list[tuple[str, ast.If, ast.Raise, object]]] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        names = {n.args[1].value for n in ast.walk(fn) if isinstance(n, ast.Call) and len(n.args) >= 2
                 and dotted(n.func) in ("getattr", "hasattr") and isinstance(n.args[1], ast.Constant)
                 and isinstance(n.args[1].value, str) and isinstance(n.args[0], ast.Name) and n.args[0].id in params}
        if not names:
            continue
        stores = Counter(n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        for name in sorted(names):
            found = _function_refusals(fn, params, stores, name)
            if found:
                out.setdefault(name, []).extend(found)
    return out


def _function_refusals(fn: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str], stores: Counter,
                       name: str) -> list[tuple[str, ast.If, ast.Raise, object]]:
    # names bound once in the function to a probe of `name` on a parameter
    bound = {n.targets[0].id: n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and _probe(n.value, name)
             and isinstance(n.value.args[0], ast.Name) and n.value.args[0].id in params  # type: ignore[attr-defined]
             and stores[n.targets[0].id] == 1}

    def subject(n: ast.expr) -> bool:
        if isinstance(n, ast.Name) and n.id in bound:
            return True
        return _probe(n, name) and isinstance(n.args[0], ast.Name) and n.args[0].id in params  # type: ignore[attr-defined]

    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and (raised := _raises(node.body)) is not None \
                and any(subject(n) for n in ast.walk(node.test)):
            out.append((fn.name, node, raised, subject))
    return out


def check_refused_attributes(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    out: list[Finding] = []
    memo: dict[str, dict] = {}  # core module -> its refusals by name
    for pc in facts.classes:
        info = world.class_of(pc.module, pc.node)
        switches = [stmt for stmt in pc.node.body if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and not stmt.targets[0].id.startswith("__")]
        if not info.bases or not switches:
            continue
        chain = [b for b in checks._linearize(world, pc.module, info, pc.scope.local_imports) if b is not None]
        core_modules = []
        for m, _ in chain:
            if ev.is_core(m.name) and m.tree is not None and m not in core_modules:
                core_modules.append(m)
        for stmt in switches:
            name = stmt.targets[0].id  # type: ignore[attr-defined]
            for m in core_modules:
                if m.name not in memo:
                    memo[m.name] = refusals_by_name(m.tree)  # type: ignore[arg-type]
                found = memo[m.name].get(name, [])
                value = _literal(stmt.value) if found else UNKNOWN
                if value is UNKNOWN:
                    continue
                for func, node, raised, subject in found:
                    if _evaluate(node.test, value, subject) is not True or not _called_by_core(ev, m.name, func):
                        continue
                    exc = dotted(raised.exc.func if isinstance(raised.exc, ast.Call) else raised.exc) or "an error"
                    message = (f"{info.name}.{name} = {ast.unparse(stmt.value)}: core's {m.name}.{func} reads "
                               f"{name} off the class it is given and raises {exc} for this value "
                               f"(`if {ast.unparse(node.test)}:` at {m.path}:{node.lineno}): core refuses the "
                               f"attribute now")
                    out.append(Finding(checks._kind(pc.ctx, "override"),
                                       f"override:{pc.module.name}.{info.name}.{name}", pc.path, stmt.lineno,
                                       m.path, node.lineno, checks._why(pc.ctx, message),
                                       severity=checks._severity(pc.ctx, ev, pc.module.name),
                                       reason=checks._reason(pc.ctx, ev, pc.module.name,
                                                             f"core calls {func} (the class is core's to inspect)"),
                                       summary=f"{info.name}.{name}: core's {func} raises {exc} on it",
                                       engine="hand"))
                    break
    return out


def _called_by_core(ev, module: str, func: str) -> bool:
    """Some core code the gate does not rule out calls `func` (by name, outside itself)."""
    for s in ev.callers.sites(func) or []:
        if s.plugin or (s.module == module and s.func == func):
            continue
        if ev.callers.reachable(s)[0]:
            return True
    return False
