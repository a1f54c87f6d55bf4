"""The data model: pin sets (pins/*.yaml) and the series (series.yaml).

Everything is loaded once into frozen dataclasses and validated on the way in;
every error names the file, the line and the field, and says what is expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Union

from overlay.series import yamldoc
from overlay.errors import OverlayError, quoted, redact, shortened, url_credentials
from overlay.series.yamldoc import Node

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
HEX = re.compile(r"^[0-9a-f]+$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
TARGET_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
PIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
PATCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.patch$")
ORIGINS = ("backport", "local", "experimental")


# ----------------------------------------------------------------------------- pins


@dataclass(frozen=True)
class GitSource:
    """A target taken from a git repository at an exact commit."""

    url: str
    commit: str

    @property
    def mirror_name(self) -> str:
        """`owner+name` for a URL ending in owner/name(.git): the mirror directory."""
        path = re.sub(r"\.git/?$", "", self.url.rstrip("/"))
        parts = re.split(r"[/:]", path)
        parts = [p for p in parts if p]
        return "+".join(parts[-2:]) if len(parts) >= 2 else parts[-1]

    def describe(self) -> str:
        return f"{self.url} at {self.commit[:12]}"


@dataclass(frozen=True)
class ArchiveSource:
    """A target taken from a released source archive on PyPI, pinned by sha256."""

    name: str
    version: str
    sha256: str
    # `history:` the repository the release was cut from (a git URL): where drift reads
    # upstream history and `git am -3` finds preimages. A release has no history of its
    # own, so provenance at an archive is decided by content.
    history: str | None = None

    @property
    def history_source(self) -> "GitSource | None":
        return GitSource(self.history, "0" * 40) if self.history else None

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def mirror_name(self) -> str:
        return f"pypi+{self.name}"

    def describe(self) -> str:
        return f"PyPI {self.requirement} (sha256 {self.sha256[:12]})"


Source = Union[GitSource, ArchiveSource]


@dataclass(frozen=True)
class PinnedTarget:
    name: str
    source: Source
    tree: str | None  # composed tree id, written by `overlay lock`
    line: int  # where the target's mapping starts in the pin file
    pin_file: str = "pins/"  # the pin file, as error messages show it


@dataclass(frozen=True)
class PinSet:
    name: str
    path: Path
    description: str
    default: bool
    targets: tuple[PinnedTarget, ...]
    toolchain: Mapping[str, str] = field(default_factory=dict)

    def target(self, name: str) -> PinnedTarget:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def target_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.targets)


# ----------------------------------------------------------------------------- series


@dataclass(frozen=True)
class AppliedRecord:
    """One `applied-upstream` record: which upstream change carries the patch, the rule
    that decided it, and the pin sets it holds for. Each pin set has its own record, so
    recording a later pin set never rewrites what an earlier one says."""

    ref: str
    commit: str | None = None
    rule: str | None = None
    pins: tuple[str, ...] = ()
    # `not-upstream`: what the patch does that the carrying change does not (left out
    # at these pin sets with the rest of the patch); None: upstream carries all of it
    not_upstream: str | None = None

    def as_dict(self) -> dict:
        return {"ref": self.ref, "commit": self.commit, "rule": self.rule}

    def same_claim(self, other: dict) -> bool:
        return (self.ref, self.commit, self.rule) == (other.get("ref"), other.get("commit"), other.get("rule"))


@dataclass(frozen=True)
class Provenance:
    """Where a patch comes from and where it goes (DEP-3 in spirit)."""

    origin: str  # backport | local | experimental
    upstream: tuple[str, ...] = ()  # PRs/commits it comes from or mirrors
    original_author: str | None = None
    core_change: tuple[str, ...] = ()  # the core change(s) that made it necessary
    forwarded: str | None = None  # where it was/will be sent upstream
    applied_upstream: str | None = None  # the upstream commit/PR that merged it
    # `applied-upstream` as a mapping (written by `overlay rebase`): the commit that
    # carries it, the drift rule that said so, and the pin sets whose upstream carries
    # it, where compose, refresh and lock leave the patch out
    applied_upstream_commit: str | None = None
    applied_upstream_rule: str | None = None
    applied_upstream_pins: tuple[str, ...] = ()
    applied_upstream_records: tuple[AppliedRecord, ...] = ()  # one per claim, pins disjoint
    switch: str | None = None  # opt-in environment switch (experimental)
    evidence: str | None = None  # evidence folder (experimental / speed claims)
    # `upstream-commit`: the full ids of the upstream commits a backport carries. When
    # all are ancestors of a newer base, upstream carries the patch (drift's rule
    # `merged (upstream-commit)`), whatever the text says
    upstream_commits: tuple[str, ...] = ()
    # `superseded-by: {commit, pr}`: upstream's own version of the patch (a rebase onto
    # a base that holds it stops for a decision: drop the patch, or port it on top)
    superseded_by_commit: str | None = None
    superseded_by_pr: str | None = None

    def record_at(self, pin: str) -> AppliedRecord | None:
        """The `applied-upstream` record that holds for pin set `pin`, if any."""
        return next((r for r in self.applied_upstream_records if pin in r.pins), None)


@dataclass(frozen=True)
class SeriesEntry:
    patch: str  # file name inside patches/
    target: str
    provenance: Provenance
    subject: str | None
    tests: tuple[str, ...]
    line: int  # where the entry starts in series.yaml
    # `only-pins`: the pin sets that carry this entry, every other one leaves it out
    # (a port onto a newer upstream, made by `overlay rebase`); empty: every pin set
    only_pins: tuple[str, ...] = ()
    # `revises`: the entry this one is the newer pin sets' own version of (written by
    # `overlay rebase` when pin sets stay independent): the two may differ on purpose
    revises: str | None = None

    @property
    def origin(self) -> str:
        return self.provenance.origin

    def carried_at(self, pin: str | None) -> bool:
        """Whether pin set `pin` carries this patch: not when its upstream already does
        (`applied-upstream` pins), nor when the entry names other pin sets (`only-pins`)."""
        if pin is None:
            return True
        if pin in self.provenance.applied_upstream_pins:
            return False
        return not self.only_pins or pin in self.only_pins


@dataclass(frozen=True)
class Series:
    path: Path
    entries: tuple[SeriesEntry, ...]

    def for_target(self, target: str, pin: str | None = None) -> tuple[SeriesEntry, ...]:
        """The target's entries, in order; with `pin`, only those that pin set carries."""
        return tuple(e for e in self.entries if e.target == target and e.carried_at(pin))

    @property
    def targets(self) -> tuple[str, ...]:
        seen: list[str] = []
        for e in self.entries:
            if e.target not in seen:
                seen.append(e.target)
        return tuple(seen)


