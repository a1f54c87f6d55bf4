"""Bring the upstream heads into the mirror before a drift run (`overlay drift --fetch`).

CI starts from nothing: each checked target's repository is cloned bare into
`<mirror>/<owner+name>` (the layout `paths.find_mirror_repo` reads) or, when it
is already there, its branches are fetched. Full history, no blob filter: drift
reads old blobs of many commits, and a partial clone would fetch them one by one.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from overlay import gitcmd, paths, reporting
from overlay.errors import OverlayError
from overlay.series.model import GitSource
from overlay.trees.sources import FETCH_TIMEOUT


def mirror_repo(mirror: Path, name: str) -> Path | None:
    """`paths.find_mirror_repo`, but a folder of that name that holds no git
    repository is an error, not "absent": the user put it there for a reason."""
    found = paths.find_mirror_repo(mirror, name)
    folder = mirror / name
    if found is None and (folder.exists() or folder.is_symlink()):
        raise OverlayError(f"mirror folder {folder} is not a git repository",
                           hint=f"make it a clone or bare clone of {name.replace('+', '/')} "
                                "(a repository in it, in .git/ or in repo/), or move it away")
    return found


def fetch_heads(mirror: Path, target: str, source: GitSource,
                progress: Callable[[str], None] | None = None) -> Path:
    """Clone or update the mirror of one git target; return its git directory."""
    existing = mirror_repo(mirror, source.mirror_name)
    if progress:
        progress(f"{target}: {'fetching' if existing else 'cloning'} {source.url}")
    config = gitcmd.fetch_config(source.url)
    if existing is None:
        mirror.mkdir(parents=True, exist_ok=True)
        dest = mirror / source.mirror_name
        git_dir = dest
        proc = gitcmd.git(["clone", "--bare", "--quiet", "--end-of-options", source.url, str(dest)],
                          timeout=FETCH_TIMEOUT, check=False, data=True, config=config)
    else:
        git_dir = existing
        proc = _update(existing, source.url, config)
    gitcmd.forget_view(git_dir)
    if proc.returncode != 0:
        reason = (proc.stderr or "").strip().splitlines()
        raise OverlayError(f"target '{target}': cannot fetch {source.url}: "
                           f"{reason[-1] if reason else 'git failed'}",
                           hint="check the URL and the network, or fill the mirror yourself")
    return git_dir


def _update(git_dir: Path, url: str, config: tuple[str, ...]) -> subprocess.CompletedProcess:
    """Fetch the upstream branches into an existing mirror without running git in it
    (its config, hooks and attributes may come from anywhere, a CI cache restore among
    them): git runs in a git directory of ours that borrows the mirror's objects folder
    (GIT_OBJECT_DIRECTORY, new objects arrive as one pack) and refs folder (linked), and
    copies of its packed-refs and shallow lists, which go back if git changed them."""
    _refuse_links(git_dir)
    with tempfile.TemporaryDirectory(prefix="overlay-fetch-") as tmp:
        ours = Path(tmp) / "git"
        ours.mkdir()
        settings = gitcmd.their_settings(git_dir, Path(tmp))
        fmt = gitcmd.object_format(git_dir, settings)
        # A work-tree clone cannot have its checked-out branch overwritten: fetch to origin/*.
        bare = settings.get("core.bare", "").lower() in ("true", "yes", "on", "1") or (
            "core.bare" not in settings and git_dir.name != ".git")
        spec = "+refs/heads/*:refs/heads/*" if bare else "+refs/heads/*:refs/remotes/origin/*"
        gitcmd.adopt(ours, fmt)
        (ours / "HEAD").write_text("ref: refs/heads/main\n")
        lent = gitcmd.lend_refs(git_dir, ours)
        proc = gitcmd.git(["fetch", "--quiet", "--prune", "--no-tags", "--no-recurse-submodules",
                           "--end-of-options", url, spec], git_dir=ours, timeout=FETCH_TIMEOUT,
                          check=False, data=True, config=(*config, "fetch.unpackLimit=1"),
                          env={"GIT_OBJECT_DIRECTORY": str((git_dir / "objects").resolve())})
        gitcmd.return_lists(git_dir, ours, lent)
        gitcmd.forget_ours(ours)
    return proc


def _refuse_links(git_dir: Path) -> None:
    """What the fetch writes (objects/, objects/pack/, refs/ and all below) must be inside
    the mirror: a symbolic link there is refused, not written through."""
    links = [p for p in (git_dir / "objects", git_dir / "objects" / "pack", git_dir / "refs")
             if p.is_symlink()]
    for folder, dirs, files in os.walk(git_dir / "refs"):
        links += [Path(folder) / n for n in dirs + files if (Path(folder) / n).is_symlink()]
    if links:
        raise OverlayError(f"mirror {git_dir}: {links[0].relative_to(git_dir)} is a symbolic link",
                           hint="drift --fetch writes only inside the mirror: replace the link "
                                "by a folder or re-clone the mirror")


def stderr_note(enabled: bool) -> Callable[[str], None] | None:
    """Fetch progress on a terminal only (the reporting layer decides)."""
    return reporting.progress("drift", quiet=not enabled)
