"""A composed tree on disk: its recorded state and the guard against losing user work."""

from __future__ import annotations

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
    return gitcmd.out(["rev-parse", f"{rev}^{{tree}}"], cwd=work_tree)


def dirty_paths(work_tree: Path) -> list[str]:
    proc = gitcmd.git(["status", "--porcelain", "--untracked-files=normal"], cwd=work_tree)
    return [line[3:] for line in proc.stdout.splitlines() if line.strip()]


def why_not_replaceable(work_tree: Path) -> str | None:
    """Why replacing this composed tree would lose work, or None when it is safe."""
    if not work_tree.exists():
        return None
    if not (git_dir(work_tree) / "HEAD").is_file():
        return "it is not a composed git tree"
    state = read_state(work_tree)
    if state is None:
        return "it has no overlay state (was it composed by overlay?)"
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
    return None


def guard(work_tree: Path, pin: str, force: bool) -> None:
    reason = why_not_replaceable(work_tree)
    if reason and not force:
        raise OverlayError(f"refusing to replace {work_tree}: {reason}", path=str(work_tree),
                           hint=f"turn your commits into patches with `overlay refresh --pin {pin}`, "
                                f"or pass --force to discard them")


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
