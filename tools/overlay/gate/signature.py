"""Function signatures read from `ast`, and the two compatibility rules on them.

Pure functions only: `accepts_call` (does a callable accept what one call site
passes?) and `covers` (does an override accept every parameter the overridden
method declares?). Each returns the problems as short sentences; empty = fine.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    name: str
    has_default: bool


@dataclass(frozen=True)
class Signature:
    name: str
    line: int
    posonly: tuple[Param, ...]
    args: tuple[Param, ...]  # positional-or-keyword
    vararg: str | None
    kwonly: tuple[Param, ...]
    kwarg: str | None
    decorators: tuple[str, ...] = ()
    # the exception class, when the body (past its docstring) is only a `raise`
    raises: str | None = None

    @property
    def never_called(self) -> bool:
        """Core says the method is never to be called: its body only raises, and not
        NotImplementedError (that one marks an interface for subclasses to implement,
        whose declaration is the contract)."""
        return self.raises is not None and self.raises.split(".")[-1] != "NotImplementedError"

    @property
    def positional(self) -> tuple[Param, ...]:
        return self.posonly + self.args

    @property
    def is_static(self) -> bool:
        return "staticmethod" in self.decorators

    @property
    def is_classmethod(self) -> bool:
        return "classmethod" in self.decorators

    def bound(self) -> "Signature":
        """The signature as seen through an instance or class: first positional dropped."""
        if self.is_static:
            return self
        if self.posonly:
            return _replace(self, posonly=self.posonly[1:])
        if self.args:
            return _replace(self, args=self.args[1:])
        return self  # `def f(*args)`: the receiver lands in *args

    def render(self) -> str:
        parts = [p.name + ("=…" if p.has_default else "") for p in self.posonly]
        if self.posonly:
            parts.append("/")
        parts += [p.name + ("=…" if p.has_default else "") for p in self.args]
        if self.vararg is not None:
            parts.append("*" + self.vararg)
        elif self.kwonly:
            parts.append("*")
        parts += [p.name + ("=…" if p.has_default else "") for p in self.kwonly]
        if self.kwarg is not None:
            parts.append("**" + self.kwarg)
        return f"{self.name}({', '.join(parts)})"


def _replace(sig: Signature, **changes: object) -> Signature:
    fields = {f: getattr(sig, f) for f in Signature.__dataclass_fields__}
    fields.update(changes)
    return Signature(**fields)  # type: ignore[arg-type]


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of Name/Attribute nodes, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def from_ast(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> Signature:
    a = node.args
    positional = a.posonlyargs + a.args
    n_plain_defaults = len(a.defaults)
    first_default = len(positional) - n_plain_defaults
    params = [Param(arg.arg, i >= first_default) for i, arg in enumerate(positional)]
    posonly = tuple(params[:len(a.posonlyargs)])
    args = tuple(params[len(a.posonlyargs):])
    kwonly = tuple(Param(arg.arg, d is not None) for arg, d in zip(a.kwonlyargs, a.kw_defaults))
    raises = None
    if isinstance(node, ast.Lambda):
        name, decorators = "<lambda>", ()
    else:
        name, decorators = node.name, tuple(decorator_name(d) for d in node.decorator_list)
        raises = _raises_only(node.body)
    return Signature(name=name, line=node.lineno, posonly=posonly, args=args,
                     vararg=a.vararg.arg if a.vararg else None, kwonly=kwonly,
                     kwarg=a.kwarg.arg if a.kwarg else None, decorators=decorators, raises=raises)


def _raises_only(body: list[ast.stmt]) -> str | None:
    """The exception a body raises when it does nothing else ('' for a bare or
    computed raise), else None."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return None
    exc = body[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return (dotted(exc) if exc is not None else None) or ""


@dataclass(frozen=True)
class CallShape:
    """What one call site passes: how many positionals, which keywords."""

    line: int
    npos: int
    keywords: tuple[str, ...]
    star: bool  # a *iterable argument: the positional count is open
    dstar: bool  # a **mapping argument: more keywords may come
    # names the **mapping cannot hold: when the call forwards the enclosing function's
    # own **kwargs (and nothing else), every parameter that function names binds its
    # argument itself and never lands in the mapping
    cannot_hold: frozenset[str] = frozenset()
    # a kernel launch `kernel[grid](...)`: the launcher takes options of its own
    # (num_warps, ...) and decorators (`triton.heuristics`, `autotune`) fill parameters
    launch: bool = False
    # the terminal name of each positional argument before any `*iterable` (`x` for `x`,
    # `a.b.x`), None for another expression: what `shifts.py` compares with core's names
    pos_names: tuple[str | None, ...] = ()
    # names the plugin probed core for where it makes the call (`if has_argument(C, "x"):
    # kw["x"] = ...`, `if "x" in inspect.signature(C).parameters: ...`): it passes each one
    # exactly where core takes it, so none is missing, whatever the branch
    guarded: frozenset[str] = frozenset()
    # `a, b = f(...)`: how many names the result is unpacked into (None: not unpacked so)
    unpacked: int | None = None
    # `x = f(...)` with `x` bound once in the function: the attributes read off `x`, each with
    # the line of its first read, outside tests of `x` and tries that catch AttributeError
    result_reads: tuple[tuple[str, int], ...] = ()


# Options a Triton launcher `kernel[grid](...)` takes besides the kernel's parameters.
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                            "warmup", "grid", "stream", "device", "enable_warp_specialization",
                            "num_buffers_warp_spec", "num_consumer_groups", "reg_dec_producer",
                            "reg_inc_consumer", "launch_cooperative_grid", "launch_pdl"})


