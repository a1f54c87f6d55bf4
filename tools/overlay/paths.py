"""Where things live: composed trees, the object cache, and upstream mirrors."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

from overlay.errors import OverlayError

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


def mirror_root(explicit: Path | None, *, validate: bool = True) -> Path | None:
    """--mirror, else $OVERLAY_MIRROR, else None. A mirror that is named but is not a
    directory is an error (silently going to the network instead would hide it)."""
    if explicit is not None:
        where, how = explicit.resolve(), "--mirror"
    elif os.environ.get("OVERLAY_MIRROR"):
        where, how = Path(os.environ["OVERLAY_MIRROR"]).resolve(), "OVERLAY_MIRROR"
    else:
        return None
    if validate and not where.is_dir():
        raise OverlayError(f"the mirror given by {how} is not a directory", path=str(where),
                           hint="point it at a folder of clones named owner+name (README: mirror)")
    return where if where.is_dir() else None


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


class NotARegularFile(Exception):
    """`read_capped` refused a path that is no regular file; `kind` says what it is."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class OutsideTree(Exception):
    """`read_capped(..., within=tree)` refused a path that resolves outside the tree (a
    symlink, or `..`, leading out); `target` is where it leads."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


def file_kind(mode: int) -> str:
    """What a non-regular file is, as the refusals name it (`a FIFO`, `a device`, ...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _inside(real: str, tree: Path) -> bool:
    base = os.path.realpath(tree)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _open_regular(path: Path, within: Path | None) -> int:
    """A descriptor on the regular file `path` names (inside `within`, when given).

    Judged before the open (a FIFO or a device is never opened), and again on the opened
    descriptor, which must be the very file the resolved path inside the tree names: a
    swap between the check and the open is refused, not followed."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotARegularFile(file_kind(mode))
    real = os.path.realpath(path)
    if within is not None and not _inside(real, within):
        raise OutsideTree(real)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(file_kind(st.st_mode))
        if within is not None:
            there = os.stat(real)
            if (there.st_dev, there.st_ino) != (st.st_dev, st.st_ino):
                raise OutsideTree(real)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def iter_capped(path: Path, limit: int, *, within: Path | None = None,
                chunk: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of a regular file in chunks, at most `limit + 1` in all (the caller refuses
    more than `limit`): the one reader for files someone else may have put there. The open
    does not block, a FIFO, a device or a socket is refused unopened (NotARegularFile),
    and with `within` a path resolving outside that tree is refused (OutsideTree). Raises
    those, or the OSError of the open or the read, for the caller to word with its own path
    and hint."""
    fd = _open_regular(path, within)
    try:
        size = 0
        while size <= limit:
            data = os.read(fd, min(chunk, limit + 1 - size))
            if not data:
                break
            size += len(data)
            yield data
    finally:
        os.close(fd)


def read_capped(path: Path, limit: int, *, within: Path | None = None) -> bytes:
    """At most `limit + 1` bytes of a regular file (see iter_capped)."""
    return b"".join(iter_capped(path, limit, within=within))


def not_ours_to_run(uid: int, mode: int, me: int) -> str | None:
    """Why a file or folder with owner `uid` and `mode` is no place to run code from for
    user `me` (another user owns it, or its group or anyone may write it); None when it is
    ours alone. Pure."""
    if uid != me:
        return f"owned by another user (uid {uid})"
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by its group or by others"
    return None


def require_ours_to_run(path: Path, hint: str) -> None:
    """Refuse (one OverlayError naming the path) unless `path`, as it resolves, belongs to
    the current user and no one else may write it: code found there is about to run."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise OverlayError(f"cannot check who owns it: {exc.strerror}", path=str(path), hint=hint) from None
    why = not_ours_to_run(st.st_uid, st.st_mode, os.geteuid())
    if why is not None:
        raise OverlayError(f"{why}; refusing to run code from it", path=str(path), hint=hint)
