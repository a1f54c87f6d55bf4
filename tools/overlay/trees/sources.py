"""Obtain a pinned target's exact commit into the local object cache.

A git target comes from a mirror (offline) or from its URL with a shallow fetch
of just that commit. A PyPI target's source archive is found in the mirror's
`pypi/` folder, the cache, or downloaded from the index the user configured for pip or uv; it
is verified by sha256 and imported as one deterministic commit, so both kinds
compose the same way. Objects are cached: a second run fetches nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from overlay.trees import archive as archive_mod
from overlay import gitcmd, paths
from overlay.trees import runlock, simple_index
from overlay.errors import OverlayError
from overlay.trees.index_config import read_index_config
from overlay.series.model import SHA256, ArchiveSource, GitSource, PinnedTarget

Progress = Callable[[str], None]

# The identity and date of archive-import commits: fixed, so the commit id depends
# only on the archive's content.
_IMPORT_ENV = {
    "GIT_AUTHOR_NAME": "overlay archive import", "GIT_AUTHOR_EMAIL": "overlay@localhost",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "overlay archive import", "GIT_COMMITTER_EMAIL": "overlay@localhost",
    "GIT_COMMITTER_DATE": "1970-01-01T00:00:00+0000",
}
FETCH_TIMEOUT = float(os.environ.get("OVERLAY_FETCH_TIMEOUT", "900"))


@dataclass(frozen=True)
class Obtained:
    """Where a pinned target's commit now lives."""

    git_dir: Path  # a git directory holding the commit and everything it needs
    commit: str  # the commit to compose on (an import commit for archives)
    how: str  # "cache", "mirror", "network", "archive"


def cache_repo(root: Path, name: str) -> Path:
    """The bare cache repository for one upstream (created on demand). It is ours, whoever
    wrote it last (CI restores it from its cache): each open writes our config over its
    own, so no proxy, URL rewrite, upload-pack or driver it names is ever read."""
    git_dir = paths.cache_dir(root) / "git" / f"{name}.git"
    if git_dir.is_symlink():
        raise OverlayError(f"the cache's {git_dir} is a symbolic link",
                           hint="remove it: the cache fills again from the mirror or the network")
    if not (git_dir / "HEAD").is_file():
        git_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=git_dir.parent))
        gitcmd.git(["init", "--bare", "-q", str(tmp)])
        try:
            os.replace(tmp, git_dir)
        except OSError:  # another run created it first
            shutil.rmtree(tmp, ignore_errors=True)
    gitcmd.adopt(git_dir)
    return git_dir


def obtain(root: Path, target: PinnedTarget, mirror: Path | None,
           progress: Progress | None = None, others: tuple[str, ...] = ()) -> Obtained:
    """`others`: the pin set's other targets, which an unreachable one's hint offers."""
    # Runs sharing a cache take turns: two fetches into one repository collide on its locks.
    with runlock.cache(paths.cache_dir(root), f"obtaining {target.name}", progress):
        if isinstance(target.source, GitSource):
            return _obtain_git(root, target, target.source, mirror, progress, others)
        return _obtain_archive(root, target, target.source, mirror, progress)


def _keep_ref(sha: str) -> str:
    return f"refs/overlay/pinned/{sha}"


def _obtain_git(root: Path, target: PinnedTarget, src: GitSource, mirror: Path | None,
                progress: Progress | None, others: tuple[str, ...] = ()) -> Obtained:
    cache = cache_repo(root, src.mirror_name)
    if gitcmd.has_commit(cache, src.commit):
        return Obtained(cache, src.commit, "cache")
    mirror_repo = paths.find_mirror_repo(mirror, src.mirror_name) if mirror else None
    if mirror_repo is not None:
        if not gitcmd.has_commit(mirror_repo, src.commit):
            raise OverlayError(
                f"target '{target.name}': commit {src.commit} is not in the mirror {mirror_repo}",
                path=_pin_display(target), line=target.line,
                hint="update the mirror (git fetch in it) or check the pinned commit")
        if progress:
            progress(f"{target.name}: copying {src.commit[:12]} from mirror {mirror_repo}")
        # From the mirror's view, as a plain path: the mirror's config, attributes and hooks
        # play no part on either side (the cache's config is ours, see cache_repo).
        _fetch(cache, str(gitcmd.data_view(mirror_repo)), src.commit, target, progress,
               shown=str(mirror_repo))
        return Obtained(cache, src.commit, "mirror")
    if progress:
        progress(f"{target.name}: fetching {src.commit[:12]} from {src.url}")
    try:
        _fetch(cache, src.url, src.commit, target, progress)
    except OverlayError as exc:
        # The first contact for most users (`make apply` offline): short, and both ways on.
        without = ",".join(others) if others else "..."
        raise OverlayError(
            f"target '{target.name}' is unreachable: {exc.message}",
            path=_pin_display(target), line=target.line,
            hint=f"leave it out: make apply TARGETS={without}, or --targets {without}; or set "
                 f"OVERLAY_MIRROR=DIR with a clone at <mirror>/{src.mirror_name}") from None
    return Obtained(cache, src.commit, "network")


