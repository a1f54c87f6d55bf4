"""The checker engine's scratch copy of the plugin: its text made checkable (pure).

A type checker run on the plugin as it ships sees little: `# type: ignore` and
`# mypy: ignore-errors` silence it, and every `vllm_version_is("X")` branch is checked
on both sides, so a break in the branch that runs is cancelled by the same text in the
diff. Here each plugin file is rewritten, as text, before the checker reads it:
- suppression comments are removed (`# type: ignore[...]`, `# mypy: ...`,
  `# pyright: ...`, `# pyre-ignore`/`# pyre-fixme`, `# pyrefly: ignore`);
- `vllm_version_is("X")` and exact-match release guards (`vllm.__version__ == "X"`,
  `!=`) become `True` or `False` for the core under test, so the checker treats the
  branch that does not run as unreachable.
Nothing here runs the plugin's code; a file that does not tokenize or parse is left as
it is (the checker reports it on both sides, and the diff cancels it).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from typing import Callable

from overlay.gate.conditions import normalize_version
from overlay.gate.signature import dotted

SUPPRESSION = re.compile(
    r"#\s*(?:type\s*:\s*ignore\b(?:\[[^\]]*\])?|(?:mypy|pyright|pyrefly|basedpyright)\s*:|pyre-(?:ignore|fixme)\b)",
    re.I)

# The torch stub, for a checker that cannot import torch (never: the checker reads no
# installed package). `nn.Module` is a real class, so the plugin's subclasses are checked
# against what they define themselves; whatever else torch offers reads as Any.
MODULE_API = ("forward", "register_buffer", "register_parameter", "register_module", "add_module", "get_submodule",
              "get_parameter", "get_buffer", "parameters", "named_parameters", "buffers", "named_buffers",
              "children", "named_children", "modules", "named_modules", "train", "eval", "to", "cuda", "cpu",
              "half", "float", "bfloat16", "type", "apply", "state_dict", "load_state_dict", "zero_grad",
              "requires_grad_", "extra_repr", "register_forward_hook", "register_forward_pre_hook",
              "register_full_backward_hook")
TORCH_STUB = {
    "torch/__init__.pyi": (
        "from typing import Any\n"
        "from . import nn as nn\n"
        "Tensor = Any\n"
        "dtype = Any\n"
        "device = Any\n"
        "def __getattr__(name: str) -> Any: ...\n"),
    # nn.Module is a real class with its public API and no catch-all `__getattr__`: torch's
    # own answers Tensor | Module for any name, which would hide every attribute a core
    # base class (vLLM's layers are modules) stops setting. What the plugin registers by
    # name (register_buffer("x", ...)) is then reported in both runs, and the diff drops it.
    "torch/nn/__init__.pyi": (
        "from typing import Any\n"
        "class Module:\n"
        "    training: bool\n"
        "    def __init__(self, *args: Any, **kwargs: Any) -> None: ...\n"
        "    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...\n"
        "    def __setattr__(self, name: str, value: Any) -> None: ...\n"
        + "".join(f"    def {name}(self, *args: Any, **kwargs: Any) -> Any: ...\n" for name in MODULE_API)
        + "def __getattr__(name: str) -> Any: ...\n"),
}


def strip_suppressions(text: str) -> str:
    """`text` without the checker-suppression comments (comments only: a string that
    holds `# type: ignore` is left alone)."""
    if not SUPPRESSION.search(text):
        return text
    lines = text.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    cuts: dict[int, list[tuple[int, int]]] = {}
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = SUPPRESSION.search(tok.string)
        if m:
            (row, col), (_, end) = tok.start, tok.end
            cuts.setdefault(row, []).append((col + m.start(), end))
    for row, spans in cuts.items():
        line = lines[row - 1]
        body, nl = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        for start, end in sorted(spans, reverse=True):
            body = body[:start] + body[end:]
        lines[row - 1] = body.rstrip() + nl
    return "".join(lines)


def _str_arg(call: ast.Call) -> str | None:
    if len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Constant) \
            and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def _dotted(node: ast.expr) -> str:
    return dotted(node) or ""


def _guard_value(node: ast.expr, same: Callable[[str], bool]) -> bool | None:
    """True/False for a version test this module pins, None for anything else."""
    if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "vllm_version_is":
        want = _str_arg(node)
        return same(want) if want is not None else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)) \
            and _dotted(node.left) == "vllm.__version__" and isinstance(node.comparators[0], ast.Constant) \
            and isinstance(node.comparators[0].value, str):
        hit = same(node.comparators[0].value)
        return hit if isinstance(node.ops[0], ast.Eq) else not hit
    return None


def pin_versions(text: str, version: str | None) -> tuple[str, int]:
    """(`text` with each version test settled for core `version`, how many were). A test
    over several lines becomes `(True` + its line breaks + `)`, so no line moves."""
    if version is None or ("vllm_version_is" not in text and "__version__" not in text):
        return text, 0
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text, 0
    have = normalize_version(version)
    spans = []
    for node in ast.walk(tree):
        value = _guard_value(node, lambda want: normalize_version(want) == have) \
            if isinstance(node, (ast.Call, ast.Compare)) else None
        if value is not None and node.end_lineno is not None and node.end_col_offset is not None:
            spans.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, value))
    if not spans:
        return text, 0
    lines = [line.encode("utf-8") for line in text.splitlines(keepends=True)]
    done = 0
    taken: list[tuple[int, int, int, int]] = []
    for start, col, end, end_col, value in sorted(spans, reverse=True):
        if any(_overlaps((start, col, end, end_col), t) for t in taken):
            continue  # a test inside a test already settled
        taken.append((start, col, end, end_col))
        word = b"True" if value else b"False"
        if start == end:
            line = lines[start - 1]
            lines[start - 1] = line[:col] + word + line[end_col:]
        else:
            head, tail = lines[start - 1][:col], lines[end - 1][end_col:]
            lines[start - 1] = head + b"(" + word + b"\n"
            for i in range(start, end - 1):
                lines[i] = b"\n"
            lines[end - 1] = b")" + tail
        done += 1
    return b"".join(lines).decode("utf-8"), done


def _constant(test: ast.expr, flags: dict[str, bool] | None = None) -> bool | None:
    """The truth of a test made of True/False alone (as pin_versions leaves them), or of
    names `flags` holds settled, else None."""
    if isinstance(test, ast.Constant) and isinstance(test.value, bool):
        return test.value
    if flags and isinstance(test, ast.Name) and test.id in flags:
        return flags[test.id]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _constant(test.operand, flags)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_constant(v, flags) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else (True if all(v is True for v in values) else None)
        return True if True in values else (False if all(v is False for v in values) else None)
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _bindings(scope: ast.AST) -> Counter:
    """How often each name is bound anywhere under `scope` (nested scopes included: a name
    rebound there is not settled either). A `global`/`nonlocal` counts as a second binding."""
    counts: Counter = Counter()
    for node in ast.walk(scope):
        if node is scope:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] += 1
        elif isinstance(node, ast.arg):
            counts[node.arg] += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                counts[(alias.asname or alias.name).split(".")[0]] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                counts[name] += 2
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            counts[node.name] += 1
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        for arg in ast.walk(scope.args):
            if isinstance(arg, ast.arg):
                counts[arg.arg] += 1
    return counts


def _settled_flags(scope: ast.AST, outer: dict[str, bool]) -> dict[str, bool]:
    """The names a test can read as settled in `scope`: its own names bound exactly once,
    to a settled value (`is_legacy = False`, as pin_versions leaves
    `is_legacy = vllm_version_is("0.10.0")`), and the enclosing scope's that it does not bind."""
    counts = _bindings(scope)
    flags = {name: value for name, value in outer.items() if not counts[name]}
    body = scope.body if isinstance(getattr(scope, "body", None), list) else []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, _SCOPES):
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name) and counts[targets[0].id] == 1:
                    value = _constant(node.value, flags)
                    if value is not None:
                        flags[targets[0].id] = value
    return flags


