"""Positive evidence that a plugin line runs: what confirms a checker's forecast.

The hand gate's reachability (callers.py, instances.py) is permissive on purpose: code
it cannot rule out counts as reachable, and a finding there is judged by the break. A
checker-only finding is the other way round: a triage list, an error only when the
hand gate *confirms* it (engines.combine). So here only positive evidence counts:
- module or class level of a module start-up loads (startup.py): it runs on import;
- a function called by name from such module-level code, from a plugin function that
  has evidence itself, or from core code the hand gate does not rule out (core's own
  call graph is core's to run: `Callers.reachable`), up to the depth limit;
- a method of a plugin class that something with evidence builds (`Cls(...)`), or that a
  string names whole for core to build (`"pkg.mod.Cls"`, as core takes its worker class,
  or `"pkg.mod:Cls"`, as its model registry does); a dunder runs only on an instance;
- a method of such a built class that overrides a method of its core base which core
  calls by name: core calls it through the base (`model.load_weights(...)`), however
  common the name.
- a method whose name is too common to follow (called in more than COMMON files), when
  the plugin calls it on its own object: through `self` in that class, or through a
  receiver its file only ever builds as that class (`self.model_runner = Runner(...)`).
What the name search cannot see (a callback, a registry, a name called in every file on
objects of unknown class, the depth limit) is no evidence: the finding stays a forecast, and its reason says why.
Nor is a diagnostic about a name the plugin replaces in core (`mod.Cls = AscendCls`,
`Cls.meth = f`): the checker judged core's definition, and what runs is the plugin's; nor
a missing attribute of a class some subclass of which defines it (subclasses.py).
"""

from __future__ import annotations

import ast
import re
from typing import Callable

from overlay.gate import checks
from overlay.gate.callers import COMMON, MAX_DEPTH, Site, function_scopes, innermost, module_name
from overlay.gate.calls import foreign_base_first
from overlay.gate.engine import Cache, Context, collector_paused, context, top_packages
from overlay.gate.index import TreeIndex, absolute_module, dotted
from overlay.gate.scan import try_body_imports
from overlay.gate.source import TreeSource
from overlay.gate.subclasses import Subclasses

Answer = tuple[bool, str]


def judge_sites(core_src: TreeSource, plugin_src: TreeSource, sites: list[tuple[str, int]], *,
                version: str | None = None, cache: Cache | None = None,
                progress: Callable[[str], None] | None = None,
                names: dict[tuple[str, int], frozenset[str]] | None = None,
                missing: dict[tuple[str, int], frozenset[tuple[str, str]]] | None = None,
                called: dict[tuple[str, int], frozenset[tuple[str, str]]] | None = None
                ) -> dict[tuple[str, int], Answer]:
    """For each plugin site (path, line): (evidence that the code holding it runs, what).
    `names`: per site, the names its diagnostics quote; one the plugin replaces in core
    is no evidence (see the module docstring). `missing`: per site, the (class, attribute)
    its diagnostic says the class lacks; a subclass in either tree that defines it is no
    evidence either: the object that reaches the line may be that subclass. `called`: per
    site, the (class, method) whose arguments its diagnostic says do not fit; the plugin's
    own class of that name (a stand-in) that defines the method is no evidence: the object
    may be the plugin's."""
    if not sites:
        return {}
    with collector_paused():
        cache = cache or Cache()
        say = progress or (lambda msg: None)
        plugin_packages = top_packages(plugin_src)
        core_packages = top_packages(core_src) - plugin_packages
        core = TreeIndex(core_src, cache.core, packages=core_packages, asts=cache.asts)
        ctx = context(core_src, plugin_src, core, version, cache, core_packages, plugin_packages, say)
        say(f"judging {len(sites)} checker site(s): does their code run?")
        judge = Liveness(ctx, plugin_src, core)
        replaced = {r.attr for r in ctx.facts.replacements if not r.in_class}
        below = Subclasses((core_src, plugin_src))
        out = {}
        for site in sites:
            mine = sorted((names or {}).get(site, frozenset()) & replaced)
            if mine:
                out[site] = (False, f"the plugin replaces {mine[0]} in core: what runs is its own, not the "
                                    f"definition the checker read")
                continue
            sub = next(((owner, attr, cls) for owner, attr in sorted((missing or {}).get(site, frozenset()))
                        if (cls := below.defined_below(owner, attr))), None)
            if sub:
                out[site] = (False, f"{sub[2]}, a subclass of {sub[0]}, defines {sub[1]}: the object that "
                                    f"reaches the line may be one")
                continue
            own = next(((owner, attr) for owner, attr in sorted((missing or {}).get(site, frozenset())
                                                                | (called or {}).get(site, frozenset()))
                        if below.stand_in(owner, attr)), None)
            if own:
                out[site] = (False, f"the plugin's own class {own[0]} defines {own[1]}: the object that reaches "
                                    f"the line may be the plugin's, not core's")
                continue
            # a subclass of the plugin's that overrides the called method: through another
            # object (`self.quant_method.apply(...)`, typed by core's base) the object may be
            # that subclass; through `self` the plugin's own class still runs core's method
            # (the 310P runner's own _prepare_input_ids left NPUModelRunner's call a real break)
            pairs = sorted((called or {}).get(site, frozenset()))
            foreign = judge.foreign_base(site, pairs)
            if foreign:
                out[site] = (False, foreign)
                continue
            sub = None if not pairs or judge.self_call(*site) else next(
                ((owner, meth, cls) for owner, meth in pairs
                 if (cls := below.defined_below(owner, meth, plugin_only=True))), None)
            out[site] = ((False, f"{sub[2]}, the plugin's subclass of {sub[0]}, defines {sub[1]}: the object "
                                 f"that reaches the line may be one") if sub else judge.site(*site))
        return out


