"""Two engines, one report: the hand gate's findings and the checker's, combined.

The checker (checker.py) is a high-recall triage list; the hand gate is the precise one.
- a hand finding the checker also reports at the same plugin site is `both`: an error,
  confidence high;
- a hand finding alone stays as the hand gate rates it (`hand`, confidence medium);
- a checker finding alone (`checker`) is a warning, a forecast. It first passes the hand
  gate's filters: a site under a guard (`hasattr`, `getattr(.., default)`,
  `__dataclass_fields__`, `inspect.signature`, or a `try` whose handlers catch what the
  diagnostic raises: `except AttributeError` for a missing attribute, not
  `except (TypeError, ValueError)`, nor one that raises again, guards.reraises) or whose
  runtime object is the plugin's own subclass that defines the name is info; a site in a
  file whose patch target is gone is folded into that one patch-target finding; a site
  in a module that start-up does not load has confidence low.
- a forecast the filters confirm is an error (a confirmed forecast, `checker`, confidence
  high): its diagnostic is one that raises whenever the line runs (`RAISES`: a missing
  attribute, a call's arguments, an abstract class built, an unpack of the wrong size), and the hand gate's
  reachability has positive evidence that the code holding the site runs (`runs`:
  liveness.judge_sites; "no caller found" is not evidence). Anything else stays a warning.
Findings are clustered by (rule, message) for the report. Pure, apart from reading the
plugin's files through its TreeSource.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Iterable

from overlay.gate.checker import UNPACK_HEAD, Diagnostic
from overlay.gate.findings import NO_CORE_CALLER, NOT_RUN_WITH_CORE, Finding
from overlay.gate.guards import reraises
from overlay.gate.source import TreeSource

NEAR = 3  # lines between a hand site and a checker site that name the same thing
GUARD_CALLS = ("hasattr", "signature", "getfullargspec")
GUARD_EXCEPTIONS = frozenset({"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError", "Exception",
                              "BaseException", "KeyError", "NameError"})
# a try guards with these; ValueError only what raises it (an unpack: see catches)
TRY_GUARDS = GUARD_EXCEPTIONS | {"ValueError"}
MISSING_ATTRIBUTE = re.compile(r'has no attribute "([A-Za-z_]\w*)"')
NO_ATTRIBUTE = re.compile(r'"([A-Za-z_]\w*)"(?: of "[^"]*")? has no attribute "([A-Za-z_]\w*)"')
QUOTED = re.compile(r'"([A-Za-z_][\w.]*)"')
FORECAST = "the checker alone (a forecast)"
CONFIRMED = "the checker alone, confirmed: it raises whenever the line runs, and the hand gate sees it run"
# (rule, first line) of the diagnostics that raise whenever their line runs: AttributeError
# (an attribute, or a method `super()` no longer finds), TypeError for a call's arguments or
# an abstract class built, ImportError for a module gone, ValueError for an unpack of the wrong size.
# Type mismatches (arg-type, assignment, override, union-attr, ...) may never raise.
RAISES = (
    ("attr-defined", re.compile(r'has no attribute "')),
    ("call-arg", re.compile(r"^(Unexpected keyword argument|Missing positional arguments?|Too many (positional )?"
                            r"arguments|Missing named argument)\b")),
    ("misc", re.compile(r"^Function gets multiple values for keyword argument\b")),
    ("abstract", re.compile(r"^Cannot instantiate abstract class\b")),
    ("import-not-found", re.compile(r"^Cannot find implementation or library stub for module named\b")),
    # `super().name` that no base after the class defines: AttributeError (the lookup skips
    # the instance, so nothing the object holds can answer it)
    ("misc", re.compile(r'^"[A-Za-z_]\w*" undefined in superclass$')),
    # an assignment to a property without a setter (`self.ep_size = n` once core turned the
    # field into a read-only property): AttributeError, nn.Module's __setattr__ included
    ("misc", re.compile(r'^Property "[A-Za-z_]\w*" defined in "[^"]+" is read-only$')),
    # unpacking a fixed-size tuple into another number of names (`a, b = f()` once core's `f`
    # returns three): ValueError, whenever the line runs
    ("misc", UNPACK_HEAD),
    # isinstance(x, f) with a function (a class core turned into a factory): TypeError
    ("arg-type", re.compile(r'^Argument 2 to "(isinstance|issubclass)" has incompatible type "(Callable\[|def |'
                            r'Overload\()')),
    # calling a value of a builtin type whose instances are never callable (a method core
    # turned into a property: `p.get_num_embeds()` once it is a cached_property -> int): TypeError
    ("operator", re.compile(r'^"(int|float|complex|str|bytes|bool|None|(list|dict|tuple|set|frozenset)\[.*\])" '
                            r'not callable$')),
)
# A function as a base class raises when the class statement runs (at import); as an
# annotation it is never evaluated. So this one raises only on a class statement's line.
FUNCTION_AS_TYPE = ("valid-type", re.compile(r'^Function "[^"]+" is not valid as a type'))
# mypy's `X?` is a type it could not resolve (an annotation naming a function, a variable):
# what it says a receiver so typed lacks says nothing of the object at run time.
INVALID_RECEIVER = re.compile(r'^"?[^"\s]+\?"? has no attribute "')


# What a raising diagnostic raises, for a `try` around it: only a handler that catches that
# (or a base of it) guards the line. Exception names a handler may spell for each.
_CAUGHT_AS = {"AttributeError": {"AttributeError"}, "TypeError": {"TypeError"},
              "ImportError": {"ImportError"}, "ModuleNotFoundError": {"ModuleNotFoundError", "ImportError"}}
_CATCH_ALL = frozenset({"Exception", "BaseException"})


def _in_raises(rule: str, head: str) -> bool:
    return any(rule == r and pattern.search(head) for r, pattern in RAISES)


def raised_by(finding: Finding) -> frozenset[str] | None:
    """The exceptions the checker's diagnostic raises when its line runs (any one of them,
    where the line's shape decides: `Module "m" has no attribute` is ImportError in a
    from-import, AttributeError elsewhere); None where it is not one that raises (RAISES)."""
    if not finding.symbol.startswith("type:"):
        return None
    _, rule, head = finding.symbol.split(":", 2)
    if not _in_raises(rule, head):
        return None
    if rule == "attr-defined":
        return frozenset({"AttributeError", "ImportError"}) if head.startswith("Module ") else frozenset({"AttributeError"})
    if rule == "import-not-found":
        return frozenset({"ModuleNotFoundError"})
    if rule == "misc" and ("undefined in superclass" in head or "is read-only" in head):
        return frozenset({"AttributeError"})
    if rule == "misc" and UNPACK_HEAD.search(head):
        return frozenset({"ValueError"})
    return frozenset({"TypeError"})  # a call's arguments, an abstract class built, isinstance with a function


def catches(handlers: frozenset[str], raised: frozenset[str] | None) -> bool:
    """Do `except` clauses naming `handlers` catch the exception raised (one of `raised`)?
    None (not a raising diagnostic): any of the guard exceptions counts, as before."""
    if raised is None:
        return bool(handlers & GUARD_EXCEPTIONS)
    return bool(handlers & _CATCH_ALL) or any(handlers & _CAUGHT_AS.get(r, {r}) for r in raised)


def raises(finding: Finding, shapes: "PluginShapes | None" = None) -> bool:
    """Does the checker's diagnostic raise whenever its line runs? (see RAISES; a
    function used as a type only on a class statement's line, which `shapes` shows)"""
    if not finding.symbol.startswith("type:"):
        return False
    _, rule, head = finding.symbol.split(":", 2)
    if rule == FUNCTION_AS_TYPE[0] and FUNCTION_AS_TYPE[1].search(head):
        return shapes is not None and finding.plugin_line in shapes.class_lines(finding.plugin_path)
    if rule == "attr-defined" and INVALID_RECEIVER.search(head):
        return False
    if rule == "attr-defined" and shapes is not None:
        m = MISSING_ATTRIBUTE.search(head)
        if m and (finding.plugin_line, m.group(1)) in shapes.stores(finding.plugin_path):
            return False  # `obj.attr = value` sets the attribute: nothing to miss
    return _in_raises(rule, head)