def _dead_bodies(tree: ast.AST) -> list[list[ast.stmt]]:
    """The bodies of the branches a settled test never takes, outermost first. A test may
    read a flag bound once from a settled test (`is_legacy = False; if is_legacy:`)."""
    out: list[list[ast.stmt]] = []

    def visit(node: ast.AST, flags: dict[str, bool]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):  # a class body settles nothing of its own
                bound = _bindings(child)
                visit(child, {k: v for k, v in flags.items() if not bound[k]})
                continue
            if isinstance(child, _SCOPES):
                visit(child, _settled_flags(child, flags))
                continue
            if isinstance(child, (ast.If, ast.While)):
                try:
                    value = _constant(child.test, flags)
                except RecursionError:  # `not not ... True` nested past the limit: not settled
                    value = None
                body = child.orelse if value is True else child.body if value is False else []
                if body:
                    out.append(body)
            visit(child, flags)

    try:
        visit(tree, _settled_flags(tree, {}))
    except RecursionError:  # nested past the limit: nothing is settled
        return []
    return out


def stub_dead_branches(text: str) -> str:
    """The text with each branch a settled test never takes reduced to `pass`, line numbers
    kept. mypy reads both arms of `if False: def __init__(a) else: def __init__(a, b)` and
    types the class by the first, so a call fitting the arm that runs was reported."""
    if "True" not in text and "False" not in text:
        return text
    try:
        tree = ast.parse(text)
        bodies = _dead_bodies(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    lines = text.splitlines(keepends=True)
    done: list[tuple[int, int]] = []
    for body in bodies:
        first = body[0]
        start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
        end = max(stmt.end_lineno or stmt.lineno for stmt in body)
        if any(a <= start and end <= b for a, b in done):
            continue  # inside a branch already reduced
        head = lines[start - 1]
        indent = head[:first.col_offset]
        if indent.strip(" \t"):
            continue  # the body shares its line with the test (`if False: x = 1`): left as is
        ending = "\r\n" if head.endswith("\r\n") else "\n"
        lines[start - 1] = indent + "pass" + ending
        for i in range(start, end):
            lines[i] = "\r\n" if lines[i].endswith("\r\n") else "\n"
        done.append((start, end))
    return "".join(lines)


def dead_lines(text: str) -> frozenset[int]:
    """Lines of the branches a settled test never takes (`if False:` bodies, `if True:`
    `else`s). mypy still resolves the imports there (its report on
    `if False: from m import gone` stands), so the checker's diagnostics on these lines
    are of code that does not run with this core, and are dropped."""
    if "True" not in text and "False" not in text:
        return frozenset()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    dead: set[int] = set()
    for body in _dead_bodies(tree):
        for stmt in body:
            dead.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return frozenset(dead)


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return (a[0], a[1]) < (b[2], b[3]) and (b[0], b[1]) < (a[2], a[3])


def prepare_text(text: str, version: str | None) -> tuple[str, int, bool]:
    """(checkable text, version tests pinned, whether a suppression was removed)."""
    stripped = strip_suppressions(text)
    pinned, n = pin_versions(stripped, version)
    return (stub_dead_branches(pinned) if n else pinned), n, stripped != text
