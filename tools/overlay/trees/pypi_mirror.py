"""Rebuild (or check) a mirror's `pypi/` folder from the committed manifest, benchmarks/mirror.yaml.

The manifest names every file of `<mirror>/pypi/` with its sha256 and where it comes from:
- `index: "DIST==VERSION"`: the file of that name from the package index the user configured
  for pip (index_config, read as data), fetched by the bounded simple-API reader
  (simple_index); never through pip, and nothing in it is run;
- `wheel-sources: "DIST==VERSION"`: a release published without an sdist, as an sdist-shaped
  `.tar.gz` holding the `.py` files of its `wheel` (fetched as above, checked against
  `wheel-sha256`, read as zip data) under `DIST-VERSION/`;
- `git: OWNER+NAME`: `git archive` of `ref` (which must resolve to `commit`) in the mirror's
  snapshot `<mirror>/OWNER+NAME/repo` (read through its data view, see gitcmd), top folder
  `NAME_UNDERSCORED-VERSION/`, plus a three-line PKG-INFO (`release`), `exclude` left out.

Made files are gzip without a timestamp (and tar members with fixed metadata), so the bytes
depend on the sources alone. Every file is written under a temporary name, checked against
the manifest's sha256, and only then renamed into place; a file already there with the right
sha256 is kept; `check` reads and hashes only. The manifest is data too: a name must be a
plain file name, a ref may not look like an option, a path to leave out must be relative;
anything else is refused in one line naming the manifest.
"""

from __future__ import annotations

import concurrent.futures as cf
import gzip
import io
import os
import re
import shutil
import stat
import tarfile
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from overlay import gitcmd, paths
from overlay.errors import OverlayError, quoted
from overlay.series import yamldoc
from overlay.series.model import REQUIREMENT, SHA256
from overlay.trees import archive, runlock, simple_index, sources
from overlay.trees.index_config import IndexConfig, read_index_config

MANIFEST = Path("benchmarks") / "mirror.yaml"  # under the project root
LOCK = ".overlay-mirror.lock"  # under the mirror root: one writer of pypi/ at a time
TEMP_PREFIX = ".overlay-mirror-"  # files and folders of a run under way
GIT_TIMEOUT = 600.0

Progress = Callable[[str], None]

KINDS = ("index", "wheel-sources", "git")
_KEYS = {
    "index": {"name", "sha256", "index"},
    "wheel-sources": {"name", "sha256", "wheel-sources", "wheel", "wheel-sha256"},
    "git": {"name", "sha256", "git", "release", "ref", "commit", "exclude"},
}
_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\+[A-Za-z0-9][A-Za-z0-9_.-]*")
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/^~+-]*")
_PATH_PART = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.+-]*")
ARCHIVE_EXTS = (".tar.gz", ".zip", ".whl")


# ----------------------------------------------------------------------------- the manifest

def name_problem(name: object) -> str | None:
    """Why `name` cannot name a file of pypi/, or None: a plain file name (no folder, no
    `..`, not hidden, not an option), ending as a release archive does. Pure."""
    if not isinstance(name, str) or not name:
        return "is not a file name"
    if "/" in name or "\\" in name or ".." in name:
        return "is not a plain file name (no '/', '\\' or '..')"
    if not _FILE.fullmatch(name):
        return "is not a plain file name (letters, digits and . _ + -, not starting with . or -)"
    if not name.endswith(ARCHIVE_EXTS):
        return "does not end in .tar.gz, .zip or .whl"
    return None


def ref_problem(ref: object) -> str | None:
    """Why `ref` is no revision the manifest may name, or None: a tag, branch or (abbreviated)
    commit with `^`/`~` suffixes; never one that starts like an option or names a range. Pure."""
    if not isinstance(ref, str) or not ref:
        return "is not a revision (write it as quoted text)"
    if ref.startswith("-"):
        return "starts with '-' (it would read as an option)"
    if ".." in ref or not _REF.fullmatch(ref):
        return "is not a plain revision (letters, digits and . _ / ^ ~ + -, no '..')"
    return None


def path_problem(path: object) -> str | None:
    """Why `path` cannot be left out of a git archive, or None: a relative path of plain
    parts (no `.`, `..`, no pathspec magic, not an option). Pure."""
    if not isinstance(path, str) or not path:
        return "is not a path"
    parts = path.split("/")
    if any(p in (".", "..") or not _PATH_PART.fullmatch(p) for p in parts):
        return "is not a plain relative path (letters, digits and . _ + -, no '.' or '..' parts)"
    return None


