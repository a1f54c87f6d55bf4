"""Replacements that never reach a core module which bound the name first.

`gumbel.gumbel_sample = ours` changes the attribute of the module `gumbel`. A core module
that did `from ...gumbel import gumbel_sample` holds its own global bound to whatever the
attribute was when that statement ran. If that module was imported before the patch
ran, its calls keep calling core's original: the patch does not reach them.

Reported only where the order is known (importorder.py):
- the patch module's own imports, before the patch line, certainly run the binding
  (whoever imports the patch module, those statements run first);
- the binding statement certainly runs, in every entry point's walk that runs the
  replacement (or, for a replacement inside a function, that imports its module), before
  it (a function cannot run before its module defines it): a warning at the replacement's
  line where the binding module calls the name at a site that can run (nothing raises:
  core's original runs there, which may be what the patch was written to avoid);
- the binding runs at start-up but the replacement runs in a function whose module is
  imported before the binding: when that function runs is not known, so a warning says
  the order cannot be placed.
A binding module the start-up never imports is not judged (core imports it later, at
a time nothing here places), nor one whose binding the plugin replaces as well
(`sampler.gumbel_sample = ours` next to `gumbel.gumbel_sample = ours`). Bindings under
`if TYPE_CHECKING:` do not run.
"""

from __future__ import annotations

from overlay.gate.callers import module_name
from overlay.gate.findings import Finding
from overlay.gate.importorder import Walk, module_walk, startup_walks
from overlay.gate.index import TreeIndex
from overlay.gate.scan import PluginFacts, Replacement


def _binders(world: TreeIndex, ev, r: Replacement) -> list[tuple[str, str, int]]:
    """(core module, local name, line) of every core module other than the owner whose
    module-level code does `from <owner> import <attr>` and calls the name (the text
    index of called names finds the candidates; a binding under another name, `as x`,
    is not followed)."""
    out = []
    for path, tree in ev.callers.files_calling(r.attr):
        if tree != 0:
            continue  # the first tree is core
        name = module_name(path)
        if name == r.owner or not ev.is_core(name):
            continue
        mod = world.module(name)
        if mod is None or mod.path != path:
            continue
        for local, bindings in mod.bindings.items():
            for b in bindings:
                if b.kind == "from" and b.target == r.owner and b.attr == r.attr and not b.type_checking:
                    out.append((name, local, b.line))
    return out


def _live_calls(ev, path: str, local: str) -> list[str]:
    """Where the binding module calls the name it bound, in code that can run."""
    return [s.where() for s in ev.callers.core_sites(path, local)
            if s.receiver == "" and ev.callers.reachable(s)[0]]


def _order(walks: list[Walk], r: Replacement, binder: str, line: int,
           own: Walk | None = None) -> tuple[str, Walk | None]:
    """'before' (the binding certainly came first, with the walk that shows it),
    'unknown' (the binding runs at start-up, the replacement at a time not placed), or
    'none' (nothing to say). `own`: the walk of importing the patch module itself (for
    a patch at import time): its own imports before the patch bind first, whoever
    imports it."""
    placed = r.at_module_line
    if own is not None:
        at = own.first("mark", r.module.name, r.line)
        bind = own.first("mark", binder, line, certain_only=True)
        if at is not None and bind is not None and bind < at:
            return "before", own
    shown = None
    bound_somewhere = False
    for w in walks:
        bind = w.first("mark", binder, line, certain_only=True)
        any_bind = w.first("mark", binder, line)
        bound_somewhere = bound_somewhere or any_bind is not None
        at = w.first("mark", r.module.name, r.line) if placed else w.first("start", r.module.name)
        if at is None:
            continue  # this entry point never runs the patch
        if bind is None or bind > at:
            return ("unknown" if not placed and any_bind is not None else "none"), None
        shown = shown or w
    if shown is not None:
        return "before", shown
    if bound_somewhere and not placed:
        return "unknown", None
    return "none", None


def check_bindings(facts: PluginFacts, world: TreeIndex, ev) -> list[Finding]:
    from overlay.gate.checks import _kind, _reason, _why
    todo = []
    for r in facts.replacements:
        if r.in_class or r.ctx.type_checking:
            continue
        owner = world.resolve_dotted(r.owner)
        if owner is None or owner[0] != "module" or not ev.is_core(r.owner):
            continue
        if world.resolve(r.owner, r.attr) is None:
            continue  # not core's: a missing target is its own finding
        for binder, local, line in _binders(world, ev, r):
            if local not in ev.replaced.get(binder, ()):  # the plugin replaces that binding too
                todo.append((r, binder, local, line))
    if not todo or not ev.startup.declared:
        return []
    marks: dict[str, set[int]] = {}
    for r, binder, _, line in todo:
        marks.setdefault(binder, set()).add(line)
        if r.at_module_line:
            marks.setdefault(r.module.name, set()).add(r.line)
    def is_plugin(name: str) -> bool:
        return name.split(".")[0] in world.packages

    walks = startup_walks(world, ev.env, is_plugin, ev.startup.roots, marks)
    own_walks: dict[str, Walk] = {}
    out = []
    for r, binder, local, line in todo:
        own = None
        if r.at_module_line:
            if r.module.name not in own_walks:
                own_walks[r.module.name] = module_walk(world, ev.env, is_plugin, r.module.name, marks)
            own = own_walks[r.module.name]
        verdict, walk = _order(walks, r, binder, line, own)
        if verdict == "none":
            continue
        bmod = world.module(binder)
        calls = _live_calls(ev, bmod.path, local)  # type: ignore[union-attr]
        if not calls:
            continue  # the module never calls what it bound: nothing keeps the original
        symbol = f"replacement:{r.owner}.{r.attr}@{binder}"
        bound = f"{binder} binds {r.attr} by name (`from {r.owner} import {r.attr}`, {bmod.path}:{line})"  # type: ignore[union-attr]
        if verdict == "before":
            ev_bind = walk.events[walk.first("mark", binder, line, certain_only=True)]  # type: ignore[union-attr,index]
            via = " -> ".join(ev_bind.chain)
            first = "the patch module itself imports it first" if walk is own else "start-up imports it first"
            message = (f"the plugin replaces {r.owner}.{r.attr}, but {bound} when it is imported, and {first} "
                       f"({via}): its calls at {', '.join(calls[:3])} keep core's original")
            # a warning, also at start-up: nothing raises (core's original still runs there); on
            # plugin 182b75ea84 against 0.29.0/0.30.0 every such order was real, and none of
            # the calls it leaves on the original was shown to run on the plugin's paths
            severity = "warning"
            evidence = (f"{r.module.name} imports {binder} before line {r.line}, whoever imports it" if walk is own
                        else f"the binding runs before the patch in every entry point's start-up that runs it "
                             f"({walk.root})")
            summary = f"patch of {r.attr} does not reach {binder}: it bound the original first"
        else:
            message = (f"the plugin replaces {r.owner}.{r.attr} in a function, and {bound}, imported at start-up: "
                       f"the two cannot be ordered (the patch may run after the binding, and then its calls at "
                       f"{', '.join(calls[:3])} keep core's original)")
            severity = "warning"
            evidence = "the patch runs in a function; when it runs relative to the binding cannot be ordered"
            summary = f"patch of {r.attr} may not reach {binder}: the import order cannot be ordered"
        out.append(Finding(_kind(r.ctx, "replacement"), symbol, r.path, r.line, bmod.path, line,  # type: ignore[union-attr]
                           _why(r.ctx, message), severity=severity,
                           reason=_reason(r.ctx, ev, r.module.name, evidence), summary=summary))
    return out
