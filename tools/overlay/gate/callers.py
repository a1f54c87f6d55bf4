"""Who calls what, across both trees, found by name: the evidence behind a finding.

A finding is only worth an error when core's code can actually reach the break.
`Callers` answers two questions from the source text of every core and plugin file
(read once, indexed by the names that appear before a `(`; files are parsed only
when a name is asked for):

- `sites(name)`: every call `name(...)`, `x.name(...)`, `name[grid](...)`, each with
  the class and function it sits in and the receiver as written;
- `reachable(site)`: whether that function can run at all once the plugin is in. It
  cannot when the plugin overrides that core method in its subclasses or replaces that
  core function, or when every caller of it (by name, a few levels up) sits in such
  code. Anything the name search cannot rule out (module-level code, dunder methods,
  a name passed around as a value, a very common name, the depth limit) is reachable.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field

from overlay.gate.index import ModuleInfo, TreeIndex
from overlay.gate.refusals import Refusals
from overlay.gate.signature import CallShape, accepts_call, call_shape, dotted, from_ast
from overlay.gate.source import TreeSource

# `\b` first: without it the engine retries inside every identifier (4x slower on core)
CALLED = re.compile(rb"\b([A-Za-z_]\w*)\s*[(\[]")
COMMON = 25  # a name called in more files than this is reachable without looking
MAX_DEPTH = 3
_NEWLINE = re.compile(rb"\n")


# `class X(Base, Other):` (its bases), and a string annotation (`x: "Cls"`, `-> "Cls"`)
_CLASS_HEADER = re.compile(rb"^[ \t]*class[ \t]+\w+[ \t]*\([^)]*\)", re.M)
_QUOTED_ANNOTATION = re.compile(rb"(\w[ \t]*:[ \t]*|->[ \t]*)([\"'])[^\"'\n]*\2")
# an import statement: one line, or a parenthesised list over several
_IMPORT_STATEMENT = re.compile(rb"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)", re.M)
# a comment: `#` outside a one-line string, to the end of the line (a line inside a
# multi-line string may lose prose after a `#`; one with an unpaired quote keeps its comment)
_COMMENT = re.compile(rb"""^((?:[^#"'\n]|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')*)#[^\n]*""", re.M)
# a triple-quoted string: a docstring or other prose, never a name passed as a value
_TRIPLE_QUOTED = re.compile(rb'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')
# a module's export list, `__all__ = [...]` (or `+=`, a tuple): names, not values passed
_EXPORT_LIST = re.compile(rb"^__all__[ \t]*\+?=[ \t]*[\[(][^\])]*[\])]", re.M)
# an instance test, `isinstance(x, (A, type(None)))` (two levels of parentheses inside)
_INSTANCE_TEST = re.compile(rb"\b(?:isinstance|issubclass)[ \t]*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")


@dataclass(frozen=True)
class Site:
    module: str  # dotted module name
    path: str
    cls: str | None  # enclosing class (innermost), None at module level / in a function
    func: str | None  # enclosing function or method, None at module/class level
    receiver: str  # 'self' | 'cls' | 'super' | '' (bare name) | dotted receiver | '?'
    shape: CallShape
    plugin: bool  # the call sits in the plugin tree
    # class names an enclosing `if isinstance(receiver, X):` narrows the receiver to
    narrowed: frozenset[str] = frozenset()

    def where(self) -> str:
        owner = ".".join(x for x in (self.cls, self.func) if x)
        return f"{self.path}:{self.shape.line}" + (f" in {owner}" if owner else "")

    def spelled(self, name: str) -> str:
        recv = {"super": "super()", "": ""}.get(self.receiver, self.receiver)
        return f"{recv}.{name}(...)" if recv else f"{name}(...)"


def _names_word(data: bytes, words: list[bytes], word_re: re.Pattern) -> bool:
    """Does `data` hold one of `words` as a whole word? A substring test first: the
    regex alone (leading `\b`, no literal prefix) is ten times slower on core files."""
    return any(w in data for w in words) and word_re.search(data) is not None


def _may_type(data: bytes, calls: re.Pattern, tail: re.Pattern, raw: list[bytes], alt: bytes) -> bool:
    """Does the text type or build a receiver of `calls` as one of the classes `alt`
    (`recv: C`, `recv = C(...)`), or loop over it? A function of the text (pure)."""
    receivers = set()
    for m in calls.finditer(data):
        before = tail.search(data, max(0, m.start() - 120), m.start())
        if before:
            receivers.add(before.group(1).split(b".")[-1])
    named = _names_word(data, raw, re.compile(rb"\b(%s)\b" % alt))
    if named:
        # `self.r = name` where `name: C` (a parameter kept on the object): type `r` too
        for r in list(receivers):
            receivers |= set(re.findall(rb"\b%s\s*=\s*([A-Za-z_]\w*)\s*$" % re.escape(r), data, re.MULTILINE))
    return any((named and re.search(rb"\b%s\s*(:[^=\n]*\b(%s)\b|=\s*(%s)\s*\()" % (re.escape(r), alt, alt), data))
               or re.search(rb"\bfor\b[^\n]*\b%s\b[^\n]*\bin\b" % re.escape(r), data)
               for r in receivers)


def without_quoted_annotations(code: bytes) -> bytes:
    """`code` without its quoted annotations (`x: "Cls"`, `-> "Cls"` become `x: #`): a name
    there is a type, not a value or a registry entry. Pure."""
    return _QUOTED_ANNOTATION.sub(rb"\1#", code)


@functools.lru_cache(maxsize=4096)
def _value_pattern(word: bytes) -> re.Pattern:
    # `[=,(]\s*\[?`: a list's first element too (`WORKERS = [Cls]`); an annotation's
    # subscript (`list[Cls]`) passes nothing
    return re.compile(rb"""(\.%s\b(?!\s*[(\[])|["']%s["']|[=,(]\s*\[?\s*%s\b(?!\s*[(\[.]))""" % ((re.escape(word),) * 3))


def without_prose(code: bytes) -> bytes:
    """`code` without its comments and triple-quoted strings (docstrings): a name there
    (`# until _update_waiting_for_remote_kv runs`) is prose, not a value. Comments go first,
    so a quote in one opens nothing. Pure."""
    if b"#" in code:
        code = _COMMENT.sub(rb"\1", code)
    if b'"""' in code or b"'''" in code:
        code = _TRIPLE_QUOTED.sub(b'""', code)
    return code


def blank(data: bytes, literals: tuple[bytes, ...]) -> bytes:
    """`data` with each of the quoted strings `literals` (`b'"pkg.mod.Cls"'`) made empty. Pure."""
    for literal in literals:
        data = data.replace(literal, b'""')
    return data


def value_use(code: bytes, word: bytes) -> bool:
    """Does `code` use the name `word` as a value: `x.word` not called, `= word`, `(word`,
    `"word"`? A class statement's bases, a quoted annotation (`runner: "GPUModelRunner"`,
    `-> "Cls"`) and an instance test (`isinstance(runner, GPUModelRunner)`) name the class,
    they pass nothing anywhere and make no instance. Pure."""
    loose = _value_pattern(word)
    if loose.search(code) is None:
        return False
    code = without_quoted_annotations(_CLASS_HEADER.sub(b"", code))
    if b"instance" in code or b"subclass" in code:
        code = _INSTANCE_TEST.sub(b"isinstance()", code)
    return loose.search(code) is not None


def _aliases(data: bytes, alias: re.Pattern) -> frozenset[str]:
    """The names the file's import statements bind by `alias` (`... NAME as X`). Pure."""
    if b" as " not in data:
        return frozenset()
    return frozenset(m.decode() for stmt in _IMPORT_STATEMENT.findall(data) for m in alias.findall(stmt))


def module_name(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _receiver(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        recv = func.value
        if isinstance(recv, ast.Call) and dotted(recv.func) == "super":
            return "super"
        return dotted(recv) or "?"
    return ""


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Subscript):  # kernel[grid](...)
        func = func.value
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _names(node: ast.AST) -> set[str]:
    """Identifiers in an annotation or a callee (`Optional["T"]`, `a.T | None`)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.update(re.findall(r"[A-Za-z_]\w*", n.value))
    return out


def _element_call(value: ast.expr) -> ast.Call | None:
    """The element constructor of `tuple(f(x) for x in xs)`, `[f(x) for x in xs]`."""
    if isinstance(value, ast.Call) and dotted(value.func) in ("tuple", "list") and len(value.args) == 1:
        value = value.args[0]
    if isinstance(value, (ast.GeneratorExp, ast.ListComp)) and isinstance(value.elt, ast.Call):
        return value.elt
    return None


def function_scopes(tree: ast.Module) -> list[tuple[int, int, str | None, ast.AST]]:
    """(first line, last line, enclosing class, def node) of every function, found by
    walking statements only (cheap: no expressions)."""
    out: list[tuple[int, int, str | None, ast.AST]] = []
    stack: list[tuple[list[ast.stmt], str | None]] = [(tree.body, None)]
    while stack:
        body, cls = stack.pop()
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((stmt.lineno, stmt.end_lineno or stmt.lineno, cls, stmt))
                stack.append((stmt.body, None))
            elif isinstance(stmt, ast.ClassDef):
                stack.append((stmt.body, stmt.name))
            else:
                for part in ("body", "orelse", "finalbody"):
                    inner = getattr(stmt, part, None)
                    if isinstance(inner, list):
                        stack.append((inner, cls))
                for h in getattr(stmt, "handlers", []) or []:
                    stack.append((h.body, cls))
                for c in getattr(stmt, "cases", []) or []:
                    stack.append((c.body, cls))
    return out


def innermost(scopes, line: int):
    best = None
    for start, end, cls, node in scopes:
        if start <= line <= end and (best is None or start >= best[0]):
            best = (start, end, cls, node)
    return best


def _isinstance_guard(test: ast.expr) -> dict[str, frozenset[str]]:
    """receiver -> class names for `isinstance(recv, X)` / `(X, Y)` (also inside `and`)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    out: dict[str, frozenset[str]] = {}
    for p in parts:
        if isinstance(p, ast.Call) and dotted(p.func) == "isinstance" and len(p.args) == 2:
            recv = dotted(p.args[0])
            kinds = p.args[1].elts if isinstance(p.args[1], ast.Tuple) else [p.args[1]]
            names = frozenset((dotted(k) or "").split(".")[-1] for k in kinds)
            if recv and all(names):
                out[recv] = names
    return out


def module_sites(mod: ModuleInfo, plugin: bool, name: str, data: bytes,
                 scopes: list | None = None) -> list[Site]:
    """Calls of `name` in the module, each with where it sits. Only the functions whose
    lines mention the name are walked."""
    if mod.tree is None:
        return []
    word = re.compile(rb"\b" + re.escape(name.encode()) + rb"\s*[(\[]")
    starts = [m.start() for m in word.finditer(data)]
    if not starts:
        return []
    newlines = [m.start() for m in _NEWLINE.finditer(data)] if len(starts) > 8 else None
    if newlines is not None:
        import bisect
        lines = sorted({bisect.bisect_left(newlines, pos) + 1 for pos in starts})
    else:
        lines = sorted({data.count(b"\n", 0, pos) + 1 for pos in starts})
    if not lines:
        return []
    scopes = scopes if scopes is not None else function_scopes(mod.tree)
    roots: dict[int, tuple] = {}
    top_level = False
    for line in lines:
        inner = innermost(scopes, line)
        if inner is None:
            top_level = True
        else:
            roots[id(inner[3])] = inner
    out: list[Site] = []
    seen: set[int] = set()

    def visit(root: ast.AST, cls: str | None, func: str | None, enclosing) -> None:
        stack: list[tuple[ast.AST, dict[str, frozenset[str]]]] = [(root, {})]
        while stack:
            node, narrow = stack.pop()
            if isinstance(node, ast.If):
                inner = dict(narrow)
                inner.update(_isinstance_guard(node.test))
                stack.append((node.test, narrow))
                stack.extend((b, inner) for b in node.body)
                stack.extend((b, narrow) for b in node.orelse)
                continue
            if isinstance(node, ast.Call) and id(node) not in seen and _called_name(node.func) == name:
                inner_scope = innermost(scopes, node.lineno)
                here = (inner_scope[2], inner_scope[3].name) if inner_scope is not None else (None, None)
                if here == (cls, func):
                    seen.add(id(node))
                    recv = _receiver(node.func)
                    out.append(Site(mod.name, mod.path, cls, func, recv, call_shape(node, enclosing), plugin,
                                    narrow.get(recv, frozenset())))
            stack.extend((c, narrow) for c in ast.iter_child_nodes(node))

    for _, _, cls, node in roots.values():
        visit(node, cls, node.name, from_ast(node))  # type: ignore[arg-type]
    if top_level:
        for stmt in mod.tree.body:
            if any(stmt.lineno <= ln <= (stmt.end_lineno or stmt.lineno) for ln in lines):
                cls = stmt.name if isinstance(stmt, ast.ClassDef) else None
                visit(stmt, cls if cls else None, None, None)
    out.sort(key=lambda s: s.shape.line)
    return out


@dataclass
class TextCache:
    """What `Callers` derives from one file alone, shared across runs by the file's
    content key (`blob:<id>`): the forward view's releases and bisect's steps analyse
    only the files that differ between them."""

    names: dict[str, frozenset[bytes]] = field(default_factory=dict)
    # the names were loaded for exactly these trees (by tree id): a directory's file
    # keys are then as good as content keys
    trusted: bool = False
    # (content key, path) -> the file's function scopes (function_scopes)
    scopes: dict[tuple[str, str], list] = field(default_factory=dict)
    # (content key, path, in the plugin, name) -> the file's call sites of name
    sites: dict[tuple[str, str, bool, str], list] = field(default_factory=dict)
    # (content key, path, in the plugin) -> ((receiver types, builds), the core factory
    # answers they rest on: valid where every one of those is answered the same)
    receivers: dict[tuple[str, str, bool], tuple] = field(default_factory=dict)
    # (kind, content key, argument) -> what a text search of the file answered
    facts: dict[tuple, object] = field(default_factory=dict)
    # (kind, name) -> (the run's content keys, the files a search of every file found,
    # whether that is all of them): see Callers._positives
    scans: dict[tuple[str, str], tuple] = field(default_factory=dict)


class Callers:
    def __init__(self, trees: list[tuple[TreeSource, frozenset[str], TreeIndex, bool]],
                 dead: frozenset[tuple[str, str | None, str]], cache: TextCache | None = None) -> None:
        """`trees`: (source, packages, index, is plugin) for core and plugin; `dead`:
        (module, class or None, function) the plugin overrides or replaces."""
        self.trees = trees
        self.dead = dead
        self.cache = cache or TextCache()
        self._by_name: dict[bytes, list[tuple[str, int]]] | None = None
        self._files: list[tuple[str, int]] = []
        self._types: dict[tuple[int, str], tuple] = {}
        self._texts: dict[tuple[int, str], bytes] = {}
        self._sites: dict[tuple[int, str, str], list[Site]] = {}
        self._scopes: dict[tuple[int, str], list] = {}
        self._factories: dict[tuple[str, str, str | None], object] = {}
        self._keys: dict[tuple[str, int], str] | None = None
        self._diff: tuple[dict, set] | None = None
        self._reach: dict[tuple[str, str | None, str], tuple[bool, str]] = {}
        # (module, class) -> why the class never runs with the plugin in place (a core
        # class for another platform), or None; set by the engine
        self.alternative = lambda module, cls: None
        # the registry names the plugin's platform refuses; set by the engine
        self.refusals = Refusals()
        # (module, class, method, depth) -> why a method whose name is too common to follow
        # still cannot run (nothing that runs touches its class), or None; set by the engine
        self.class_untouched = lambda module, cls, func, depth: None

    # -- the text index

    def _index(self) -> dict[bytes, list[tuple[str, int]]]:
        if self._by_name is None:
            self._by_name = {}
            for i, (src, packages, _, _) in enumerate(self.trees):
                for pkg in sorted(packages):
                    for path in src.py_files(pkg):
                        self._files.append((path, i))
                        key = src.key(path)
                        names = self.cache.names.get(key)
                        if names is None or (key.startswith("dir:") and not self.cache.trusted):
                            data = src.read(path) or b""
                            self._texts[(i, path)] = data
                            names = frozenset(CALLED.findall(data))
                            self.cache.names[key] = names
                        for n in names:
                            self._by_name.setdefault(n, []).append((path, i))
        return self._by_name

    def files_calling(self, name: str) -> list[tuple[str, int]]:
        return self._index().get(name.encode(), [])

    def text(self, path: str, tree: int) -> bytes:
        data = self._texts.get((tree, path))
        if data is None:
            data = self.trees[tree][0].read(path) or b""
            self._texts[(tree, path)] = data
        return data

    def mentions(self, name: str) -> list[str]:
        """Core files whose text contains the identifier `name` at all."""
        return self._core_matching("mentions", name, re.compile(rb"\b" + re.escape(name.encode()) + rb"\b"))

    def stores(self, name: str) -> list[str]:
        """Core files that may set the attribute `name` on some object, or probe for it: an
        attribute assignment `.name = ...` (or augmented), the name quoted in a `setattr`,
        `getattr`, `hasattr` or `delattr` call on one line, or as a `__dict__` key. A read of
        `.name`, a field `name` of another class, or a dictionary key `"name"` sets nothing."""
        raw = name.encode()
        quoted = rb"['\"]" + re.escape(raw) + rb"['\"]"
        pattern = re.compile(rb"\.\s*" + re.escape(raw) + rb"\s*(?:[-+*/%|&^@]|//|<<|>>|\*\*)?=(?!=)"
                             rb"|\b(?:set|get|has|del)attr\s*\([^\n]*" + quoted
                             + rb"|__dict__\s*\[\s*" + quoted)
        return self._core_matching("stores", name, pattern)

    def _core_matching(self, kind: str, name: str, pattern: re.Pattern) -> list[str]:
        """Core files (never the plugin's) whose text holds `name` where `pattern` matches."""
        raw = name.encode()
        found = self._positives(kind, name, lambda path, i: not self.trees[i][3] and raw in self.text(path, i)
                                and pattern.search(self.text(path, i)) is not None)
        return [path for path, i in self.all_files() if (path, i) in found]

    # -- text searches shared across runs

    def _content_keys(self) -> dict[tuple[str, int], str]:
        """(path, tree) -> content key of every file of both trees, for this run."""
        if self._keys is None:
            self._keys = {(path, i): self.trees[i][0].key(path) for path, i in self.all_files()}
        return self._keys

    def _differ(self, old: dict[tuple[str, int], str]) -> set[tuple[str, int]]:
        """The files of this run whose content another run's `old` did not hold (changed,
        added, or not keyed by content)."""
        if self._diff is None or self._diff[0] is not old:
            keys = self._content_keys()
            self._diff = (old, {f for f, k in keys.items() if old.get(f) != k or not k.startswith("blob:")})
        return self._diff[1]

    def _positives(self, kind: str, name: str, test, first: bool = False) -> set[tuple[str, int]]:
        """The files of both trees for which `test(path, tree)`, a function of the file's
        text and `name`, holds; with `first`, at least one such file if there is any (for
        a yes/no answer). Shared across runs (TextCache.scans): a run after another tests
        again only the files whose content differs (the forward view's next release)."""
        keys = self._content_keys()
        known = self.cache.scans.get((kind, name))
        if known is not None:
            old, old_found, complete = known
            differ = self._differ(old)
            found = {f for f in old_found if f in keys and f not in differ}
            if complete:
                found.update(f for f in differ if test(*f))
                self.cache.scans[(kind, name)] = (keys, frozenset(found), True)
                return found
            if found and first:
                return found
        found = set()
        for f in keys:
            if test(*f):
                found.add(f)
                if first:
                    break
        self.cache.scans[(kind, name)] = (keys, frozenset(found), not (first and found))
        return found

    def files_where(self, kind: str, name: str, test) -> set[tuple[str, int]]:
        """Every file of either tree for which `test(path, tree)`, a function of the file's
        text and `name` alone, holds; shared across runs like `any_file`."""
        return self._positives(kind, name, test)

    def any_file(self, kind: str, name: str, test) -> bool:
        """Does `test(path, tree)`, a function of a file's text and `name` alone, hold for
        any file of either tree? Shared across runs like `_positives` (`kind` names the
        test): a later release tests again only the files whose content differs."""
        return bool(self._positives(kind, name, test, first=True))

    # -- call sites

    def sites_in(self, path: str, tree: int, name: str) -> list[Site]:
        key = (tree, path, name)
        if key not in self._sites:
            src, _, index, is_plugin = self.trees[tree]
            mod = index.module(module_name(path))
            if mod is None or mod.path != path or mod.tree is None:
                self._sites[key] = []
            else:
                # a function of the file's content and path alone (the module there,
                # its syntax tree): shared by content with every tree holding the file
                content = src.key(path)
                shared = content.startswith("blob:")
                ckey = (content, path, is_plugin, name)
                found = self.cache.sites.get(ckey) if shared else None
                if found is None:
                    found = module_sites(mod, is_plugin, name, self.text(path, tree), self._scopes_of(tree, path, mod))
                    if shared:
                        self.cache.sites[ckey] = found
                self._sites[key] = found
        return self._sites[key]

    def _by_content(self, kind: str, path: str, tree: int, arg, compute):
        """`compute()`, a function of the file's text and `arg` alone, once per content
        key (`blob:`): every tree holding the file shares the answer."""
        content = self.trees[tree][0].key(path)
        if not content.startswith("blob:"):
            return compute()
        key = (kind, content, arg)
        if key not in self.cache.facts:
            self.cache.facts[key] = compute()
        return self.cache.facts[key]

    def _scopes_of(self, tree: int, path: str, mod: ModuleInfo) -> list:
        skey = (tree, path)
        if skey not in self._scopes:
            content = self.trees[tree][0].key(path)
            shared = content.startswith("blob:")
            found = self.cache.scopes.get((content, path)) if shared else None
            if found is None:
                found = function_scopes(mod.tree)
                if shared:
                    self.cache.scopes[(content, path)] = found
            self._scopes[skey] = found
        return self._scopes[skey]

    def function_at(self, path: str, tree: int, line: int) -> ast.AST | None:
        """The innermost function of one file holding `line` (None at module level or where
        the file is not the module the index reads there)."""
        mod = self.trees[tree][2].module(module_name(path))
        if mod is None or mod.path != path or mod.tree is None:
            return None
        inner = innermost(self._scopes_of(tree, path, mod), line)
        return inner[3] if inner is not None else None

    def core_sites(self, path: str, name: str) -> list[Site]:
        """Calls of `name` in one core file (the first tree is core)."""
        return self.sites_in(path, 0, name)

    def names_any(self, site: Site, names: set[str]) -> bool:
        """Does the file holding `site` name any of these identifiers?"""
        data = self.text(site.path, 1 if site.plugin else 0)
        return any(n.encode() in data and re.search(rb"\b" + re.escape(n.encode()) + rb"\b", data) for n in names)

    def typed_sites(self, name: str, class_names: set[str], limit: int) -> list[Site]:
        """Core calls `recv.name(...)` through another object whose type the file states
        as one of `class_names`: `self.recv: T = ...`, `self.recv = T(...)`, a
        parameter `recv: T`. Only files naming one of the classes are parsed."""
        files = self.files_calling(name)
        raw = [n.encode() for n in sorted(class_names)]
        alt = b"|".join(re.escape(n) for n in raw)
        calls = re.compile(rb"\.%s\s*\(" % re.escape(name.encode()))
        if len(files) > limit and name == "forward":
            return []  # every torch module's: a MoE layer's `self.runner.forward(...)` is not a model's
        if len(files) > limit:
            # a common name (`capture`, `apply`): only the core files that name a class of
            # the hierarchy and call the name on a receiver (`x.apply(`, not a `def apply(`
            # of their own) can type a receiver as one of them
            named = re.compile(rb"\b(%s)\b" % alt)
            # and not one architecture's model file (`models/whisper_causal.py` calls its
            # underlying attention backend: a common name there binds no plugin class)
            files = [(p, t) for p, t in files if not self.trees[t][3] and "/models/" not in f"/{p}" and self._by_content(
                "names", p, t, alt, lambda p=p, t=t: _names_word(self.text(p, t), raw, named)) and self._by_content(
                "dotcall", p, t, name, lambda p=p, t=t: calls.search(self.text(p, t)) is not None)]
            if len(files) > limit:
                return []
        tail = re.compile(rb"([A-Za-z_][\w.]*)$")
        out = []
        for path, tree in files:
            if self.trees[tree][3]:
                continue
            # parse only when a receiver is typed or built as one of the classes in the
            # text, or is the variable of a loop (whose elements a factory may type)
            if not self._by_content("typed", path, tree, (name, alt),
                                    lambda path=path, tree=tree: _may_type(self.text(path, tree), calls, tail, raw, alt)):
                continue
            sites = [s for s in self.sites_in(path, tree, name)
                     if s.receiver not in ("self", "cls", "super", "", "?")]
            if not sites:
                continue
            typed = self.receiver_types(path, tree)
            out += [s for s in sites if typed.get(s.receiver, set()) & class_names]
        return out

    def typed_object_calls(self, classes: set[tuple[str, str]], limit: int) -> list[tuple[Site, str]]:
        """Core calls an object itself (`self.model(...)`, `layer(...)`) that the file builds
        only as one of `classes` ((module, class name) pairs): calling a torch module runs
        its `forward`. Only the core files naming a class are parsed; a class named in more
        than `limit` files is not followed. Each site with the name the object is called by."""
        core = next((i for i, t in enumerate(self.trees) if not t[3]), None)
        if core is None:
            return []
        class_names = {name for _, name in classes}
        files: set[str] = set()
        for name in sorted(class_names):
            named = self.mentions(name)
            if len(named) <= limit:
                files.update(named)
        out: list[tuple[Site, str]] = []
        for path in sorted(files):
            # built, not merely typed: a variable that holds the class itself
            # (`conv_cls = Conv3dLayer`, then `conv_cls(...)`) constructs it
            for recv, types in sorted(self.receiver_builds(path, core).items()):
                if types and types & class_names and self._binds_one_of(path, core, types & class_names, classes):
                    head, _, name = recv.rpartition(".")
                    out += [(s, name) for s in self.sites_in(path, core, name) if s.receiver == head]
        return out

    def _binds_one_of(self, path: str, tree: int, names: set[str], classes: set[tuple[str, str]]) -> bool:
        """Does one of `names`, as the file at `path` binds it, denote one of `classes`? A
        file's own class of that name, or an import of another one, is another class
        (vLLM's deepseek_eagle.py defines its own DeepseekV2Model); a name the file does not
        bind where the gate can read it may be any of them."""
        from overlay.gate.index import qualify
        index = self.trees[tree][2]
        mod = index.module(module_name(path))
        if mod is None:
            return True
        for name in names:
            target = qualify(mod, name)
            found = index.resolve_dotted(target) if target else None
            if found is None or found[0] != "class":
                return True  # not proven another class
            fmod, fcls = found[1]  # type: ignore[misc]
            if (fmod.name, fcls.name) in classes:
                return True
        return False

    def receiver_types(self, path: str, tree: int) -> dict[str, set[str]]:
        """receiver (as written) -> class names its annotations/constructions mention."""
        return self._receivers(path, tree)[0]

    def receiver_builds(self, path: str, tree: int) -> dict[str, set[str] | None]:
        """receiver -> the classes it is built from when every assignment to it in the
        file is a construction `recv = Name(...)` (None when any assignment is not)."""
        return self._receivers(path, tree)[1]

    def _receivers(self, path: str, tree: int):
        key = (tree, "types:" + path)
        cached = self._types.get(key)
        if cached is not None:
            return cached
        src, _, index, is_plugin = self.trees[tree]
        mod = index.module(module_name(path))
        content = src.key(path) if mod is not None and mod.path == path else ""
        ckey = (content, path, is_plugin)
        # a function of the file's content, and in core of what the core factories it
        # calls return: shared by content while those answers are the same
        shared = self.cache.receivers.get(ckey) if content.startswith("blob:") else None
        if shared is not None and all(self._factory(kind, mod, callee) == answer
                                      for (kind, callee), answer in shared[1].items()):
            self._types[key] = shared[0]
            return shared[0]
        asked: dict[tuple[str, str | None], object] = {}

        def factory(kind: str, callee: str | None):
            answer = asked[(kind, callee)] = self._factory(kind, mod, callee)
            return answer

        self._types[key] = self._receivers_walk(mod, tree == 0, factory)
        if content.startswith("blob:"):
            self.cache.receivers[ckey] = (self._types[key], asked)
        return self._types[key]

    def _factory(self, kind: str, mod: ModuleInfo, callee: str | None):
        """`_factory_returns` or `_factory_classes` of `callee` in core module `mod`,
        once per run (their answers are never modified)."""
        key = (kind, mod.name, callee)
        if key not in self._factories:
            self._factories[key] = (self._factory_returns(mod, callee) if kind == "returns"
                                    else self._factory_classes(mod, callee))  # type: ignore[arg-type]
        return self._factories[key]

    @staticmethod
    def _receivers_walk(mod: ModuleInfo | None, core: bool, factory):
        """(types, builds) of `mod`'s receivers; `factory(kind, callee)` answers what a
        core factory returns ("returns") or builds ("classes")."""
        types: dict[str, set[str]] = {}
        builds: dict[str, set[str] | None] = {}
        # `self.managers = tuple(factory(...) for ...)`: what the elements are, for the
        # loops over it (`for i, m in enumerate(self.managers): m.meth(...)`)
        elements: dict[str, set[str]] = {}
        loops: list[tuple[str, str]] = []
        # `self._quant_method = quant_method`: the receiver holds what the name holds, typed
        # by the name's annotation (a parameter `quant_method: FusedMoEMethodBase`)
        held: list[tuple[str, str]] = []
        if mod is not None and mod.tree is not None:
            for node in ast.walk(mod.tree):
                value = None
                if isinstance(node, (ast.For, ast.comprehension)):
                    it = node.iter
                    if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and it.args:
                        it, var = it.args[0], node.target
                        var = var.elts[1] if isinstance(var, ast.Tuple) and len(var.elts) == 2 else None
                    else:
                        var = node.target
                    if isinstance(var, ast.Name) and dotted(it):
                        loops.append((var.id, dotted(it)))  # type: ignore[arg-type]
                    continue
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and dotted(node.targets[0]):
                    elt = _element_call(node.value)
                    if elt is not None:
                        made = _names(elt.func) | (factory("returns", dotted(elt.func)) if core else set())
                        elements.setdefault(dotted(node.targets[0]), set()).update(made)  # type: ignore[arg-type]
                if isinstance(node, ast.AnnAssign):
                    target, names, value = dotted(node.target), _names(node.annotation), node.value
                    if value is not None and isinstance(value, ast.Call):
                        names |= _names(value.func)
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, value = dotted(node.targets[0]), node.value
                    names = _names(value.func) if isinstance(value, ast.Call) else set()
                    if isinstance(value, ast.Name) and target and target != value.id:
                        held.append((target, value.id))
                elif isinstance(node, ast.arg) and node.annotation is not None:
                    target, names = node.arg, _names(node.annotation)
                    builds[node.arg] = None  # a parameter: any caller's object
                else:
                    continue
                if not target:
                    continue
                types.setdefault(target, set()).update(names)
                if value is not None:
                    if isinstance(value, ast.Constant) and value.value is None:
                        continue
                    callee = dotted(value.func) if isinstance(value, ast.Call) else None
                    made = None
                    if callee is not None and callee.split(".")[-1][:1].isupper():
                        made = {callee.split(".")[-1]}
                    elif callee is not None and core:
                        made = factory("classes", callee)
                    if made is None:
                        builds[target] = None
                    elif target not in builds or builds[target] is not None:
                        builds.setdefault(target, set()).update(made)  # type: ignore[union-attr]
                    if callee is not None and core and not callee.split(".")[-1][:1].isupper():
                        types[target] |= factory("returns", callee)
            for target, name in held:
                if types.get(name):
                    types.setdefault(target, set()).update(types[name])
            for var, it in loops:
                if it in elements:
                    types.setdefault(var, set()).update(elements[it])
                    builds[var] = None  # whatever the factory returns: not only core's own classes
        return types, builds

    def _factory_returns(self, mod: ModuleInfo, callee: str | None) -> set[str]:
        """The class a core factory's return annotation names (`-> SingleTypeKVCacheManager`)."""
        from overlay.gate.index import qualify
        if not callee:
            return set()
        target = qualify(mod, callee)
        found = self.trees[0][2].resolve_dotted(target) if target else None
        if found is None or found[0] != "func":
            return set()
        fmod, sig = found[1]  # type: ignore[misc]
        for n in fmod.tree.body if fmod.tree else []:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == sig.name and n.returns is not None:
                ret = n.returns
                if isinstance(ret, ast.Constant) and isinstance(ret.value, str):
                    return {ret.value.split(".")[-1]} if ret.value.replace(".", "").replace("_", "").isalnum() else set()
                name = dotted(ret)
                return {name.split(".")[-1]} if name else set()
        return set()

    def _factory_classes(self, mod: ModuleInfo, callee: str) -> set[str] | None:
        """The classes a core factory function builds, when every `return` in it is a
        construction `return Name(...)`; None otherwise."""
        from overlay.gate.index import qualify
        target = qualify(mod, callee)
        index = self.trees[0][2]
        found = index.resolve_dotted(target) if target else None
        if found is None or found[0] != "func":
            return None
        fmod, sig = found[1]  # type: ignore[misc]
        node = next((n for n in ast.walk(fmod.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == sig.name and n.lineno == sig.line), None) if fmod.tree else None
        if node is None:
            return None
        out: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Return):
                made = dotted(n.value.func) if isinstance(n.value, ast.Call) else None
                if made is None or not made.split(".")[-1][:1].isupper():
                    return None
                out.add(made.split(".")[-1])
        return out or None

    def sites(self, name: str, limit: int | None = None) -> list[Site] | None:
        """Calls of `name` in both trees; None when more than `limit` files call it."""
        files = self.files_calling(name)
        if limit is not None and len(files) > limit:
            return None
        out: list[Site] = []
        for path, tree in files:
            out += self.sites_in(path, tree, name)
        return out

    def plugin_reads(self, name: str) -> bool:
        """Does any plugin file read `.name` other than by assigning it (`x.name = ...`)?
        A name the plugin adds to a core module or class and then uses is a helper, not
        a patch of something core has."""
        word = re.compile(rb"\." + re.escape(name.encode()) + rb"\b(?!\s*=[^=])")
        raw = name.encode()
        return any(raw in self.text(path, i) and word.search(self.text(path, i))
                   for path, i in self.all_files() if self.trees[i][3])

    def plugin_uses(self, name: str) -> int:
        """How many times plugin files name the identifier `name` other than on an import
        line (its def and every use count)."""
        word = re.compile(rb"\b" + re.escape(name.encode()) + rb"\b")
        raw = name.encode()
        count = 0
        for path, i in self.all_files():
            if self.trees[i][3] and raw in self.text(path, i):
                count += sum(len(word.findall(line)) for line in self.text(path, i).splitlines()
                             if raw in line and not re.match(rb"\s*(from\s+\S+\s+)?import\s", line))
        return count

    def all_files(self) -> list[tuple[str, int]]:
        self._index()
        return self._files

    def scopes(self, path: str, tree: int) -> list:
        """`function_scopes` of one file the index reads (empty where it reads another)."""
        mod = self.trees[tree][2].module(module_name(path))
        if mod is None or mod.path != path or mod.tree is None:
            return []
        return self._scopes_of(tree, path, mod)

    def code(self, path: str, tree: int) -> bytes:
        """A file's text without its comments, docstrings, import statements and export
        list: naming a name in prose, importing it (`from m import (f as _f, ...)`) or
        listing it in `__all__` neither calls it nor passes it around."""
        key = (-1 - tree, path)
        data = self._texts.get(key)
        if data is None:
            data = without_prose(self.text(path, tree))
            if b"import" in data:
                data = _IMPORT_STATEMENT.sub(b"", data)
            if b"__all__" in data:
                data = _EXPORT_LIST.sub(b"", data)
            self._texts[key] = data
        return data

    def import_aliases(self, name: str) -> list[str]:
        """Names core or plugin files import `name` as (`from m import f as _f`): calls of
        the alias are calls of `name`."""
        word = name.encode()
        alias = re.compile(rb"\b%s\s+as\s+(\w+)" % re.escape(word))
        found: set[str] = set()
        for path, tree in self.files_calling(name):
            found.update(self._by_content("aliases", path, tree, name,
                                          lambda path=path, tree=tree: _aliases(self.text(path, tree), alias)))
        return sorted(found - {name})

    def passed_as_value(self, name: str) -> bool:
        """`x.name`, `= name` or "name" used other than as a call, in either tree: a
        callback, a getattr, a registry entry. Name search cannot follow it, so it
        counts as called."""
        return bool(self._positives("value", name, self._value_test(name), first=True))

    def value_uses(self, name: str) -> set[tuple[str, int]]:
        """Every file where `passed_as_value(name)` holds."""
        return self.files_where("value", name, self._value_test(name))

    def _value_test(self, name: str):
        def value(path: str, tree: int) -> bool:
            return self.value_use_in(path, tree, name)

        return value

    def value_use_in(self, path: str, tree: int, name: str, ignoring: tuple[bytes, ...] = ()) -> bool:
        """`passed_as_value(name)`'s test on one file, with the quoted strings `ignoring`
        (`b'"pkg.mod.Cls"'`) blanked first."""
        word = name.encode()
        if word not in self.text(path, tree):
            return False
        return value_use(blank(self.code(path, tree), ignoring), word)

    # -- reachability

    def core_class(self, module: str, cls: str):
        """Core's class `cls` of `module` (its ClassInfo), or None where core has none."""
        mod = self.trees[0][2].module(module)
        return mod.classes.get(cls) if mod is not None else None

    def binds_core_class(self, module: str, name: str, replaced: dict[str, set[str]],
                         registered: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
        """Does core module `module` bind `name` only to a core class: its own class
        statement, or `from m import name` of a class core defines? Then `name(...)` there
        builds core's class, whatever the plugin calls its own classes. Not where the
        plugin replaces the name there or in the module it comes from (`replaced`: module
        -> names), nor for a class registered out of tree (`registered`: qualified names),
        nor for any other binding (an assignment may hold anything)."""
        index = self.trees[0][2]
        mod = index.module(module)
        bindings = mod.bindings.get(name, []) if mod is not None else []
        if not bindings or name in replaced.get(module, ()):
            return False
        for b in bindings:
            if b.kind == "class":
                target = f"{module}.{name}"
            elif b.kind == "from" and b.target and b.attr and b.attr not in replaced.get(b.target, ()):
                target = f"{b.target}.{b.attr}"
            else:
                return False
            found = index.resolve_dotted(target)
            if found is None or found[0] != "class":
                return False
            cmod, ccls = found[1]  # type: ignore[misc]
            if ccls.name in replaced.get(cmod.name, ()) or f"{cmod.name}.{ccls.name}" in registered:
                return False
        return True

    def may_call(self, site: Site, module: str, cls: str | None, func: str) -> bool:
        """Can the call `site`, found by the name `func`, be a call of core's `func` (a
        method of `cls`, or `module`'s function)? Not when core's own signature of it would
        refuse the call's arguments: `layer.set_eplb_state(moe_layer_idx=...)` in a model's
        `set_eplb_state` is meant for the MoE layer's method, not the models'. A plugin call
        always counts (the plugin may call its own override with its own arguments), and
        so does any call the gate cannot match to a readable signature."""
        if site.plugin:
            return True
        if cls is None:
            mod = self.trees[0][2].module(module)
            sig = mod.functions.get(func) if mod is not None else None
        else:
            info = self.core_class(module, cls)
            sig = info.methods.get(func) if info is not None else None
            if sig is not None and not sig.is_static:
                sig = sig.bound()
        return sig is None or not accepts_call(sig, site.shape)

    def is_dead(self, module: str, cls: str | None, func: str | None) -> bool:
        return func is not None and (module, cls, func) in self.dead

    def reachable(self, site: Site, depth: int = 0) -> tuple[bool, str]:
        """Can the code holding `site` run? (answer, evidence)."""
        if site.plugin or site.func is None:
            return True, "module level" if site.func is None else "plugin code"
        return self.function_reachable(site.module, site.cls, site.func, depth)

    def function_reachable(self, module: str, cls: str | None, func: str, depth: int = 0) -> tuple[bool, str]:
        key = (module, cls, func)
        if self.is_dead(*key):
            owner = f"{cls}.{func}" if cls else func
            return False, f"{owner} is overridden or replaced by the plugin"
        if cls is not None:
            why = self.alternative(module, cls)
            if why:
                return False, why
        if func.startswith("__") and func.endswith("__"):
            return True, "called implicitly"
        if depth >= MAX_DEPTH:
            return True, "depth limit"
        if key in self._reach:
            return self._reach[key]
        self._reach[key] = (True, "recursive")  # a cycle counts as reachable
        files = self.files_calling(func)
        result: tuple[bool, str]
        if len(files) > COMMON:
            why = self.class_untouched(module, cls, func, depth) if cls is not None else None
            result = (False, why) if why else (True, f"{func} is called in {len(files)} files")
        else:
            aliases = self.import_aliases(func)
            callers = [s for name in [func, *aliases] for s in self.sites(name) or []
                       if (s.func != func or s.cls != cls) and self.may_call(s, module, cls, func)]
            live = None
            for s in callers:
                ok, _ = self.reachable(s, depth + 1)
                if ok:
                    live = s
                    break
            if live is not None:
                result = (True, f"called at {live.where()}")
            elif any(self.passed_as_value(name) for name in [func, *aliases]):
                result = (True, f"{func} is passed around as a value")
            elif not callers:
                result = (True, f"no caller of {func} found by name (it may be called dynamically)")
            else:
                where = ", ".join(sorted({s.where() for s in callers})[:3])
                result = (False, f"{func} is only called from code the plugin overrides or replaces ({where})")
        self._reach[key] = result
        return result
