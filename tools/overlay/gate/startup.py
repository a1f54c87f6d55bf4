"""Which plugin modules run when core loads the plugin: the start-up import graph.

Core loads a plugin through its entry points (`vllm.platform_plugins`,
`vllm.general_plugins`, ... in setup.py, setup.cfg or pyproject.toml, else in the
`<Name>.egg-info/entry_points.txt` an archive built from a wheel carries, or a wheel's own
`<name>-<version>.dist-info/entry_points.txt`), and through
core's own imports of the plugin (vLLM's TPU platform module binds tpu-inference's
`TpuPlatform`; the plugin declares no platform entry point). From those modules the
graph follows every import of a plugin module (at any scope, in the branches that run)
and every dotted string naming one (`"vllm_ascend.worker.worker.NPUWorker"`, the way
platforms name their worker classes). A module no chain reaches is opt-in
(a user must name it in a configuration): a break there is a warning, not an error.
A plugin that declares no entry points, and that core does not import, is taken as
reached everywhere. A configuration file the plugin ships inside its package (vllm-omni's
stage configs name the worker class each stage runs) is one more way in: the modules its
dotted names name run when that configuration is used. A module every chain reaches only
through a load that swallows its failure (`try: ... except Exception: pass` around an import,
vllm-kunlun's import hook) is reached, but its failing to import breaks nothing.
"""

from __future__ import annotations

import ast
import configparser
import re
from collections import deque
from dataclasses import dataclass, field

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli distribution (a dependency there)
    import tomli as tomllib  # type: ignore[no-redef]

from overlay.gate.source import DATA_SUFFIXES, TreeSource

ENTRY = re.compile(r"^\s*([^=\s]+)\s*=\s*([\w.]+)(?::([\w.]+))?")


@dataclass(frozen=True)
class EntryPoint:
    group: str
    name: str
    module: str
    attr: str | None

    def label(self) -> str:
        if self.group == CORE_IMPORT:  # name: the core module that imports it
            return f"core's {self.name} imports {self.module}" + (f".{self.attr}" if self.attr else "")
        if self.group == PACKAGE_DATA:  # name: the data file that names it
            return f"{self.name} names {self.module}" + (f".{self.attr}" if self.attr else "")
        return f"{self.module}:{self.attr}" if self.attr else self.module


def _setup_py(data: bytes) -> list[tuple[str, str]]:
    """(group, "name = module:attr") from a literal `entry_points={...}` in setup.py."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # hostile: no entry points read
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg == "entry_points" and isinstance(kw.value, ast.Dict):
                for k, v in zip(kw.value.keys, kw.value.values):
                    if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                        continue
                    items = v.elts if isinstance(v, (ast.List, ast.Tuple)) else [v]
                    for e in items:
                        if isinstance(e, ast.Constant) and isinstance(e.value, str):
                            out.extend((k.value, line) for line in e.value.splitlines() if line.strip())
    return out


def _pyproject(data: bytes) -> list[tuple[str, str]]:
    try:
        doc = tomllib.loads(data.decode("utf-8", errors="replace"))
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    groups = (doc.get("project") or {}).get("entry-points") or {}
    return [(g, f"{n} = {v}") for g, table in groups.items() if isinstance(table, dict)
            for n, v in table.items() if isinstance(v, str)]


def _setup_cfg(data: bytes) -> list[tuple[str, str]]:
    cfg = configparser.ConfigParser()
    try:
        cfg.read_string(data.decode("utf-8", errors="replace"))
    except configparser.Error:
        return []
    if not cfg.has_section("options.entry_points"):
        return []
    return [(g, line) for g, text in cfg.items("options.entry_points")
            for line in text.splitlines() if line.strip()]


_DIST_NAME = re.compile(r"^Name:[ \t]*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)[ \t]*$", re.MULTILINE)


def _entry_points_txt(data: bytes) -> list[tuple[str, str]]:
    """(group, "name = module:attr") from an entry_points.txt: one section per group."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.optionxform = str  # type: ignore[assignment,method-assign]  # entry point names keep their case
    try:
        cfg.read_string(data.decode("utf-8", errors="replace"))
    except configparser.Error:
        return []
    return [(g, f"{n} = {v}") for g in cfg.sections() for n, v in cfg.items(g)]


