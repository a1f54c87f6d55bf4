"""One gate run: index both trees, scan the plugin, run the checks.

`gate_sources` works on any two TreeSources (directories or git commits) and is
what bisection calls at every step; `run_gate` in `overlay.gate` wraps it for two
directories and applies the allowlist.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from overlay.errors import OverlayError
from overlay.gate import checks, classpatches, instances, refusals, selfstate, store
from overlay.gate.abstracts import check_abstract_methods
from overlay.gate.platformstubs import check_platform_stubs, platform_names
from overlay.gate.workerrpc import check_worker_rpcs
from overlay.gate.protocols import check_protocols
from overlay.gate.refusedattrs import check_refused_attributes
from overlay.gate.bindings import check_bindings
from overlay.gate.replacedglobals import check_replaced_globals
from overlay.gate.callers import Callers, TextCache, module_name
from overlay.gate.calls import check_calls
from overlay.gate.conditions import Env, core_version, decide_branch
from overlay.gate.fieldorder import check_field_order
from overlay.gate.heldobjects import check_held_objects
from overlay.gate.oot import check_oot_ops, registered
from overlay.gate.findings import Finding, merge_sites
from overlay.gate.index import ModuleInfo, TreeIndex, qualify
from overlay.gate.scan import PluginFacts, caught_loads, scan_module
from overlay.gate.source import TreeSource, file_limit
from overlay.gate.startup import (PROGRAM, EntryPoint, core_imports, entry_points, package_data, platform_classes, reach,
                                  runs_as_program)
from overlay.gate.subclasses import Subclasses
from overlay.gate.supercalls import super_calls
from overlay.gate.unreached import demote_unreached

# Top-level directories that are never the importable package of a tree.
NOT_PACKAGES = frozenset({"tests", "test", "docs", "doc", "examples", "benchmarks", "tools", "csrc",
                          "cmake", "build", "dist", "scripts", "requirements"})


def tree_id(source: TreeSource) -> str:
    """What names the tree's content (a source without `tree_id` is named by its label)."""
    fn = getattr(source, "tree_id", None)
    return fn() if fn is not None else source.label()


def top_packages(source: TreeSource) -> frozenset[str]:
    """Importable top-level packages of a tree: directories with an __init__.py. A tree that
    holds none is read as PEP 420 namespace packages: each top-level directory with a regular
    package below it (optimum-neuron's `optimum/neuron/__init__.py`, which shares `optimum`
    with other distributions). Only then, so a tree's stray folders of packages (an app, a
    sibling project) never join the regular ones."""
    names = set()
    below = set()
    for path in source.py_files():
        parts = path.split("/")
        if parts[0] in NOT_PACKAGES or parts[-1] != "__init__.py":
            continue
        if len(parts) == 2:
            names.add(parts[0])
        elif parts[0].isidentifier():
            below.add(parts[0])
    return frozenset(names or below)