def call_shape(call: ast.Call, enclosing: Signature | None = None) -> CallShape:
    """The shape of one call; `enclosing`: the innermost function it sits in, if known."""
    star = any(isinstance(a, ast.Starred) for a in call.args)
    npos = sum(1 for a in call.args if not isinstance(a, ast.Starred))
    launch = isinstance(call.func, ast.Subscript)
    keywords = tuple(k.arg for k in call.keywords
                     if k.arg is not None and not (launch and k.arg in LAUNCH_OPTIONS))
    mappings = [k.value for k in call.keywords if k.arg is None]
    cannot_hold: frozenset[str] = frozenset()
    if (enclosing is not None and enclosing.kwarg is not None and len(mappings) == 1
            and isinstance(mappings[0], ast.Name) and mappings[0].id == enclosing.kwarg):
        cannot_hold = frozenset(p.name for p in enclosing.args + enclosing.kwonly)
    pos_names: list[str | None] = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            break
        pos_names.append(a.id if isinstance(a, ast.Name) else a.attr if isinstance(a, ast.Attribute) else None)
    return CallShape(line=call.lineno, npos=npos, keywords=keywords, star=star, dstar=bool(mappings),
                     cannot_hold=cannot_hold, launch=launch, pos_names=tuple(pos_names))


def accepts_call(sig: Signature, call: CallShape) -> list[str]:
    """Why `sig` would raise TypeError for this call (binding rules of CPython)."""
    problems: list[str] = []
    positional = sig.positional
    if call.npos > len(positional) and sig.vararg is None:
        problems.append(f"takes {len(positional)} positional argument(s) but the call passes "
                        f"{call.npos}")
    filled = {p.name for p in positional[:call.npos]}
    by_keyword = {p.name for p in sig.args} | {p.name for p in sig.kwonly}
    for kw in call.keywords:
        if kw in filled and kw in by_keyword:
            problems.append(f"gets multiple values for argument '{kw}'")
        elif kw not in by_keyword and sig.kwarg is None:
            problems.append(f"got an unexpected keyword argument '{kw}'")
        else:
            filled.add(kw)
    if not call.star and not call.dstar and not call.launch:
        missing = [p.name for p in positional + sig.kwonly
                   if not p.has_default and p.name not in filled and p.name not in call.guarded]
        if missing:
            problems.append("is missing required argument(s) " + ", ".join(f"'{m}'" for m in missing))
    return problems


