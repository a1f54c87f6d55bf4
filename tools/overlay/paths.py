"""Where things live: composed trees, the object cache, and upstream mirrors."""

from __future__ import annotations

import os
from pathlib import Path

COMPOSED_DIR = "build"
BRANCH_PREFIX = "overlay/"


def composed_root(root: Path, into: Path | None = None) -> Path:
    """The directory holding one folder per pin set (default: <root>/build)."""
    return (into if into is not None else root / COMPOSED_DIR).resolve()


def composed_dir(root: Path, pin: str, target: str, into: Path | None = None) -> Path:
    """The composed git work tree of `target` at pin set `pin`: <into>/<pin>/<target>."""
    return composed_root(root, into) / pin / target


def branch_name(pin: str) -> str:
    """The branch a composed tree is on, named after its pin set."""
    return BRANCH_PREFIX + pin


def cache_dir(root: Path) -> Path:
    """Fetched objects and archives, reused across runs (OVERLAY_CACHE overrides)."""
    env = os.environ.get("OVERLAY_CACHE")
    return Path(env).resolve() if env else (root / ".overlay" / "cache").resolve()


def mirror_root(explicit: Path | None) -> Path | None:
    """--mirror, else $OVERLAY_MIRROR, else None."""
    if explicit is not None:
        return explicit.resolve()
    env = os.environ.get("OVERLAY_MIRROR")
    return Path(env).resolve() if env else None


def find_mirror_repo(mirror: Path, name: str) -> Path | None:
    """The git directory for repository `owner+name` inside a mirror directory.

    Accepted layouts: a normal clone (<name>/.git), a bare repository (<name>
    itself), or a bare git directory one level down (<name>/repo), as `fetch`
    snapshots are laid out.
    """
    base = mirror / name
    for candidate in (base / ".git", base, base / "repo"):
        if (candidate / "objects").is_dir() and (candidate / "HEAD").is_file():
            return candidate
    return None