def release_problem(value: object) -> str | None:
    """Why `value` is not `DIST==VERSION`, or None. Pure."""
    if not isinstance(value, str) or not REQUIREMENT.fullmatch(value):
        return "is not DIST==VERSION (a distribution name and a release version)"
    return None


@dataclass(frozen=True)
class Entry:
    """One file of pypi/ and its source."""

    name: str
    sha256: str
    kind: str  # one of KINDS
    dist: str = ""  # index / wheel-sources / git: the release, DIST==VERSION split
    version: str = ""
    wheel: str = ""  # wheel-sources
    wheel_sha256: str = ""
    repo: str = ""  # git: OWNER+NAME
    ref: str = ""
    commit: str = ""
    exclude: tuple[str, ...] = ()
    line: int = 0

    @property
    def source(self) -> str:
        """The source in words, as the manifest says it."""
        if self.kind == "git":
            return f"git {self.repo} {self.ref}"
        return f"{self.kind} {self.dist}=={self.version}"


def parse_manifest(root: yamldoc.Node, shown: str) -> list[Entry]:
    """The entries of a loaded manifest; OverlayError (one line naming `shown`) on anything
    that is not a plain, complete entry."""
    def bad(message: str, line: int, hint: str = "see the comment at the top of the manifest") -> OverlayError:
        return OverlayError(message, path=shown, line=line, hint=hint)

    if not isinstance(root.value, dict) or set(root.value) != {"files"}:
        raise bad("the manifest must be a mapping with one key, `files`", root.line)
    files = root.value["files"]
    if not isinstance(files.value, list) or not files.value:
        raise bad("`files` must be a non-empty list (a manifest that names nothing builds nothing)",
                  files.line)
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for node in files.value:
        if not isinstance(node.value, dict):
            raise bad("each entry of `files` must be a mapping", node.line)
        raw = {k: [i.value for i in v.value] if isinstance(v.value, list) else v.value
               for k, v in node.value.items()}
        kinds = [k for k in KINDS if k in raw]
        if len(kinds) != 1:
            raise bad(f"an entry needs exactly one source ({', '.join(KINDS)}); this one has "
                      f"{', '.join(kinds) or 'none'}", node.line)
        kind = kinds[0]
        unknown = sorted(set(raw) - _KEYS[kind])
        if unknown:
            raise bad(f"unknown key {quoted(unknown[0])} in a `{kind}` entry", node.value[unknown[0]].line,
                      hint=f"a `{kind}` entry has {', '.join(sorted(_KEYS[kind]))}")
        missing = sorted(_KEYS[kind] - {"commit", "exclude"} - set(raw))
        if missing:
            raise bad(f"a `{kind}` entry needs `{missing[0]}`", node.line)

        def field_line(key: str) -> int:
            return node.value[key].line if key in node.value else node.line

        name = raw["name"]
        if (why := name_problem(name)) is not None:
            raise bad(f"file name {quoted(name)} {why}", field_line("name"),
                      hint="a name is a file directly in pypi/")
        if name in seen:
            raise bad(f"file name {quoted(name)} is listed twice (first at line {seen[name]})",
                      field_line("name"))
        seen[name] = field_line("name")
        for key in ("sha256", "wheel-sha256"):
            if key in raw and not (isinstance(raw[key], str) and SHA256.fullmatch(raw[key])):
                raise bad(f"{key} {quoted(raw[key])} of {name} is not 64 lowercase hex digits",
                          field_line(key))
        release_key = {"index": "index", "wheel-sources": "wheel-sources", "git": "release"}[kind]
        if (why := release_problem(raw[release_key])) is not None:
            raise bad(f"{release_key} {quoted(raw[release_key])} of {name} {why}", field_line(release_key))
        dist, _, version = raw[release_key].partition("==")
        fields: dict = dict(name=name, sha256=raw["sha256"], kind=kind, dist=dist, version=version,
                            line=field_line("name"))
        if kind == "index" and not simple_index._is_sdist_of(name, dist, version):
            raise bad(f"{name} is not a release file of {dist}=={version}", field_line("name"))
        if kind == "wheel-sources":
            wheel = raw["wheel"]
            if name != f"{dist}-{version}.tar.gz":
                raise bad(f"{name}: an sdist made from a wheel is named {dist}-{version}.tar.gz",
                          field_line("name"))
            if (why := name_problem(wheel)) is not None or archive.wheel_release(wheel) is None \
                    or not simple_index._is_sdist_of(wheel, dist, version):
                raise bad(f"wheel {quoted(wheel)} of {name} is not a wheel file name of {dist}=={version}",
                          field_line("wheel"))
            fields.update(wheel=wheel, wheel_sha256=raw["wheel-sha256"])
        if kind == "git":
            repo, ref, commit = raw["git"], raw["ref"], raw.get("commit", "")
            if not (isinstance(repo, str) and _REPO.fullmatch(repo) and ".." not in repo):
                raise bad(f"git {quoted(repo)} of {name} is not OWNER+NAME (a snapshot folder of the mirror)",
                          field_line("git"))
            if (why := ref_problem(ref)) is not None:
                raise bad(f"ref {quoted(ref)} of {name} {why}", field_line("ref"))
            if commit and not (isinstance(commit, str) and _COMMIT.fullmatch(commit)):
                raise bad(f"commit {quoted(commit)} of {name} is not a full hex commit id", field_line("commit"))
            exclude = raw.get("exclude", [])
            if not isinstance(exclude, list):
                raise bad(f"exclude of {name} must be a list of paths", field_line("exclude"))
            for path in exclude:
                if (why := path_problem(path)) is not None:
                    raise bad(f"exclude path {quoted(path)} of {name} {why}", field_line("exclude"))
            if name != f"{dist.replace('-', '_')}-{version}.tar.gz":
                raise bad(f"{name}: a git archive of {dist}=={version} is named "
                          f"{dist.replace('-', '_')}-{version}.tar.gz", field_line("name"))
            fields.update(repo=repo, ref=ref, commit=commit, exclude=tuple(exclude))
        entries.append(Entry(**fields))
    return entries