class Liveness:
    def __init__(self, ctx: Context, plugin_src: TreeSource, core: TreeIndex) -> None:
        self.ctx = ctx
        self.plugin_src = plugin_src
        self.core = core
        self.callers = ctx.ev.callers
        self.startup = ctx.ev.startup
        self._trees: dict[str, ast.Module | None] = {}
        self._scopes: dict[str, list | None] = {}
        self._fallbacks: dict[str, dict[int, str]] = {}
        self._try_imports: dict[int, list] | None = None
        self._type_checking: dict[str, frozenset[int]] = {}
        self._lines: dict[str, list[str]] = {}
        self._memo: dict[tuple, Answer] = {}
        self._classes = {(pc.module.name, pc.node.name): pc for pc in ctx.facts.classes}
        self._foreign: dict[tuple, str | None] = {}
        self._handoffs: dict[tuple[str, str], list[tuple[str, int, str]]] | None = None

    def site(self, path: str, line: int) -> Answer:
        module = module_name(path)
        if not self.startup.declared:
            return False, "the plugin declares no entry points: nothing shows what start-up loads"
        if not self.startup.reached(module):
            return False, self.startup.chain(module)
        scopes = self._scopes_of(path)
        if scopes is None:
            return False, "the file does not parse"
        if line in self._type_checking_lines(path):
            return False, "under `if TYPE_CHECKING:`: a type checker reads it, nothing runs it"
        fallback = self._fallback_lines(path).get(line)
        if fallback:
            return False, fallback
        where = innermost(scopes, line)
        if where is None:
            return True, f"module or class level of {module}, which start-up imports"
        _, _, cls, node = where
        return self.function(module, cls, node.name, 0)

    def foreign_base(self, site: tuple[str, int], pairs) -> str | None:
        """Why a `self.meth(...)` the checker resolved on a core class is not proven: the
        enclosing plugin class inherits a class of another vLLM plugin that C3 puts first."""
        if not pairs or not self.self_call(*site):
            return None
        module = module_name(site[0])
        here = [pc for (mod, _), pc in self._classes.items()
                if mod == module and pc.node.lineno <= site[1] <= (pc.node.end_lineno or pc.node.lineno)]
        if not here:
            return None
        pc = max(here, key=lambda c: c.node.lineno)
        for owner, meth in pairs:
            key = (pc.module.name, pc.node.name, pc.node.lineno, meth)
            if key not in self._foreign:  # one method order per class and method, not per site
                self._foreign[key] = foreign_base_first(self.ctx.facts, self.ctx.world, self.ctx.ev, pc.module,
                                                        pc.node, pc.scope.local_imports, meth)
            base = self._foreign[key]
            if base:
                return (f"{pc.node.name} inherits {base}, a class of another vLLM plugin that the method "
                        f"resolution order puts before core's {owner}: it may define {meth}, which the gate "
                        f"cannot read")
        return None

    def self_call(self, path: str, line: int) -> bool:
        """Whether the line calls a method through `self`/`cls`/`super()` (the receiver is
        the running object's own class) rather than through another object."""
        if path not in self._lines:
            self._lines[path] = (self.plugin_src.read(path) or b"").decode("utf-8", "replace").splitlines()
        text = self._lines[path]
        return 0 < line <= len(text) and re.search(r"\b(?:self|cls|super\(\))\.\w+\s*\(", text[line - 1]) is not None

    def _type_checking_lines(self, path: str) -> frozenset[int]:
        """Lines of the bodies of `if TYPE_CHECKING:` (and `typing.TYPE_CHECKING`); the
        checker reads them as running, Python never runs them."""
        if path not in self._type_checking:
            lines: set[int] = set()
            tree = self._tree(path)
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.If) and dotted(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                    for stmt in node.body:
                        lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            self._type_checking[path] = frozenset(lines)
        return self._type_checking[path]

    def _fallback_lines(self, path: str) -> dict[int, str]:
        """Lines of the `except ImportError:` (or ModuleNotFoundError) handlers of a `try`
        whose core imports this core all has: the fallback for other cores never runs here.
        A handler that also catches other errors (`Exception`, bare) may run for them."""
        if path not in self._fallbacks:
            out: dict[int, str] = {}
            if self._try_imports is None:  # once per run
                self._try_imports = try_body_imports(self.ctx.facts.imports)
            starts = {line: tid for tid, (p, line) in self.ctx.facts.try_lines.items()
                      if p == path and tid in self._try_imports}
            tree = self._tree(path) if starts else None
            for node in ast.walk(tree) if tree is not None else ():
                uses = self._try_imports[starts[node.lineno]] \
                    if isinstance(node, ast.Try) and node.lineno in starts else []
                if not uses or not all(checks.lookup_import(self.core, u).status == "found" for u in uses):
                    continue
                why = (f"in the `except ImportError:` fallback of the try at line {node.lineno}, whose "
                       f"import of {uses[0].module} this core has: the fallback does not run")
                for h in node.handlers:
                    kinds = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type] if h.type else []
                    names = {(dotted(k) or "").split(".")[-1] for k in kinds}
                    if names and names <= {"ImportError", "ModuleNotFoundError"}:
                        out.update((n, why) for n in range(h.lineno, (h.end_lineno or h.lineno) + 1))
            self._fallbacks[path] = out
        return self._fallbacks[path]

    def _tree(self, path: str) -> ast.Module | None:
        """The plugin file's syntax tree, parsed once per run (None: it does not parse)."""
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self.plugin_src.read(path) or b"")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._trees[path] = None
        return self._trees[path]

    def _scopes_of(self, path: str) -> list | None:
        if path not in self._scopes:
            tree = self._tree(path)
            self._scopes[path] = function_scopes(tree) if tree is not None else None
        return self._scopes[path]

    def function(self, module: str, cls: str | None, func: str, depth: int) -> Answer:
        """Evidence that the plugin function `func` (of `cls`, or module-level) runs."""
        if func.startswith("__") and func.endswith("__"):
            return self.built(module, cls, depth) if cls else (False, f"{func} is not a method")
        key = ("f", module, cls, func)
        if key in self._memo:
            return self._memo[key]
        if depth >= MAX_DEPTH:
            return False, "the depth limit: no live caller seen within it"
        self._memo[key] = (False, "recursive: no live caller seen")
        files = self.callers.files_calling(func)
        if len(files) > COMMON:
            answer = (False, f"{func} is called in {len(files)} files: too common a name to tell which")
            if cls is not None:
                answer = self._any_live(self._typed_plugin_sites(files, cls, func), depth, answer[1])
        else:
            names = [func, *self.callers.import_aliases(func)]
            sites = [s for n in names for s in self.callers.sites(n) or []
                     if (s.func != func or s.cls != cls) and self._dispatches_here(s, module, cls)]
            answer = self._any_live(sites, depth, f"no caller of {func} that runs is seen by name")
        if not answer[0] and cls is not None:
            answer = self._through_core_base(module, cls, func, depth) or answer
        self._memo[key] = answer
        return answer

    def _dispatches_here(self, s: Site, module: str, cls: str | None) -> bool:
        """Whether a call may reach the plugin's method of `cls`: one through `self` or `cls`
        in core class K runs on an instance of K, so only when K is among the plugin class's
        bases (V0's `Scheduler._get_prompt_limit` calls its own, never the V1 scheduler
        subclass's of that name); one in plugin class K, also when `cls` is among K's bases.
        A class whose hierarchy the gate cannot read may be either."""
        if s.plugin and s.receiver == "super" and cls is not None and s.cls is not None:
            # `super().m(...)` in plugin class K reaches a class after K: one of K's bases
            theirs = self._bases(s.module, s.cls)
            return theirs is None or (module, cls) in theirs
        if cls is None or s.cls is None or s.receiver not in ("self", "cls"):
            return True
        if s.plugin and (s.module, s.cls) == (module, cls):
            return True  # the class's own call (its MRO as read here leaves the class out)
        bases = self._bases(module, cls)
        if not s.plugin:
            return bases is None or (s.module, s.cls) in bases
        # a plugin class K's `self.m(...)` runs on a K (or a subclass of K): it reaches `cls.m`
        # only when one of the two classes is below the other (GLM-Image's processor calling
        # its own `_call_hf_processor` is no evidence for Bagel's processor's)
        if bases is None or (s.module, s.cls) in bases:
            return True
        theirs = self._bases(s.module, s.cls)
        return theirs is None or (module, cls) in theirs

    def _bases(self, module: str, cls: str) -> frozenset[tuple[str, str]] | None:
        """(module, class) of every class in the plugin class's MRO the gate can read;
        None when one cannot be read (any class may then be a base)."""
        key = ("b", module, cls)
        if key not in self._memo:
            pc = self._classes.get((module, cls))
            if pc is None:
                self._memo[key] = None  # type: ignore[assignment]
            else:
                info = self.ctx.world.class_of(pc.module, pc.node)
                mro = checks._linearize(self.ctx.world, pc.module, info, pc.scope.local_imports)
                self._memo[key] = (None if any(b is None for b in mro)  # type: ignore[assignment]
                                   else frozenset((b[0].name, b[1].name) for b in mro))
        return self._memo[key]  # type: ignore[return-value]

    def _typed_plugin_sites(self, files: list[tuple[str, int]], cls: str, func: str) -> list[Site]:
        """For a name too common to follow: the plugin's own calls of it on an object of
        `cls` alone: through `self`/`cls` in that class, or through a receiver every
        assignment of which in its file builds `cls` (`self.model_runner = NPUModelRunner(...)`,
        then `self.model_runner.execute_model(...)`)."""
        out: list[Site] = []
        for path, tree in files:
            if not self.callers.trees[tree][3]:
                continue
            builds = self.callers.receiver_builds(path, tree)
            for s in self.callers.sites_in(path, tree, func):
                if s.receiver in ("self", "cls"):
                    if s.cls == cls and s.func != func:
                        out.append(s)
                elif s.receiver not in ("", "?", "super") and builds.get(s.receiver) == {cls}:
                    out.append(s)
        return out

    def _through_core_base(self, module: str, cls: str, func: str, depth: int) -> Answer | None:
        """Evidence that core calls the plugin's `cls.func` through a core base class that
        declares `func`: the class is built, and core's code calls the name."""
        pc = self._classes.get((module, cls))
        if pc is None:
            return None
        world, is_core = self.ctx.world, self.ctx.ev.is_core
        info = world.class_of(pc.module, pc.node)
        chain = [b for b in checks._linearize(world, pc.module, info, pc.scope.local_imports) if b is not None]
        base = next((b for b in chain if is_core(b[0].name) and func in b[1].methods), None)
        if base is None:
            return None
        # core's CustomOp.forward dispatches to forward_oot without naming it in a call
        names = checks._dispatch_names(func, [b for b in chain if is_core(b[0].name)])
        core_files = [path for name in names for path, tree in self.callers.files_calling(name)
                      if not self.callers.trees[tree][3]]
        if not core_files:
            return None
        built, why = self.built(module, cls, depth)
        if not built:
            return None
        return True, (f"{cls}.{func} overrides core's {base[1].name}.{func}, which core calls "
                      f"({len(core_files)} core file(s), e.g. {core_files[0]}); {why}")

    def built(self, module: str, cls: str, depth: int) -> Answer:
        """Evidence that an instance of the plugin class `cls` exists."""
        key = ("c", module, cls)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = (False, "recursive: nothing live seen building it")
        spellings = [f"{module}{sep}{cls}".encode() for sep in (".", ":")]
        named = next(((path, word) for path, tree in self.callers.all_files() if self.callers.trees[tree][3]
                      for word in spellings if word in self.callers.text(path, tree)), None)
        if named is not None:
            answer = (True, f"{cls} is named as {named[1].decode()} for core to build ({named[0]})")
        elif (registered := self._registration(module, cls) or self._handed_to_core(module, cls)) is not None:
            answer = (True, registered)
        elif depth >= MAX_DEPTH:
            answer = (False, f"the depth limit: nothing live seen building {cls}")
        else:
            files = self.callers.files_calling(cls)
            sites = (self.callers.sites(cls) or []) if len(files) <= COMMON else []
            ok, why = self._any_live(sites, depth, f"nothing live seen building {cls}")
            answer = (ok, f"{cls} is built: {why}" if ok else why)
        self._memo[key] = answer
        return answer

    def _registration(self, module: str, cls: str) -> str | None:
        """Why core builds the plugin class: a registration of it for a core op
        (`CustomOp.register_oot(...)`) in code that runs; None when there is none."""
        for op in self.ctx.ev.oot:
            if op.core and (op.plugin[0].name, op.plugin[1].name) == (module, cls):
                ok, why = self.site(op.reg.module.path, op.reg.line)
                if ok:
                    return (f"{cls} is registered for core's op {op.reg.op} ({op.reg.module.path}:{op.reg.line}, "
                            f"{why or 'which runs'}): core's {op.reg.op}(...) builds it")
        return None

    def _handed_to_core(self, module: str, cls: str) -> str | None:
        """Why core builds the plugin class: code that runs passes the class itself to a core
        `register*` call, a registry core builds it from (`@MULTIMODAL_REGISTRY.register_processor(
        Proc, info=Info)` on a model class, `ModelRegistry.register_model("Arch", Cls)`); None when
        none is seen. The out-of-tree op registry (`register_oot`) has its own rule (_registration)."""
        if self._handoffs is None:
            self._handoffs = {}
            for path, tree in self.callers.all_files():
                if self.callers.trees[tree][3] and path.endswith(".py"):
                    for key, line, func in _handoffs(self._tree(path), module_name(path),
                                                     path.endswith("__init__.py"), self.ctx.ev.is_core):
                        self._handoffs.setdefault(key, []).append((path, line, func))
        for path, line, func in self._handoffs.get((module, cls), ()):
            ok, why = self.site(path, line)
            if ok:
                return (f"{cls} is handed to core's {func} ({path}:{line}, {why or 'which runs'}): core builds it "
                        f"from there")
        return None

    def _any_live(self, sites: list[Site], depth: int, otherwise: str) -> Answer:
        for s in sites:
            ok, why = self._live(s, depth)
            if ok:
                return True, f"called at {s.where()}" + (f" <- {why}" if why else "")
        return False, otherwise

    def _live(self, s: Site, depth: int) -> Answer:
        if not s.plugin:
            return self.callers.reachable(s, depth + 1)[0], ""
        if not self.startup.reached(s.module):
            return False, ""
        if s.func is None:
            return True, ""
        return self.function(s.module, s.cls, s.func, depth + 1)


def _handoffs(tree: ast.Module | None, module: str, package: bool, is_core: Callable[[str], bool]):
    """((module, class), line, callee) for each plugin class passed by name to a core
    `register*` call in one file: the callee's root a name imported from core, the class
    defined in the file or imported from the plugin."""
    if tree is None:
        return
    imported: dict[str, tuple[str, str | None]] = {}  # name -> (module, attribute or None)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = absolute_module(module, package, node.level, node.module)
            for a in node.names:
                imported[a.asname or a.name] = (src, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                imported[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
    local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = dotted(node.func)
        if not func or "." not in func:
            continue
        last = func.rsplit(".", 1)[1]
        root = imported.get(func.split(".")[0])
        if not last.startswith("register") or last == "register_oot" or root is None or not is_core(root[0]):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if not isinstance(arg, ast.Name):
                continue
            if arg.id in local:
                yield (module, arg.id), node.lineno, func
            elif arg.id in imported and imported[arg.id][1] is not None and not is_core(imported[arg.id][0]):
                yield imported[arg.id], node.lineno, func
