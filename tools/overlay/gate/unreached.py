"""Plugin helpers the core under test never runs: their findings are warnings.

A plugin keeps code for older cores in private helpers it calls only behind a test of
core: `if importlib.util.find_spec("vllm.profiler.wrapper") is None: return
self._setup_legacy_profiler()`, `if getattr(envs, "VLLM_TORCH_PROFILER_DIR", None) is not
None: ...` (vllm-spyre 1.9.1). Where the gate decides such a test against the core under
test (conditions.evaluate) the branch does not run, and a private helper (`_name`, no
dunder) that

- the plugin names only by its definition(s) and by calls inside such branches, and
- no core file names (core could call it, as an override of a core method),

never runs with this core: what core lacks inside it is no break there. Each finding inside
it becomes a warning that says which calls were ruled out. A helper named anywhere else
(another call, a callback, a string, a comment) is left alone: the name search cannot
tell those apart, so it does not guess.

A function or method that the plugin names only by its definition(s), that no core file
names and that no entry point names, never runs at all (vllm-gaudi's
`HpuPlatform.patch_for_pt27`, whose function-local import of a name core moved is no break).
For a private helper every finding inside it becomes a warning, as above; for a public one
(not a dunder, undecorated but for classmethod/staticmethod) only its imports do.
"""

from __future__ import annotations

import ast
import dataclasses

from overlay.gate.callers import function_scopes, module_name
from overlay.gate.checks import Evidence
from overlay.gate.conditions import DECIDED, evaluate
from overlay.gate.findings import NOT_RUN_WITH_CORE, Finding
from overlay.gate.index import TreeIndex


def _called_name(call: ast.Call) -> str | None:
    fn = call.func
    if isinstance(fn, ast.Name):
        return fn.id
    if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) and fn.value.id in ("self", "cls"):
        return fn.attr
    return None


def ruled_out_calls(tree: ast.Module, decide) -> dict[str, list[int]]:
    """name -> lines of the calls `name(...)` / `self.name(...)` that sit in a branch
    `decide(test)` (True/False, None when undecided) says does not run."""
    out: dict[str, list[int]] = {}
    seen: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        taken = decide(node.test)
        if taken is None:
            continue
        for stmt in node.orelse if taken else node.body:
            for inner in ast.walk(stmt):
                if isinstance(inner, ast.Call) and id(inner) not in seen:
                    seen.add(id(inner))
                    name = _called_name(inner)
                    if name is not None:
                        out.setdefault(name, []).append(inner.lineno)
    return out


def demote_reason(name: str, version: str | None, sites: list[str]) -> str:
    """What a demoted finding says: which calls were ruled out, ending in NOT_RUN_WITH_CORE."""
    return (f"inside {name}, which the plugin calls only in branches this core ({version or 'under test'}) "
            f"does not take ({', '.join(sites)}): {NOT_RUN_WITH_CORE}")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def demote_unreached(found: list[Finding], world: TreeIndex, ev: Evidence,
                     version: str | None = None) -> list[Finding]:
    """`found` with every error inside a private helper this core never runs (see the
    module docstring) made a warning that says why."""
    env = ev.env
    if env is None or not any(f.severity == "error" for f in found):
        return found
    scopes_by_path: dict[str, list] = {}

    def scopes_of(path: str) -> list:
        """(first, last, class, def) of every function of the plugin file at `path`."""
        if path not in scopes_by_path:
            mod = world.module(module_name(path)) if path.endswith(".py") else None
            ok = mod is not None and mod.tree is not None and mod.path == path
            scopes_by_path[path] = function_scopes(mod.tree) if ok else []  # type: ignore[union-attr,arg-type]
        return scopes_by_path[path]

    ruled_out: dict[str, list[tuple[str, int]]] | None = None
    verdicts: dict[tuple[str, int], str | None] = {}  # (name, defs in the finding's file) -> why

    def all_ruled_out() -> dict[str, list[tuple[str, int]]]:
        nonlocal ruled_out
        if ruled_out is None:
            ruled_out = {}
            for path, i in ev.callers.all_files():
                if not ev.callers.trees[i][3] or not path.endswith(".py"):
                    continue  # plugin files only
                mod = world.module(module_name(path))
                if mod is None or mod.tree is None or mod.path != path:
                    continue

                def decide(test, mod=mod):
                    v = evaluate(test, mod, {}, env)
                    return bool(v.value) if v.kind == DECIDED else None
                for name, lines in ruled_out_calls(mod.tree, decide).items():
                    ruled_out.setdefault(name, []).extend((path, line) for line in lines)
        return ruled_out

    def unreached(name: str, defs: int, private: bool) -> str | None:
        """Why `name` never runs with this core, or None."""
        key = (name, defs)
        if key not in verdicts:
            verdicts[key] = None
            if not ev.callers.mentions(name) and name not in ev.startup.called:
                uses = ev.callers.plugin_uses(name)
                sites = all_ruled_out().get(name, []) if private else []
                if sites and uses == defs + len(sites):
                    verdicts[key] = demote_reason(name, version, [f"{p}:{line}" for p, line in sorted(sites)])
                elif uses == defs:
                    verdicts[key] = (f"inside {name}, which nothing calls: the plugin names it only where it "
                                     f"defines it, and neither core nor an entry point names it: {NOT_RUN_WITH_CORE}")
        return verdicts[key]

    out = []
    for f in found:
        why = None
        if f.severity == "error":
            scopes = scopes_of(f.plugin_path)
            for start, end, _cls, node in scopes:
                if start <= f.plugin_line <= end:
                    name = node.name  # type: ignore[attr-defined]
                    defs = sum(1 for s in scopes if s[3].name == name)  # type: ignore[attr-defined]
                    # a public function nothing names: only its imports (a compat helper's lazy
                    # import); reads and calls there are left to the reachability the other
                    # checks weigh. A private helper is judged for every finding (unreached()).
                    plain = f.kind == "import" and not name.startswith("__") and all(
                        isinstance(d, ast.Name) and d.id in ("classmethod", "staticmethod")
                        for d in getattr(node, "decorator_list", []))
                    why = unreached(name, defs, _is_private(name)) if (_is_private(name) or plain) else None
                    if why:
                        break
        if why:
            f = dataclasses.replace(f, severity="warning", reason=f"{f.reason}; {why}" if f.reason else why)
        out.append(f)
    return out