def load_manifest(path: Path, shown: str | None = None) -> list[Entry]:
    shown = shown or str(path)
    return parse_manifest(yamldoc.load(path, shown), shown)


# ----------------------------------------------------------------------------- results

STATUSES = ("made", "kept", "verified", "failed")


@dataclass
class Result:
    entry: Entry
    status: str  # one of STATUSES
    detail: str = ""  # why it failed (one line, with what to do)


@dataclass
class Outcome:
    pypi: Path
    check: bool
    results: list[Result]
    extra: list[str] = field(default_factory=list)  # files in pypi/ the manifest does not name

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.status != "failed" for r in self.results)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)


class _Failed(Exception):
    """One file could not be made; the message says why and what to do."""


# ----------------------------------------------------------------------------- making files

def _gzip(data: bytes, dest: Path) -> None:
    """`data` gzip-compressed into `dest`: no name, no timestamp (the bytes depend on `data`)."""
    with dest.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(data)


def git_archive(repo: Path, entry: Entry, dest: Path) -> None:
    """`entry`'s git archive of the snapshot `repo` (a git directory), gzip'd into `dest`."""
    commit = gitcmd.resolve(repo, entry.ref)
    if commit is None:
        raise _Failed(f"{entry.ref} is not a commit of the snapshot {repo} (fetch a newer snapshot "
                      f"of {entry.repo}, or correct the entry's ref)")
    if entry.commit and commit != entry.commit:
        raise _Failed(f"{entry.ref} is {commit[:12]} in the snapshot {repo}, the manifest says "
                      f"{entry.commit[:12]} (the tag moved upstream: check which commit is the release, "
                      f"then correct the manifest)")
    stem = entry.name[: -len(".tar.gz")]
    pkg_info = f"Metadata-Version: 2.1\nName: {entry.dist}\nVersion: {entry.version}\n"
    args = ["archive", "--format=tar", f"--prefix={stem}/",
            f"--add-virtual-file={stem}/PKG-INFO:{pkg_info}", "--end-of-options", commit]
    if entry.exclude:
        args += ["."] + [f":(exclude){p}" for p in entry.exclude]  # paths, after the revision
    proc = gitcmd.git(args, git_dir=repo, data=True, text=False, check=False, timeout=GIT_TIMEOUT)
    if proc.returncode != 0:
        last = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["(no message)"])[-1]
        raise _Failed(f"git archive of {entry.ref} in {repo} failed: {gitcmd.unview(last)} (a snapshot "
                      "missing objects: fetch it again, or leave the folder out with `exclude`)")
    _gzip(proc.stdout, dest)


