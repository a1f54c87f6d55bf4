"""`overlay range-diff A B`: two versions of the series compared patch by patch with
`git range-diff` over their composed branches.

A and B are two pin set names (their composed trees in build/ when those are today's
series, else composed aside), or two git revisions of this repository: the series
(series.yaml, patches/) at each revision is composed aside on one shared upstream base,
the pin set `--pin` (default: the default one) as revision B declares it, so what differs
is the series, not upstream. The scratch folder is the command's own and is removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator

from overlay import gitcmd, paths
from overlay.errors import OverlayError, printable, quoted
from overlay.series.model import PinSet, Project, load_pin, pin_names
from overlay.trees import compose, composed
from overlay.views import status

SERIES_PATHS = ("series.yaml", "patches", "pins")
_PAIR = re.compile(r"^\s*(-|\d+):\s+(-+|[0-9a-f]+)\s+([=!<>])\s+(-|\d+):\s+(-+|[0-9a-f]+)\s?(.*)$")
MAX_SERIES_FILES = 4096


@dataclass(frozen=True)
class Side:
    given: str
    kind: str  # pin | revision | composed (a branch in build/, before or after a refresh)
    name: str  # the pin set name, or the full commit id


@dataclass(frozen=True)
class Branch:
    base: str
    head: str
    objects: Path  # the git dir holding its objects
    how: str  # build/ or composed aside


@dataclass(frozen=True)
class Pair:
    a: int | None
    a_commit: str | None
    status: str  # = same, ! changed, < only in A, > only in B
    b: int | None
    b_commit: str | None
    subject: str

    def to_json(self) -> dict:
        return {"a": self.a, "a_commit": self.a_commit, "status": self.status, "b": self.b,
                "b_commit": self.b_commit, "subject": self.subject}


@dataclass(frozen=True)
class TargetDiff:
    target: str
    a: Branch
    b: Branch
    pairs: tuple[Pair, ...]
    text: str

    def counts(self) -> dict[str, int]:
        names = {"=": "same", "!": "changed", "<": "only_a", ">": "only_b"}
        out = {v: 0 for v in names.values()}
        for p in self.pairs:
            out[names[p.status]] += 1
        return out

    def to_json(self) -> dict:
        return {"target": self.target,
                "a": {"base": self.a.base, "head": self.a.head, "from": self.a.how},
                "b": {"base": self.b.base, "head": self.b.head, "from": self.b.how},
                "counts": self.counts(), "pairs": [p.to_json() for p in self.pairs],
                "range_diff": self.text}


def parse_pairs(text: str) -> tuple[Pair, ...]:
    """The pair lines of `git range-diff` output (`1:  abc = 1:  def subject`). Pure."""
    out = []
    for line in text.splitlines():
        m = _PAIR.match(line)
        if not m:
            continue
        a, ac, st, b, bc, subject = m.groups()
        out.append(Pair(None if a == "-" else int(a), None if ac.startswith("-") else ac, st,
                        None if b == "-" else int(b), None if bc.startswith("-") else bc, subject))
    return tuple(out)


def resolve_side(root: Path, given: str) -> Side:
    """A pin set name, else a commit of the repository at `root`; an option-like or unknown
    value is one error line."""
    if not given.strip() or given.startswith("-"):
        raise OverlayError(f"{quoted(given)} is neither a pin set nor a revision", path="pins/",
                           hint="give two pin set names or two revisions of this repository "
                                "(e.g. origin/main HEAD)")
    if given in pin_names(root):
        return Side(given, "pin", given)
    sha = None
    if (root / ".git").exists():
        proc = gitcmd.git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{given}^{{commit}}"],
                          cwd=root, check=False)
        sha = proc.stdout.strip() if proc.returncode == 0 else None
    if not sha:
        raise OverlayError(f"{quoted(given)} is neither a pin set nor a revision of this repository",
                           path="pins/", hint="known pin sets: " + (", ".join(pin_names(root)) or "none")
                           + "; or give a commit, branch or tag")
    return Side(given, "revision", sha)


def _extract_series(root: Path, rev: str, dest: Path) -> None:
    """series.yaml, patches/ and pins/ of commit `rev` into `dest`: regular blobs only."""
    listing = gitcmd.git(["ls-tree", "-r", "-z", "--end-of-options", rev, "--", *SERIES_PATHS],
                         cwd=root).stdout
    items = [i for i in listing.split("\0") if i]
    if len(items) > MAX_SERIES_FILES:
        raise OverlayError(f"revision {rev[:12]} has {len(items)} series files", hint="compare fewer")
    found = False
    for item in items:
        meta, _, path = item.partition("\t")
        mode, kind, blob = meta.split()
        rel = PurePosixPath(path)
        if kind != "blob" or mode not in ("100644", "100755") or ".." in rel.parts or rel.is_absolute():
            continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(gitcmd.git(["cat-file", "blob", blob], cwd=root, text=False).stdout)
        found = found or path == "series.yaml"
    if not found:
        raise OverlayError(f"revision {rev[:12]} has no series.yaml", path="series.yaml",
                           hint="give a revision of this repository that holds the series")


@contextlib.contextmanager
def _shared_cache(root: Path) -> Iterator[None]:
    """Series composed from a scratch root take upstream objects from this checkout's cache."""
    before = os.environ.get("OVERLAY_CACHE")
    os.environ["OVERLAY_CACHE"] = str(paths.cache_dir(root))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("OVERLAY_CACHE", None)
        else:
            os.environ["OVERLAY_CACHE"] = before