def _egg_info(source: TreeSource) -> list[tuple[str, str]]:
    """The entry points of `<Name>.egg-info/entry_points.txt`, Name read from PKG-INFO (how
    setuptools names the folder); a Name that is not a plain distribution name reads as none."""
    meta = source.read("PKG-INFO")
    name = _DIST_NAME.search(meta.decode("utf-8", errors="replace")) if meta else None
    if name is None:
        return []
    data = source.read(f"{re.sub(r'[-.]+', '_', name.group(1))}.egg-info/entry_points.txt")
    return _entry_points_txt(data) if data else []


_DIST_INFO = re.compile(r"^[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+\.dist-info$")


def _dist_info(source: TreeSource) -> list[tuple[str, str]]:
    """The entry points of a wheel's `<name>-<version>.dist-info/entry_points.txt` (at the
    wheel's top; every such folder's, where a wheel has more than one)."""
    found: list[tuple[str, str]] = []
    for path in source.files("", ("entry_points.txt",)):
        folder, sep, leaf = path.partition("/")
        if sep and leaf == "entry_points.txt" and _DIST_INFO.match(folder):
            data = source.read(path)
            found += _entry_points_txt(data) if data else []
    return found


def entry_points(source: TreeSource) -> tuple[EntryPoint, ...]:
    found: list[tuple[str, str]] = []
    for path, read in (("setup.py", _setup_py), ("pyproject.toml", _pyproject), ("setup.cfg", _setup_cfg)):
        data = source.read(path)
        if data:
            found += read(data)
    if not found:  # an archive made from a wheel, or a wheel: its metadata is all that names them
        found = _egg_info(source) or _dist_info(source)
    out = []
    for group, line in found:
        m = ENTRY.match(line)
        if m:
            out.append(EntryPoint(group, m.group(1), m.group(2), m.group(3)))
    return tuple(dict.fromkeys(out))


CORE_IMPORT = "imported by core"  # the group of an entry point that is core's own import
PACKAGE_DATA = "package data"  # a configuration file inside the plugin's package names the module
PROGRAM = "program (opt-in: python -m)"  # a plugin module a user runs (vllm-gaudi's multi-model server)
# program modules that are the plugin's own tooling, not a configuration it supports
_NOT_A_SUPPORTED_PROGRAM = re.compile(r"(?:^|\.)(?:tests?|testing|examples?|tools|experimental|\w*bench\w*)(?:\.|$)")


def runs_as_program(name: str, tree: ast.Module | None) -> bool:
    """The module is a program users start: a package's `__main__`, or a module-level
    `if __name__ == "__main__":`; tests, examples, tools, benchmarks and experiments are not."""
    if tree is None or _NOT_A_SUPPORTED_PROGRAM.search(name):
        return False
    if name.endswith(".__main__"):
        return True
    for stmt in tree.body:
        test = stmt.test if isinstance(stmt, ast.If) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            sides = [test.left, *test.comparators]
            if any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and \
                    any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides):
                return True
    return False


def core_imports(core_src: TreeSource, core_packages: frozenset[str],
                 plugin_packages: frozenset[str]) -> tuple[EntryPoint, ...]:
    """The plugin modules core's own files import (at any scope, as data: the files are
    parsed, never run), one entry point each, named by the importing core module. A
    from-import of a name that is a submodule (`from tpu_inference import tpu_info`) names
    both candidates; `reach` keeps the one the plugin has."""
    out: list[EntryPoint] = []
    needles = [p.encode() for p in sorted(plugin_packages)]
    for pkg in sorted(core_packages):
        for path in core_src.py_files(pkg):
            data = core_src.read(path)
            if not data or not any(n in data for n in needles):
                continue
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            here = path[:-3].replace("/", ".").removesuffix(".__init__")
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    out += [EntryPoint(CORE_IMPORT, here, a.name, None) for a in node.names
                            if a.name.split(".")[0] in plugin_packages]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                        and node.module.split(".")[0] in plugin_packages:
                    for a in node.names:
                        if a.name != "*":
                            out += [EntryPoint(CORE_IMPORT, here, f"{node.module}.{a.name}", None),
                                    EntryPoint(CORE_IMPORT, here, node.module, a.name)]
    return tuple(dict.fromkeys(out))


_DATA_DIRS = re.compile(r"(?:^|/)(?:tests?|testing|examples?|docs?|benchmarks?|\.\w+)/")
DATA_NAMES_MAX = 256  # dotted names read from one data file
DATA_FILES_MAX = 512  # data files read from one package