def accepts_open_call(sig: Signature, declared: Signature, call: CallShape) -> list[str]:
    """Why `sig` may fail a call passing `*args` / `**kwargs`, whose contents are unknown.

    What such a call can pass is bounded by the callee core declares (`declared`,
    receiver dropped): `*args` may fill any of its positions after the explicit ones,
    `**kwargs` any of its parameters not passed explicitly (nor in `call.cannot_hold`).
    The stand-in must take each of them the same way, or a call core makes works
    with core's callee and raises TypeError with the plugin's.
    """
    problems: list[str] = []
    dp = declared.positional
    if call.star and sig.vararg is None:
        beyond = [p.name for p in dp[max(call.npos, len(sig.positional)):]]
        if beyond:
            problems.append("does not take core parameter(s) " + ", ".join(f"'{n}'" for n in beyond)
                            + " by position, which the call's *args may fill")
    if call.dstar and sig.kwarg is None:
        filled = {p.name for p in dp[:call.npos]} | set(call.keywords) | call.cannot_hold
        by_keyword = {p.name for p in sig.args + sig.kwonly}
        missing = [p.name for p in declared.args + declared.kwonly
                   if p.name not in filled and p.name not in by_keyword]
        if missing:
            problems.append("does not accept core parameter(s) " + ", ".join(f"'{n}'" for n in missing)
                            + " by keyword, which the call's **kwargs may pass")
    return problems


def covers(plugin: Signature, core: Signature, receiver: bool = True,
           names: bool = True) -> list[str]:
    """Why `plugin` would not accept every call that `core`'s declaration allows.

    With `receiver`, both are methods as declared and the first parameter (self/cls)
    is passed implicitly, so its name does not matter. Positions must line up,
    names must match where a caller may pass by keyword, and the plugin may not
    require anything the core signature leaves optional or does not have.
    """
    problems: list[str] = []
    pp, cp = plugin.positional, core.positional
    plugin_kw = {p.name: p for p in plugin.args + plugin.kwonly}
    skip = 1 if receiver and not core.is_static else 0
    # Name what really changed: when core has more positions and the plugin's names are
    # core's with some left out (core inserted a parameter), report the missing ones
    # where core put them, not the last position that no longer fits.
    plugin_names = [p.name for p in pp[skip:]]
    core_names = [c.name for c in cp[skip:]]
    absent = [n for n in core_names if n not in plugin_names and n not in plugin_kw]
    inserted = (len(cp) > len(pp) and plugin.vararg is None and absent
                and len(core_names) - len(absent) == len(plugin_names)
                and [n for n in core_names if n not in absent] == plugin_names)
    if inserted:
        for n in absent:
            i = core_names.index(n) + skip
            later = "; every later argument lands one position off" if i - skip < len(plugin_names) else ""
            problems.append(f"lacks core parameter '{n}' (position {i}){later}")
    for i, c in enumerate(cp):
        if i == 0 and receiver and not core.is_static:
            continue  # self/cls: always passed positionally, name irrelevant
        positional_ok = i < len(pp) or plugin.vararg is not None
        if inserted and (c.name in absent or not positional_ok or pp[i].name != c.name):
            continue  # explained by the inserted parameter(s) above
        if not positional_ok:
            problems.append(f"does not accept core parameter '{c.name}' (position {i})")
            continue
        if c in core.args:  # callers may pass it by name
            p = plugin_kw.get(c.name)
            if p is None and plugin.kwarg is None and (names or i >= len(pp)):
                problems.append(f"does not accept core parameter '{c.name}' by keyword")
            elif names and i < len(pp) and pp[i].name != c.name and p is not None:
                problems.append(f"has '{pp[i].name}' where core has '{c.name}' at position {i}")
        if c.has_default and i < len(pp) and not pp[i].has_default:
            problems.append(f"requires '{pp[i].name}', which core declares optional")
    for c in core.kwonly:
        if c.name not in plugin_kw and plugin.kwarg is None:
            problems.append(f"does not accept keyword-only core parameter '{c.name}'")
        elif c.name in plugin_kw and c.has_default and not plugin_kw[c.name].has_default:
            problems.append(f"requires '{c.name}', which core declares optional")
    if core.vararg is not None and plugin.vararg is None:
        problems.append(f"does not take *{core.vararg} like core")
    if core.kwarg is not None and plugin.kwarg is None:
        problems.append(f"does not take **{core.kwarg} like core")
    core_names = {p.name for p in cp + core.kwonly}
    for p in pp[len(cp):] + plugin.kwonly:
        if not p.has_default and p.name not in core_names:
            problems.append(f"requires extra parameter '{p.name}' that core callers do not pass")
    return problems