def _pin_display(target: PinnedTarget) -> str:
    return target.pin_file


def _fetch(cache: Path, url: str, sha: str, target: PinnedTarget,
           progress: Progress | None, shown: str | None = None) -> None:
    # Shallow: only this commit's snapshot. A blob filter would only defer the
    # same download, since a composed work tree needs every blob of the commit.
    # git's own output is always captured: its `remote: Counting objects` lines and paths
    # are not ours to show (the progress line above says what is being fetched).
    args = ["fetch", "--no-tags", "--quiet", "--depth=1", "--end-of-options", url,
            f"{sha}:{_keep_ref(sha)}"]
    proc = gitcmd.git(args, git_dir=cache, timeout=FETCH_TIMEOUT, check=False,
                      capture=True, data=True, config=gitcmd.fetch_config(url),
                      env={"GIT_HTTP_LOW_SPEED_LIMIT": "1000", "GIT_HTTP_LOW_SPEED_TIME": "30"})
    gitcmd.forget_view(cache)
    if proc.returncode != 0 or not gitcmd.has_commit(cache, sha):
        detail = (proc.stderr or "").strip().splitlines()
        reason = next((line for line in reversed(detail) if line.startswith(("fatal:", "error:"))),
                      detail[-1] if detail else "git fetch failed")
        # git's "fatal: unable to access '<url>/': <why>" says the URL twice: keep <why>
        reason = re.sub(r"^(fatal|error): (unable to access '[^']*': )?", "", reason)
        raise OverlayError(f"cannot fetch {sha[:12]} from {shown or url}: {reason}")


# ----------------------------------------------------------------------------- archives

def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def sha256_of(source: Path | BinaryIO) -> str:
    """The sha256 of an open archive, or of one named by path (a regular file only)."""
    if isinstance(source, Path):
        with archive_mod.open_regular(source) as f:
            return sha256_of(f)
    h = hashlib.sha256()
    for chunk in iter(lambda: source.read(1 << 20), b""):
        h.update(chunk)
    return h.hexdigest()


def find_archive(folder: Path, src: ArchiveSource) -> Path | None:
    """The release's archive in `folder`: .tar.gz/.tgz or .zip, else its wheel (vllm-rbln and
    vllm-omni publish wheels only). Where several are there, the one whose sha256 the pin names,
    else an sdist before a wheel (an sdist also carries the packaging files). One in a
    compression PyPI sdists do not use (.tar.bz2, .tar.xz, ...) is refused, not skipped."""
    if not folder.is_dir():
        return None
    want = _norm(f"{_norm(src.name)}-{src.version}")
    refused = None
    sdists: list[Path] = []
    wheels: list[Path] = []
    for p in sorted(folder.iterdir()):
        wheel = archive_mod.wheel_release(p.name)
        if wheel and _norm(f"{_norm(wheel[0])}-{wheel[1]}") == want:
            wheels.append(p)
            continue
        for ext in archive_mod.ACCEPTED + archive_mod.REFUSED:
            if p.name.endswith(ext) and ext != archive_mod.WHEEL and _norm(p.name[: -len(ext)]) == want:
                if ext in archive_mod.ACCEPTED:
                    sdists.append(p)
                else:
                    refused = refused or p
    found = sdists + wheels
    # a lookup by name passes no digest, or the placeholder "0" * 64
    if len(found) > 1 and SHA256.match(src.sha256 or "") and src.sha256 != "0" * 64:
        for p in found:
            if p.is_file() and not p.is_symlink() and sha256_of(p) == src.sha256:
                return p
    if found:
        return found[0]
    if refused is not None:
        raise OverlayError(f"{refused.name} is not a .tar.gz or .zip archive", path=str(refused),
                           hint="PyPI source archives are .tar.gz (older ones .zip): put that "
                                "one there instead")
    return None


def download_archive(src: ArchiveSource, folder: Path, progress: Progress | None = None) -> Path:
    """Fetch the pinned sdist from the index the user configured (environment or pip.conf,
    read as data: pip is neither imported nor run), verified against the pin's sha256."""
    config = read_index_config()
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".download-", dir=folder)
    os.close(fd)
    tmp = Path(tmp_name)
    if progress:
        progress(f"looking up {src.requirement} on {config.describe()}")
    try:
        filename = simple_index.fetch_sdist(config, src.name, src.version, src.sha256, tmp,
                                            FETCH_TIMEOUT, progress)
        final = folder / filename
        os.replace(tmp, final)
        return final
    except OverlayError as exc:
        raise OverlayError(f"cannot download {src.requirement}: {exc.message}",
                           hint=exc.hint or "put the archive in <mirror>/pypi/ or check the package index") from None
    finally:
        tmp.unlink(missing_ok=True)


