"""Compose: each target at its pinned commit with its patches applied as attributed commits.

Atomic: everything is built under a staging folder next to the composed trees and
moved into place only when every selected target composed; a failure or an
interrupted run leaves the previous good trees untouched (a killed run leaves only
a staging folder, removed by the next run). Every folder a run makes next to the
trees carries its marker (overlay.trees.ownership); the next run cleans up only those.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from contextlib import contextmanager

from overlay.trees import composed, ownership, runlock, seriesswap, sources
from overlay import gitcmd, paths
from overlay.errors import Interrupted, OverlayError, inject_fault
from overlay.series.model import GitSource, PinSet, PinnedTarget, Project, SeriesEntry
from overlay.series.patchfile import PatchMail, link_problem, read_patch, unsafe_reason

Report = Callable[[str], None]
STAGING_PREFIX = ".staging-"
OLD_PREFIX = ".old-"  # good trees moved aside mid-swap: put back if their replacement is missing
DISCARD_PREFIX = ".discard-"  # replaced trees after a finished swap: only ever deleted


@dataclass(frozen=True)
class PatchOutcome:
    patch: str
    target: str
    status: str  # applied | failed | not-attempted
    commit: str | None = None
    detail: str | None = None  # why it failed: file, hunk and reason
    next_step: str | None = None


@dataclass(frozen=True)
class TargetOutcome:
    target: str
    path: Path
    base: str
    how: str  # where the base came from: cache | mirror | network | archive
    head: str | None
    tree: str | None
    locked_tree: str | None
    patches: tuple[PatchOutcome, ...] = field(default_factory=tuple)

    @property
    def tree_mismatch(self) -> bool:
        return bool(self.locked_tree and self.tree and self.locked_tree != self.tree)


def select_targets(pin: PinSet, wanted: list[str] | None) -> list[PinnedTarget]:
    if not wanted:
        return list(pin.targets)
    out = []
    for name in wanted:
        if name not in pin.target_names:
            raise OverlayError(f"unknown target '{name}' for pin set '{pin.name}'",
                               path=f"pins/{pin.name}.yaml",
                               hint="known targets: " + ", ".join(pin.target_names))
        out.append(pin.target(name))
    return out


def load_patches(project: Project, entries: tuple[SeriesEntry, ...]) -> list[PatchMail]:
    """Read and vet every patch before anything is fetched or written."""
    mails = []
    for entry in entries:
        shown = f"patches/{entry.patch}"
        mail = read_patch(project.patches_dir / entry.patch, shown)
        for change in mail.files:
            reason = unsafe_reason(change)
            if reason:
                raise OverlayError(f"unsafe patch: {reason}", path=shown,
                                   hint="patches may only change text files inside the tree")
        mails.append(mail)
    return mails


def vet_against_tree(work: Path, entries: tuple[SeriesEntry, ...], mails: list[PatchMail]) -> None:
    """Before any patch is applied to the checked-out tree: none of its paths is, or goes
    through, one of the tree's symlinks (git would refuse it as a failed patch; it is an
    unsafe one)."""
    for entry, mail in zip(entries, mails):
        for change in mail.files:
            reason = link_problem(change, lambda rel: (work / rel).is_symlink())
            if reason:
                raise OverlayError(f"unsafe patch: {reason}", path=f"patches/{entry.patch}",
                                   hint="patches change the tree's own files, never through its links")


@contextmanager
def _run_lock(where: Path, pin: str) -> Iterator[None]:
    try:
        where.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OverlayError("the composed-trees folder is a file, not a directory", path=str(where),
                           hint="remove it or pass another --into") from None
    # Another checkout may compose into the same --into folder: this lock is the folder's.
    with runlock.held(where / ".overlay.lock", f"apply --pin {pin}", wait=False,
                      busy="another overlay run is composing here", hint="wait for it to finish"):
        yield


def _remove_leftovers(where: Path) -> None:
    """Clean up after killed runs: only folders whose marker proves a run that is gone
    made them (a user's `.staging-area` or `.old-drafts` is never touched).

    A staging folder is simply dropped. An `.old-` folder holds good trees moved
    aside during a swap (`<pin>/<target>`); a tree whose replacement never arrived is
    put back. Nothing is moved through a symbolic link: an `.old-` folder holding one
    where a pin folder or a tree should be, or a pin folder in `where` that is one, is
    left as it is (no run makes them), and the run says so.
    """
    for p in where.iterdir():
        if not p.name.startswith((STAGING_PREFIX, DISCARD_PREFIX, OLD_PREFIX)):
            continue
        if ownership.leftover(p) is None:
            continue
        if p.name.startswith(OLD_PREFIX):
            moves, why = _trees_to_put_back(p, where)
            if why is not None:
                ownership.refuse(p, why)
                continue
            for tree, final in moves:
                if not os.path.lexists(final):
                    final.parent.mkdir(exist_ok=True)
                    os.replace(tree, final)
        ownership.remove(p, ignore_errors=True)


def _trees_to_put_back(old: Path, where: Path) -> tuple[list[tuple[Path, Path]], str | None]:
    """(tree, where it goes back) for each tree in an `.old-` folder, or why none may
    move: every pin folder and tree in it, and every pin folder it goes back into, must
    be a real directory (lstat: a symbolic link is never followed)."""
    moves = []
    for pin_dir in sorted(old.iterdir()):
        if pin_dir.name == ownership.MARKER:
            continue
        if not _real_dir(pin_dir):
            return [], f"{pin_dir.name} in it is {_what(pin_dir)}, which no overlay run makes"
        dest = where / pin_dir.name
        if os.path.lexists(dest) and not _real_dir(dest):
            return [], f"{dest} is {_what(dest)}: nothing is moved through it"
        for tree in sorted(pin_dir.iterdir()):
            if not _real_dir(tree):
                return [], f"{pin_dir.name}/{tree.name} in it is {_what(tree)}, which no overlay run makes"
            moves.append((tree, dest / tree.name))
    return moves, None


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _what(path: Path) -> str:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "gone"
    return "a symbolic link" if stat.S_ISLNK(mode) else paths.file_kind(mode)


_COMPOSED_CONFIG = """\
[core]
\tautocrlf = false
[gc]
\tauto = 0
[notes]
\trewriteRef = {notes}
[notes "rewrite"]
\tamend = true
\trebase = true
"""


def _init_tree(work: Path, obtained: sources.Obtained, branch: str) -> None:
    gitcmd.git(["init", "-q", str(work)])
    git_dir = work / ".git"
    # Borrow objects from the cache instead of copying a whole upstream snapshot.
    alternates = [str((obtained.git_dir / "objects").resolve())]
    inherited = obtained.git_dir / "objects" / "info" / "alternates"
    if inherited.is_file():
        alternates += [line for line in inherited.read_text().splitlines() if line.strip()]
    (git_dir / "objects" / "info" / "alternates").write_text("\n".join(alternates) + "\n")
    # The cache holds shallow snapshots: history stops at the pinned commit.
    shallow = obtained.git_dir / "shallow"
    if shallow.is_file():
        shutil.copyfile(shallow, git_dir / "shallow")
    # Keep the series mapping through amend and rebase (refresh reads these notes).
    with (git_dir / "config").open("a") as fh:
        fh.write(_COMPOSED_CONFIG.format(notes=composed.NOTES_REF))
    base_ref = git_dir / "refs" / "overlay" / "base"
    base_ref.parent.mkdir(parents=True, exist_ok=True)
    base_ref.write_text(obtained.commit + "\n")
    gitcmd.git(["checkout", "-q", "-B", branch, obtained.commit], cwd=work)


_PATCH_FAILED = re.compile(r"^error: patch failed: (.+):(\d+)$", re.M)
_NO_FILE = re.compile(r"^error: (.+): (does not exist in index|No such file or directory)$", re.M)
_EXISTS = re.compile(r"^error: (.+): already exists in (?:index|working directory)$", re.M)


def _span(start: int, length: int) -> str:
    return str(start) if length == 1 else f"{start},{length}"  # as git writes hunk headers


def _lost_cr(work: Path, mail: PatchMail, path: str) -> bool:
    """The pinned file is CRLF while the patch's hunks for it have no CR at all."""
    try:
        crlf_file = b"\r\n" in (work / path).read_bytes()
    except OSError:
        return False
    hunks = "".join(str(h) for pf in mail.patchset() if pf.path == path for h in pf)
    return crlf_file and bool(hunks) and "\r" not in hunks


def explain_failure(work: Path, mail: PatchMail, shown: str) -> str:
    """Which file and hunk failed and why, from `git apply --check` on the same base."""
    proc = gitcmd.git(["apply", "--check", "-v", str(mail.path)], cwd=work, check=False)
    text = proc.stderr + proc.stdout
    m = _PATCH_FAILED.search(text)
    if m:
        path, line = m.group(1), int(m.group(2))
        if _lost_cr(work, mail, path):
            return (f"{path}: the file has CRLF line endings but the patch's lines carry no CR "
                    f"bytes: {LOST_CR}")
        for pf in mail.patchset():
            if pf.path == path or pf.target_file.endswith("/" + path):
                for i, hunk in enumerate(pf, 1):
                    if hunk.source_start == line:
                        header = f"@@ -{_span(hunk.source_start, hunk.source_length)} +{_span(hunk.target_start, hunk.target_length)} @@"
                        return (f"{path}: hunk {i}/{len(pf)} ({header}) does not apply: "
                                f"its context was not found at or near line {line}")
        return f"{path}: a hunk at line {line} does not apply (context not found)"
    m = _NO_FILE.search(text)
    if m:
        return f"{m.group(1)}: file does not exist in the pinned tree"
    m = _EXISTS.search(text)
    if m:
        return f"{m.group(1)}: the patch creates it but it already exists"
    last = [line for line in text.splitlines() if line.startswith("error:")]
    return last[-1][len("error: "):] if last else "git am rejected it"


def _apply_series(work: Path, mails: list[PatchMail], base: str,
                  committer: tuple[str, str]) -> tuple[list[str], bool]:
    """`git am` the whole series in one go; (commits made, whether all applied)."""
    if not mails:
        return [], True
    env = {"GIT_COMMITTER_NAME": committer[0], "GIT_COMMITTER_EMAIL": committer[1]}
    # --keep-cr: the CR bytes of a CRLF file's lines are part of the change
    proc = gitcmd.git(["am", "-q", "--keep-cr", "--keep-non-patch", "--no-3way", "--committer-date-is-author-date",
                       "--whitespace=nowarn", *[str(m.path) for m in mails]], cwd=work, env=env,
                      check=False)
    if proc.returncode != 0:
        # keep what applied; drop the failed patch's state
        gitcmd.git(["am", "--quit"], cwd=work, check=False)
        gitcmd.git(["reset", "-q", "--hard"], cwd=work, check=False)
    listed = gitcmd.out(["rev-list", "--reverse", "--end-of-options", f"{base}..HEAD"], cwd=work)
    commits = listed.split() if listed else []
    if len(commits) > len(mails):  # a file held more than one mail
        raise OverlayError(f"git am made {len(commits)} commits from {len(mails)} patch files",
                           path="patches/", hint="each patch file must hold exactly one mail (overlay check)")
    return commits, proc.returncode == 0 and len(commits) == len(mails)


def blob_mismatch(work: Path, commits: list[str], mails: list[PatchMail]) -> tuple[PatchMail, str] | None:
    """The first file whose composed blob is not the one its patch's index line names.

    Checked where the patch met the very blob it was made against (or created the
    file): then git's result must be byte-identical. Applied with an offset onto a
    different pre-image, the result legitimately differs and is not checked.
    """
    checks: list[tuple[PatchMail, str, bool, str, str]] = []  # mail, path, had a pre-image, blobs
    names: list[str] = []  # for each check: its pre-image (when it had one), then its result
    for commit, mail in zip(commits, mails):
        for change in mail.files:
            if change.blobs is None or change.target is None:
                continue  # no index line, or a deletion
            if change.source:
                names.append(f"{commit}^:{change.source}")
            names.append(f"{commit}:{change.target}")
            checks.append((mail, change.target, change.source is not None, *change.blobs))
    if not checks:
        return None
    proc = gitcmd.git(["cat-file", "--batch-check=%(objectname)"], cwd=work,
                      input="".join(n + "\n" for n in names))
    # "<name> missing" for a path the commit lacks: no blob id, nothing proven
    answers = iter("" if line.endswith((" missing", " ambiguous")) else line.split()[0]
                   for line in proc.stdout.splitlines())
    for mail, path, had_pre_image, before, after in checks:
        same_base = not had_pre_image or next(answers).startswith(before)
        got = next(answers)
        # A hand-edited patch has a stale index line and is fine; one that lost the
        # CR bytes of a CRLF file is not: the composed file is not what was committed.
        if same_base and got and not got.startswith(after) and _crlf_blob(work, got).startswith(after):
            return mail, (f"{path} was composed as blob {got[:12]} but the patch's index line names "
                          f"{after[:12]}, the same text with CRLF line endings: {LOST_CR}")
    return None


LOST_CR = "the patch lost the CR bytes of its CRLF lines"


def _crlf_blob(work: Path, blob: str) -> str:
    """The id the blob would have with every LF as CRLF."""
    data = gitcmd.git(["cat-file", "blob", "--end-of-options", blob], cwd=work, text=False).stdout
    crlf = re.sub(rb"\r?\n", b"\r\n", data)
    return gitcmd.out(["hash-object", "--stdin"], cwd=work, input=crlf, text=False).decode()


def compose(project: Project, pin: PinSet, *, targets: list[str] | None, into: Path | None,
            mirror: Path | None, force: bool, report: Report,
            progress: sources.Progress | None = None,
            only: frozenset[str] | None = None) -> list[TargetOutcome]:
    """Compose the selected targets; raise OverlayError (nothing replaced) on any failure.

    `only` limits the series to those patch files (A/B variants compose subsets into
    their own --into folder); their trees are then not compared with the pin's lock.
    Holds the checkout lock: a refresh never rewrites patches/ under it.
    """
    with seriesswap.checkout(project.root, f"apply --pin {pin.name}") as recovered:
        if recovered:
            project = Project.load(project.root)
        return _compose(project, pin, targets=targets, into=into, mirror=mirror, force=force,
                        report=report, progress=progress, only=only)


def _compose(project: Project, pin: PinSet, *, targets: list[str] | None, into: Path | None,
             mirror: Path | None, force: bool, report: Report,
             progress: sources.Progress | None, only: frozenset[str] | None) -> list[TargetOutcome]:
    chosen = select_targets(pin, targets)
    if only is not None:
        unknown = sorted(only - {e.patch for e in project.series.entries})
        if unknown:
            raise OverlayError(f"patch {unknown[0]} is not in the series", path="series.yaml",
                               hint="name patch files listed in series.yaml")
    plan = {t.name: tuple(e for e in project.series.for_target(t.name, pin.name)
                          if only is None or e.patch in only) for t in chosen}
    mails = {name: load_patches(project, entries) for name, entries in plan.items()}
    where = paths.composed_root(project.root, into)
    finals = {t.name: paths.composed_dir(project.root, pin.name, t.name, into) for t in chosen}
    with _run_lock(where, pin.name):
        _remove_leftovers(where)
        for name, final in finals.items():
            composed.guard(final, pin.name, force)
        obtained = {t.name: sources.obtain(project.root, t, mirror, progress,
                                           tuple(o.name for o in pin.targets if o.name != t.name))
                    for t in chosen}
        staging = ownership.make(where, f"{STAGING_PREFIX}{pin.name}-")
        try:
            outcomes = _compose_all(project, pin, chosen, plan, mails, obtained, staging, report,
                                    progress, finals)
            failed = [p for o in outcomes for p in o.patches if p.status == "failed"]
            if failed:
                first = failed[0]
                raise OverlayError(f"patch {first.patch} ({first.target}) failed: {first.detail}",
                                   path=f"patches/{first.patch}", hint=first.next_step, exit_code=1)
            inject_fault("before-swap")
            # Ctrl-C and SIGTERM wait until the renames are done: an interrupt never lands
            # between moving a good tree aside and moving its replacement in.
            signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        except KeyboardInterrupt:
            ownership.remove(staging, ignore_errors=True)
            raise Interrupted(f"interrupted before the new trees were installed: {where / pin.name} "
                              f"is as it was (run the command again)") from None
        except BaseException:
            ownership.remove(staging, ignore_errors=True)
            raise
        discard = None
        try:
            discard = _swap_into_place(staging, finals, where, pin.name)
            ownership.remove(staging, ignore_errors=True)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)  # one pressed meanwhile lands here
            inject_fault("after-swap")
            if discard is not None:
                ownership.remove(discard, ignore_errors=True)
        except KeyboardInterrupt:
            left = (f"; the replaced trees left in {discard} are removed by the next run"
                    if discard is not None else "")
            raise Interrupted(f"interrupted after the new trees were installed in {where / pin.name} "
                              f"(composed){left}") from None
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
    return [TargetOutcome(o.target, finals[o.target], o.base, o.how, o.head, o.tree,
                          o.locked_tree, o.patches) for o in outcomes]