# ----------------------------------------------------------------------------- validation helpers


class _Fields:
    """Typed access to one YAML mapping with file:line:field errors."""

    def __init__(self, node: Node, path: str, what: str, allowed: tuple[str, ...]) -> None:
        if not isinstance(node.value, dict):
            raise OverlayError(f"{what} must be a mapping, got {_kind(node.value)}",
                               path=path, line=node.line)
        self.node = node
        self.map: dict[str, Node] = node.value
        self.path = path
        self.what = what
        for key, value in self.map.items():
            if key not in allowed:
                raise OverlayError(f"unknown field {quoted(key)} in {what}", path=path, line=value.line,
                                   hint="expected one of: " + ", ".join(allowed))

    def error(self, key: str, message: str, hint: str | None = None) -> OverlayError:
        line = self.map[key].line if key in self.map else self.node.line
        return OverlayError(f"field '{key}' of {self.what}: {message}", path=self.path,
                            line=line, hint=hint)

    def has(self, key: str) -> bool:
        return key in self.map and self.map[key].value is not None

    def line(self, key: str) -> int:
        return self.map[key].line if key in self.map else self.node.line

    def str(self, key: str, *, required: bool = False, pattern: re.Pattern[str] | None = None,
            expect: str = "a string") -> str | None:
        if not self.has(key):
            if required:
                raise self.error(key, f"missing; expected {expect}")
            return None
        value = self.map[key].value
        if not isinstance(value, str):
            raise self.error(key, f"expected {expect}, got {_shown(value)}",
                             hint="quote the value" if isinstance(value, (int, float)) else None)
        value = value.strip()
        if not value:
            raise self.error(key, f"empty; expected {expect}")
        if pattern and not pattern.match(value):
            raise self.error(key, f"{quoted(value)} is not {expect}")
        return value

    def bool(self, key: str, default: bool = False) -> bool:
        if not self.has(key):
            return default
        value = self.map[key].value
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_shown(value)}")
        return value

    def str_list(self, key: str, expect: str = "a string or a list of strings",
                 most: tuple[int, str, str] | None = None) -> tuple[str, ...]:
        """`most`: (the most items, what one item is, a hint), a bound no real entry nears."""
        if not self.has(key):
            return ()
        value = self.map[key].value
        if isinstance(value, str):
            return (value.strip(),)
        if not isinstance(value, list):
            raise self.error(key, f"expected {expect}, got {_kind(value)}")
        if most is not None and len(value) > most[0]:
            raise self.error(key, f"{len(value)} {most[1]}s; an entry names at most {most[0]}",
                             hint=most[2])
        out = []
        for item in value:
            if not isinstance(item.value, str) or not item.value.strip():
                raise OverlayError(f"field '{key}' of {self.what}: expected {expect}, "
                                   f"got {_shown(item.value)}", path=self.path, line=item.line)
            out.append(item.value.strip())
        return tuple(out)

    def mapping(self, key: str, *, required: bool = False) -> Node | None:
        if not self.has(key):
            if required:
                raise self.error(key, "missing; expected a mapping")
            return None
        node = self.map[key]
        if not isinstance(node.value, dict):
            raise self.error(key, f"expected a mapping, got {_kind(node.value)}")
        return node


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "nothing"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """A value as an error message shows it: kind, and the value itself if it is plain."""
    if isinstance(value, (dict, list)):
        return _kind(value)
    return f"{_kind(value)} {quoted(value)}"


