"""Grading a forecast by what upstream's maintainers then did (the backcast). Pure.

A gate error found on plugin P against a newer core release R is a forecast: "this site
breaks on R". Once upstream ships a plugin release that declares R, its maintainers'
own changes grade it:
- **changed**: the site (the function or class body holding the finding's line, else the
  line itself) differs in the release, or is gone: the maintainers touched what the gate
  pointed at (the forecast is borne out);
- **unchanged**: the release keeps the site as it was. If the release still shows the same
  finding against the core it declares, upstream ships the break itself (an upstream bug
  the series can carry a fix for); if not, the forecast is not borne out (a likely false
  alarm, or a break upstream fixed elsewhere).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

CHANGED, UNCHANGED, GONE = "changed", "unchanged", "gone"


@dataclass(frozen=True)
class Site:
    """Where a finding sits: the innermost def/class holding its line (qualified name and
    source text), or the line itself at module level."""

    qualname: str
    text: str


@functools.lru_cache(maxsize=32)
def _parsed(source: str) -> ast.Module | None:
    """`source`'s syntax tree, or None when it does not parse. A forward matrix grades
    many findings in one file: it is parsed once (the trees are only read)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def site_of(source: str, line: int) -> Site | None:
    """The innermost function or class of `source` whose span holds `line`, else the
    line's own text; None when the source does not parse or has no such line."""
    tree = _parsed(source)
    if tree is None:
        return None
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return None
    best: tuple[str, ast.AST] | None = None

    def walk(node: ast.AST, prefix: str) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                end = getattr(child, "end_lineno", child.lineno) or child.lineno
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                if start <= line <= end:
                    best = (name, child)
                    walk(child, name + ".")
    walk(tree, "")
    if best is None:
        return Site(f"<module>:{lines[line - 1].strip()}", lines[line - 1].strip())
    name, node = best
    return Site(name, ast.get_source_segment(source, node) or "")


def find_site(source: str, qualname: str) -> Site | None:
    """The def/class `qualname` in `source` (or a module-level line `<module>:TEXT`)."""
    if qualname.startswith("<module>:"):
        wanted = qualname[len("<module>:"):]
        return Site(qualname, wanted) if any(line.strip() == wanted for line in source.splitlines()) else None
    tree = _parsed(source)
    if tree is None:
        return None
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next((c for c in ast.iter_child_nodes(node)
                     if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and c.name == part),
                    None)
        if node is None:
            return None
    return Site(qualname, ast.get_source_segment(source, node) or "")


def backcast(before: str | None, line: int, after: str | None) -> tuple[str, str]:
    """(changed | unchanged | gone, the site's name): what the release did to the site the
    finding at `line` of `before` (the file at the forecast's plugin) points at; `after` is
    that file in the release (None: the file is gone)."""
    site = site_of(before, line) if before is not None else None
    if site is None:
        return (GONE if after is None else CHANGED), "?"
    if after is None:
        return GONE, site.qualname
    there = find_site(after, site.qualname)
    if there is None:
        return GONE, site.qualname
    return (UNCHANGED if _norm(there.text) == _norm(site.text) else CHANGED), site.qualname


def _norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def grade(outcome: str, upstream_still_has_it: bool) -> str:
    """One word for the table: confirmed, upstream-bug or not-borne-out."""
    if outcome in (CHANGED, GONE):
        return "confirmed"
    return "upstream-bug" if upstream_still_has_it else "not-borne-out"