class Aging(dict):
    """A cache table that knows which of its entries were used since it last aged:
    `age()` keeps those and drops the rest. A process running many gate runs in turn
    (gate-eval's 145 pairings) keeps what the run before used, so neighbouring cores
    still share their unchanged files, without holding every core it ever read (one
    gate-eval process over 73 pairings grew to 18.9 GB with a table that only grew)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.used: set = set()

    def __getitem__(self, key):
        value = super().__getitem__(key)
        self.used.add(key)
        return value

    def get(self, key, default=None):
        if super().__contains__(key):
            self.used.add(key)
            return super().__getitem__(key)
        return default

    def __contains__(self, key) -> bool:
        found = super().__contains__(key)
        if found:
            self.used.add(key)
        return found

    def __setitem__(self, key, value) -> None:
        self.used.add(key)
        super().__setitem__(key, value)

    def setdefault(self, key, default=None):
        self.used.add(key)
        return super().setdefault(key, default)

    def age(self) -> int:
        """Drop the entries unused since the last `age()`; returns how many went."""
        stale = [key for key in self.keys() if key not in self.used]
        for key in stale:
            super().__delitem__(key)
        self.used = set()
        return len(stale)


@dataclass
class Cache:
    """Parsed modules shared across runs (bisect steps, the forward view's releases),
    keyed by content."""

    core: dict[str, ModuleInfo] = field(default_factory=dict)
    plugin: dict[str, ModuleInfo] = field(default_factory=dict)
    text: TextCache = field(default_factory=TextCache)
    asts: dict = field(default_factory=dict)  # sha1 of a file's bytes -> its syntax tree

    @classmethod
    def bounded(cls) -> "Cache":
        """A cache whose every table ages (see Aging): for a process that runs many gate
        runs one after another and calls `age()` between them."""
        text = TextCache(names=Aging(), scopes=Aging(), sites=Aging(), receivers=Aging(), facts=Aging(),
                         scans=Aging())
        return cls(core=Aging(), plugin=Aging(), text=text, asts=Aging())

    def age(self) -> int:
        """Drop what no run used since the last call (only tables that age: a plain
        Cache keeps everything); returns how many entries went."""
        tables = [self.core, self.plugin, self.asts] + [getattr(self.text, f.name)
                                                          for f in dataclasses.fields(self.text)]
        return sum(t.age() for t in tables if isinstance(t, Aging))


@dataclass(frozen=True)
class RawResult:
    findings: tuple[Finding, ...]
    core_version: str | None
    core_files_read: tuple[str, ...]
    plugin_files: int
    seconds: float
    notes: tuple[str, ...] = ()  # plugin files that could not be gated, etc.
    cached: bool = False  # answered from the on-disk cache (unchanged trees)
    loaded: frozenset[str] | None = None  # plugin modules start-up loads (None: no entry points)


# Whether the objects of the last paused stretch wait, frozen, for the next one's start.
_deferred = [False]
# Objects a pause must leave (tracked, in the youngest generation) to be frozen at its
# end: a real tree's run leaves millions; a small one's are cheaper to collect at once.
FREEZE_ABOVE = 200_000


@contextlib.contextmanager
def collector_paused():
    """The syntax trees of ~900 files are millions of long-lived objects: every full
    collection walks them all, which cost a cold run a third of its CPU time. A run
    makes next to no garbage cycles, so collection waits until it is over. Runs that
    share a Cache (the forward view's releases) pause it around all of them: else each
    run's end collects over every tree the cache holds (a tenth of a forward view's
    CPU on the mirror). Nested, only the outermost resumes it.

    Resuming does not collect either: the first collection after a pause walks every
    object made during it (after the forward view's six releases, a tenth of its CPU,
    spent at the very end of a process about to exit). The outermost pause's objects
    are frozen instead (gc.freeze: no collection walks them), and the next outermost
    pause in the same process unfreezes and collects them first, so a process running
    many gate runs (gate-eval, the tests) frees each one's garbage as before, one run
    later, and the last run's end costs nothing. A pause that made few objects (under
    FREEZE_ABOVE: a small tree's run, as in the tests) resumes as before: collecting
    them then is cheap, cheaper than a full collection at the next start."""
    was_enabled = gc.isenabled()
    if was_enabled and _deferred[0]:
        _deferred[0] = False
        gc.unfreeze()
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_count()[0] > FREEZE_ABOVE:
                gc.freeze()
                _deferred[0] = True
            gc.enable()


def gate_sources(core_src: TreeSource, plugin_src: TreeSource, **kwargs) -> RawResult:
    """One gate run (see `_gate_sources`), with the cyclic collector paused."""
    with collector_paused():
        return _gate_sources(core_src, plugin_src, **kwargs)


def _gate_sources(core_src: TreeSource, plugin_src: TreeSource, *, version: str | None = None,
                  cache: Cache | None = None, core_packages: frozenset[str] | None = None,
                  plugin_packages: frozenset[str] | None = None, store_root: Path | None = None,
                  progress: Callable[[str], None] | None = None) -> RawResult:
    """One gate run. `store_root`: the on-disk cache (see store.py): a warm run on the
    same trees answers from it, a cold one fills it. `progress`: called with a short
    line per phase (the CLI prints them on a terminal)."""
    started = time.perf_counter()
    say = progress or (lambda msg: None)
    cache = cache or Cache()
    core_packages = core_packages if core_packages is not None else top_packages(core_src)
    plugin_packages = plugin_packages if plugin_packages is not None else top_packages(plugin_src)
    core_packages = core_packages - plugin_packages
    core = TreeIndex(core_src, cache.core, packages=core_packages, asts=cache.asts)
    ids = (tree_id(core_src), tree_id(plugin_src)) if store_root is not None else ("", "")
    result_key = "|".join([*ids, version or "", ",".join(sorted(core_packages)), ",".join(sorted(plugin_packages)),
                           store.code_digest() if store_root is not None else "", str(file_limit())])
    known = store.load(store_root, "result", result_key)
    if isinstance(known, RawResult):
        say("unchanged trees: answered from the index cache")
        return dataclasses.replace(known, seconds=time.perf_counter() - started, cached=True)
    if store_root is not None and not isinstance(cache.text.names, store.BlobNames):
        # the names each file calls, by content: shared with every tree holding the file
        cache.text.names = store.BlobNames(store_root, cache.text.names)

    ctx = context(core_src, plugin_src, core, version, cache, core_packages, plugin_packages, say)
    facts, world, ev, notes, version = ctx.facts, ctx.world, ctx.ev, ctx.notes, ctx.version
    startup = ev.startup
    say(f"checking {len(facts.imports)} imports, {len(facts.classes)} classes, {len(facts.calls)} calls")
    found = (checks.check_imports(facts, core, ev) + checks.check_overrides(facts, world, ev)
             + checks.check_replacements(facts, world, core, ev) + checks.check_constructors(facts, world, ev)
             + checks.check_attributes(facts, world, ev) + check_calls(facts, world, ev)
             + checks.check_version_guards(facts, ev) + check_bindings(facts, world, ev)
             + check_replaced_globals(facts, world, ev)
             + check_field_order(facts, world, ev) + selfstate.check_self_state(facts, world, ev)
             + check_abstract_methods(facts, world, ev) + check_oot_ops(facts, world, ev)
             + check_held_objects(facts, world, ev) + check_platform_stubs(facts, world, ev)
             + check_worker_rpcs(facts, world, ev)
             + check_protocols(facts, world, ev) + check_refused_attributes(facts, world, ev))
    found = checks.fold_dead_patches(found, facts, world, ev)
    found = demote_unreached(found, world, ev, version)
    unique = merge_sites(sorted(set(found), key=Finding.sort_key))
    notes += skipped_notes(core_src, plugin_src)
    result = RawResult(findings=tuple(unique), core_version=version,
                       core_files_read=tuple(sorted(core.files_read)), plugin_files=facts.files,
                       seconds=time.perf_counter() - started, notes=tuple(notes),
                       loaded=frozenset(startup.parent) if startup.declared else None)
    if store_root is not None:
        if isinstance(cache.text.names, store.BlobNames):
            cache.text.names.flush()
            result = dataclasses.replace(result, notes=result.notes + tuple(cache.text.names.notes()))
        store.save(store_root, "result", result_key, dataclasses.replace(result, notes=tuple(notes)))
    say(f"done in {result.seconds:.1f}s")
    return result


@dataclass
class Context:
    """What every check reads: the scanned plugin, both indexes and the evidence."""

    facts: PluginFacts
    world: TreeIndex
    ev: checks.Evidence
    notes: list[str]
    version: str | None


def context(core_src: TreeSource, plugin_src: TreeSource, core: TreeIndex, version: str | None, cache: Cache,
             core_packages: frozenset[str], plugin_packages: frozenset[str], say: Callable[[str], None]) -> Context:
    """Index both trees, scan the plugin and build the reachability evidence (the part of
    a gate run that the checks and `liveness.judge_sites` share)."""
    def is_core(name: str) -> bool:
        return name.split(".")[0] in core_packages

    say(f"indexing core ({', '.join(sorted(core_packages)) or 'no package'})")
    version = version or core_version(core, next(iter(sorted(core_packages)), "vllm"))
    env_box: list[Env] = []
    # the plugin's `if vllm_version_is(...)` / capability branches are settled for this
    # core while its modules are indexed, so its definitions are the ones that run
    world = TreeIndex(plugin_src, cache.plugin, packages=plugin_packages, other=core,
                      decide=lambda test, mod: decide_branch(test, mod, env_box[0]),
                      variant=f"@{version}@{tree_id(core_src)}", asts=cache.asts)
    # who calls what, from the text of both trees (the dead code is known after the scan)
    callers = Callers([(core_src, core_packages, core, False), (plugin_src, plugin_packages, world, True)],
                      frozenset(), cache.text)
    env = Env(world=world, is_core=is_core, version=version, core_mentions=lambda n: bool(callers.mentions(n)))
    env_box.append(env)
    facts = PluginFacts()
    notes: list[str] = []
    programs: list[EntryPoint] = []
    say(f"scanning the plugin against core {version or '(version unknown)'}")
    for pkg in sorted(plugin_packages):
        for path in plugin_src.py_files(pkg):
            name = path[:-3].replace("/", ".")
            if name.endswith(".__init__"):
                name = name[: -len(".__init__")]
            mod = world.module(name)
            if mod is not None and mod.path == path:
                if mod.syntax_error:
                    notes.append(f"plugin file {path} does not parse ({mod.syntax_error}): not gated")
                try:
                    scan_module(mod, env, facts)
                except RecursionError:
                    notes.append(f"plugin file {path} is nested too deeply to scan: not gated")
                if runs_as_program(name, mod.tree):
                    programs.append(EntryPoint(PROGRAM, name, name, None))
    facts.replacements.extend(classpatches.replacements(facts, world, is_core))
    declared = entry_points(plugin_src)
    groups = frozenset(p.group.split(".")[0] for p in declared)
    if expected_core_package(facts.imported_tops, plugin_packages, groups) not in core_packages:
        raise no_core_package(core_src, facts.imported_tops, plugin_packages, groups)
    points = declared + core_imports(core_src, core_packages, plugin_packages)
    if points:  # a program or a shipped configuration is one more way in; alone it would
        # make every other module opt-in
        points += tuple(programs) + package_data(plugin_src, plugin_packages,
                                                 lambda name: world.module(name) is not None)
    startup = reach(points, facts.refs, plugin_packages, lambda name: world.module(name) is not None,
                    caught_loads(facts))
    callers.dead = dead_code(facts, world, is_core)
    platform = platform_names(facts, platform_classes(points, world.module))
    # the registry names the platform refuses are no picks (instances.picked_by_name)
    callers.refusals = refusals.read(
        ((pc.path, pc.module.tree, pc.node) for pc in facts.classes if pc.module.tree is not None), platform,
        lambda name: any(not callers.trees[t][3] for _, t in callers.files_calling(name)),
        plugin_trees(callers))
    # a core class for another platform, or one only such code builds, never runs here
    plugin_imports = {(u.module, u.name) for u in facts.imports}
    callers.alternative = instances.never_built(callers, plugin_imports,
                                                checks.platform_alternatives(facts, world, is_core, callers))
    callers.class_untouched = instances.only_through_class(callers, plugin_imports)
    replaced: dict[str, set[str]] = {}
    for r in facts.replacements:
        replaced.setdefault(r.owner, set()).add(r.attr)
    ev = checks.Evidence(startup, callers, is_core, replaced, env,
                         platform=platform,
                         classes=Subclasses(tuple(t[0] for t in callers.trees)))
    ev = dataclasses.replace(ev, oot=registered(facts, world, ev))
    return Context(facts, world, ev, notes, version)


def plugin_trees(callers: Callers):
    """Each plugin module's syntax tree, parsed as it is asked for."""
    for src, packages, index, is_plugin in callers.trees:
        for path in (p for pkg in sorted(packages) for p in src.py_files(pkg)) if is_plugin else ():
            mod = index.module(module_name(path))
            if mod is not None and mod.tree is not None and mod.path == path:
                yield mod.tree


def skipped_notes(core_src: TreeSource, plugin_src: TreeSource) -> list[str]:
    """One line per file of either tree the bounded reader refused (a FIFO, a device, a
    link out of the tree, a file over the cap): the gate did not read it."""
    return [f"{role} file {path} {why}: not read, not gated"
            for role, src in (("plugin", plugin_src), ("core", core_src))
            for path, why in sorted(getattr(src, "skipped", {}).items())]


def dead_code(facts: PluginFacts, world: TreeIndex, is_core) -> frozenset[tuple[str, str | None, str]]:
    """(module, class or None, function) of core code that does not run once the plugin is
    in: core methods a plugin subclass overrides, core functions and methods the plugin
    replaces. Core call sites in there do not count against the plugin."""
    dead: set[tuple[str, str | None, str]] = set()
    for pc in facts.classes:
        cls = world.class_of(pc.module, pc.node)
        if not cls.bases:
            continue
        for base in checks._linearize(world, pc.module, cls, pc.scope.local_imports):
            if base is None or not is_core(base[0].name):
                continue
            for meth in (set(cls.methods) & set(base[1].methods)) - super_calls(pc.node):
                dead.add((base[0].name, base[1].name, meth))
    for r in facts.replacements:
        owner = world.resolve_dotted(r.owner)
        if owner is None or _captured(r, world, owner):
            continue
        if owner[0] == "module":
            dead.add((owner[1].name, None, r.attr))  # type: ignore[union-attr]
        elif owner[0] == "class":
            mod, cls = owner[1]  # type: ignore[misc]
            dead.add((mod.name, cls.name, r.attr))
    return frozenset(dead)


def _captured(r, world: TreeIndex, owner) -> bool:
    """Does the plugin keep the original it replaces (`_upstream_init = FusedMoE.__init__`
    before `FusedMoE.__init__ = _init_with_masks`, which calls it)? Then the original's body
    may still run: not dead code. Read from the names the replacing scope binds once to a
    dotted expression (vllm-rbln 0.11.0a1 wraps core's `FusedMoE.__init__`, which builds the
    `MoERunner` whose calls into the plugin's MoE methods are the contract)."""
    for expr in r.scope.aliases.values():
        head, _, attr = expr.rpartition(".")
        if attr != r.attr or not head:
            continue
        target = qualify(r.module, head, r.scope.local_imports)
        found = world.resolve_dotted(target) if target else None
        if found is not None and found[0] == owner[0] and _named(found[1]) == _named(owner[1]):
            return True
    return False


def _named(entity) -> tuple:
    """A resolved module or (module, class) by name, for comparing two resolutions."""
    if isinstance(entity, tuple):
        return tuple(getattr(e, "name", None) for e in entity)
    return (getattr(entity, "name", None),)


def expected_core_package(imported: dict[str, int], plugin_packages: frozenset[str],
                          groups: frozenset[str] = frozenset()) -> str | None:
    """The package the plugin expects core to provide, among the top-level packages it
    imports that are neither its own nor the standard library's: the one its entry points'
    groups name (`vllm` for `vllm.general_plugins`: tpu-inference imports `jax` more often),
    else the one its own name extends (`vllm` for `vllm_ascend`, the naming rule of core
    plugins), else the most imported one. Checking just "any import resolves" is not
    enough: a folder one level too deep (`vllm/`) holds a `ray` package, and the plugin
    imports `ray`."""
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    candidates = [top for top in imported
                  if top not in plugin_packages and top not in stdlib and top != "__future__"]
    if not candidates:
        return None
    return min(candidates, key=lambda top: (top not in groups,
                                            not any(p.startswith(top + "_") for p in plugin_packages),
                                            -imported[top], top))


def no_core_package(core_src: TreeSource, imported: dict[str, int],
                    plugin_packages: frozenset[str], groups: frozenset[str] = frozenset()) -> OverlayError:
    """The error for a core tree that provides nothing the plugin imports (a folder one
    level too deep, the plugin tree passed as core, a --core-prefix that matches nothing):
    gating it would find nothing and report a false OK."""
    name = expected_core_package(imported, plugin_packages, groups)
    what = f"no `{name}` package the plugin imports" if name else "no package the plugin imports"
    folder = f"{name}/" if name else "the core package"
    if core_src.read("__init__.py") is not None:
        hint = "this folder is inside a package: pass the folder that holds " + folder
    elif getattr(core_src, "prefix", None) is not None:
        hint = f"check --core-prefix: it must name the folder inside the repository that holds {folder}"
    else:
        hint = f"pass the core source tree's root, the folder that holds {folder}"
    return OverlayError(f"the core tree holds {what}", path=core_src.label(), hint=hint)