def _compose_aside(project: Project, pin: PinSet, into: Path, mirror: Path | None,
                   targets: list[str] | None) -> dict[str, Branch]:
    outcomes = compose.compose(project, pin, targets=targets, into=into, mirror=mirror, force=False,
                               report=lambda line: None)
    return {o.target: Branch(o.base, o.head, o.path / ".git", "composed aside") for o in outcomes}


def _pin_branches(project: Project, pin: PinSet, scratch: Path, mirror: Path | None,
                  into: Path | None, targets: list[str] | None) -> dict[str, Branch]:
    """The pin set's composed branches: build/'s when they are today's series, else composed aside."""
    out = {}
    for t in [t.name for t in compose.select_targets(pin, targets)]:
        wanted = tuple(e.patch for e in project.series.for_target(t, pin.name))
        lock = status.target_lock(project.root, pin, t, wanted, into)
        work = paths.composed_dir(project.root, pin.name, t, into)
        state = composed.read_state(work)
        if lock.state in (status.NOT_COMPOSED, status.STALE) or state is None:
            return _compose_aside(project, pin, scratch / f"pin-{pin.name}", mirror, targets)
        out[t] = Branch(state.base, composed.head(work), work / ".git", "build/")
    return out


def _revision_branches(root: Path, side: Side, pin: PinSet, scratch: Path, mirror: Path | None,
                       label: str, targets: list[str] | None) -> dict[str, Branch]:
    src = scratch / f"series-{label}"
    _extract_series(root, side.name, src)
    try:
        return _compose_aside(Project.load(src), pin, scratch / f"composed-{label}", mirror, targets)
    except OverlayError as exc:  # say which revision's series it is
        raise OverlayError(f"at revision {printable(side.given)} ({side.name[:12]}): {exc.message}",
                           path=exc.path, line=exc.line, hint=exc.hint, exit_code=exc.exit_code) from None


def _range_diff(scratch: Path, target: str, a: Branch, b: Branch, creation_factor: int = 60) -> str:
    """`git range-diff a.base..a.head b.base..b.head` in a scratch repository that borrows
    both sides' objects (and their shallow boundaries)."""
    repo = scratch / f"range-diff-{target}.git"
    gitcmd.git(["init", "-q", "--bare", str(repo)])
    alternates, shallow = [], []
    for side in (a, b):
        alternates.append(str((side.objects / "objects").resolve()))
        inherited = side.objects / "objects" / "info" / "alternates"
        if inherited.is_file():
            alternates += [line for line in inherited.read_text().splitlines() if line.strip()]
        if (side.objects / "shallow").is_file():
            shallow += (side.objects / "shallow").read_text().split()
    (repo / "objects" / "info" / "alternates").write_text("\n".join(dict.fromkeys(alternates)) + "\n")
    if shallow:
        (repo / "shallow").write_text("\n".join(dict.fromkeys(shallow)) + "\n")
    if a.base == a.head or b.base == b.head:  # git range-diff refuses an empty range
        return _one_sided(repo, a, b)
    return gitcmd.git(["range-diff", "--no-color", f"--creation-factor={creation_factor}",
                       f"{a.base}..{a.head}", f"{b.base}..{b.head}"], git_dir=repo).stdout


def _one_sided(repo: Path | None, a: Branch, b: Branch, cwd: Path | None = None) -> str:
    """range-diff's pair lines where one side has no patches: each of the other's is only there."""
    side, only_a = (a, True) if a.base != a.head else (b, False)
    log = gitcmd.git(["log", "--reverse", "--format=%h%x00%s", f"{side.base}..{side.head}"],
                     git_dir=repo, cwd=cwd).stdout
    out = []
    for n, line in enumerate(log.splitlines(), 1):
        short, _, subject = line.partition("\0")
        dashes = "-" * len(short)
        out.append(f"{n}:  {short} < -:  {dashes} {subject}" if only_a
                   else f"-:  {dashes} > {n}:  {short} {subject}")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class RangeDiff:
    a: Side
    b: Side
    pin: str | None  # the shared pin set, comparing revisions
    targets: tuple[TargetDiff, ...]

    def to_json(self) -> dict:
        return {"a": {"given": self.a.given, "kind": self.a.kind, "name": self.a.name},
                "b": {"given": self.b.given, "kind": self.b.kind, "name": self.b.name},
                "pin": self.pin, "targets": [t.to_json() for t in self.targets]}


