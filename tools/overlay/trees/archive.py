"""Import a source archive as a sandboxed copy: bounded, regular members only, nothing outside.

A pinned sdist is data. Before anything is written, every member is vetted: regular
files, folders, and symlinks whose target stays inside the archive's top folder are
accepted; hardlinks, devices, FIFOs, absolute names, `..`, `.git/` and names git
cannot carry are refused with one line naming the archive and the member. The bytes
read are capped (total size, member count, compression ratio), so a small archive
cannot expand without bound. The import itself reads no attributes and runs no
filter: blobs are hashed as-is (`hash-object --no-filters`) and the tree is built
from an index we write, so the commit depends only on the archive's bytes.
"""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import shutil
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from overlay import gitcmd
from overlay.errors import OverlayError

Progress = Callable[[str], None]

# Real vLLM sdists: about 50 MB, 10k members, 140 MB unpacked (ratio about 3).
ACCEPTED = (".tar.gz", ".tgz", ".zip")
REFUSED = (".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".tar.zst")
_RATIO_FLOOR = 16 << 20  # below this many unpacked bytes the ratio is not checked


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 2 << 30  # unpacked bytes, headers included
    max_members: int = 200_000
    max_ratio: int = 50  # unpacked bytes per archive byte

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Limits":
        env = os.environ if env is None else env
        values = {}
        for field, var in (("max_bytes", "OVERLAY_ARCHIVE_MAX_BYTES"),
                           ("max_members", "OVERLAY_ARCHIVE_MAX_MEMBERS"),
                           ("max_ratio", "OVERLAY_ARCHIVE_MAX_RATIO")):
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            try:
                value = int(raw)
            except ValueError:
                value = 0
            if value <= 0:
                raise OverlayError(f"{var}={raw!r} is not a positive whole number",
                                   hint=f"unset {var} or give e.g. {getattr(cls, field)}")
            values[field] = value
        return cls(**values)

    def unpacked_cap(self, archive_size: int) -> tuple[int, str]:
        """Bytes the archive may expand to, and which limit sets that number."""
        by_ratio = max(self.max_ratio * archive_size, _RATIO_FLOOR)
        if by_ratio < self.max_bytes:
            return by_ratio, f"{self.max_ratio}x its own size (OVERLAY_ARCHIVE_MAX_RATIO)"
        return self.max_bytes, f"{self.max_bytes} bytes (OVERLAY_ARCHIVE_MAX_BYTES)"


def kind(name: str) -> str | None:
    """'accepted', 'refused' (a compression we do not read) or None (not an archive)."""
    if name.endswith(ACCEPTED):
        return "accepted"
    if name.endswith(REFUSED):
        return "refused"
    return None


def open_regular(path: Path) -> BinaryIO:
    """Open an archive for reading only if it is a regular file (a FIFO or a device named
    like an archive would hang or never end). O_NONBLOCK: opening a FIFO never waits."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise OverlayError(f"cannot read the archive: {exc.strerror}", path=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise OverlayError("the archive is not a regular file", path=str(path),
                           hint="replace it with the release's source archive")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise OverlayError(f"cannot read the archive: {exc.strerror}", path=str(path)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
        os.close(fd)
        raise OverlayError("the archive is not a regular file", path=str(path),
                           hint="replace it with the release's source archive")
    return os.fdopen(fd, "rb")


class _TooBig(Exception):
    pass


class _Bounded(io.RawIOBase):
    """A seekable view of a decompressed stream that refuses to go past `limit` bytes."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self.raw = raw
        self.limit = limit

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.raw.tell()

    def read(self, n: int = -1) -> bytes:
        room = self.limit - self.raw.tell()
        if n is None or n < 0 or n > room:
            data = self.raw.read(max(room, 0) + 1)
            if len(data) > room:
                raise _TooBig()
            return data
        return self.raw.read(n)

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        target = {0: offset, 1: self.raw.tell() + offset}.get(whence)
        if target is None:  # from the end: would decompress everything
            raise _TooBig()
        if target > self.limit:
            raise _TooBig()
        return self.raw.seek(target)


def _shown(name: str) -> str:
    """A member name as one printable token."""
    return name if name.isprintable() and name.strip() == name and name else repr(name)


def _clean(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/")


def _refuse(archive: Path, member: str, why: str) -> OverlayError:
    return OverlayError(f"archive member {_shown(member)} {why}; nothing was imported",
                        path=str(archive), hint="the archive is not a plain source release: "
                                                "replace it with the published one")


def _check_name(archive: Path, name: str) -> list[str]:
    if not name:
        raise _refuse(archive, name, "has an empty name")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise _refuse(archive, name, "has an absolute name")
    if "\\" in name:
        raise _refuse(archive, name, "has a backslash in its name")
    if any(c in name for c in "\n\r\0"):
        raise _refuse(archive, name, "has a line break or NUL in its name")
    parts = name.split("/")
    if ".." in parts:
        raise _refuse(archive, name, "escapes the archive with '..'")
    if any(p.lower() == ".git" for p in parts):
        raise _refuse(archive, name, "reaches into a .git folder")
    return [p for p in parts if p not in ("", ".")]


@dataclass(frozen=True)
class _Member:
    name: str  # cleaned, '/'-separated
    kind: str  # "file", "dir", "symlink"
    size: int
    link: str = ""
    executable: bool = False


def _check_link(archive: Path, name: str, target: str, top: str | None) -> None:
    """A symlink is kept only if its target, taken from the link's folder, stays inside
    the archive's top folder (the tree that becomes the import)."""
    if not target or target.startswith("/") or "\0" in target or "\n" in target:
        raise _refuse(archive, name, f"is a symlink to {_shown(target)}, outside the archive")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    root = top or ""
    inside = resolved != ".." and not resolved.startswith("../") and (
        not root or resolved == root or resolved.startswith(root + "/"))
    if not inside or resolved == root or resolved == ".":
        raise _refuse(archive, name, f"is a symlink to {_shown(target)}, outside its top folder")


def _vet(archive: Path, members: list[_Member]) -> str | None:
    """Check the whole listing; return the single top folder (None when there is none)."""
    seen: set[str] = set()
    tops = {m.name.split("/")[0] for m in members}
    top = next(iter(tops)) if len(tops) == 1 else None
    if top is not None and not any(m.name == top and m.kind == "dir" for m in members) and \
            not any(m.name.startswith(top + "/") for m in members):
        top = None  # a lone file, not a folder
    links = {m.name for m in members if m.kind == "symlink"}
    for m in members:
        if m.name in seen:
            raise _refuse(archive, m.name, "appears twice")
        seen.add(m.name)
        parents = m.name.split("/")[:-1]
        for k in range(1, len(parents) + 1):
            if "/".join(parents[:k]) in links:
                raise _refuse(archive, m.name, "lies under a symlink member")
        if m.kind == "symlink":
            _check_link(archive, m.name, m.link, top)
    return top


def _tar_members(archive: Path, tf: tarfile.TarFile, limits: Limits) -> Iterator[tuple[tarfile.TarInfo, _Member]]:
    count = 0
    for info in tf:
        count += 1
        if count > limits.max_members:
            raise OverlayError(f"the archive holds more than {limits.max_members} members; "
                               "nothing was imported", path=str(archive),
                               hint="raise OVERLAY_ARCHIVE_MAX_MEMBERS if the release really is that large")
        name = _clean(info.name)
        _check_name(archive, info.name)
        if info.isreg():
            yield info, _Member(name, "file", info.size, executable=bool(info.mode & 0o100))
        elif info.isdir():
            yield info, _Member(name, "dir", 0)
        elif info.issym():
            yield info, _Member(name, "symlink", 0, link=info.linkname)
        elif info.islnk():
            raise _refuse(archive, info.name, f"is a hardlink (to {_shown(info.linkname)})")
        elif info.ischr() or info.isblk():
            raise _refuse(archive, info.name, "is a device")
        elif info.isfifo():
            raise _refuse(archive, info.name, "is a FIFO")
        else:
            raise _refuse(archive, info.name, "is not a regular file, folder or symlink")


def _zip_members(archive: Path, zf: zipfile.ZipFile, limits: Limits) -> list[tuple[zipfile.ZipInfo, _Member]]:
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise OverlayError(f"the archive holds {len(infos)} members, more than "
                           f"{limits.max_members}; nothing was imported", path=str(archive),
                           hint="raise OVERLAY_ARCHIVE_MAX_MEMBERS if the release really is that large")
    out = []
    for info in infos:
        _check_name(archive, info.filename)
        name = _clean(info.filename)
        mode = info.external_attr >> 16
        fmt = stat.S_IFMT(mode)
        if info.is_dir():
            out.append((info, _Member(name, "dir", 0)))
        elif fmt in (0, stat.S_IFREG):
            out.append((info, _Member(name, "file", info.file_size, executable=bool(mode & 0o100))))
        elif fmt == stat.S_IFLNK:
            if info.file_size > 4096:
                raise _refuse(archive, info.filename, "is a symlink with an over-long target")
            target = zf.read(info).decode("utf-8", "surrogateescape")
            out.append((info, _Member(name, "symlink", 0, link=target)))
        else:
            raise _refuse(archive, info.filename, "is not a regular file, folder or symlink")
    return out


def _place(dest: Path, member: _Member) -> Path:
    path = dest.joinpath(*member.name.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _extract_tar(archive: Path, f: BinaryIO, dest: Path, limits: Limits, size: int) -> str | None:
    cap, which = limits.unpacked_cap(size)
    try:
        stream = _Bounded(gzip.GzipFile(fileobj=f, mode="rb"), cap)
        with tarfile.open(fileobj=stream, mode="r:") as tf:
            pairs = list(_tar_members(archive, tf, limits))
            top = _vet(archive, [m for _, m in pairs])
            members = [info for info, _ in pairs]
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, members=members, filter="data")
            else:  # Python before 3.10.12: every member was vetted above
                tf.extractall(dest, members=members)
    except _TooBig:
        raise OverlayError(f"the archive unpacks to more than {cap} bytes, the cap of {which}; "
                           "nothing was imported", path=str(archive),
                           hint="a release this large needs the cap raised; otherwise replace the archive") from None
    except getattr(tarfile, "FilterError", ()) as exc:  # a second line of defence behind ours
        member = getattr(exc, "tarinfo", None)
        raise _refuse(archive, member.name if member else "?",
                      f"is refused by tarfile's data filter ({type(exc).__name__})") from None
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise OverlayError(f"the archive is not a readable gzip-compressed tar ({exc})",
                           path=str(archive), hint="replace it with the release's .tar.gz") from None
    return top


def _extract_zip(archive: Path, f: BinaryIO, dest: Path, limits: Limits, size: int) -> str | None:
    cap, which = limits.unpacked_cap(size)
    try:
        with zipfile.ZipFile(f) as zf:
            pairs = _zip_members(archive, zf, limits)
            if sum(m.size for _, m in pairs) > cap:
                raise _TooBig()
            top = _vet(archive, [m for _, m in pairs])
            written = 0
            for info, m in pairs:
                path = _place(dest, m)
                if m.kind == "dir":
                    path.mkdir(exist_ok=True)
                elif m.kind == "symlink":
                    os.symlink(m.link, path)
                else:
                    with zf.open(info) as src, open(path, "xb") as out:
                        while chunk := src.read(1 << 20):
                            written += len(chunk)
                            if written > cap:
                                raise _TooBig()
                            out.write(chunk)
                    if m.executable:
                        path.chmod(0o755)
    except _TooBig:
        raise OverlayError(f"the archive unpacks to more than {cap} bytes, the cap of {which}; "
                           "nothing was imported", path=str(archive),
                           hint="a release this large needs the cap raised; otherwise replace the archive") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
        raise OverlayError(f"the archive is not a readable zip ({exc})", path=str(archive),
                           hint="replace it with the release's source archive") from None
    return top


def _walk_checked(archive: Path, top: Path) -> list[tuple[str, Path, str]]:
    """(path in the tree, file, git mode) of everything extracted, checked once more on
    disk: only regular files and symlinks that resolve inside `top`."""
    root = os.path.realpath(top)
    found = []
    for folder, dirs, files in os.walk(top):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            rel = path.relative_to(top).as_posix()
            st = path.lstat()
            if stat.S_ISDIR(st.st_mode):
                continue
            if stat.S_ISLNK(st.st_mode):
                real = os.path.realpath(path)
                if real == root or not real.startswith(root + os.sep):
                    raise _refuse(archive, rel, f"is a symlink to {_shown(os.readlink(path))}, "
                                                "outside its top folder")
                found.append((rel, path, "120000"))
            elif stat.S_ISREG(st.st_mode):
                found.append((rel, path, "100755" if st.st_mode & 0o100 else "100644"))
            else:
                raise _refuse(archive, rel, "is not a regular file, folder or symlink")
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink()]
    return sorted(found)


def extract(archive: Path, f: BinaryIO, dest: Path, limits: Limits | None = None) -> Path:
    """Unpack the vetted archive (open as `f`) into `dest`; return its single top folder
    (or `dest` when it has none)."""
    limits = limits or Limits.from_env()
    size = os.fstat(f.fileno()).st_size
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        top = _extract_zip(archive, f, dest, limits, size)
    elif archive.name.endswith((".tar.gz", ".tgz")):
        top = _extract_tar(archive, f, dest, limits, size)
    else:
        raise OverlayError("the archive is neither .tar.gz nor .zip", path=str(archive),
                           hint="PyPI source archives are .tar.gz (older ones .zip)")
    where = dest / top if top else dest
    return where if where.is_dir() else dest


def import_tree(cache: Path, archive: Path, top: Path, message: str, env: dict[str, str],
                progress: Progress | None = None) -> str:
    """One commit of the files under `top`, built from objects only (no attributes, no
    filters, no ignore rules); return its id."""
    entries = _walk_checked(archive, top)
    if progress:
        progress(f"importing {sum(1 for e in entries if e[2] != '120000')} files into the object cache")
    hashed = []
    scratch = top.parent / ".overlay-link-targets"
    scratch.mkdir()
    for k, (rel, path, mode) in enumerate(entries):
        if mode == "120000":  # the blob of a symlink is its target's text
            holder = scratch / str(k)
            holder.write_bytes(os.fsencode(os.readlink(path)))
            hashed.append(holder)
        else:
            hashed.append(path)
    oids = gitcmd.git(["hash-object", "-w", "--no-filters", "--stdin-paths"], git_dir=cache,
                      input=b"".join(os.fsencode(p) + b"\n" for p in hashed), text=False,
                      data=True).stdout.decode().split()
    shutil.rmtree(scratch)
    if len(oids) != len(entries):
        raise OverlayError("git hash-object did not hash every archive member", path=str(archive))
    listing = b"".join(f"{mode} {oid}\t".encode() + os.fsencode(rel) + b"\0"
                       for (rel, _, mode), oid in zip(entries, oids))
    gitcmd.git(["update-index", "-z", "--add", "--index-info"], git_dir=cache, input=listing,
               env=env, text=False, data=True)
    return gitcmd.out(["write-tree"], git_dir=cache, env=env, data=True)