def _obtain_archive(root: Path, target: PinnedTarget, src: ArchiveSource, mirror: Path | None,
                    progress: Progress | None) -> Obtained:
    cache = cache_repo(root, src.mirror_name)
    have = gitcmd.resolve(cache, archive_ref(src))
    if have:
        return Obtained(cache, have, "cache")
    archives = paths.cache_dir(root) / "archives"
    archive = (find_archive(mirror / "pypi", src) if mirror else None) or find_archive(archives, src)
    if archive is None:
        try:
            archive = download_archive(src, archives, progress)
        except OverlayError as exc:
            raise OverlayError(f"target '{target.name}' is unreachable: {exc.message}",
                               path=_pin_display(target), line=target.line,
                               hint="put the archive under <mirror>/pypi/ and pass --mirror, "
                                    "or leave the target out (--targets)") from None
    return Obtained(cache, obtain_archive_commit(root, src, archive, progress, target), "archive")


def archive_ref(src: ArchiveSource) -> str:
    """The cache ref that keeps an archive's import commit."""
    return f"refs/overlay/archives/{_norm(src.name)}-{src.version}-{src.sha256[:16]}"


def obtain_archive_commit(root: Path, src: ArchiveSource, archive: Path, progress: Progress | None = None,
                          target: PinnedTarget | None = None) -> str:
    """The import commit of `archive` (verified against `src.sha256`) in the cache, made
    once and kept under a ref named by the release and its digest."""
    cache = cache_repo(root, src.mirror_name)
    ref = archive_ref(src)
    have = gitcmd.resolve(cache, ref)
    if have:
        return have
    label = target.name if target is not None else src.requirement
    where = dict(path=_pin_display(target), line=target.line) if target is not None else dict(path=str(archive))
    # One open file for the digest and the import: the bytes imported are the bytes verified.
    with archive_mod.open_regular(archive) as fh:
        if progress:
            progress(f"{label}: verifying the sha256 of {archive.name} "
                     f"({os.fstat(fh.fileno()).st_size / 1e6:.0f} MB)")
        digest = sha256_of(fh)
        if digest != src.sha256:
            raise OverlayError(f"target '{label}': {archive.name} has sha256 {digest}, "
                               f"the pin says {src.sha256}", **where,
                               hint="the archive is not the pinned release; remove it or fix the pin")
        fh.seek(0)
        step = (lambda msg: progress(f"{label}: {msg}")) if progress else None
        commit = import_archive(cache, archive, f"{src.requirement}\n\nsha256: {src.sha256}\n", step,
                                opened=fh)
    gitcmd.git(["update-ref", ref, commit], git_dir=cache)
    gitcmd.forget_view(cache)
    return commit


def import_archive(cache: Path, archive: Path, message: str,
                   progress: Progress | None = None, opened: BinaryIO | None = None) -> str:
    """One deterministic commit holding the archive's files (top folder stripped), built
    from its vetted member table without extracting anything (see overlay.trees.archive)."""
    with tempfile.TemporaryDirectory(prefix="overlay-archive-") as tmp:
        if progress:
            progress(f"reading {archive.name} (once; later runs reuse the import)")
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        fh = opened if opened is not None else archive_mod.open_regular(archive)
        try:
            tree = archive_mod.import_tree(cache, archive, fh, env, progress=progress)
        finally:
            if opened is None:
                fh.close()
        env.update(_IMPORT_ENV)
        return gitcmd.out(["commit-tree", tree, "-m", message], git_dir=cache, env=env, data=True)


def release_tree(root: Path, mirror: Path | None, name: str, version: str, progress=None) -> Path:
    """The source tree of one release, under `<cache>/gate/cores/<name>-<version>/tree`:
    the archive is imported into the object cache as compose imports it (vetted member
    table, nothing extracted), then checked out by git; a `.complete` marker naming the
    archive's sha256 proves the checkout finished."""
    dest = paths.cache_dir(root) / "gate" / "cores" / f"{name}-{version}"
    if (dest / ".complete").is_file() and (dest / "tree").is_dir():
        return dest / "tree"
    src = ArchiveSource(name=name, version=version, sha256="")
    archives = paths.cache_dir(root) / "archives"
    archive = (find_archive(mirror / "pypi", src) if mirror else None) or find_archive(archives, src)
    if archive is None:
        archive = download_archive(src, archives, progress)
    digest = sha256_of(archive)
    with runlock.cache(paths.cache_dir(root), f"importing {archive.name}", progress):
        commit = obtain_archive_commit(root, ArchiveSource(name=name, version=version, sha256=digest),
                                       archive, progress)
    if progress:
        progress(f"checking out {archive.name}")
    dest.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".checkout-", dir=dest))
    try:
        archive_mod.checkout_tree(cache_repo(root, src.mirror_name), commit, scratch / "tree",
                                  {"GIT_INDEX_FILE": str(scratch / "index")})
        if (dest / "tree").exists():
            shutil.rmtree(dest / "tree")
        (scratch / "tree").rename(dest / "tree")
        (dest / ".complete").write_text(f"{archive.name} {digest}\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return dest / "tree"