def first_line(message: str) -> str:
    return message.split("\n", 1)[0]


def to_findings(diagnostics: Iterable[Diagnostic], against: str) -> list[Finding]:
    """Each new diagnostic as a `type` finding: a forecast until the hand gate agrees."""
    out = []
    for d in diagnostics:
        head = first_line(d.message)
        out.append(Finding("type", f"type:{d.rule}:{head}", d.path, d.line, "", 0, d.message,
                           severity="warning", reason=f"new with core {against}: {FORECAST}",
                           summary=f"[{d.rule}] {head}", engine="checker", confidence="medium"))
    return out


@dataclass
class Shape:
    """What the filters read from one plugin file: guarded line ranges, its classes."""

    # (first line, last line, what guards them, the exceptions a `try`'s handlers name; None: a test)
    guarded: list[tuple[int, int, str, frozenset[str] | None]]
    classes: dict[str, tuple[list[str], set[str]]]  # name -> (base names, names it defines)
    class_lines: frozenset[int] = frozenset()  # lines of class statements' headers (decorators to bases)
    stores: frozenset[tuple[int, str]] = frozenset()  # (line, attribute) an assignment sets: `x.attr = ...`


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return ""


def _guard(test: ast.expr) -> str | None:
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            fn = _name(node.func)
            if fn in GUARD_CALLS or (fn == "getattr" and len(node.args) >= 3):
                return f"{fn}(...)"
        if isinstance(node, ast.Attribute) and node.attr in ("__dataclass_fields__", "__annotations__"):
            return node.attr
    return None


