"""Which classes below a class define a name: the runtime object may be one of them.

mypy reports `"KVCacheSpec" has no attribute "num_kv_heads"` where a variable is typed by
core's base class, while the object that reaches the line is a subclass that has it
(core's AttentionSpec, the plugin's own spec, the plugin's attention backend). Such a
diagnostic raises only if no subclass defines the name, so it is no confirmed forecast
when one does. Classes are matched by name over both trees (a text pass, then a parse of
the files that can define the name): a name clash can only withhold a confirmation, never
make one.

The same holds for a class of the plugin's own that stands in for core's under core's name
(vllm-ascend's `MultiGroupBlockTable`, which its input batch builds instead of core's): a
diagnostic about core's class, missing attribute or call of a method, says nothing of the
plugin's class when that one defines the member.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

from overlay.gate.signature import Signature, from_ast
from overlay.gate.source import TreeSource

_CLASS = re.compile(rb"^[ \t]*class[ \t]+([A-Za-z_]\w*)[ \t]*\(([^)]*)\)", re.M)
_ANY_CLASS = re.compile(rb"^[ \t]*class[ \t]+([A-Za-z_]\w*)", re.M)
# a name the trees bind otherwise: `def Name`, `Name = ...`, `Name: T = ...` (an alias or a
# factory such as vLLM 0.20.2's SharedFusedMoE): the trees' own, not a foreign base
_ANY_BINDING = re.compile(rb"^[ \t]*(?:def[ \t]+([A-Za-z_]\w*)|([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=))", re.M)
_BASE = re.compile(rb"([A-Za-z_][\w.]*)\s*(?:\[[^\]]*\])?\s*(?:,|$)")


def texts(sources: Iterable[TreeSource]) -> list[bytes]:
    """Every Python file of the trees, read once."""
    return [src.read(path) or b"" for src in sources for path in src.py_files()]


def class_graph(files: Iterable[bytes]) -> dict[str, set[str]]:
    """Class name -> the last names of its bases, over every Python file (a text pass)."""
    graph: dict[str, set[str]] = {}
    for data in files:
        for m in _CLASS.finditer(data):
            bases = {b.rsplit(b".", 1)[-1].decode() for b in _BASE.findall(m.group(2).strip() + b",")}
            graph.setdefault(m.group(1).decode(), set()).update(bases)
    return graph


def class_names(files: Iterable[bytes]) -> set[str]:
    """Every name a class statement defines, with bases or without, and every name bound by
    a `def` or an assignment at the start of a line."""
    names = {m.group(1).decode() for data in files for m in _ANY_CLASS.finditer(data)}
    names |= {(m.group(1) or m.group(2)).decode() for data in files for m in _ANY_BINDING.finditer(data)}
    return names


def descendants(graph: dict[str, set[str]], name: str) -> set[str]:
    """Every class name with `name` among its ancestors (by name), `name` excluded."""
    below: dict[str, set[str]] = {}
    for cls, bases in graph.items():
        for b in bases:
            below.setdefault(b, set()).add(cls)
    out: set[str] = set()
    todo = [name]
    while todo:
        for sub in below.get(todo.pop(), ()):
            if sub not in out and sub != name:
                out.add(sub)
                todo.append(sub)
    return out


def _bound_in_body(stmt: ast.stmt) -> list[str]:
    """The plain names a class-body statement assigns (`x = ...`, `x: T = ...`)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _self_store(node: ast.AST) -> str | None:
    """The attribute `self.x = ...` stores, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
            and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _defines(cls: ast.ClassDef, attr: str) -> bool:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == attr:
            return True
        if attr in _bound_in_body(stmt):
            return True
    return any(_self_store(node) == attr for node in ast.walk(cls))


def definers(files: list[bytes], attr: str, parsed: dict[int, list[ast.ClassDef]] | None = None) -> set[str]:
    """Names of the classes that define `attr` (a member, a body binding or `self.attr = ...`);
    `parsed` keeps each file's classes across calls."""
    needle = attr.encode()
    parsed = {} if parsed is None else parsed
    out: set[str] = set()
    for i, data in enumerate(files):
        if needle not in data:
            continue
        if i not in parsed:
            try:
                parsed[i] = [n for n in ast.walk(ast.parse(data)) if isinstance(n, ast.ClassDef)]
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                parsed[i] = []
        out.update(n.name for n in parsed[i] if _defines(n, attr))
    return out


# the owner `members` reports for a file that names the attribute but does not parse: it may
# define it for any class
UNREADABLE = "<a file that does not parse>"


