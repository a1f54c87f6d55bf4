"""Import a source archive as git objects: one canonical model of its members, no file written.

A pinned sdist (or, for a release that publishes none, its wheel: a zip whose members have no
top folder) is data. Its member table (tar or zip, the same model for both) is read and
vetted whole before anything is stored:
- every name must already be canonical (no `.`, `..` or empty component, no leading `/`,
  no backslash, no control character, no `.git` folder): a name that only normalises to a
  good one (`TOP/./x`, `TOP//x`) is refused, so two spellings can never name one path;
- regular files, folders and symlinks only (hardlinks, devices, FIFOs are refused), each
  name once, none both a file and a folder, none under a symlink member;
- a symlink is resolved against the member table itself, following chains, and must
  stay inside the archive's top folder at every step (a link that looks inside by its
  text but leaves through another link is refused);
- the bytes read are capped (total size, member count, compression ratio).

Nothing is extracted. Blobs are hashed here and stored with `git fast-import` (content
only: no attributes, no filters), the tree is built from an index we write, so no path is
ever opened through a link, whatever the Python patch level (tarfile's extraction filters
play no part), and the commit depends only on the archive's bytes. A work tree of an
import, where one is needed (the gate's forward view), is checked out by git from that
vetted tree (`checkout_tree`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import subprocess
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
ACCEPTED = (".tar.gz", ".tgz", ".zip", ".whl")
WHEEL = ".whl"  # a zip laid out as installed: the package and `<name>-<version>.dist-info/` at its top
REFUSED = (".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".tar.zst")
_RATIO_FLOOR = 16 << 20  # below this many unpacked bytes the ratio is not checked
MAX_LINK_HOPS = 40  # as the kernel's MAXSYMLINKS
MAX_LINK_TARGET = 4096


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


def wheel_release(filename: str) -> tuple[str, str] | None:
    """(name, version) of a wheel's file name, `{name}-{version}(-{build})?-{py}-{abi}-{platform}.whl`
    (PEP 427), as spelled; None for any other name."""
    if not filename.endswith(WHEEL):
        return None
    parts = filename[: -len(WHEEL)].split("-")
    return (parts[0], parts[1]) if len(parts) in (5, 6) else None


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


# ----------------------------------------------------------------------------- the model

def _shown(name: str) -> str:
    """A member name as one printable token, at most 200 characters."""
    text = name if name.isprintable() and name.strip() == name and name else repr(name)
    return text if len(text) <= 200 else text[:200] + f"... ({len(text)} characters)"


def _refuse(archive: Path, member: str, why: str) -> OverlayError:
    return OverlayError(f"archive member {_shown(member)} {why}; nothing was imported",
                        path=str(archive), hint="the archive is not a plain source release: "
                                                "replace it with the published one")


def canonical_name(name: str, is_dir: bool) -> str | None:
    """The member's canonical name, or None when `name` is not already canonical (one
    trailing '/' is allowed on a folder, nothing else is rewritten). Pure."""
    if is_dir and name.endswith("/"):
        name = name[:-1]
    parts = name.split("/")
    if not name or any(p in ("", ".", "..") for p in parts):
        return None
    return name


def name_problem(name: str) -> str | None:
    """Why a raw member name is refused, or None. Pure."""
    if not name:
        return "has an empty name"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "has an absolute name"
    if "\\" in name:
        return "has a backslash in its name"
    if "\n" in name or "\r" in name or "\0" in name:
        return "has a line break or NUL in its name"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "has a control character in its name"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "escapes the archive with '..'"
    if any(p.lower() == ".git" for p in parts):
        return "reaches into a .git folder"
    return None


@dataclass(frozen=True)
class Member:
    name: str  # canonical, '/'-separated, top folder included
    kind: str  # "file", "dir", "symlink"
    size: int
    link: str = ""
    executable: bool = False


def _member(archive: Path, raw: str, kind: str, size: int, link: str = "",
            executable: bool = False) -> Member:
    why = name_problem(raw)
    if why:
        raise _refuse(archive, raw, why)
    name = canonical_name(raw, kind == "dir")
    if name is None:
        raise _refuse(archive, raw, "is not a canonical name (an empty or '.' component)")
    return Member(name, kind, size, link, executable)


def vet(archive: Path, members: list[Member]) -> str | None:
    """Check the whole table; return the single top folder (None when there is none)."""
    tops = {m.name.split("/")[0] for m in members}
    top = next(iter(tops)) if len(tops) == 1 else None
    if top is not None and not any(m.name.startswith(top + "/") for m in members):
        top = None  # a lone file, not a folder
    kinds: dict[str, str] = {}
    for m in members:
        if m.name in kinds:
            raise _refuse(archive, m.name, "appears twice")
        kinds[m.name] = m.kind
    links = {m.name: m.link for m in members if m.kind == "symlink"}
    for m in members:
        parts = m.name.split("/")
        for k in range(1, len(parts)):
            above = kinds.get("/".join(parts[:k]))
            if above == "symlink":
                raise _refuse(archive, m.name, "lies under a symlink member")
            if above == "file":
                raise _refuse(archive, m.name, "lies under a member that is a file")
    for name, target in links.items():
        if len(target) > MAX_LINK_TARGET:
            raise _refuse(archive, name, "is a symlink with an over-long target")
        resolved = follow(name, target, links, top)
        if resolved is None or len(resolved) <= (1 if top else 0):
            raise _refuse(archive, name, f"is a symlink to {_shown(target)}, outside its top folder")
    return top


def follow(name: str, target: str, links: dict[str, str], top: str | None,
           hops: int = 0) -> list[str] | None:
    """Physical resolution of symlink `name` -> `target` against the table's symlinks
    (`links`: name -> target): the components it lands on, top included; None when a step
    leaves the top folder or the chain exceeds MAX_LINK_HOPS. Pure."""
    if hops > MAX_LINK_HOPS:
        return None
    if not target or target.startswith("/") or "\0" in target or "\\" in target:
        return None
    floor = 1 if top else 0  # the top folder is stripped on import: never at or above it
    stack = name.split("/")[:-1]
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if len(stack) <= floor:
                return None
            stack.pop()
            continue
        stack.append(part)
        here = "/".join(stack)
        if here in links:
            inner = follow(here, links[here], links, top, hops + 1)
            if inner is None:
                return None
            stack = inner
    return stack


# ----------------------------------------------------------------------------- reading tables

def _too_many(archive: Path, limits: Limits) -> OverlayError:
    return OverlayError(f"the archive holds more than {limits.max_members} members; "
                        "nothing was imported", path=str(archive),
                        hint="raise OVERLAY_ARCHIVE_MAX_MEMBERS if the release really is that large")


def _tar_table(archive: Path, tf: tarfile.TarFile, limits: Limits) -> list[tuple[tarfile.TarInfo, Member]]:
    out = []
    for info in tf:
        if len(out) >= limits.max_members:
            raise _too_many(archive, limits)
        if info.isreg():
            m = _member(archive, info.name, "file", info.size, executable=bool(info.mode & 0o100))
        elif info.isdir():
            m = _member(archive, info.name, "dir", 0)
        elif info.issym():
            m = _member(archive, info.name, "symlink", 0, link=info.linkname)
        elif info.islnk():
            raise _refuse(archive, info.name, f"is a hardlink (to {_shown(info.linkname)})")
        elif info.ischr() or info.isblk():
            raise _refuse(archive, info.name, "is a device")
        elif info.isfifo():
            raise _refuse(archive, info.name, "is a FIFO")
        else:
            raise _refuse(archive, info.name, "is not a regular file, folder or symlink")
        out.append((info, m))
    return out


def _zip_table(archive: Path, zf: zipfile.ZipFile, limits: Limits) -> list[tuple[zipfile.ZipInfo, Member]]:
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise _too_many(archive, limits)
    out = []
    for info in infos:
        mode = info.external_attr >> 16
        fmt = stat.S_IFMT(mode)
        if info.filename.endswith("/") or fmt == stat.S_IFDIR:
            m = _member(archive, info.filename, "dir", 0)
        elif fmt in (0, stat.S_IFREG):
            m = _member(archive, info.filename, "file", info.file_size, executable=bool(mode & 0o100))
        elif fmt == stat.S_IFLNK:
            if info.file_size > MAX_LINK_TARGET:
                raise _refuse(archive, info.filename, "is a symlink with an over-long target")
            target = zf.read(info).decode("utf-8", "surrogateescape")
            m = _member(archive, info.filename, "symlink", 0, link=target)
        else:
            raise _refuse(archive, info.filename, "is not a regular file, folder or symlink")
        out.append((info, m))
    return out


def _read_all(src: BinaryIO, budget: list[int]) -> bytes:
    """A member's bytes, charged against the archive's remaining unpacked budget."""
    chunks = []
    while chunk := src.read(1 << 20):
        budget[0] -= len(chunk)
        if budget[0] < 0:
            raise _TooBig()
        chunks.append(chunk)
    return b"".join(chunks)


def _tar_contents(archive: Path, f: BinaryIO, cap: int, limits: Limits
                  ) -> tuple[list[Member], Callable[[], Iterator[tuple[Member, bytes]]]]:
    stream = _Bounded(gzip.GzipFile(fileobj=f, mode="rb"), cap)
    tf = tarfile.open(fileobj=stream, mode="r:")
    pairs = _tar_table(archive, tf, limits)

    def contents() -> Iterator[tuple[Member, bytes]]:
        budget = [cap]
        for info, m in pairs:
            if m.kind == "file":
                handle = tf.extractfile(info)
                yield m, _read_all(handle, budget) if handle is not None else b""
    return [m for _, m in pairs], contents


def _zip_contents(archive: Path, f: BinaryIO, cap: int, limits: Limits
                  ) -> tuple[list[Member], Callable[[], Iterator[tuple[Member, bytes]]]]:
    zf = zipfile.ZipFile(f)
    pairs = _zip_table(archive, zf, limits)
    if sum(m.size for _, m in pairs) > cap:
        raise _TooBig()

    def contents() -> Iterator[tuple[Member, bytes]]:
        budget = [cap]
        for info, m in pairs:
            if m.kind == "file":
                with zf.open(info) as src:
                    yield m, _read_all(src, budget)
    return [m for _, m in pairs], contents


def _read_error(archive: Path, exc: BaseException, cap: int, which: str) -> OverlayError | None:
    """The one line for a failure while reading either format, or None (not ours to map)."""
    if isinstance(exc, _TooBig):
        return OverlayError(f"the archive unpacks to more than {cap} bytes, the cap of {which}; "
                            "nothing was imported", path=str(archive),
                            hint="a release this large needs the cap raised; otherwise replace the archive")
    if archive.name.endswith((".zip", WHEEL)):
        if isinstance(exc, (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError)):
            return OverlayError(f"the archive is not a readable zip ({exc})", path=str(archive),
                                hint="replace it with the release's source archive")
    elif isinstance(exc, (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)):
        return OverlayError(f"the archive is not a readable gzip-compressed tar ({exc})",
                            path=str(archive), hint="replace it with the release's .tar.gz")
    return None


# ----------------------------------------------------------------------------- import

def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _BlobWriter:
    """Blobs into the cache through one `git fast-import` (content only, no filters)."""

    def __init__(self, cache: Path) -> None:
        self.proc = subprocess.Popen(gitcmd.command(cache, data=True) + ["fast-import", "--quiet", "--done"],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=gitcmd.data_env())
        self.seen: set[str] = set()

    def add(self, data: bytes) -> str:
        oid = _blob_id(data)
        if oid not in self.seen:
            self.seen.add(oid)
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"blob\ndata %d\n" % len(data) + data + b"\n")
        return oid

    def close(self, archive: Path) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"done\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        err = self.proc.stderr.read().decode("utf-8", "replace") if self.proc.stderr else ""
        if self.proc.wait() != 0:
            raise OverlayError(f"git fast-import could not store the archive's files: "
                               f"{err.strip().splitlines()[-1] if err.strip() else 'failed'}",
                               path=str(archive))

    def abandon(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _strip(name: str, top: str | None) -> str:
    return name[len(top) + 1:] if top else name


def import_tree(cache: Path, archive: Path, f: BinaryIO, env: dict[str, str],
                limits: Limits | None = None, progress: Progress | None = None) -> str:
    """The git tree of the archive (open as `f`), top folder stripped; return its id.
    The whole table is vetted before any object is stored."""
    limits = limits or Limits.from_env()
    gitcmd.adopt(cache)  # the objects are written into the cache itself, never a view of it
    size = os.fstat(f.fileno()).st_size
    cap, which = limits.unpacked_cap(size)
    if archive.name.endswith((".zip", WHEEL)):
        reader = _zip_contents
    elif archive.name.endswith((".tar.gz", ".tgz")):
        reader = _tar_contents
    else:
        raise OverlayError("the archive is neither .tar.gz, .zip nor a wheel", path=str(archive),
                           hint="PyPI source archives are .tar.gz (older ones .zip); wheels end in .whl")
    try:
        members, contents = reader(archive, f, cap, limits)
        top = vet(archive, members)
        if archive.name.endswith(WHEEL):
            top = None  # a wheel's members sit at its top: nothing is stripped (vetting is the same)
        files = [m for m in members if m.kind == "file"]
        if progress:
            progress(f"importing {len(files)} files into the object cache")
        entries: list[tuple[str, str, str]] = []  # (mode, oid, path in the tree)
        writer = _BlobWriter(cache)
        try:
            for m, data in contents():
                entries.append(("100755" if m.executable else "100644", writer.add(data),
                                _strip(m.name, top)))
            for m in members:
                if m.kind == "symlink":  # the blob of a symlink is its target's text
                    entries.append(("120000", writer.add(os.fsencode(m.link)), _strip(m.name, top)))
        except BaseException:
            writer.abandon()
            raise
        writer.close(archive)
    except OverlayError:
        raise
    except Exception as exc:  # noqa: BLE001 - mapped to one line, or re-raised
        mapped = _read_error(archive, exc, cap, which)
        if mapped is None:
            raise
        raise mapped from None
    listing = b"".join(f"{mode} {oid}\t".encode() + os.fsencode(rel) + b"\0"
                       for mode, oid, rel in sorted(entries, key=lambda e: os.fsencode(e[2])))
    gitcmd.git(["update-index", "-z", "--add", "--index-info"], git_dir=cache, input=listing,
               env=env, text=False, data=True)
    return gitcmd.out(["write-tree"], git_dir=cache, env=env, data=True)


def checkout_tree(cache: Path, rev: str, dest: Path, env: dict[str, str]) -> None:
    """Write the vetted tree of `rev` into the empty folder `dest` with git's own checkout
    (which never writes through a symlink it created)."""
    dest.mkdir(parents=True, exist_ok=False)
    gitcmd.git(["read-tree", "--end-of-options", rev], git_dir=cache, env=env, data=True)
    gitcmd.git(["--work-tree", str(dest), "checkout-index", "-a"], git_dir=cache, env=env, data=True)
