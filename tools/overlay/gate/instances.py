"""Reachability through instances, computed from the call graph of both trees.

A method runs only on an instance of its class (or of a subclass). A core class none of
whose instances can exist while the plugin runs has no live methods, whatever calls them
by name, a dispatch through a string included (`getattr(self, "commit_scale_up")`). As
vLLM's elastic EP: `ElasticEPScalingExecutor` is built only in the GPU worker's
`__init__`, a class the plugin's platform never runs (see `checks.platform_alternatives`),
so core's only caller of `GPUModelRunner.setup_eplb_from_mapping` cannot run on the NPU.

`never_built(...)` answers, for a core class, why it has no instance or None, and is
chained after the platform answer as `Callers.alternative`. A class counts as built
(None) unless every one of these holds, each found by name in the text of both trees:
- core builds it somewhere by name (`Cls(...)`), or names it in full as a string
  (`"pkg.mod.Cls"`, as core's platforms name their worker for core to build): a class
  nothing names so may be made by reflection or a registry;
- every such construction and string sits in code that cannot run (`Callers.reachable`),
  never at module level;
- the plugin does not import it, and no code uses it other than by calling it (a value,
  a string, `Cls.attr`: a classmethod runs without an instance; a quoted annotation
  `runner: "Cls"` and a class statement's bases pass nothing);
- each class deriving from it has no instance either, by the same rules (another
  platform's `XPUModelRunner(GPUModelRunner)`, built only by `XPUWorker(Worker)`, a
  specialisation of the GPU worker: `checks.platform_alternatives`).

`plugin_function_reachable(...)` follows the same graph upwards from a plugin function:
a call in plugin code can only break when something can call the function around it.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Callable

from overlay.gate.callers import COMMON, MAX_DEPTH, Callers, Site, blank, function_scopes, innermost, module_name
from overlay.gate.refusals import attribute_reads, first_string
from overlay.gate.signature import dotted


def never_built(callers: Callers, plugin_imports: set[tuple[str, str]],
                then: Callable[[str, str], str | None]) -> Callable[[str, str], str | None]:
    """`then(module, cls)` first (another platform's class); else why the core class
    `cls` of `module` has no instance with the plugin in place, or None."""
    memo: dict[tuple[str, str], str | None] = {}

    def why(module: str, cls: str) -> str | None:
        first = then(module, cls)
        if first:
            return first
        key = (module, cls)
        if key in memo:
            return memo[key]
        memo[key] = None  # while deciding: built (a cycle proves nothing)
        memo[key] = _no_instance(callers, plugin_imports, module, cls, why)
        return memo[key]

    return why


def _no_instance(callers: Callers, plugin_imports: set[tuple[str, str]], module: str, cls: str,
                 why: Callable[[str, str], str | None]) -> str | None:
    if (module, cls) in plugin_imports or len(callers.files_calling(cls)) > COMMON:
        return None
    sites = callers.sites(cls) or []
    if any(s.plugin for s in sites):
        return None
    named: list[tuple[str, str | None, str | None, str]] = []
    if _used_otherwise(callers, cls, module):
        # core's platforms name their worker as a string ("pkg.mod.Cls"): such a string
        # in code that cannot run (another platform's) builds nothing either
        found = _named_in_full(callers, module, cls)
        if not found or _used_otherwise(callers, cls, module, ignoring=(f"{module}.{cls}", f"{module}:{cls}")):
            return None
        named = found
    if not sites and not named:
        return None
    # a subclass's instance runs the class's methods: each must have no instance either
    # (`XPUModelRunner(GPUModelRunner)`, built only by another platform's worker)
    for sub_module, sub in derived_by_name(callers, cls):
        if sub_module is None or not why(sub_module, sub):
            return None
    dead = []
    for s in sites:
        ok, reason = callers.reachable(s)
        if ok:
            return None
        dead.append(f"{s.where()} ({reason})")
    for where_module, owner, func, where in named:
        if func is None:
            return None  # module level: whatever reads the name may run
        ok, reason = callers.function_reachable(where_module, owner, func)
        if ok:
            return None
        dead.append(f"{where} as a string ({reason})")
    return f"{cls} is built only at {'; '.join(dead[:2])}: no instance exists with the plugin, so its methods never run"


def _named_in_full(callers: Callers, module: str, cls: str) -> list[tuple[str, str | None, str | None, str]] | None:
    """Where a string constant names the class in full (`"pkg.mod.Cls"`, `"pkg.mod:Cls"`, as
    core's platforms name their worker for core to build): (module, class, function, path:line)
    of each, class and function None at module level. None when a plugin file or a file the
    gate cannot read names it so (the plugin's platform may choose that class)."""
    spellings = (f"{module}.{cls}", f"{module}:{cls}")
    raws = [x.encode() for x in spellings]
    files = callers.files_where("named in full", spellings[0],
                                lambda path, tree: any(r in callers.text(path, tree) for r in raws))
    out: list[tuple[str, str | None, str | None, str]] = []
    for path, tree in sorted(files):
        index = callers.trees[tree][2]
        mod = index.module(module_name(path))
        if callers.trees[tree][3] or mod is None or mod.tree is None or mod.path != path:
            return None
        scopes = function_scopes(mod.tree)
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Constant) and node.value in spellings:
                scope = innermost(scopes, node.lineno)
                out.append((mod.name, scope[2] if scope else None, scope[3].name if scope else None,  # type: ignore[attr-defined]
                            f"{path}:{node.lineno}"))
    return out


_CLASS_STATEMENT = rb"^[ \t]*class[ \t]+(\w+)[ \t]*\([^)]*\b%s\b"


def derived_by_name(callers: Callers, cls: str) -> list[tuple[str | None, str]]:
    """(module, name) of every class statement deriving from `cls` by name in either tree;
    module None for one in the plugin (its instances are the plugin's to make)."""
    derived = re.compile(_CLASS_STATEMENT % re.escape(cls.encode()), re.M)
    raw = cls.encode()
    out: list[tuple[str | None, str]] = []
    found = callers.files_where("derived", cls, lambda path, tree: raw in callers.text(path, tree)
                                and derived.search(callers.text(path, tree)) is not None)
    for path, tree in sorted(found):
        for m in derived.finditer(callers.text(path, tree)):
            out.append((None if callers.trees[tree][3] else module_name(path), m.group(1).decode()))
    return out


def _used_otherwise(callers: Callers, cls: str, module: str | None = None, ignoring: tuple[str, ...] = ()) -> bool:
    """An attribute of the class itself (`Cls.m`), or the class as a value or a string
    anywhere in either tree. With `module`, a core file whose name `cls` is another class
    (its own class statement, or an import from a module where the name is another class:
    V0's `vllm.worker.cpu_model_runner.CPUModelRunner` beside V1's) does not count. The
    string constants `ignoring` (the class named in full) do not count either."""
    word = re.escape(cls.encode())
    attribute = re.compile(rb"\b%s[ \t]*\.[ \t]*[A-Za-z_]" % word)
    raw = cls.encode()
    quoted = tuple(q + x.encode() + q for x in ignoring for q in (b'"', b"'"))

    def used(path: str, tree: int) -> bool:
        data = callers.text(path, tree)
        return raw in data and attribute.search(data) is not None

    if not (callers.any_file("used otherwise", cls, used) or callers.passed_as_value(cls)):
        return False
    files = callers.files_where("used otherwise", cls, used) | callers.value_uses(cls)
    if quoted:
        files = {(path, tree) for path, tree in files
                 if callers.value_use_in(path, tree, cls, quoted)
                 or attribute.search(blank(callers.text(path, tree), quoted)) is not None}
    if module is None:
        return bool(files)
    return any(_names_the_class(callers, path, tree, module, cls) for path, tree in sorted(files))


def _names_the_class(callers: Callers, path: str, tree: int, module: str, cls: str) -> bool:
    """Whether `cls` in this file may be `module`'s class (anything the gate cannot rule out)."""
    index = callers.trees[tree][2]
    here = module_name(path)
    if callers.trees[tree][3] or here == module:
        return True
    mod = index.module(here)
    bindings = mod.bindings.get(cls, []) if mod is not None and mod.path == path else []
    if not bindings:
        return True
    for b in bindings:
        if b.kind == "class":
            continue  # a class of that name of this module's own
        if b.kind == "from" and b.target and b.attr:
            found = index.resolve_dotted(f"{b.target}.{b.attr}")
            if found is not None and found[0] == "class" and found[1][0].name != module:  # type: ignore[index]
                continue  # another module's class of that name
        return True
    return False


def plugin_function_reachable(callers: Callers, module: str, cls: str | None, func: str,
                              depth: int = 0, memo: dict | None = None) -> tuple[bool, str]:
    """Can the plugin function `func` (a method of `cls`, or module-level) be called?
    Its callers by name in both trees: a core one counts when core's code around it can
    run (`Callers.reachable`), a plugin one when the plugin function around it can, up
    to the depth limit. Anything the name search cannot rule out is reachable."""
    memo = {} if memo is None else memo
    key = (module, cls, func)
    if key in memo:
        return memo[key]
    if func.startswith("__") and func.endswith("__"):
        return True, "called implicitly"
    if depth >= MAX_DEPTH:
        return True, "depth limit"
    memo[key] = (True, "recursive")
    files = callers.files_calling(func)
    if len(files) > COMMON:
        result = (True, f"{func} is called in {len(files)} files")
    else:
        names = [func, *callers.import_aliases(func)]
        sites = [s for name in names for s in callers.sites(name) or [] if s.func != func or s.cls != cls]
        live = next((s for s in sites if _site_live(callers, s, depth, memo)), None)
        if live is not None:
            result = (True, f"called at {live.where()}")
        elif not sites or any(callers.passed_as_value(name) for name in names):
            result = (True, f"{func} may be called dynamically")
        else:
            where = ", ".join(sorted({s.where() for s in sites})[:3])
            result = (False, f"{func} is called only from code that cannot run with the plugin ({where})")
    memo[key] = result
    return result


def _site_live(callers: Callers, site: Site, depth: int, memo: dict) -> bool:
    if not site.plugin:
        return callers.reachable(site, depth + 1)[0]
    if site.func is None:
        return True  # module level: runs on import
    return plugin_function_reachable(callers, site.module, site.cls, site.func, depth + 1, memo)[0]


def only_through_class(callers: Callers,
                       plugin_imports: set[tuple[str, str]]) -> Callable[[str, str, str, int], str | None]:
    """`(module, cls, func, depth)`: why core's method `cls.func` cannot run with the plugin in
    place although its name is too common to follow by name (`EplbState.build`: `build` is
    called in 32 files), or None. A method runs on an instance of its class or through the
    class itself (`Cls.func(...)`, `cls.func` inside it), so it cannot run when no code
    that can run touches the class. Every place that names the class, by AST in both trees,
    must be one of:
    - in a function that cannot run (`Callers.function_reachable`);
    - an annotation (it names a type, passes nothing);
    - inside the class's own methods (they run only if something else runs them);
    - `Cls.attr` for another `attr` that is a static method not naming the class, or a
      plain class attribute (no instance, no class object passed on:
      `EplbState.build_initial_global_physical_to_logical_map(...)` in a live layer).
    A class statement deriving from it names it too (its bases are no annotation), and so does
    a string naming it, bare or in full. And: the plugin neither imports nor names it, nothing
    imports it under another name, and it is undecorated but for `dataclass` (a registry
    decorator may build it) with no metaclass. At least one place that names it must sit in
    code that cannot run (a class nothing names may be made by reflection)."""
    memo: dict[tuple[str, str], list | None] = {}

    def answer(module: str, cls: str, func: str, depth: int) -> str | None:
        key = (module, cls)
        if key not in memo:
            memo[key] = _class_references(callers, plugin_imports, module, cls)
        refs = memo[key]
        if not refs:
            return None
        dead: list[str] = []
        for ref in refs:
            if ref.benign_attr is not None and ref.benign_attr != func:
                continue
            if ref.scope is None:
                return None  # module or class level: runs on import
            ok, reason = callers.function_reachable(ref.module, ref.scope[0], ref.scope[1], depth + 1)
            if ok:
                return None
            dead.append(f"{ref.where} ({reason})")
        if not dead:
            return None
        return (f"{cls}.{func} runs only through {cls}, and the only code that touches {cls} cannot run: "
                f"{'; '.join(dead[:2])}")

    return answer


# the one decorator that keeps a class as it is: no registry, no factory
_DATACLASS = re.compile(r"(dataclasses\.)?dataclass")


@dataclass(frozen=True)
class _ClassRef:
    module: str
    where: str  # path:line
    scope: tuple[str | None, str] | None  # (class, function) around it; None at module/class level
    benign_attr: str | None  # `Cls.attr` where attr passes no instance nor the class on


def _class_references(callers: Callers, plugin_imports: set[tuple[str, str]], module: str,
                      cls: str) -> list[_ClassRef] | None:
    """Every place in core that names `cls` of `module` and could touch it, or None where
    the gate cannot see them all (see `only_through_class`)."""
    if (module, cls) in plugin_imports:
        return None
    home = next((index.module(module) for _src, _packages, index, is_plugin in callers.trees
                 if not is_plugin and index.module(module) is not None), None)
    info = home.classes.get(cls) if home is not None else None
    if info is None or info.node is None or info.node.keywords \
            or not all(_DATACLASS.fullmatch(dotted(d.func if isinstance(d, ast.Call) else d) or "")
                       for d in info.node.decorator_list):
        return None
    # after the class's own tests: a scan of every file's text
    aliased = re.compile(rb"\b%s\s+as\s+\w" % re.escape(cls.encode()))
    if callers.any_file("class aliased", cls, lambda path, tree: cls.encode() in callers.text(path, tree)
                        and aliased.search(callers.text(path, tree)) is not None):
        return None  # `import ... Cls as X`: X is not followed
    statics, plain = _static_and_plain(info.node)
    spellings = (f"{module}.{cls}", f"{module}:{cls}")
    word = re.compile(rb"\b%s\b" % re.escape(cls.encode()))
    files = callers.files_where("class named", cls, lambda path, tree: cls.encode() in callers.text(path, tree)
                                and word.search(callers.code(path, tree)) is not None)
    refs: list[_ClassRef] = []
    for path, tree in sorted(files):
        index = callers.trees[tree][2]
        mod = index.module(module_name(path))
        if callers.trees[tree][3] or mod is None or mod.tree is None or mod.path != path:
            return None  # the plugin names it, or a file the gate cannot read
        if mod.name != module and not _names_the_class(callers, path, tree, module, cls):
            continue
        own = info.node if mod.name == module else None
        scopes = callers.scopes(path, tree)
        for node, parent in _mentions(mod.tree, cls, spellings):
            line = node.lineno
            if own is not None and own.lineno <= line <= (own.end_lineno or own.lineno):
                if not _inside_def(own, line):
                    return None  # the class body itself, at import
                continue
            scope = innermost(scopes, line)
            benign = None
            if isinstance(parent, ast.Attribute) and parent.value is node:
                if parent.attr in plain or (parent.attr in statics and not statics[parent.attr]):
                    benign = parent.attr
            refs.append(_ClassRef(mod.name, f"{path}:{line}",
                                  (scope[2], scope[3].name) if scope else None, benign))  # type: ignore[attr-defined]
    return refs


def _static_and_plain(node: ast.ClassDef) -> tuple[dict[str, bool], set[str]]:
    """The class body's static methods (name -> whether its body names the class: it may
    then build one) and its plain attributes (bound to a constant)."""
    statics: dict[str, bool] = {}
    plain: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in stmt.decorator_list) \
                    and len(stmt.decorator_list) == 1:
                statics[stmt.name] = any(isinstance(n, ast.Name) and n.id == node.name
                                         or isinstance(n, ast.Attribute) and n.attr == node.name
                                         for n in ast.walk(stmt))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Constant):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            plain.update(t.id for t in targets if isinstance(t, ast.Name))
    return statics, plain


