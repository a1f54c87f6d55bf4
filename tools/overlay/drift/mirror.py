"""Bring the upstream heads into the mirror before a drift run (`overlay drift --fetch`).

CI starts from nothing: each checked target's repository is cloned bare into
`<mirror>/<owner+name>` (the layout `paths.find_mirror_repo` reads) or, when it
is already there, its branches are fetched. Full history, no blob filter: drift
reads old blobs of many commits, and a partial clone would fetch them one by one.
"""

from __future__ import annotations

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
    if existing is None:
        mirror.mkdir(parents=True, exist_ok=True)
        dest = mirror / source.mirror_name
        args = ["clone", "--bare", "--quiet", source.url, str(dest)]
        git_dir = dest
        proc = gitcmd.git(args, timeout=FETCH_TIMEOUT, check=False, data=True)
    else:
        bare = gitcmd.out(["rev-parse", "--is-bare-repository"], git_dir=existing, data=True) == "true"
        # A work-tree clone cannot have its checked-out branch overwritten: fetch to origin/*.
        spec = "+refs/heads/*:refs/heads/*" if bare else "+refs/heads/*:refs/remotes/origin/*"
        git_dir = existing
        # Writing into the mirror runs git in it; DATA_CONFIG keeps its helpers from running.
        proc = gitcmd.git(["fetch", "--quiet", "--prune", "--no-tags", "--no-recurse-submodules",
                           source.url, spec], git_dir=existing, timeout=FETCH_TIMEOUT, check=False,
                          data=True)
    gitcmd.forget_view(git_dir)
    if proc.returncode != 0:
        reason = (proc.stderr or "").strip().splitlines()
        raise OverlayError(f"target '{target}': cannot fetch {source.url}: "
                           f"{reason[-1] if reason else 'git failed'}",
                           hint="check the URL and the network, or fill the mirror yourself")
    return git_dir


def stderr_note(enabled: bool) -> Callable[[str], None] | None:
    """Fetch progress on a terminal only (the reporting layer decides)."""
    return reporting.progress("drift", quiet=not enabled)
