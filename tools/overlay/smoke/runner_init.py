"""Build an object through its class's real `__init__` chain, statement by statement
(runs in the composed environment: stdlib only).

The smoke cannot call the Ascend runner's `__init__` as a whole: some statements
need the NPU (a device stream, a HCCL group, a kernel). So each statement of the
plugin's `__init__` runs on its own, in order, with the `__init__`'s own globals
and arguments; `super().__init__(...)` runs core's `__init__` the same way; `if`
tests are evaluated and only the branch taken runs; `with` blocks enter their
context managers. A statement that raises is recorded and the rest go on. Every
attribute a failed statement would have set gets a `NotBuilt` value that says,
when anything uses it, which statement did not run on the CPU and why: so the
object has every attribute its `__init__`s set at this release, read from the
source, and a use of one the CPU could not build fails as the smoke's own.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any, Callable


class NotBuiltError(AttributeError):
    """An attribute whose `__init__` statement did not run on the CPU was used."""


class NotBuilt:
    """The value of an attribute whose `__init__` statement raised on the CPU."""

    def __init__(self, name: str, where: str, error: str):
        object.__setattr__(self, "_why", f"runner.{name} was not built on the CPU: its __init__ statement at "
                                         f"{where} raised {error}")

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise NotBuiltError(object.__getattribute__(self, "_why"))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()

    __call__ = __getitem__ = __iter__ = __len__ = __bool__ = __int__ = __index__ = _fail

    def __repr__(self) -> str:
        return f"<not built: {object.__getattribute__(self, '_why')}>"


@dataclass(frozen=True)
class Skipped:
    """One `__init__` statement that raised: where (file:line) and what."""

    where: str
    error: str
    attributes: tuple[str, ...]


def self_attributes(node: ast.AST, owner: str = "self") -> list[str]:
    """Names of `owner.X` assigned anywhere in `node` (not inside nested functions,
    lambdas or classes), in source order."""
    names: list[str] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        targets: list[ast.AST] = []
        if isinstance(n, ast.Assign):
            targets = list(n.targets)
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
            targets = [n.target]
        elif isinstance(n, (ast.For, ast.AsyncFor)):
            targets = [n.target]
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            targets = [n.optional_vars]
        for target in targets:
            for part in ast.walk(target):
                if (isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name)
                        and part.value.id == owner and part.attr not in names):
                    names.append(part.attr)
        for child in ast.iter_child_nodes(n):
            visit(child)

    for child in ast.iter_child_nodes(node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else [node]:
        visit(child)
    return names


def init_attributes(cls: type) -> list[str]:
    """Every `self.X` the `__init__`s of `cls`'s MRO assign (the source's list)."""
    names: list[str] = []
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None or not inspect.isfunction(init):
            continue
        body = _function_node(init)
        names += [n for n in self_attributes(body, _self_name(body)) if n not in names]
    return names


def _function_node(func: Callable) -> ast.FunctionDef:
    source = textwrap.dedent(inspect.getsource(func))
    node = ast.parse(source).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    _, start = inspect.getsourcelines(func)
    ast.increment_lineno(node, start - node.lineno)
    return node


def _self_name(node: ast.FunctionDef) -> str:
    return node.args.args[0].arg if node.args.args else "self"


def _is_super_init(stmt: ast.stmt) -> ast.Call | None:
    """`super().__init__(...)` as a statement: its call node."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func = stmt.value.func
    if (isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"):
        return stmt.value
    return None


def _short(path: str, line: int) -> str:
    for marker in ("/vllm_ascend/", "/vllm/"):
        if marker in path:
            return f"{marker.strip('/')}/{path.split(marker, 1)[1]}:{line}"
    return f"{path}:{line}"


def _last_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


class _InitRun:
    def __init__(self, obj: Any):
        self.obj = obj
        self.skipped: list[Skipped] = []

    def init(self, klass: type, args: tuple, kwargs: dict) -> None:
        """Run `klass.__init__(obj, *args, **kwargs)` statement by statement."""
        init = vars(klass).get("__init__")
        if init is None or not inspect.isfunction(init):  # inherited or builtin: the next class's
            for base in type(self.obj).__mro__[type(self.obj).__mro__.index(klass) + 1:]:
                if inspect.isfunction(vars(base).get("__init__")):
                    return self.init(base, args, kwargs)
            return None
        bound = inspect.signature(init).bind(self.obj, *args, **kwargs)
        bound.apply_defaults()
        node = _function_node(init)
        path = inspect.getsourcefile(init) or "?"
        namespace = {**init.__globals__, **bound.arguments}
        self.block(node.body, namespace, path, klass)

    def block(self, statements: list[ast.stmt], ns: dict, path: str, klass: type) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.Return):
                return
            self.statement(stmt, ns, path, klass)

    def statement(self, stmt: ast.stmt, ns: dict, path: str, klass: type) -> None:
        owner = next(iter(inspect.signature(vars(klass)["__init__"]).parameters))
        try:
            call = _is_super_init(stmt)
            if call is not None:
                args = [self.eval(a.value if isinstance(a, ast.Starred) else a, ns, path) for a in call.args]
                kwargs = {k.arg: self.eval(k.value, ns, path) for k in call.keywords if k.arg}
                mro = type(self.obj).__mro__
                self.init(mro[mro.index(klass) + 1], tuple(args), kwargs)
                return
            if isinstance(stmt, ast.If):
                branch = stmt.body if self.eval(stmt.test, ns, path) else stmt.orelse
                self.block(branch, ns, path, klass)
                return
            if isinstance(stmt, ast.With):
                self.with_block(stmt, stmt.items, ns, path, klass)
                return
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec"), ns)  # noqa: S102 - its own statement
        except Exception as exc:  # noqa: BLE001 - recorded; the object gets a NotBuilt for it
            where = _short(path, stmt.lineno)
            names = tuple(self_attributes(stmt, owner))
            self.skipped.append(Skipped(where, _last_line(exc), names))
            for name in names:
                if name not in vars(self.obj):
                    setattr(self.obj, name, NotBuilt(name, where, _last_line(exc)))

    def with_block(self, stmt: ast.With, items: list[ast.withitem], ns: dict, path: str, klass: type) -> None:
        if not items:
            self.block(stmt.body, ns, path, klass)
            return
        item = items[0]
        try:
            manager = self.eval(item.context_expr, ns, path)
            value = manager.__enter__()
        except Exception as exc:  # noqa: BLE001 - recorded; the block runs without this context
            self.skipped.append(Skipped(_short(path, item.context_expr.lineno), _last_line(exc), ()))
            self.with_block(stmt, items[1:], ns, path, klass)
            return
        try:
            if item.optional_vars is not None:
                if not isinstance(item.optional_vars, ast.Name):
                    raise NotImplementedError("a with-target that is not a plain name")
                ns[item.optional_vars.id] = value
            self.with_block(stmt, items[1:], ns, path, klass)
        finally:
            manager.__exit__(None, None, None)

    @staticmethod
    def eval(expr: ast.expr, ns: dict, path: str) -> Any:
        return eval(compile(ast.Expression(body=expr), path, "eval"), ns)  # noqa: S307 - its own expression


def build(cls: type, *args: Any, **kwargs: Any) -> tuple[Any, list[Skipped]]:
    """An instance of `cls` made by its `__init__` chain run statement by statement,
    and the statements that raised."""
    obj = object.__new__(cls)
    run = _InitRun(obj)
    run.init(cls, args, kwargs)
    return obj, run.skipped


def summary(skipped: list[Skipped], limit: int = 4) -> str:
    """One phrase for a step's line: how many statements did not run, the first few."""
    if not skipped:
        return "every __init__ statement ran"
    shown = "; ".join(f"{s.where} {s.error}" for s in skipped[:limit])
    more = f"; {len(skipped) - limit} more" if len(skipped) > limit else ""
    return f"{len(skipped)} __init__ statement(s) did not run on the CPU ({shown}{more})"