def _inside_def(node: ast.ClassDef, line: int) -> bool:
    """`line` lies in one of the class body's own functions (not at class level)."""
    return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
               and s.lineno <= line <= (s.end_lineno or s.lineno) for s in node.body)


def _mentions(tree: ast.Module, cls: str, spellings: tuple[str, ...]):
    """(node, parent) of each `cls` name, `.cls` attribute and string naming it (bare or in
    full) outside annotations and import statements, walked with an explicit stack."""
    stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Name) and node.id == cls or isinstance(node, ast.Attribute) and node.attr == cls \
                or isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and (node.value == cls or node.value in spellings):
            yield node, parent
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns"):
                continue  # a type named: nothing passed, nothing built
            items = value if isinstance(value, list) else [value]
            stack.extend((c, node) for c in items if isinstance(c, ast.AST))


# ----------------------------------------------------------------------------- picked by the configuration


def may_derive_from(callers: Callers, sub_module: str, sub: str, module: str, cls: str) -> bool:
    """Can core's class `sub` of `sub_module`, found deriving from `cls` by name
    (`derived_by_name`), derive from `module`'s class? Not where its base of that name
    resolves to another module's class (V0's `vllm.worker.worker.Worker` below V1's
    `vllm.v1.worker.gpu_worker.Worker`). Whatever the index cannot resolve may."""
    index = callers.trees[0][2]
    mod = index.module(sub_module)
    info = mod.classes.get(sub) if mod is not None else None
    if info is None:
        return True
    for expr, base in zip(info.bases, index.bases(mod, info)):  # type: ignore[arg-type]
        if expr is None or expr.rsplit(".", 1)[-1] != cls:
            continue
        if base is None or (base[0].name, base[1].name) == (module, cls):
            return True
    return False