def _compose_all(project: Project, pin: PinSet, chosen: list[PinnedTarget],
                 plan: dict[str, tuple[SeriesEntry, ...]], mails: dict[str, list[PatchMail]],
                 obtained: dict[str, sources.Obtained], staging: Path,
                 report: Report, progress: sources.Progress | None = None,
                 finals: dict[str, Path] | None = None) -> list[TargetOutcome]:
    committer = gitcmd.user_identity()
    branch = paths.branch_name(pin.name)
    outcomes = []
    for target in chosen:
        got = obtained[target.name]
        work = staging / target.name
        entries, target_mails = plan[target.name], mails[target.name]
        if progress:
            progress(f"{target.name}: checking out {got.commit[:12]} and applying "
                     f"{len(target_mails)} patch(es)")
        _init_tree(work, got, branch)
        vet_against_tree(work, entries, target_mails)
        commits, ok = _apply_series(work, target_mails, got.commit, committer)
        results: list[PatchOutcome] = []
        for entry, commit in zip(entries, commits):
            results.append(PatchOutcome(entry.patch, target.name, "applied", commit))
            report(f"  applied  {target.name:<8} {entry.patch} -> {commit[:12]}")
        mismatch = blob_mismatch(work, commits, target_mails)
        if mismatch:
            mail, detail = mismatch
            name = mail.path.name
            raise OverlayError(detail, path=f"patches/{name}", exit_code=1,
                               hint="restore the CR bytes, or recreate the change on the composed "
                                    "branch and `overlay refresh` (it keeps them)")
        composed.add_notes(work, {c: e.patch for c, e in zip(commits, entries)})
        failed = not ok
        if failed:
            entry, mail = entries[len(commits)], target_mails[len(commits)]
            detail = explain_failure(work, mail, f"patches/{entry.patch}")
            step = failed_apply_step(pin.name, target, got.commit, entry.patch,
                                     (finals or {}).get(target.name))
            if LOST_CR in detail:
                step = ("not an upstream change: restore the CR bytes, or recreate the change on "
                        f"the composed branch and `overlay refresh --pin {pin.name}` (it keeps them)")
            results.append(PatchOutcome(entry.patch, target.name, "failed", None, detail, step))
            report(f"  FAILED   {target.name:<8} {entry.patch}: {detail}")
            for later in entries[len(commits) + 1:]:
                results.append(PatchOutcome(later.patch, target.name, "not-attempted"))
                report(f"  skipped  {target.name:<8} {later.patch} (an earlier patch failed)")
        inject_fault(f"after-target-{target.name}")
        head = composed.head(work)
        tree = composed.tree_of(work)
        if not failed:
            composed.write_state(work, composed.ComposedState(
                pin=pin.name, target=target.name, base=got.commit, head=head, tree=tree,
                branch=branch, patches=tuple(e.patch for e in plan[target.name]),
                series_digest=composed.series_digest(project.patches_dir,
                                                     [e.patch for e in plan[target.name]])))
        full = len(plan[target.name]) == len(project.series.for_target(target.name, pin.name))
        outcomes.append(TargetOutcome(target.name, work, got.commit, got.how, head, tree,
                                      target.tree if full else None, tuple(results)))
    return outcomes