def _end(nodes: list[ast.stmt]) -> int:
    return max((getattr(n, "end_lineno", None) or n.lineno) for n in nodes) if nodes else 0


def shape_of(text: str) -> Shape:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Shape([], {})
    headers: set[int] = set()
    stores: set[tuple[int, str]] = set()
    guarded: list[tuple[int, int, str, frozenset[str] | None]] = []
    classes: dict[str, tuple[list[str], set[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            why = _guard(node.test)
            if why:
                guarded.append((node.lineno, node.end_lineno or node.lineno, why, None))
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
            while targets:
                t = targets.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets.extend(t.elts)
                elif isinstance(t, ast.Starred):
                    targets.append(t.value)
                elif isinstance(t, ast.Attribute):
                    stores.add((t.lineno, t.attr))
        if isinstance(node, ast.Try):
            names = set()
            for h in node.handlers:
                if reraises(h):
                    continue  # it raises again: the line still fails
                if h.type is None:
                    names.add("BaseException")
                for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type] if h.type else []):
                    names.add(_name(t))
            if names & TRY_GUARDS and node.body:
                guarded.append((node.body[0].lineno, _end(node.body), f"try/except {', '.join(sorted(names))}",
                                frozenset(names)))
        elif isinstance(node, ast.ClassDef):
            defined: set[str] = set()
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    defined.add(sub.name)
                elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) \
                        and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                    defined.add(sub.attr)
                elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                    for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                        if isinstance(t, ast.Name):
                            defined.add(t.id)
            classes[node.name] = ([_name(b) for b in node.bases], defined)
            body = node.body[0].lineno if node.body else node.lineno
            headers.update(range(min([node.lineno, *(d.lineno for d in node.decorator_list)]), body))
    return Shape(guarded, classes, frozenset(headers), frozenset(stores))


class PluginShapes:
    """Shapes of the plugin's files, read on demand; its classes across all files."""

    def __init__(self, plugin: TreeSource, files: Iterable[str]):
        self.plugin = plugin
        self.files = sorted(files)
        self._shapes: dict[str, Shape] = {}
        self._classes: dict[str, list[tuple[list[str], set[str]]]] | None = None

    def shape(self, path: str) -> Shape:
        if path not in self._shapes:
            data = self.plugin.read(path)
            self._shapes[path] = shape_of(data.decode("utf-8", "replace")) if data else Shape([], {})
        return self._shapes[path]

    def class_lines(self, path: str) -> frozenset[int]:
        return self.shape(path).class_lines

    def stores(self, path: str) -> frozenset[tuple[int, str]]:
        return self.shape(path).stores

    def guard_at(self, path: str, line: int, raised: frozenset[str] | None = None) -> str | None:
        """What guards the line against the exception raised (one of `raised`; None: any)."""
        for first, last, why, handlers in self.shape(path).guarded:
            if first <= line <= last and (handlers is None or catches(handlers, raised)):
                return why
        return None

    def subclass_defining(self, base: str, attr: str) -> str | None:
        """A plugin class below `base` (by name, through the plugin's own classes) that
        defines `attr`: at run time the object is that class."""
        if self._classes is None:
            self._classes = {}
            for path in self.files:
                for name, entry in self.shape(path).classes.items():
                    self._classes.setdefault(name, []).append(entry)
        below = {base}
        grew = True
        while grew:
            grew = False
            for name, entries in self._classes.items():
                if name not in below and any(set(bases) & below for bases, _ in entries):
                    below.add(name)
                    grew = True
        for name in sorted(below - {base}):
            if any(attr in defined for _, defined in self._classes[name]):
                return name
        return None