def package_data(source: TreeSource, plugin_packages: frozenset[str], exists) -> tuple[EntryPoint, ...]:
    """The plugin modules named by dotted strings in the configuration files its packages ship
    (YAML or JSON; tests, examples, docs and benchmarks aside), one entry point each, named by
    the file. The text is data: it is searched, never loaded or run; a name counts only where a
    prefix of it is a module the plugin has (`exists(name)`); what follows is an object in it."""
    out: list[EntryPoint] = []
    for pkg in sorted(plugin_packages):
        pattern = re.compile(rf"(?<![\w.]){re.escape(pkg)}(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")
        for n, path in enumerate(p for p in source.files(pkg, DATA_SUFFIXES) if not _DATA_DIRS.search(p)):
            if n >= DATA_FILES_MAX:
                break
            data = source.read(path)
            if not data or pkg.encode() not in data:
                continue
            names = dict.fromkeys(pattern.findall(data.decode("utf-8", errors="replace")))
            for name in list(names)[:DATA_NAMES_MAX]:
                parts = name.replace(":", ".").split(".")
                for cut in range(len(parts), 1, -1):
                    if exists(".".join(parts[:cut])):
                        attr = ".".join(parts[cut:]) or None
                        out.append(EntryPoint(PACKAGE_DATA, path, ".".join(parts[:cut]), attr))
                        break
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Startup:
    """The modules start-up reaches, each with the chain that reaches it."""

    declared: bool  # the plugin declares entry points
    parent: dict  # module -> the module that first reached it (None for a root)
    roots: dict  # root module -> entry point label
    # the attributes the entry points (and core's own imports) name: core calls these
    # (`register_ops`) though nothing in the plugin's code does
    called: frozenset = frozenset()
    # reached modules every chain to which passes a load that swallows its failure
    # (`try: importlib.import_module(...) except Exception: pass`) -> (path, line) of
    # the first such try: their import-time failure breaks nothing at start-up
    caught: dict = field(default_factory=dict)

    def reached(self, module: str) -> bool:
        return not self.declared or module in self.parent

    def caught_at(self, module: str) -> tuple[str, int] | None:
        """Where the failure to load `module` is swallowed, when no chain reaches it
        without passing such a guard; None otherwise."""
        return self.caught.get(module)

    def chain(self, module: str) -> str:
        if not self.declared:
            return "the plugin declares no entry points: every module counts as loaded"
        if module not in self.parent:
            return (f"{module} is opt-in: no import chain from the plugin's entry points "
                    f"({', '.join(sorted(set(self.roots.values())))}) reaches it")
        names = [module]
        while self.parent.get(names[-1]) is not None and len(names) < 64:
            names.append(self.parent[names[-1]])
        names.reverse()
        return f"loaded at start-up: entry point {self.roots[names[0]]} -> " + " -> ".join(names)


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _loads(module: str, refs: dict[str, set[str]]) -> list[str]:
    """What importing `module` runs: its parent packages, and what it imports or names."""
    return sorted(set(_parents(module)) | refs.get(module, set()))


def reach(points: tuple[EntryPoint, ...], refs: dict[str, set[str]], plugin_packages: frozenset[str],
          exists, caught_edges: dict[tuple[str, str], tuple[str, int]] | None = None) -> Startup:
    """Breadth-first over `refs` (module -> modules it imports or names) from the entry
    point modules of the plugin's own packages; importing a module runs its parent
    packages first. `exists(name)`: whether the plugin has that module. `caught_edges`:
    the edges whose load swallows the failure (scan.caught_loads)."""
    mine = [p for p in points if p.module.split(".")[0] in plugin_packages and exists(p.module)]
    if not mine:
        return Startup(False, {}, {})
    parent: dict[str, str | None] = {}
    roots: dict[str, str] = {}
    queue: deque[str] = deque()
    for p in mine:
        if p.module not in parent:
            parent[p.module] = None
            roots[p.module] = p.label() if p.group == CORE_IMPORT else f"{p.group}: {p.label()}"
            queue.append(p.module)
    while queue:
        mod = queue.popleft()
        for nxt in _loads(mod, refs):
            if nxt not in parent and exists(nxt):
                parent[nxt] = mod
                queue.append(nxt)
    # a package reached first through a child keeps a chain back to a root
    for mod in list(parent):
        if parent[mod] is None and mod not in roots:
            roots[mod] = "?"
    return Startup(True, parent, roots, frozenset(p.attr.split(".")[-1] for p in mine if p.attr),
                   _caught(roots, refs, exists, caught_edges or {}))


