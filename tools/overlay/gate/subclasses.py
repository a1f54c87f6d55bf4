"""Which classes below a class define a name: the runtime object may be one of them.

mypy reports `"KVCacheSpec" has no attribute "num_kv_heads"` where a variable is typed by
core's base class, while the object that reaches the line is a subclass that has it
(core's AttentionSpec, the plugin's own spec, the plugin's attention backend). Such a
diagnostic raises only if no subclass defines the name, so it is no confirmed forecast
when one does. Classes are matched by name over both trees (a text pass, then a parse of
the files that can define the name): a name clash can only withhold a confirmation, never
make one.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

from overlay.gate.source import TreeSource

_CLASS = re.compile(rb"^[ \t]*class[ \t]+([A-Za-z_]\w*)[ \t]*\(([^)]*)\)", re.M)
_BASE = re.compile(rb"([A-Za-z_][\w.]*)\s*(?:\[[^\]]*\])?\s*(?:,|$)")


def class_graph(sources: Iterable[TreeSource]) -> dict[str, set[str]]:
    """Class name -> the last names of its bases, over every Python file (a text pass)."""
    graph: dict[str, set[str]] = {}
    for src in sources:
        for path in src.py_files():
            data = src.read(path) or b""
            for m in _CLASS.finditer(data):
                bases = {b.rsplit(b".", 1)[-1].decode() for b in _BASE.findall(m.group(2).strip() + b",")}
                graph.setdefault(m.group(1).decode(), set()).update(bases)
    return graph


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


def _defines(cls: ast.ClassDef, attr: str) -> bool:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == attr:
            return True
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
            if isinstance(stmt, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
            return True
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            return True
    return False


def definers(sources: Iterable[TreeSource], attr: str) -> set[str]:
    """Names of the classes that define `attr` (a member, a body binding or `self.attr = ...`)."""
    needle = attr.encode()
    out: set[str] = set()
    for src in sources:
        for path in src.py_files():
            data = src.read(path) or b""
            if needle not in data:
                continue
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            out.update(n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and _defines(n, attr))
    return out


class Subclasses:
    """`defined_below(owner, attr)`: a subclass of `owner` that defines `attr`, if any."""

    def __init__(self, sources: tuple[TreeSource, ...]) -> None:
        self.sources = sources
        self._graph: dict[str, set[str]] | None = None
        self._definers: dict[str, set[str]] = {}

    def defined_below(self, owner: str, attr: str) -> str | None:
        if self._graph is None:
            self._graph = class_graph(self.sources)
        if attr not in self._definers:
            self._definers[attr] = definers(self.sources, attr)
        found = sorted(descendants(self._graph, owner) & self._definers[attr])
        return found[0] if found else None