# a string naming a class bare or in full, quoted: `"Cls"`, `"pkg.mod.Cls"`, `"pkg.mod:Cls"`
_QUOTED_NAME = rb"""["'](?:[\w.]*[.:])?%s["']"""
# isinstance and issubclass test a class; they pass it nowhere
_TESTS = ("isinstance", "issubclass")


def picked_by_name(callers: Callers, module: str, cls: str) -> str | None:
    """Where the user's configuration or the plugin picks core's class `cls` of `module`
    (models, LoRA layers and KV connectors are chosen from registries, never by the
    platform), or None. A pick is, in code that can run (module level, or a function
    `Callers.function_reachable` keeps):
    - the bare name as a string in a table: an element of a list, tuple, set or dict, or
      beside another string in a call (`"SarvamMLAForCausalLM": ("sarvam",
      "SarvamMLAForCausalLM")`, `_LazyRegisteredModel("sarvam", "Cls")`);
    - the class itself as a value (`_all_lora_classes = {..., Cls}`, `make(Cls)`);
    - a module-level alias of it (`Alias = Cls`) picked by these same rules;
    and anywhere, a plugin string naming it bare or in full.
    Not picks: the full dotted name in core (how a platform names its worker, and how the
    attention-backend enum lists backends), a string alone (`process_name = "Worker"`), the
    export list, instance tests, comparisons, class bases, subscript indexes, assignment
    targets, `Cls.attr`, annotations, and the class's own body."""
    return _picked(callers, module, cls, set())