def _definitions(data: bytes) -> dict[str, list[tuple[str | None, Signature | None]]] | None:
    """Name -> (class or None, signature) of what one file defines: each class's functions
    (a signature), its other bindings and `self.x = ...` stores (None), and the module-level
    functions (no class); None when the file does not parse. Pure."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    out: dict[str, list[tuple[str | None, Signature | None]]] = {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(n.name, []).append((None, from_ast(n)))
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        defs: dict[str, list[Signature]] = {}
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs.setdefault(stmt.name, []).append(from_ast(stmt))
        bound = {name for stmt in cls.body for name in _bound_in_body(stmt)}
        bound |= {attr for node in ast.walk(cls) if (attr := _self_store(node)) is not None}
        for name, sigs in defs.items():
            out.setdefault(name, []).extend((cls.name, sig) for sig in sigs)
        for name in bound - set(defs):
            out.setdefault(name, []).append((cls.name, None))
    return out


# bases that define nothing a diagnostic could name
_EMPTY_BASES = frozenset({"object", "ABC", "Generic", "Protocol", "NamedTuple", "TypedDict", "ABCMeta"})
# where a base named by its last name alone is looked up: the standard library's own
# classes, read by introspection (never the trees' code)
_STDLIB = ("builtins", "collections", "collections.abc", "enum", "typing", "abc", "queue", "threading")


def foreign_may_define(base: str, attr: str) -> bool:
    """May a base class outside both trees, known by its last name, define `attr`? A
    standard-library class answers by introspection; any other (a third-party class the
    trees import) may define anything, so it may."""
    if base in _EMPTY_BASES:
        return False
    import importlib
    for name in _STDLIB:
        cls = getattr(importlib.import_module(name), base, None)
        if isinstance(cls, type):
            return hasattr(cls, attr)
    return True


class Subclasses:
    """`defined_below(owner, attr)`: a subclass of `owner` that defines `attr`, if any;
    `stand_in(owner, attr)`: the plugin's own class named `owner` when it defines `attr`.
    `sources`: core's tree first, then the plugin's."""

    def __init__(self, sources: tuple[TreeSource, ...]) -> None:
        self.sources = sources
        self._files: list[bytes] | None = None
        self._plugin_files: list[bytes] | None = None
        self._graph: dict[str, set[str]] = {}
        self._names: set[str] = set()
        self._own_import: re.Pattern | None = None  # `from <the trees' packages>... import`
        self._from_trees_memo: dict[str, bool] = {}
        self._definers: dict[str, set[str]] = {}
        self._plugin_definers: dict[str, set[str]] = {}
        self._parsed: dict[int, list[ast.ClassDef]] = {}
        self._plugin_parsed: dict[int, list[ast.ClassDef]] = {}
        self._defined: dict[int, dict[str, list] | None] = {}  # file -> name -> (class or None, signature)

    def defined_below(self, owner: str, attr: str, plugin_only: bool = False) -> str | None:
        """`plugin_only`: only a subclass of the plugin's own counts. Without it, a
        subclass whose base lies outside both trees counts when that base may define
        `attr` (core's `FCFSRequestQueue(deque, RequestQueue)` has deque's `popleft`)."""
        self._load()
        below = descendants(self._graph, owner)
        found = sorted(below & self._defining(attr, plugin_only))
        if found:
            return found[0]
        if plugin_only:
            return None
        foreign = sorted(sub for sub in below if any(foreign_may_define(base, attr)
                                                     for base in self._graph.get(sub, ())
                                                     if base not in self._names and not self._from_trees(base)))
        return foreign[0] if foreign else None

    def _load(self) -> None:
        """Every Python file of the trees, read once, with the class graph and the names
        the trees bind."""
        if self._files is None:
            self._files = texts(self.sources)
            self._graph = class_graph(self._files)
            self._names = class_names(self._files)
            packages = sorted({path.split("/")[0] for src in self.sources for path in src.py_files() if "/" in path})
            if packages:
                self._own_import = re.compile(rb"^[ \t]*from[ \t]+(?:%s)(?:\.[\w.]+)?[ \t]+import[ \t]+(\([^)]*|[^\n]*)"
                                              % b"|".join(re.escape(p.encode()) for p in packages), re.M)

    def _from_trees(self, name: str) -> bool:
        """Whether some file imports `name` from the trees' own packages (`from vllm.x import
        SharedFusedMoE` where core no longer has it): not a foreign class, a failing import."""
        if name not in self._from_trees_memo:
            word = re.compile(rb"\b%s\b" % re.escape(name.encode()))
            self._from_trees_memo[name] = self._own_import is not None and any(
                name.encode() in data and any(word.search(m.group(1)) for m in self._own_import.finditer(data))
                for data in self._files or [])
        return self._from_trees_memo[name]

    def hierarchy(self, roots: set[str]) -> set[str]:
        """`roots` and every class below one of them, by name over both trees."""
        self._load()
        out = set(roots)
        for root in roots:
            out |= descendants(self._graph, root)
        return out

    def members(self, attr: str) -> list[tuple[str | None, Signature | None]]:
        """Everything in both trees that answers `x.attr(...)`: (class name, its signature) for
        each class defining `attr` (None when the class binds it otherwise, by an assignment
        or `self.attr = ...`), and (None, signature) for each module-level function of that
        name (a module object answers too). A file naming `attr` that does not parse gives
        (UNREADABLE, None): it may define it anywhere. Each file is parsed once, and only what
        it defines is kept, not its tree."""
        self._load()
        needle = attr.encode()
        found: list[tuple[str | None, Signature | None]] = []
        for i, data in enumerate(self._files or []):
            if needle in data:
                if i not in self._defined:
                    self._defined[i] = _definitions(data)
                defined = self._defined[i]
                found += [(UNREADABLE, None)] if defined is None else defined.get(attr, [])
        return found

    def stand_in(self, owner: str, attr: str) -> str | None:
        return owner if owner in self._defining(attr, plugin_only=True) else None

    def _defining(self, attr: str, plugin_only: bool) -> set[str]:
        if plugin_only:
            if self._plugin_files is None:
                self._plugin_files = texts(self.sources[1:])
            if attr not in self._plugin_definers:
                self._plugin_definers[attr] = definers(self._plugin_files, attr, self._plugin_parsed)
            return self._plugin_definers[attr]
        self._load()
        if attr not in self._definers:
            self._definers[attr] = definers(self._files, attr, self._parsed)
        return self._definers[attr]
