"""A composed tree on disk: its recorded state and the guard against losing user work."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from overlay import gitcmd
from overlay.errors import OverlayError

STATE_FILE = "overlay-state.json"  # inside the composed repo's .git/
NOTES_REF = "refs/notes/overlay"  # one note per composed commit: "patch: <file>"


@dataclass(frozen=True)
class ComposedState:
    pin: str
    target: str
    base: str  # the pinned (or archive-import) commit the series was applied on
    head: str  # HEAD right after composing / refreshing
    tree: str
    branch: str
    patches: tuple[str, ...]  # patch files, in the order applied
    series_digest: str = ""  # of those patch files' bytes, to notice a series that moved on

    def to_json(self) -> str:
        data = asdict(self)
        data["patches"] = list(self.patches)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def git_dir(work_tree: Path) -> Path:
    return work_tree / ".git"


def read_state(work_tree: Path) -> ComposedState | None:
    path = git_dir(work_tree) / STATE_FILE
    try:
        data = json.loads(path.read_text())
        data["patches"] = tuple(data["patches"])
        return ComposedState(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_state(work_tree: Path, state: ComposedState) -> None:
    path = git_dir(work_tree) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.to_json())
    tmp.replace(path)


def head(work_tree: Path) -> str:
    return gitcmd.out(["rev-parse", "HEAD"], cwd=work_tree)


def tree_of(work_tree: Path, rev: str = "HEAD") -> str:
    return gitcmd.out(["rev-parse", "--verify", "--end-of-options", f"{rev}^{{tree}}"], cwd=work_tree)


def series_digest(patches_dir: Path, names: tuple[str, ...] | list[str]) -> str:
    """Fingerprint of a target's part of the series: names, order and bytes."""
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode() + b"\0")
        h.update(hashlib.sha256((patches_dir / name).read_bytes()).digest())
    return h.hexdigest()


def series_moved_on(state: ComposedState, patches_dir: Path, names: list[str]) -> bool:
    """Whether the target's part of the series changed since this tree was composed."""
    if not state.series_digest:  # composed before digests were recorded
        return False
    return tuple(names) != state.patches or series_digest(patches_dir, names) != state.series_digest


_IN_PROGRESS = (("rebase-merge", "a rebase"), ("rebase-apply", "a rebase or git am"),
                ("MERGE_HEAD", "a merge"), ("CHERRY_PICK_HEAD", "a cherry-pick"),
                ("REVERT_HEAD", "a revert"), ("BISECT_LOG", "a bisect"))


def operation_in_progress(work_tree: Path) -> str | None:
    for name, what in _IN_PROGRESS:
        if (git_dir(work_tree) / name).exists():
            return what
    return None


def current_branch(work_tree: Path) -> str | None:
    proc = gitcmd.git(["symbolic-ref", "-q", "--short", "HEAD"], cwd=work_tree, check=False)
    return proc.stdout.strip() or None


def why_not_readable(work_tree: Path, state: ComposedState) -> str | None:
    """Why the branch cannot be read back as the series right now (refresh, lock)."""
    doing = operation_in_progress(work_tree)
    if doing:
        return f"{doing} is in progress (finish or abort it first)"
    branch = current_branch(work_tree)
    if branch != state.branch:
        return (f"HEAD is on {branch or 'a detached commit'}, not {state.branch} "
                f"(git checkout {state.branch})")
    dirty = dirty_paths(work_tree)
    if dirty:
        return (f"it has uncommitted edits ({dirty[0]}): commit them on the composed branch "
                f"(git commit / --amend) first")
    return None


def dirty_paths(work_tree: Path) -> list[str]:
    # -z: names as they are (no C quoting), a rename's old name in the entry after it
    proc = gitcmd.git(["status", "--porcelain", "--untracked-files=normal", "-z"], cwd=work_tree)
    entries = iter(proc.stdout.split("\0"))
    out = []
    for entry in entries:
        if len(entry) < 4:
            continue
        out.append(entry[3:])
        if entry[0] in "RC":
            next(entries, None)
    return out