def failed_apply_step(pin: str, target: PinnedTarget, base: str, patch: str,
                      last_good: Path | None) -> str:
    """The next step after `patch` failed on `base`, from what the last good compose of this
    pin set and target (its composed state) says: the series changed, or the pin moved."""
    state = composed.read_state(last_good) if last_good is not None else None
    fix = f"fix it on the composed branch and `overlay refresh --pin {pin}`"
    classify = (f"run `overlay drift --pin {pin} --onto {target.name}={base}` to classify it, then "
                if isinstance(target.source, GitSource) else "")  # an archive has no history to walk
    if state is not None and state.base == base and patch in state.patches:
        return (f"the pinned {target.name} has not moved since the last good apply (both on "
                f"{base[:12]}), so the series changed: this patch or one before it differs from what "
                f"applied then; compare it with that branch (`git -C {last_good} log -p`), then {fix}")
    if state is not None and state.base != base:
        return (f"the pinned {target.name} moved from {state.base[:12]} (last good apply) to "
                f"{base[:12]} under this patch: {classify}{fix}")
    return (f"it does not apply on the pinned {target.name} {base[:12]} (a changed patch or a "
            f"changed pin): {classify}{fix}")


_HELD = {signal.SIGINT, signal.SIGTERM}


def _swap_into_place(staging: Path, finals: dict[str, Path], where: Path, pin: str) -> Path | None:
    """Move the staged trees into place; return the folder holding the replaced ones, if
    any (deleting them is slow and left to the caller; a killed run's next run does it)."""
    old_root: Path | None = None
    for name, final in finals.items():
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            if old_root is None:  # marked before anything is moved into it
                old_root = ownership.make(where, OLD_PREFIX)
            old = old_root / pin / name
            old.parent.mkdir(parents=True, exist_ok=True)
            os.replace(final, old)
            inject_fault("mid-swap")
        os.replace(staging / name, final)
    if old_root is None:
        return None
    # Swap done: nothing in it is ever to be put back. Same nonce, so the marker still fits.
    discard = where / (DISCARD_PREFIX + old_root.name[len(OLD_PREFIX):])
    os.replace(old_root, discard)
    return discard