def module_of(path: str) -> str:
    name = path[:-3] if path.endswith(".py") else path
    name = name.replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def last_name(symbol: str) -> str:
    """The attribute, function or method a finding's symbol ends with."""
    return re.split(r"[.:]", symbol)[-1]


def _agrees(hand: Finding, chk: Finding) -> bool:
    if hand.plugin_path != chk.plugin_path:
        return False
    if hand.plugin_line == chk.plugin_line:
        return True
    return abs(hand.plugin_line - chk.plugin_line) <= NEAR and last_name(hand.symbol) in QUOTED.findall(chk.message)


def confirm_sites(checked: Iterable[Finding], shapes: "PluginShapes | None" = None) -> list[tuple[str, int]]:
    """The sites whose reachability can confirm a forecast: those that raise (RAISES)."""
    return sorted({(c.plugin_path, c.plugin_line) for c in checked if raises(c, shapes)})


# `"X" has no attribute "a"`, `"type[X]" has no attribute "a"`, `Module has no attribute "a"`
# (an nn.Module): the class the checker read, and the name
OWNER_LACKS = re.compile(r'^(?:"(?:type\[)?([A-Za-z_][\w.]*?)\]?"|(Module)) has no attribute "([A-Za-z_]\w*)"')


# `... in call to "f" of "X"`, `... for "f" of "X"`: the method and the class the checker read
CALL_OF = re.compile(r'(?:in call to|for) "([A-Za-z_]\w*)" of "(?:type\[)?([A-Za-z_][\w.]*?)\]?"')


def missing_on(checked: Iterable[Finding]) -> dict[tuple[str, int], frozenset[tuple[str, str]]]:
    """Per site, the (class, attribute) pairs its missing-attribute diagnostics name."""
    out: dict[tuple[str, int], set[tuple[str, str]]] = {}
    for c in checked:
        m = OWNER_LACKS.match(first_line(c.message))
        if m:
            owner = (m.group(1) or m.group(2)).rsplit(".", 1)[-1]
            out.setdefault((c.plugin_path, c.plugin_line), set()).add((owner, m.group(3)))
    return {k: frozenset(v) for k, v in out.items()}


def called_on(checked: Iterable[Finding]) -> dict[tuple[str, int], frozenset[tuple[str, str]]]:
    """Per site, the (class, method) pairs its call diagnostics name (arguments that do not
    fit a method of that class)."""
    out: dict[tuple[str, int], set[tuple[str, str]]] = {}
    for c in checked:
        m = CALL_OF.search(first_line(c.message))
        if m:
            out.setdefault((c.plugin_path, c.plugin_line), set()).add((m.group(2).rsplit(".", 1)[-1], m.group(1)))
    return {k: frozenset(v) for k, v in out.items()}


def quoted_names(checked: Iterable[Finding]) -> dict[tuple[str, int], frozenset[str]]:
    """Per site, every name its diagnostics quote (dotted names split into their parts)."""
    out: dict[tuple[str, int], set[str]] = {}
    for c in checked:
        words = {part for q in QUOTED.findall(first_line(c.message)) for part in q.split(".")}
        out.setdefault((c.plugin_path, c.plugin_line), set()).update(words)
    return {k: frozenset(v) for k, v in out.items()}