def _picked(callers: Callers, module: str, cls: str, seen: set[tuple[str, str]]) -> str | None:
    if (module, cls) in seen:
        return None
    seen.add((module, cls))
    raw = cls.encode()
    quoted = re.compile(_QUOTED_NAME % re.escape(raw))
    plugin = callers.files_where("plugin string", cls, lambda path, tree: callers.trees[tree][3]
                                 and raw in callers.text(path, tree)
                                 and quoted.search(callers.code(path, tree)) is not None)
    if plugin:
        path, _ = sorted(plugin)[0]
        return f"the plugin names {cls} in a string ({path})"
    bare = re.compile(rb"""["']%s["']""" % re.escape(raw))
    files = callers.files_where("bare string", cls, lambda path, tree: not callers.trees[tree][3]
                                and raw in callers.text(path, tree)
                                and bare.search(callers.code(path, tree)) is not None)
    word = re.compile(rb"\b%s\b" % re.escape(raw))
    files |= callers.files_where("named in code", cls, lambda path, tree: not callers.trees[tree][3]
                                 and raw in callers.text(path, tree)
                                 and word.search(callers.code(path, tree)) is not None)
    for path, tree in sorted(files):
        index = callers.trees[tree][2]
        mod = index.module(module_name(path))
        if mod is None or mod.tree is None or mod.path != path:
            continue
        as_value = mod.name == module or _names_the_class(callers, path, tree, module, cls)
        own = [(n.lineno, n.end_lineno or n.lineno) for n in mod.tree.body
               if isinstance(n, ast.ClassDef) and n.name == cls] if mod.name == module else []
        scopes = callers.scopes(path, tree)
        reads = functools.cache(functools.partial(attribute_reads, mod.tree))
        for node, kind, alias, entry in _uses(mod.tree, cls, as_value):
            line = node.lineno
            if any(first <= line <= last for first, last in own):
                continue  # the class's own body: it runs only if the class does
            if entry is not None and callers.refusals.refusing(*entry, reads):
                continue  # the plugin's platform refuses that registry name
            if alias is not None:
                if _picked(callers, mod.name, alias, seen):
                    return f"{cls} is picked as {alias} ({path}:{line})"
                continue
            scope = innermost(scopes, line)
            if scope is None:
                return f"{cls} is named {kind} at {path}:{line}"
            ok, _ = callers.function_reachable(mod.name, scope[2], scope[3].name)  # type: ignore[attr-defined]
            if ok:
                return f"{cls} is named {kind} at {path}:{line}, in {scope[3].name}, which can run"  # type: ignore[attr-defined]
    return None