def _caught(roots: dict, refs: dict[str, set[str]], exists,
            caught_edges: dict[tuple[str, str], tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """Modules reached only past a swallowing load -> where the first such load is. Pure:
    breadth-first over the edges that let a failure through, then on from there over the
    swallowing ones, each module keeping the try that first guarded its chain."""
    if not caught_edges:
        return {}
    firm = set(roots)
    queue: deque[str] = deque(roots)
    while queue:
        mod = queue.popleft()
        for nxt in _loads(mod, refs):
            if nxt not in firm and exists(nxt) and (mod, nxt) not in caught_edges:
                firm.add(nxt)
                queue.append(nxt)
    out: dict[str, tuple[str, int]] = {}
    queue = deque(sorted(firm))
    while queue:
        mod = queue.popleft()
        for nxt in _loads(mod, refs):
            if nxt in firm or nxt in out or not exists(nxt):
                continue
            where = out.get(mod) or caught_edges.get((mod, nxt))
            if where is not None:
                out[nxt] = where
                queue.append(nxt)
    return out


ALIAS_HOPS = 4  # `register = _register` chains are one or two names long


def _module_getattr_name(tree: ast.Module, attr: str) -> str | None:
    """The module-level name a PEP 562 `def __getattr__(name)` returns for `attr`
    (`if name == "register": return _register`), else None. Pure."""
    hook = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"
                 and n.args.args), None)
    if hook is None:
        return None
    param = hook.args.args[0].arg
    for node in ast.walk(hook):
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
                and {type(test.left), type(test.comparators[0])} == {ast.Name, ast.Constant}:
            name, const = (test.left, test.comparators[0]) if isinstance(test.left, ast.Name) \
                else (test.comparators[0], test.left)
            if name.id == param and const.value == attr:
                ret = next((b for b in node.body if isinstance(b, ast.Return)), None)
                if ret is not None and isinstance(ret.value, ast.Name):
                    return ret.value.id
    return None


def entry_function(tree: ast.Module | None, attr: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The module-level function an entry point's `module:attr` names, as Python resolves the
    attribute: a `def attr`, an alias (`register = _register`), or what the module's PEP 562
    `__getattr__` returns for the name (vllm-metal serves `register` lazily). Pure."""
    if tree is None:
        return None
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    aliases = {t.id: n.value.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name)
               for t in n.targets if isinstance(t, ast.Name)}
    name: str | None = attr
    for _ in range(ALIAS_HOPS):
        if name in defs:
            return defs[name] if name != "__getattr__" else None
        if name in aliases:
            name = aliases[name]
        elif name == attr:  # only the module's own attribute goes through its __getattr__
            name = _module_getattr_name(tree, name)
        else:
            return None
        if name is None:
            return None
    return None


def platform_classes(points: tuple[EntryPoint, ...], module) -> frozenset[str]:
    """Names of the classes the plugin's `vllm.platform_plugins` entry points return, as
    vLLM reads them: a function returning the class's dotted name as a string constant; and
    the names core's own platform modules (`<core>.platforms.*`) import from the plugin.
    `module(name)`: the plugin's index of that module (None when absent)."""
    out: set[str] = {p.attr for p in points if p.group == CORE_IMPORT and p.attr
                     and ".platforms." in f"{p.name}." and p.attr[:1].isupper()}
    for p in points:
        mod = module(p.module) if p.group == "vllm.platform_plugins" and p.attr else None
        fn = entry_function(mod.tree if mod is not None else None, p.attr)
        for node in ast.walk(fn) if fn is not None else ():
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) and re.fullmatch(r"[\w.]+", node.value.value):
                out.add(node.value.value.rsplit(".", 1)[-1])
    return frozenset(out)


STRING_MAX = 300  # a registry entry or a dotted name is short; longer constants are prose


def loaded_strings(modules) -> set[str]:
    """Every short string constant of the given plugin modules (`ModuleInfo`s): the registry
    entries and dotted class names through which core reaches plugin classes by name."""
    out: set[str] = set()
    for mod in modules:
        if mod is None or mod.tree is None:
            continue
        out |= {n.value for n in ast.walk(mod.tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < STRING_MAX}
    return out
