"""Where a tree's files come from: a directory, or one commit of a git object database.

The gate only ever asks for single files by path, so the same index code runs on a
checked-out tree and, for bisection, straight on git objects (no checkout, no build).
A git tree reads blobs through one long-lived `git cat-file --batch` process; blob
ids double as cache keys, so a file unchanged between two commits is parsed once.

Both trees are data someone else wrote: every file is read through the one bounded
reader (paths.read_capped: a regular file inside the tree, at most FILE_MAX_BYTES), and
a blob over the cap is not read. A file refused is absent to `read` and recorded in
`skipped` (path -> why, as a note says it), so the gate can say it did not gate it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
from pathlib import Path
from typing import Iterator, Protocol

from overlay import gitcmd, paths
from overlay.errors import OverlayError
from overlay.gitcmd import GitFailed

# Directories that never hold importable source of the tree itself.
# package data the gate reads for the plugin names it ships (stage configs naming worker classes)
DATA_SUFFIXES = (".yaml", ".yml", ".json")
# every file a run reads: sources, package data, packaging metadata (entry points)
READ_SUFFIXES = (".py", *DATA_SUFFIXES, ".toml", ".cfg", ".txt", "PKG-INFO", "METADATA")
SKIP_DIRS = frozenset({".git", "__pycache__", "build", "dist", ".tox", ".venv", "node_modules"})

# vLLM's largest source file is a few hundred KB; a parsed file costs ~100x its size in memory.
FILE_MAX_BYTES = 8 << 20
ENV_FILE_MAX_BYTES = "OVERLAY_GATE_FILE_MAX_BYTES"


def file_limit() -> int:
    try:
        return int(os.environ.get(ENV_FILE_MAX_BYTES, "")) or FILE_MAX_BYTES
    except ValueError:
        return FILE_MAX_BYTES


def too_large(limit: int) -> str:
    return f"is larger than {limit} bytes ({ENV_FILE_MAX_BYTES} raises the cap)"


class TreeSource(Protocol):
    """Read-only access to the files of one tree, by '/'-separated relative path."""

    skipped: dict[str, str]  # files that are there but were not read: path -> why

    def read(self, path: str) -> bytes | None: ...

    def is_dir(self, path: str) -> bool: ...

    def key(self, path: str) -> str: ...  # cache key: changes when the content changes

    def py_files(self, under: str = "") -> Iterator[str]: ...

    def files(self, under: str = "", suffixes: tuple[str, ...] = (".py",)) -> Iterator[str]: ...

    def label(self) -> str: ...

    def tree_id(self) -> str: ...  # names the whole tree's content: the index cache's key


def blob_id(data: bytes) -> str:
    """Git's object id of a blob holding `data`: a file's content key, the same whether the
    file is read from a directory or from a commit, so every source shares one index."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class DirSource:
    """A tree on disk. A file's cache key is its content's blob id (see `key`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._tree_id: str | None = None
        self._keys: dict[str, str] = {}
        self._data: dict[str, bytes | None] = {}  # what `read` answered, once per file and run
        self.skipped: dict[str, str] = {}

    def tree_id(self) -> str:
        """A digest of the path, size and modification time of every file the gate reads (Python
        files, package data, packaging metadata): any edit, addition or removal changes it
        (content is not read: a cold run stays cheap)."""
        if self._tree_id is None:
            h = hashlib.sha256(b"dir-v2\0")
            for path in self.files(suffixes=READ_SUFFIXES):
                try:
                    st = (self.root / path).stat()
                except OSError:
                    continue
                h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            self._tree_id = "dir-" + h.hexdigest()[:32]
        return self._tree_id

    def read(self, path: str) -> bytes | None:
        """The file's bytes through the bounded reader, or None (refused: see `skipped`).
        Read once per source: the key, the index and the text searches share it."""
        if path in self._data:
            return self._data[path]
        data = self._read(path)
        self._data[path] = data
        return data

    def _read(self, path: str) -> bytes | None:
        limit = file_limit()
        try:
            data = paths.read_capped(self.root / path, limit, within=self.root)
        except paths.NotARegularFile as exc:
            if exc.kind != "a directory":
                self.skipped[path] = f"is {exc.kind}, not a regular file"
            return None
        except paths.OutsideTree:
            self.skipped[path] = "is a link that leads out of the tree"
            return None
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:  # a dotted name no file can have
                return None
            self.skipped[path] = f"cannot be read ({exc.strerror or exc})"
            return None
        if len(data) > limit:
            self.skipped[path] = too_large(limit)
            return None
        return data

    def is_dir(self, path: str) -> bool:
        try:
            return (self.root / path).is_dir()
        except OSError:  # a name too long for the file system names no folder
            return False

    def key(self, path: str) -> str:
        """`blob:<blob id>` of the file's content as `read` returns it, so a file that two
        trees (two releases, two checkouts) hold unchanged has one key and is indexed
        once; `dir:<path>` for a file `read` refuses or that is not there."""
        known = self._keys.get(path)
        if known is None:
            data = self.read(path)
            known = "blob:" + blob_id(data) if data is not None else "dir:" + str(self.root / path)
            self._keys[path] = known
        return known

    def py_files(self, under: str = "") -> Iterator[str]:
        return self.files(under)

    def files(self, under: str = "", suffixes: tuple[str, ...] = (".py",)) -> Iterator[str]:
        base = self.root / under if under else self.root
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            rel = os.path.relpath(dirpath, self.root)
            for name in sorted(filenames):
                if name.endswith(suffixes):
                    yield name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")

    def label(self) -> str:
        return str(self.root)


class TooLarge(Exception):
    """A blob over the cap, not read."""


class CatFile:
    """One `git cat-file --batch` process serving blob reads for a whole run."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        if self._proc is None:
            cmd = gitcmd.command(self.git_dir, data=True) + ["cat-file", "--batch"]
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, env=gitcmd.data_env())
        return self._proc

    def read(self, obj: str, limit: int | None = None) -> bytes | None:
        """The object's bytes (None when missing); one over `limit` is drained unread and
        raises TooLarge."""
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(obj.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline()
        if not header:
            raise OverlayError("git cat-file stopped unexpectedly", path=str(self.git_dir))
        parts = header.split()
        if len(parts) < 3 or parts[1] == b"missing":
            return None
        size = int(parts[2])
        if limit is not None and size > limit:
            left = size + 1  # and the newline after the contents
            while left > 0:
                got = proc.stdout.read(min(left, 1 << 20))
                if not got:
                    raise OverlayError("git cat-file stopped unexpectedly", path=str(self.git_dir))
                left -= len(got)
            raise TooLarge(limit)
        data = proc.stdout.read(size)
        proc.stdout.read(1)  # the newline after the contents
        return data

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin:
                self._proc.stdin.close()
            self._proc.wait(timeout=10)
            self._proc = None

    def __enter__(self) -> "CatFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GitTreeSource:
    """One commit's tree, read through a shared CatFile; nothing is checked out.

    The listing (`ls-tree -r`, names and blob ids only) is one cheap call per commit;
    file contents are read only when the gate asks for them.
    """

    def __init__(self, cat: CatFile, commit: str, prefix: str = "") -> None:
        self.cat = cat
        self.commit = commit
        self.prefix = prefix.strip("/")
        try:
            listing = gitcmd.out(["ls-tree", "-r", "--full-tree", "--end-of-options", commit],
                                 git_dir=cat.git_dir, data=True)
        except GitFailed as exc:
            raise OverlayError(f"cannot list commit {commit[:12]}: {exc.stderr.strip()}",
                               path=str(cat.git_dir)) from None
        self.blobs: dict[str, str] = {}
        self.dirs: set[str] = {""}
        self.skipped: dict[str, str] = {}
        for line in listing.splitlines():
            meta, _, path = line.partition("\t")
            kind_sha = meta.split()
            if len(kind_sha) < 3 or kind_sha[1] != "blob":
                continue
            if self.prefix:
                if not path.startswith(self.prefix + "/"):
                    continue
                path = path[len(self.prefix) + 1:]
            self.blobs[path] = kind_sha[2]
            parts = path.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))

    def read(self, path: str) -> bytes | None:
        sha = self.blobs.get(path)
        if sha is None:
            return None
        limit = file_limit()
        try:
            return self.cat.read(sha, limit)
        except TooLarge:
            self.skipped[path] = too_large(limit)
            return None

    def is_dir(self, path: str) -> bool:
        return path.strip("/") in self.dirs

    def key(self, path: str) -> str:
        return "blob:" + self.blobs.get(path, "missing:" + path)

    def py_files(self, under: str = "") -> Iterator[str]:
        return self.files(under)

    def files(self, under: str = "", suffixes: tuple[str, ...] = (".py",)) -> Iterator[str]:
        head = under.strip("/") + "/" if under else ""
        for path in sorted(self.blobs):
            if path.endswith(suffixes) and path.startswith(head):
                yield path

    def label(self) -> str:
        return f"{self.cat.git_dir}@{self.commit[:12]}"

    def tree_id(self) -> str:
        """The blobs of the tree (under the prefix) name its content exactly."""
        h = hashlib.sha256(b"git-v1\0" + self.prefix.encode() + b"\0")
        for path in sorted(self.blobs):
            h.update(f"{path}\0{self.blobs[path]}\n".encode())
        return "git-" + h.hexdigest()[:32]