def _uses(tree: ast.Module, cls: str, as_value: bool):
    """(node, how, alias, entry) for each place in a module that may pick `cls`: `how` says
    which; `alias` is the name a module-level `Alias = Cls` binds (its picks are the
    class's); `entry`, for a string, is (the registry name it is chosen by, a function giving
    that registry's names), see `_registry_entry`."""
    stack: list[tuple[ast.AST, ast.AST | None, ast.AST | None, int]] = [(tree, None, None, 0)]
    while stack:
        node, parent, grand, depth = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue  # the export list names, it passes nothing
            if depth == 1 and isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                    and node.value.id == cls and as_value and all(isinstance(t, ast.Name) for t in targets):
                for t in targets:
                    yield node.value, "as an alias", t.id, None  # type: ignore[union-attr]
                continue
        if isinstance(node, ast.Constant) and node.value == cls:
            if isinstance(parent, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
                yield node, "as a string in a table", None, _registry_entry(tree, node, parent, grand)
            elif isinstance(parent, ast.Call) and node in parent.args \
                    and any(isinstance(a, ast.Constant) and isinstance(a.value, str) and a is not node
                            for a in parent.args):
                yield node, "as a string beside another in a call", None, _registry_entry(tree, node, parent, grand)
        elif as_value and (isinstance(node, ast.Name) and node.id == cls
                           or isinstance(node, ast.Attribute) and node.attr == cls) \
                and isinstance(node.ctx, ast.Load) and _passes(node, parent, grand):
            yield node, "as a value", None, None
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns") or isinstance(node, ast.ClassDef) and name in ("bases", "keywords"):
                continue  # a type named, or a class's bases: nothing passed, nothing built
            items = value if isinstance(value, list) else [value]
            stack.extend((c, node, parent, depth + 1) for c in items if isinstance(c, ast.AST))


def _strings(nodes) -> frozenset[str]:
    return frozenset(n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _registry_entry(tree: ast.Module, node: ast.Constant, parent: ast.AST, grand: ast.AST | None):
    """(the name a registry string is chosen by, a function giving the registry's names, the
    registering function's dotted name for a call) or None. A dict's key, for the key or a string in its value (`"SarvamMLAForCausalLM":
    ("sarvam", "SarvamMLAForCausalLM")`), the dict's keys its names; a list, tuple or set's
    string, the collection's strings its names; a call's first string argument
    (`register_connector("Name", "module", "Class")`), the first strings of every call to
    the same function in the module its names."""
    if isinstance(parent, ast.Dict):
        keys = parent.keys
        if node in keys:
            name = node.value
        else:
            value = parent.values.index(node) if node in parent.values else None
            key = keys[value] if value is not None else None
            name = key.value if isinstance(key, ast.Constant) else None
        return (name, lambda: _strings(keys), None) if isinstance(name, str) else None
    if isinstance(parent, (ast.List, ast.Tuple, ast.Set)):
        if isinstance(grand, ast.Dict) and parent in grand.values:
            key = grand.keys[grand.values.index(parent)]
            keys = grand.keys
            return (key.value, lambda: _strings(keys), None) \
                if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        elts = parent.elts
        return node.value, lambda: _strings(elts), None
    if isinstance(parent, ast.Call):
        first = first_string(parent)
        callee = dotted(parent.func)
        if first is None or not callee:
            return None

        def names() -> frozenset[str]:
            calls = (n for n in ast.walk(tree) if isinstance(n, ast.Call) and dotted(n.func) == callee)
            return frozenset(name for name in map(first_string, calls) if name is not None)
        return first, names, callee
    return None


def _passes(node: ast.AST, parent: ast.AST | None, grand: ast.AST | None) -> bool:
    """Does this load of the class hand it on (a value), rather than call it, test for it,
    compare it, index with it or read an attribute of it?"""
    if isinstance(parent, ast.Call):
        return node is not parent.func and dotted(parent.func) not in _TESTS
    if isinstance(parent, ast.Tuple) and isinstance(grand, ast.Call) and dotted(grand.func) in _TESTS:
        return False
    if isinstance(parent, (ast.Compare, ast.Subscript)):
        return False
    if isinstance(parent, ast.Attribute):
        return False  # `Cls.attr`
    return True
