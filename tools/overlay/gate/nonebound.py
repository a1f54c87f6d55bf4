"""A name a core module's `__getattr__` answers with None: which plugin uses survive it.

A PEP 562 module `__getattr__` that ends without raising for a name it does not serve
returns None, so `from core_mod import Name` succeeds and binds None (vLLM 0.14.0-0.15.1's
`vllm/transformers_utils/tokenizer.py` serves only `get_tokenizer` that way). The import is
no break by itself; a use that needs a real object is: calling it, reading its attributes,
`isinstance`, a base class, `Name | None` in an annotation that is evaluated. A use in an
annotation that `typing` accepts None in (`x: Name`, `Optional[Name]`), in a string, under
`from __future__ import annotations`, or on a local variable (never evaluated) is harmless.
Pure functions over ASTs.
"""

from __future__ import annotations

import ast

from overlay.gate.scan import flat_statements


def breaking_use(tree: ast.Module, name: str) -> int | None:
    """The line of the first use of the module-level name `name` in `tree` that None does
    not support; None when every use is harmless (see the module docstring)."""
    lazy = any(isinstance(s, ast.ImportFrom) and s.module == "__future__"
               and any(a.name == "annotations" for a in s.names) for s in tree.body)
    harmless: set[int] = set()
    for node in ast.walk(tree):
        for ann, evaluated in _annotations(node):
            if not evaluated or lazy:
                harmless.update(id(n) for n in ast.walk(ann))
            else:
                harmless.update(_none_tolerant(ann))
    lines = [n.lineno for n in ast.walk(tree)
             if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in harmless]
    return min(lines) if lines else None


def _annotations(node: ast.AST):
    """(annotation, evaluated at run time?) of the annotations `node` carries directly."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                yield a.annotation, True
        if node.returns is not None:
            yield node.returns, True
        for stmt in flat_statements(node.body):  # a local variable's annotation is never evaluated
            if isinstance(stmt, ast.AnnAssign):
                yield stmt.annotation, False
    elif isinstance(node, (ast.Module, ast.ClassDef)):
        for stmt in flat_statements(node.body):
            if isinstance(stmt, ast.AnnAssign):
                yield stmt.annotation, True


def _none_tolerant(ann: ast.expr) -> set[int]:
    """Ids of the nodes of an evaluated annotation where None stands in harmlessly: the
    annotation itself, and the members of a subscript (`Optional[X]`, `dict[str, X]`,
    `Callable[[X], Y]`), but not an operand of `|`, an attribute's object or a call."""
    out: set[int] = set()

    def visit(node: ast.expr) -> None:
        if isinstance(node, ast.Name):
            out.add(id(node))
        elif isinstance(node, ast.Constant):
            out.add(id(node))
        elif isinstance(node, ast.Subscript):
            visit(node.slice)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                visit(e)

    visit(ann)
    return out