def combine(hand: Iterable[Finding], checked: Iterable[Finding], shapes: PluginShapes,
            loaded: frozenset[str] | None, keep_hand_only: bool = True,
            runs: dict[tuple[str, int], tuple[bool, str]] | None = None) -> list[Finding]:
    """One list from both engines (see the module docstring). `runs`: (path, line) ->
    (evidence that the code holding it runs?, what), from liveness.judge_sites; without it
    no forecast is confirmed."""
    hand = list(hand)
    checked = list(checked)
    matched: set[int] = set()
    out: list[Finding] = []
    for h in hand:
        # an info finding is not a break, whatever else reports the site
        agree = [i for i, c in enumerate(checked) if _agrees(h, c)] if h.severity != "info" else []
        if agree:
            matched.update(agree)
            words = "; ".join(first_line(checked[i].message) for i in agree[:3])
            # Agreeing that code is broken says nothing of whether it runs: a hand warning
            # in a module start-up does not load, on a patch that does nothing, with no core
            # caller seen (the checker's override check sees no caller either), or inside a
            # helper this core never runs (unreached.py) stays one.
            live = h.severity == "error" or (h.kind != "patch-target" and NO_CORE_CALLER not in h.summary + h.message
                                             and NOT_RUN_WITH_CORE not in h.reason
                                             and (loaded is None or module_of(h.plugin_path) in loaded))
            out.append(replace(h, severity="error" if live else h.severity, engine="both", confidence="high",
                               reason=f"{h.reason}; the checker agrees: {words}" if h.reason else
                               f"the checker agrees: {words}"))
        elif keep_hand_only:
            out.append(replace(h, engine="hand", confidence="medium"))
    dead = {h.plugin_path: h for h in hand if h.kind == "patch-target"}
    folded: Counter = Counter()
    for i, c in enumerate(checked):
        if i in matched:
            continue
        if c.plugin_path in dead:
            folded[c.plugin_path] += 1
            continue
        why = shapes.guard_at(c.plugin_path, c.plugin_line, raised_by(c))
        if why:
            out.append(replace(c, severity="info", confidence="low", reason=f"guarded by {why}: the checker alone"))
            continue
        m = NO_ATTRIBUTE.search(first_line(c.message))
        sub = shapes.subclass_defining(m.group(1), m.group(2)) if m else None
        if sub:
            out.append(replace(c, severity="info", confidence="low",
                               reason=f"the runtime object may be the plugin's {sub}, which defines {m.group(2)}"))
            continue
        if loaded is not None and module_of(c.plugin_path) not in loaded:
            out.append(replace(c, confidence="low", reason=c.reason + "; its module is not loaded at start-up"))
            continue
        answer = (runs or {}).get((c.plugin_path, c.plugin_line))  # the hand gate's, when it was asked
        if answer is not None and raises(c, shapes):
            ok, evidence = answer
            evidence = evidence or "no evidence given"
            c = (replace(c, severity="error", confidence="high",
                         reason=c.reason.replace(FORECAST, CONFIRMED) + f" ({evidence})") if ok
                 else replace(c, reason=f"{c.reason}; not confirmed: {evidence}"))
        out.append(c)
    if folded:
        out = [replace(f, message=f"{f.message}; {folded[f.plugin_path]} checker diagnostic(s) in this file "
                                  "are behind this dead patch") if f.kind == "patch-target" and folded.get(f.plugin_path)
               and f.plugin_path in dead and dead[f.plugin_path].symbol == f.symbol else f for f in out]
    return sorted(out, key=Finding.sort_key)


@dataclass(frozen=True)
class Cluster:
    rule: str
    message: str
    count: int
    engines: tuple[str, ...]
    sites: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"rule": self.rule, "message": self.message, "count": self.count, "engines": list(self.engines),
                "sites": list(self.sites)}


def clusters(findings: Iterable[Finding], sites: int = 5) -> list[Cluster]:
    """Checker findings grouped by (rule, message), largest first."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        if f.engine == "hand" or not f.symbol.startswith("type:") and f.engine != "both":
            continue
        if f.symbol.startswith("type:"):
            _, rule, message = f.symbol.split(":", 2)
        else:
            rule, message = f.kind, first_line(f.message)
        groups.setdefault((rule, message), []).append(f)
    out = [Cluster(rule, message, len(fs), tuple(sorted({f.engine for f in fs})),
                   tuple(f"{f.plugin_path}:{f.plugin_line}" for f in fs[:sites]))
           for (rule, message), fs in groups.items()]
    return sorted(out, key=lambda c: (-c.count, c.rule, c.message))