# Ignored paths that only hold what Python regenerates by itself: replacing a tree
# may drop these. Any other ignored file (a .venv/, notes.log, build outputs) is the
# user's and blocks replacement like an untracked file.
_REGENERATED = ("__pycache__", ".pytest_cache")


def ignored_paths(work_tree: Path) -> list[str]:
    """Git-ignored files and folders in the tree, less Python's own caches."""
    proc = gitcmd.git(["status", "--porcelain", "--ignored=matching", "--untracked-files=all",
                       "-z"], cwd=work_tree)
    out = []
    for entry in proc.stdout.split("\0"):
        if not entry.startswith("!! "):
            continue
        path = entry[3:]
        parts = path.rstrip("/").split("/")
        if any(p in _REGENERATED for p in parts) or path.endswith((".pyc", ".pyo")):
            continue
        out.append(path)
    return out


def why_not_replaceable(work_tree: Path, *, ignored_files: bool = False) -> str | None:
    """Why replacing this composed tree would lose work, or None when it is safe.

    `ignored_files`: also count git-ignored files as work (apply replaces the whole
    folder; lock and refresh only read commits, so they need not care)."""
    if not work_tree.exists():
        return None
    if not work_tree.is_dir():
        return "it is not a directory"
    if not (git_dir(work_tree) / "HEAD").is_file():
        return "it is not a composed git tree (remove it or choose another --into)"
    state = read_state(work_tree)
    if state is None:
        return "it has no overlay state: it was not composed by overlay (remove it or choose another --into)"
    doing = operation_in_progress(work_tree)
    if doing:
        return f"{doing} is in progress in it"
    try:
        dirty = dirty_paths(work_tree)
        current = head(work_tree)
    except gitcmd.GitFailed as exc:
        return f"git cannot read it ({exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else exc})"
    if dirty:
        more = f" and {len(dirty) - 1} more" if len(dirty) > 1 else ""
        return f"it holds uncommitted edits ({dirty[0]}{more})"
    if current != state.head:
        return f"it holds commits not in the series (HEAD {current[:12]}, composed {state.head[:12]})"
    if ignored_files:
        ignored = ignored_paths(work_tree)
        if ignored:
            more = f" and {len(ignored) - 1} more" if len(ignored) > 1 else ""
            return f"it holds git-ignored files that replacing it would delete ({ignored[0]}{more})"
    return None


def guard(work_tree: Path, pin: str, force: bool) -> None:
    reason = why_not_replaceable(work_tree, ignored_files=True)
    if reason and not force:
        user_work = "edits" in reason or "commits" in reason or "progress" in reason
        hint = (f"turn your work into patches with `overlay refresh --pin {pin}`, or pass --force "
                f"to discard it" if user_work else
                "move them out of the tree first, or pass --force to delete them" if "ignored" in reason
                else "remove it, or pass --force to replace it")
        raise OverlayError(f"refusing to replace the composed tree: {reason}", path=str(work_tree),
                           hint=hint)


def add_notes(work_tree: Path, patches: dict[str, str]) -> None:
    """Tie composed commits to their patch files, in one git process.

    Notes survive amend and rebase (notes.rewriteRef), so refresh can tell which
    series entry a reworked commit belongs to.
    """
    if not patches:
        return
    name, email = gitcmd.user_identity()
    parent = gitcmd.git(["rev-parse", "--verify", "--quiet", NOTES_REF], cwd=work_tree,
                        check=False).stdout.strip()
    stream = [f"commit {NOTES_REF}", f"committer {name} <{email}> 0 +0000", "data 0"]
    if parent:
        stream.append(f"from {parent}")
    for commit, patch in patches.items():
        body = f"patch: {patch}\n".encode()
        stream += [f"N inline {commit}", f"data {len(body)}", body.decode()]
    gitcmd.git(["fast-import", "--quiet", "--force"], cwd=work_tree,
               input="\n".join(stream) + "\n")