def sdist_from_wheel(wheel: Path, entry: Entry, dest: Path, limits: archive.Limits | None = None) -> None:
    """The `.py` files of `wheel` (zip data, nothing run) as a tar under `DIST-VERSION/`,
    members sorted, mode 0644, no owner, time 0; gzip'd into `dest`."""
    limits = limits or archive.Limits.from_env()
    top = entry.name[: -len(".tar.gz")]
    budget = limits.max_bytes
    buf = io.BytesIO()
    try:
        with archive.open_regular(wheel) as fh, zipfile.ZipFile(fh) as zf, \
                tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            infos = [i for i in zf.infolist() if i.filename.endswith(".py")]
            if len(infos) > limits.max_members:
                raise _Failed(f"{wheel.name} holds more than {limits.max_members} .py files "
                              "(OVERLAY_ARCHIVE_MAX_MEMBERS)")
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise _Failed(f"{wheel.name} names a member twice; not a plain wheel")
            for info in sorted(infos, key=lambda i: i.filename):
                why = archive.name_problem(info.filename) or (
                    None if archive.canonical_name(info.filename, False) else "is not a canonical name")
                if why is None and stat.S_IFMT(info.external_attr >> 16) not in (0, stat.S_IFREG):
                    why = "is not a regular file"
                if why is not None:
                    raise _Failed(f"{wheel.name}: member {quoted(info.filename)} {why}; not a plain wheel")
                budget -= info.file_size
                if budget < 0:
                    raise _Failed(f"the .py files of {wheel.name} unpack to more than {limits.max_bytes} "
                                  "bytes (OVERLAY_ARCHIVE_MAX_BYTES)")
                data = zf.read(info)  # zipfile checks the size and CRC it declares
                ti = tarfile.TarInfo(f"{top}/{info.filename}")
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
                ti.uname = ti.gname = ""
                tar.addfile(ti, io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        raise _Failed(f"{wheel.name} is not a readable zip ({exc}); fetch it again") from None
    _gzip(buf.getvalue(), dest)


class _Index:
    """The configured package index, each project's file list read once."""

    def __init__(self, config: IndexConfig, timeout: float) -> None:
        self.config, self.timeout = config, timeout
        self.listed: dict[str, tuple[list[simple_index.Candidate], list[str]]] = {}
        self.lock = threading.Lock()

    def transport(self) -> simple_index.Transport:
        return simple_index.Transport(self.config, time.monotonic() + self.timeout, self.timeout)

    def files(self, dist: str) -> tuple[list[simple_index.Candidate], list[str]]:
        key = simple_index.normalize(dist)
        with self.lock:  # one reader per project page; the pages are read before the pool anyway
            if key not in self.listed:
                notes: list[str] = []
                try:
                    found = simple_index.project_files(self.transport(), self.config, dist, notes)
                except OverlayError as exc:  # the deadline passed
                    found, notes = [], [exc.message]
                self.listed[key] = (found, notes)
            return self.listed[key]

    def fetch(self, dist: str, name: str, sha256: str, dest: Path, expected_by: str) -> None:
        """The file `name` of project `dist` into `dest`, its bytes checked against `sha256`."""
        if not self.config.index_urls and not self.config.find_links:
            raise _Failed("no package index is configured (set index-url in pip's configuration, "
                          "PIP_INDEX_URL or UV_INDEX_URL)")
        found, notes = self.files(dist)
        named = [c for c in found if c.filename == name]
        if not named:
            where = "; ".join(notes) if notes else f"searched {self.config.describe()}"
            raise _Failed(f"the package index lists no {name} ({where}); check pip's index setting")
        usable = [c for c in named if c.sha256 in (None, sha256)]
        if not usable:
            raise _Failed(f"{named[0].where} lists {name} with sha256 {named[0].sha256}, {expected_by} says "
                          f"{sha256}; not downloaded (the index serves other bytes under that name: check "
                          f"the index setting, or review the release and correct {expected_by})")
        chosen = sorted(usable, key=lambda c: c.sha256 is None)[0]  # one the index vouches for first
        try:
            simple_index.download(self.transport(), chosen, sha256, dest, expected_by)
        except OverlayError as exc:
            raise _Failed(exc.message + (f" ({exc.hint})" if exc.hint else "")) from None


# ----------------------------------------------------------------------------- the run

def _present(path: Path, sha256: str) -> str | None:
    """None when `path` is a regular file with that sha256, else what it is."""
    if not os.path.lexists(path):
        return "missing"
    try:
        got = sources.sha256_of(path)
    except OverlayError:
        return "not a readable regular file"
    return None if got == sha256 else f"sha256 {got}"


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def run(mirror: Path, entries: list[Entry], *, check: bool = False, shown: str = str(MANIFEST),
        jobs: int = 4, progress: Progress | None = None, config: IndexConfig | None = None,
        timeout: float | None = None) -> Outcome:
    """Make (or with `check`, only verify) every entry's file in `<mirror>/pypi/`."""
    pypi = mirror / "pypi"
    say_lock = threading.Lock()

    def say(message: str) -> None:
        if progress is not None:
            with say_lock:
                progress(message)

    def extra() -> list[str]:
        names = {e.name for e in entries}
        return sorted(p.name for p in pypi.iterdir()
                      if p.name not in names and not p.name.startswith(TEMP_PREFIX)) if pypi.is_dir() else []

    if check:
        results = []
        for e in entries:
            state = _present(pypi / e.name, e.sha256)
            if state is None:
                results.append(Result(e, "verified"))
            elif state == "missing":
                results.append(Result(e, "failed", f"pypi/{e.name} is missing (run `overlay mirror` "
                                                   "without --check to make it)"))
            else:
                what = f"has {state}, {shown} says {e.sha256}" if state.startswith("sha256") else f"is {state}"
                results.append(Result(e, "failed", f"pypi/{e.name} {what} (remove it and run `overlay mirror` "
                                                   "to make it again)"))
            say(f"{results[-1].status} {e.name}")
        return Outcome(pypi, True, results, extra())

    pypi.mkdir(parents=True, exist_ok=True)
    with runlock.held(mirror / LOCK, "mirror", wait=False, busy=f"another run is writing {pypi}",
                      hint="wait for it to finish and run the command again"):
        for stale in pypi.glob(TEMP_PREFIX + "*"):  # an interrupted run's: ours, unfinished
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
        index = _Index(config if config is not None else read_index_config(),
                       sources.FETCH_TIMEOUT if timeout is None else timeout)
        mode = _file_mode()
        todo = []
        results: dict[int, Result] = {}
        for i, e in enumerate(entries):
            state = _present(pypi / e.name, e.sha256)
            if state is None:
                results[i] = Result(e, "kept")
            else:
                todo.append(i)
        if results:
            say(f"{len(results)} of {len(entries)} files already there with the right sha256: kept")
        for dist in dict.fromkeys(entries[i].dist for i in todo if entries[i].kind != "git"):
            say(f"reading the package index's files of {dist}")
            index.files(dist)

        def make(i: int) -> Result:
            e = entries[i]
            dest = pypi / e.name
            fd, tmp_name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{e.name}.", dir=pypi)
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                say(f"making {e.name} ({e.source})")
                if e.kind == "index":
                    index.fetch(e.dist, e.name, e.sha256, tmp, shown)
                elif e.kind == "wheel-sources":
                    scratch = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}wheel-", dir=pypi))
                    try:
                        wheel = scratch / e.wheel
                        index.fetch(e.dist, e.wheel, e.wheel_sha256, wheel, f"{shown} (wheel-sha256)")
                        sdist_from_wheel(wheel, e, tmp)
                    finally:
                        shutil.rmtree(scratch, ignore_errors=True)
                else:
                    repo = paths.find_mirror_repo(mirror, e.repo)
                    if repo is None:
                        raise _Failed(f"the mirror has no snapshot {e.repo} (bring it to "
                                      f"{mirror / e.repo / 'repo'}, a bare clone, then run again)")
                    git_archive(repo, e, tmp)
                got = sources.sha256_of(tmp)
                if got != e.sha256:
                    raise _Failed(f"made with sha256 {got}, {shown} says {e.sha256}; discarded "
                                  f"({_mismatch_hint(e, mirror)})")
                os.chmod(tmp, mode)
                os.replace(tmp, dest)
                result = Result(e, "made")
            except _Failed as exc:
                result = Result(e, "failed", str(exc))
            except OverlayError as exc:
                result = Result(e, "failed", exc.one_line())
            except OSError as exc:  # the file system refused (a folder under that name, a full disk)
                result = Result(e, "failed", f"{exc.filename or dest}: {exc.strerror or exc} (check the "
                                             "path and its permissions, and the free space)")
            finally:
                tmp.unlink(missing_ok=True)
            say(f"{result.status} {e.name}" + (f": {result.detail}" if result.detail else ""))
            return result

        pool = cf.ThreadPoolExecutor(max(1, jobs))
        try:
            for i, result in zip(todo, pool.map(make, todo)):
                results[i] = result
        finally:  # interrupted: what has not started does not start; each file under way cleans up
            pool.shutdown(wait=True, cancel_futures=True)
    return Outcome(pypi, False, [results[i] for i in range(len(entries))], extra())


def _mismatch_hint(entry: Entry, mirror: Path) -> str:
    if entry.kind == "git":
        return (f"the snapshot {mirror / entry.repo} or this git/zlib makes other bytes than the ones "
                "the manifest was made with: compare the archive's files with the commit's")
    if entry.kind == "wheel-sources":
        return "this Python's zlib or tarfile writes other bytes: compare the archive's files with the wheel's"
    return "the index serves other bytes: check pip's index setting"