def _rel(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(path)


# ----------------------------------------------------------------------------- pin loading

PIN_FIELDS = ("name", "description", "default", "targets", "toolchain")
TARGET_FIELDS = ("repo", "commit", "pypi", "sha256", "history", "tree")


def _commit(fields: _Fields, key: str) -> str:
    value = fields.str(key, required=True, expect="a full 40-hex commit id")
    assert value is not None
    lowered = value.lower()
    if HEX.match(lowered) and len(lowered) < 40:
        raise fields.error(key, f"'{value}' is a short commit id ({len(value)} hex digits)",
                           hint="write the full 40-hex commit id (git rev-parse gives it)")
    if not FULL_SHA.match(lowered):
        raise fields.error(key, f"{quoted(value)} is not a full 40-hex commit id",
                           hint="write the full 40-hex commit id (git rev-parse gives it)")
    return lowered


def load_pinset(path: Path, root: Path | None = None) -> PinSet:
    shown = _rel(path, root)
    doc = yamldoc.load(path, shown)
    top = _Fields(doc, shown, "the pin set", PIN_FIELDS)
    name = top.str("name", pattern=PIN_NAME, expect="a pin name") or path.stem
    if name != path.stem:
        raise top.error("name", f"{quoted(name)} differs from the file name {quoted(path.stem)}",
                        hint=f"rename the file to pins/{shortened(name)}.yaml or drop the field")
    targets_node = top.mapping("targets", required=True)
    assert targets_node is not None
    if not targets_node.value:
        raise top.error("targets", "no targets; expected at least one")
    targets = []
    for tname, tnode in targets_node.value.items():
        if not TARGET_NAME.match(tname):
            raise OverlayError(f"target name {quoted(tname)} must be lower-case letters, digits, '-' or '_'",
                               path=shown, line=tnode.line)
        tf = _Fields(tnode, shown, f"target {quoted(tname)}", TARGET_FIELDS)
        has_git = tf.has("repo") or tf.has("commit")
        has_pypi = tf.has("pypi") or tf.has("sha256")
        if has_git and has_pypi:
            raise tf.error("pypi", "a target is either repo+commit or pypi+sha256, not both")
        if tf.has("history") and not has_pypi:
            raise tf.error("history", "only a pypi target names the history it was cut from",
                           hint="a repo+commit target has its history already")
        if has_pypi:
            req = tf.str("pypi", required=True, pattern=REQUIREMENT, expect="'name==version'")
            sha = tf.str("sha256", required=True, expect="the archive's 64-hex sha256")
            assert req and sha
            if not SHA256.match(sha.lower()):
                raise tf.error("sha256", f"{quoted(sha)} is not a 64-hex sha256",
                               hint="pip hash <archive> prints it")
            m = REQUIREMENT.match(req)
            assert m
            history = tf.str("history", expect="the git URL of the repository the release was cut from")
            if history and url_credentials(history):
                raise tf.error("history", f"the URL {redact(history)} carries credentials, which a "
                                          "committed lockfile must never hold",
                               hint="remove them, and revoke the token if it was pushed")
            source: Source = ArchiveSource(m.group(1), m.group(2), sha.lower(), history)
        else:
            url = tf.str("repo", required=True, expect="a git URL or path")
            assert url
            if url_credentials(url):
                raise tf.error("repo", f"the URL {shortened(redact(url))} carries credentials, which a "
                                       f"committed lockfile must never hold",
                               hint="remove them: use a git credential helper or a mirror "
                                    "(--mirror), and revoke the token if it was pushed")
            source = GitSource(url, _commit(tf, "commit"))
        tree = None
        if tf.has("tree"):
            tree = tf.str("tree", expect="a 40-hex tree id")
            assert tree
            if not FULL_SHA.match(tree.lower()):
                raise tf.error("tree", f"{quoted(tree)} is not a 40-hex tree id",
                               hint="run `overlay lock` to record it")
            tree = tree.lower()
        targets.append(PinnedTarget(tname, source, tree, tnode.line, shown))
    toolchain: dict[str, str] = {}
    tc = top.mapping("toolchain")
    if tc is not None:
        for key, value in tc.value.items():
            if isinstance(value.value, (dict, list)):
                raise OverlayError(f"toolchain {quoted(key)} must be a plain value (a fact, e.g. '2.13.0')",
                                   path=shown, line=value.line)
            toolchain[key] = "" if value.value is None else str(value.value)
    return PinSet(name=name, path=path, description=top.str("description") or "",
                  default=top.bool("default"), targets=tuple(targets), toolchain=toolchain)


def pin_names(root: Path) -> list[str]:
    pins = root / "pins"
    return sorted(p.stem for p in pins.glob("*.yaml")) if pins.is_dir() else []


def resolve_pin_name(root: Path, wanted: str | None) -> str:
    """A pin name, an unambiguous prefix of one, or (None) the default pin set."""
    if wanted is not None and not wanted.strip():
        raise OverlayError("empty pin name", path="pins/", hint="give a pin name or leave it out for the default")
    names = pin_names(root)
    if not names:
        raise OverlayError("no pin sets found", path="pins/",
                           hint="add pins/<name>.yaml (see README: pin set format)")
    if wanted is None:
        defaults = [n for n in names if load_pinset(root / "pins" / f"{n}.yaml", root).default]
        if len(defaults) != 1:
            found = ", ".join(defaults) if defaults else "none"
            raise OverlayError(f"expected exactly one pin set with 'default: true', found {found}",
                               path="pins/", hint="mark one pin set as the default or pass --pin NAME")
        return defaults[0]
    if wanted in names:
        return wanted
    matches = [n for n in names if n.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise OverlayError(f"pin {quoted(wanted)} is ambiguous: it matches {', '.join(matches)}",
                           path="pins/", hint="give more characters of the pin name")
    raise OverlayError(f"unknown pin {quoted(wanted)}", path=f"pins/{shortened(wanted)}.yaml",
                       hint="known pins: " + ", ".join(names))


def load_pin(root: Path, wanted: str | None) -> PinSet:
    name = resolve_pin_name(root, wanted)
    return load_pinset(root / "pins" / f"{name}.yaml", root)


def load_all_pins(root: Path) -> list[PinSet]:
    return [load_pinset(root / "pins" / f"{n}.yaml", root) for n in pin_names(root)]


# ----------------------------------------------------------------------------- series loading

ENTRY_FIELDS = ("patch", "target", "origin", "subject", "upstream", "upstream-commit",
                "superseded-by", "original-author", "core-change", "forwarded", "applied-upstream",
                "switch", "evidence", "tests", "only-pins", "revises")
SUPERSEDED_FIELDS = ("commit", "pr")


APPLIED_FIELDS = ("ref", "commit", "rule", "pins", "not-upstream")


def _applied_upstream(f: _Fields, shown: str, i: int) -> tuple[str | None, tuple[AppliedRecord, ...]]:
    """`applied-upstream: REF`, the mapping `overlay rebase` writes ({ref, commit, rule,
    pins}), or a list of such mappings, one per claim (each pin set in one record only):
    (the first record's ref, the records)."""
    if not f.has("applied-upstream"):
        return None, ()
    node = f.map["applied-upstream"]
    if isinstance(node.value, str):
        return f.str("applied-upstream"), ()
    items = node.value if isinstance(node.value, list) else [node]
    if not items:
        raise f.error("applied-upstream", "an empty list; expected a record {ref, commit, rule, pins}")
    records: list[AppliedRecord] = []
    owner: dict[str, int] = {}
    for k, item in enumerate(items, 1):
        what = f"'applied-upstream' of series entry {i}" + (f", record {k}" if len(items) > 1 else "")
        sub = _Fields(item, shown, what, APPLIED_FIELDS)
        ref = sub.str("ref", required=True, expect="the upstream PR or commit that carries the patch")
        commit = sub.str("commit", pattern=FULL_SHA, expect="a full 40-hex commit id")
        pins = _pin_names(sub, "pins")
        if len(items) > 1 and not pins:
            raise sub.error("pins", "missing; each record of a list names the pin sets it holds for")
        for pin in pins:
            if pin in owner:
                raise sub.error("pins", f"pin set '{pin}' is in record {owner[pin]} already",
                                hint="a pin set has one record: remove it from one of them")
            owner[pin] = k
        assert ref
        records.append(AppliedRecord(ref, commit, sub.str("rule"), pins, sub.str("not-upstream")))
    return records[0].ref, tuple(records)


def _pin_names(f: _Fields, key: str) -> tuple[str, ...]:
    pins = f.str_list(key, expect="a list of pin set names")
    for name in pins:
        if not PIN_NAME.match(name):
            raise f.error(key, f"{quoted(name)} is not a pin set name")
    return pins


# A backport carries a few upstream commits; drift and check read each from the mirror.
MAX_UPSTREAM_COMMITS = 64


def _upstream_commits(f: _Fields) -> tuple[str, ...]:
    """`upstream-commit`: one full 40-hex commit id or a list of them (at most 64)."""
    out = []
    for value in f.str_list("upstream-commit", expect="a full 40-hex commit id or a list of them",
                            most=(MAX_UPSTREAM_COMMITS, "upstream commit",
                                  "a backport names the few commits it carries: split the entry")):
        lowered = value.lower()
        if not FULL_SHA.match(lowered):
            raise f.error("upstream-commit", f"{quoted(value)} is not a full 40-hex commit id",
                          hint="write the full 40-hex commit id (git rev-parse in the mirror gives it)")
        out.append(lowered)
    return tuple(dict.fromkeys(out))


def _superseded_by(f: _Fields, shown: str, i: int) -> tuple[str | None, str | None]:
    """`superseded-by: {commit, pr}`: (commit, pr)."""
    node = f.mapping("superseded-by")
    if node is None:
        return None, None
    sub = _Fields(node, shown, f"'superseded-by' of series entry {i}", SUPERSEDED_FIELDS)
    commit = sub.str("commit", required=True, pattern=FULL_SHA, expect="a full 40-hex commit id")
    pr = sub.str("pr", required=True, expect="upstream's pull request, as owner/name#N")
    assert pr is not None
    if not re.match(r"^[\w.-]+/[\w.-]+#\d+$", pr):
        raise sub.error("pr", f"{quoted(pr)} is not owner/name#N")
    return commit, pr


def load_series(root: Path) -> Series:
    path = root / "series.yaml"
    shown = _rel(path, root)
    if not path.exists():
        raise OverlayError(f"file not found in {root}", path=shown,
                           hint="run inside the project (a folder with series.yaml) or pass --root DIR")
    doc = yamldoc.load(path, shown)
    top = _Fields(doc, shown, "series.yaml", ("series",))
    if "series" not in top.map:
        raise top.error("series", "missing; expected a list of patch entries")
    items = top.map["series"]
    if items.value is None:
        return Series(path, ())
    if not isinstance(items.value, list):
        raise top.error("series", f"expected a list of patch entries, got {_kind(items.value)}")
    entries: list[SeriesEntry] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items.value, 1):
        f = _Fields(item, shown, f"series entry {i}", ENTRY_FIELDS)
        patch = f.str("patch", required=True, expect="a file name in patches/ ending in .patch")
        assert patch
        if "/" in patch or "\\" in patch or not PATCH_NAME.match(patch):
            raise f.error("patch", f"{quoted(patch)} is not a plain file name ending in .patch",
                          hint="patches live directly in patches/; name them like 0001-topic.patch")
        if patch in seen:
            raise f.error("patch", f"{quoted(patch)} is listed twice (first at line {seen[patch]})",
                          hint="list each patch exactly once")
        seen[patch] = f.line("patch")
        target = f.str("target", required=True, pattern=TARGET_NAME, expect="a target name such as plugin")
        origin = f.str("origin", required=True, expect="one of " + ", ".join(ORIGINS))
        if origin not in ORIGINS:
            raise f.error("origin", f"{quoted(origin)} is not one of " + ", ".join(ORIGINS))
        assert target and origin
        applied = _applied_upstream(f, shown, i)
        superseded = _superseded_by(f, shown, i)
        prov = Provenance(
            origin=origin,
            upstream=f.str_list("upstream"),
            original_author=f.str("original-author"),
            core_change=f.str_list("core-change"),
            forwarded=f.str("forwarded"),
            applied_upstream=applied[0],
            applied_upstream_commit=applied[1][0].commit if applied[1] else None,
            applied_upstream_rule=applied[1][0].rule if applied[1] else None,
            applied_upstream_pins=tuple(p for r in applied[1] for p in r.pins),
            applied_upstream_records=applied[1],
            switch=f.str("switch"),
            evidence=f.str("evidence"),
            upstream_commits=_upstream_commits(f),
            superseded_by_commit=superseded[0],
            superseded_by_pr=superseded[1],
        )
        entries.append(SeriesEntry(patch=patch, target=target, provenance=prov,
                                   subject=f.str("subject"), tests=f.str_list("tests"),
                                   line=item.line, only_pins=_pin_names(f, "only-pins"),
                                   revises=f.str("revises", pattern=PATCH_NAME,
                                                 expect="the patch file this entry is a version of")))
    return Series(path, tuple(entries))


@dataclass(frozen=True)
class Project:
    """The project root with its series and pins, loaded once."""

    root: Path
    series: Series

    @classmethod
    def load(cls, root: Path) -> "Project":
        return cls(root=root, series=load_series(root))

    @property
    def patches_dir(self) -> Path:
        return self.root / "patches"

    def pin(self, wanted: str | None) -> PinSet:
        pin = load_pin(self.root, wanted)
        for t in self.series.targets:
            if t not in pin.target_names:
                entry = next(e for e in self.series.entries if e.target == t)
                raise OverlayError(f"series entry {entry.patch} targets {quoted(t)}, which pin set "
                                   f"'{pin.name}' does not define", path="series.yaml",
                                   line=entry.line,
                                   hint=f"add target {quoted(t)} to pins/{pin.name}.yaml or fix the entry")
        return pin