def range_diff(root: Path, a_given: str, b_given: str, *, pin_name: str | None = None,
               mirror: Path | None = None, into: Path | None = None,
               creation_factor: int = 60, targets: list[str] | None = None) -> RangeDiff:
    """Compare A and B; the checkout's own series is read only when they are pin sets (two
    revisions need not agree with it)."""
    a, b = resolve_side(root, a_given), resolve_side(root, b_given)
    if a.kind != b.kind:
        raise OverlayError(f"{quoted(a_given)} is a {a.kind} and {quoted(b_given)} a {b.kind}",
                           hint="compare two pin sets, or two revisions of this repository")
    if a.kind == "pin" and pin_name is not None:
        raise OverlayError("--pin is for comparing revisions; pin sets are compared as they are",
                           hint="leave --pin out, or give two revisions")
    scratch = Path(tempfile.mkdtemp(prefix="overlay-range-diff-"))
    try:
        shared = None
        if a.kind == "pin":
            project = Project.load(root)
            sides = [_pin_branches(project, project.pin(s.name), scratch, mirror, into, targets)
                     for s in (a, b)]
        else:
            src = scratch / "pin-source"
            _extract_series(root, b.name, src)
            pin = load_pin(src, pin_name)
            shared = pin.name
            with _shared_cache(root):
                sides = [_revision_branches(root, s, pin, scratch, mirror, label, targets)
                         for s, label in ((a, "a"), (b, "b"))]
        diffs = []
        for target in [t for t in sides[0] if t in sides[1]]:
            ba, bb = sides[0][target], sides[1][target]
            if ba.base == ba.head and bb.base == bb.head:
                continue  # no patches on either side
            text = _range_diff(scratch, target, ba, bb, creation_factor)
            diffs.append(TargetDiff(target, ba, bb, parse_pairs(text), text))
        return RangeDiff(a, b, shared, tuple(diffs))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def text(result: RangeDiff) -> str:
    """The one summary of a range-diff: `overlay range-diff` prints it (and pr.yml's job
    summary is that output), and refresh and rebase print it at their end."""
    out = []
    on = f" on pin set {result.pin}" if result.pin else ""
    out.append(f"range-diff {printable(result.a.given)} -> {printable(result.b.given)}{on}")
    if not result.targets:
        out.append("no target has patches on either side")
    for t in result.targets:
        c = t.counts()
        out.append(f"== {t.target}: {c['same']} same, {c['changed']} changed, {c['only_a']} only in "
                   f"{printable(result.a.given)}, {c['only_b']} only in {printable(result.b.given)}")
        out.append(printable(t.text, newlines=True).rstrip("\n"))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- after a refresh

BEFORE, AFTER = "before refresh", "after refresh"


def composed_heads(root: Path, pin: PinSet, targets: list[str] | None,
                   into: Path | None = None) -> dict[str, Branch]:
    """Each composed target's branch as its state records it (before a refresh rewrites it)."""
    out = {}
    for t in compose.select_targets(pin, targets):
        work = paths.composed_dir(root, pin.name, t.name, into)
        state = composed.read_state(work) if work.is_dir() else None
        if state is not None and state.pin == pin.name:
            out[t.name] = Branch(state.base, state.head, work / ".git", "build/")
    return out


def since(pin_name: str, before: dict[str, Branch]) -> RangeDiff:
    """The range-diff from each target's branch recorded in `before` to its work tree's HEAD
    now (the same repository: both are there), as `text` prints it; targets whose branch
    did not change are left out (no target: nothing changed)."""
    out = []
    for target, old in before.items():
        work = old.objects.parent
        try:
            head = composed.head(work)
        except gitcmd.GitFailed:
            continue
        new = Branch(old.base, head, old.objects, "build/")
        if head == old.head:
            continue
        if old.base == old.head or new.base == new.head:
            diff = _one_sided(None, old, new, cwd=work)
        else:
            diff = gitcmd.git(["range-diff", "--no-color", f"{old.base}..{old.head}", f"{new.base}..{head}"],
                              cwd=work).stdout
        out.append(TargetDiff(target, old, new, parse_pairs(diff), diff))
    return RangeDiff(Side(BEFORE, "composed", pin_name), Side(AFTER, "composed", pin_name), pin_name,
                     tuple(out))
