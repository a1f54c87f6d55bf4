"""Running git with a pinned, user-independent configuration.

Byte-stable patches and reproducible composition must not depend on whoever runs
them: global and system config are ignored, and the settings that change what
`format-patch`, `am` or `diff` produce are pinned explicitly (Electron learned each
of these one bug at a time: signatures, renames, prefixes, bracketed subjects).

A mirror or the cache is data: git never runs in one with its own config (see "data
repositories" below: views, `adopt`, `fetch_config`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from overlay.errors import OverlayError, redact
from overlay.paths import NotARegularFile, read_capped

# Settings that change the bytes git writes or reads in patches. `-c` overrides the
# composed repository's own config for single-valued keys; multi-valued ones
# (format.to/cc/headers) are reset by format-patch flags in refresh.FORMAT_PATCH.
PINNED_CONFIG = (
    "core.autocrlf=false",
    "core.eol=lf",
    "core.safecrlf=false",
    "core.quotePath=true",
    "core.abbrev=12",
    "core.hooksPath=/dev/null",
    "diff.renames=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.algorithm=myers",
    "diff.indentHeuristic=true",
    "diff.context=3",
    "diff.interHunkContext=0",
    "diff.suppressBlankEmpty=false",
    "diff.relative=false",
    "color.ui=false",
    "format.signature=",
    "format.numbered=false",
    "format.subjectPrefix=PATCH",
    "format.coverLetter=false",
    "format.signOff=false",
    "format.useAutoBase=false",
    "format.thread=false",
    "format.encodeEmailHeaders=true",
    "format.mboxrd=false",
    "format.noprefix=false",
    "format.forceInBodyFrom=false",
    "format.pretty=",
    "format.attach=false",
    "am.keepcr=false",
    "am.threeWay=false",
    "am.messageId=false",
    "apply.whitespace=nowarn",
    "i18n.commitEncoding=UTF-8",
    "i18n.logOutputEncoding=UTF-8",
    "init.defaultBranch=main",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.detachedHead=false",
    "advice.mergeConflict=false",
    "protocol.file.allow=always",
    "commit.gpgSign=false",
    "core.attributesFile=/dev/null",
)

# Added when git reads a repository that is data (a mirror, the object cache): nothing
# its config names may run. Most reads go through `data_view`, which sees none of that
# repository's config at all; these cover the commands that must run in it (fetch).
DATA_CONFIG = (
    "core.fsmonitor=false",
    "credential.helper=",
    "log.showSignature=false",
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
    "protocol.ext.allow=never",
    "uploadpack.allowFilter=false",
)
DATA_ENV = {"GIT_ATTR_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_NO_LAZY_FETCH": "1"}

FALLBACK_IDENTITY = ("overlay", "overlay@localhost")


def user_identity() -> tuple[str, str]:
    """The composer's identity from the user's own git config (committer of composed commits)."""
    def get(key: str) -> str | None:
        try:
            out = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() or None

    name = os.environ.get("GIT_COMMITTER_NAME") or get("user.name") or FALLBACK_IDENTITY[0]
    email = os.environ.get("GIT_COMMITTER_EMAIL") or get("user.email") or FALLBACK_IDENTITY[1]
    return name, email


def isolated_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for git that ignores global/system config and never prompts."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") or k in ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")}
    env.update({
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "true",
        "GIT_SSH_COMMAND": "ssh -oBatchMode=yes -oConnectTimeout=15",
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
    })
    if extra:
        env.update(extra)
    return env


class GitFailed(Exception):
    def __init__(self, args: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(f"git {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.args_ = list(args)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def command(git_dir: Path | None = None, data: bool = False,
            config: Sequence[str] = ()) -> list[str]:
    """`git` with the pinned settings (and the data settings when `data`), before the
    subcommand: for callers that start git themselves (long-lived pipes). With `data`, a
    git directory that is not one of ours is read through its view (see `data_view`)."""
    cmd = ["git"]
    if git_dir is not None:
        cmd += ["--git-dir", str(_where(git_dir) if data else git_dir)]
    for setting in PINNED_CONFIG + (DATA_CONFIG if data else ()) + tuple(config):
        cmd += ["-c", setting]
    return cmd


def data_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return isolated_env({**DATA_ENV, **(extra or {})})


def git(args: Sequence[str], *, cwd: Path | None = None, git_dir: Path | None = None,
        input: str | bytes | None = None, env: dict[str, str] | None = None,
        check: bool = True, text: bool = True, timeout: float | None = None,
        capture: bool = True, data: bool = False,
        config: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Run one git command with the pinned configuration (`data`: the repository is a
    mirror or the cache, see DATA_CONFIG: one that is not ours runs in its view);
    `config`: settings after those (a fetch's `fetch_config`)."""
    cmd = command(git_dir, data, config) + list(args)
    try:
        # git speaks UTF-8 here (i18n.logOutputEncoding, paths as bytes): decode it as such
        # whatever the locale (LC_ALL=C would make text mode ASCII); odd bytes survive.
        proc = subprocess.run(cmd, cwd=cwd, input=input,
                              env=data_env(env) if data else isolated_env(env),
                              capture_output=capture, timeout=timeout,
                              **({"encoding": "utf-8", "errors": "surrogateescape"} if text else {}))
    except subprocess.TimeoutExpired:
        raise OverlayError(f"git {args[0]} did not finish within {timeout:.0f}s",
                           hint="check the network or use a local mirror (--mirror)") from None
    except FileNotFoundError:
        raise OverlayError("git is not installed", hint="install git (apt-get install git)") from None
    if capture and text and proc.stderr:
        proc.stderr = unview(proc.stderr)
    if check and proc.returncode != 0:
        def as_text(value) -> str:
            if isinstance(value, bytes):
                return value.decode("utf-8", "replace")
            return value or ""
        raise GitFailed(args, proc.returncode, as_text(proc.stdout) if capture else "",
                        as_text(proc.stderr) if capture else "")
    return proc


def out(args: Sequence[str], **kwargs) -> str:
    return git(args, **kwargs).stdout.strip()


def has_commit(git_dir: Path, sha: str) -> bool:
    proc = git(["cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"], git_dir=git_dir,
               check=False, data=True)
    return proc.returncode == 0


def resolve(git_dir: Path, rev: str) -> str | None:
    proc = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
               git_dir=git_dir, check=False, data=True)
    return proc.stdout.strip() if proc.returncode == 0 else None




# ----------------------------------------------------------------------------- data repositories
#
# A mirror or a cache restored from elsewhere is data: no git process ever runs with it as
# its repository, since git always reads `$GIT_DIR/config` (proxies, URL rewrites,
# upload-pack programs, drivers, hooks) and `info/attributes`. git runs only in
# repositories of ours: a *view* (`data_view`) to read one, a git directory of ours that
# borrows its objects and refs to update a mirror (drift's fetch), and the object cache,
# whose config `adopt` rewrites each time it is opened.

OUR_CONFIG = "[core]\n\trepositoryformatversion = {version}\n\tfilemode = true\n\tbare = true\n"
CONFIG_CAP = 1 << 20  # a repository's config read as data
LIST_CAP = 256 << 20  # its packed-refs or shallow list
VIEW_TIMEOUT = 300.0

_ours: set[str] = set()  # git directories whose config the tool wrote (views, the cache)
_views: dict[str, Path] = {}
_view_root: tempfile.TemporaryDirectory | None = None


def _key(repo: Path) -> str:
    return str(Path(repo).resolve())


def _where(git_dir: Path) -> Path:
    """Where a read of `git_dir` as data runs: in it when it is ours, else in its view."""
    return Path(git_dir) if _key(git_dir) in _ours else data_view(git_dir)


def our_config(object_format: str = "sha1") -> str:
    """The config of a bare git directory of ours: nothing but its format."""
    text = OUR_CONFIG.format(version=0 if object_format == "sha1" else 1)
    if object_format != "sha1":
        text += f"[extensions]\n\tobjectFormat = {object_format}\n"
    return text


def adopt(git_dir: Path, object_format: str = "sha1") -> None:
    """Make `git_dir` (the object cache, a fetch directory) ours: write our config over
    whatever config it has (a cache restored by CI may carry anyone's), then let git run
    in it. The write replaces the file, never writes through a link."""
    git_dir = Path(git_dir)
    if git_dir.is_symlink() or not git_dir.is_dir():
        raise OverlayError(f"{git_dir} is not a folder of the tool's",
                           hint="remove it: the tool makes it anew")
    config = git_dir / "config"
    text = our_config(object_format)
    try:
        current = read_capped(config, CONFIG_CAP) if not config.is_symlink() else None
    except (OSError, NotARegularFile):
        current = None
    if current != text.encode():
        fd, tmp = tempfile.mkstemp(prefix=".config-", dir=git_dir)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, config)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise OverlayError(f"cannot write {config}: {exc.strerror}",
                               hint="remove the folder: the tool makes it anew") from None
    _ours.add(_key(git_dir))


def forget_ours(git_dir: Path) -> None:
    """`git_dir` (a fetch directory) is gone: it is no longer one of ours."""
    _ours.discard(_key(git_dir))


def _data_bytes(path: Path, cap: int) -> bytes | None:
    """A regular file of a data repository (None when absent), or one line saying why not."""
    try:
        data = read_capped(path, cap)
    except FileNotFoundError:
        return None
    except NotARegularFile as exc:
        raise OverlayError(f"{path} is {exc.kind}, not a file", hint="that is no git repository "
                           "the tool reads; re-clone it") from None
    except OSError as exc:
        raise OverlayError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > cap:
        raise OverlayError(f"{path} is over {cap >> 20} MiB", hint="re-clone the repository")
    return data


def their_settings(repo: Path, scratch: Path) -> dict[str, str]:
    """`repo`'s config, parsed by git as a file of data (a copy in `scratch`, a folder of
    ours; no includes followed): lower-cased keys, last value wins."""
    text = _data_bytes(Path(repo) / "config", CONFIG_CAP)
    if text is None:
        return {}
    copy = Path(scratch) / "their-config"
    copy.write_bytes(text)
    try:
        proc = subprocess.run(["git", "config", "--file", str(copy), "--no-includes", "--null",
                               "--list"], cwd=scratch, env=isolated_env(), capture_output=True,
                              timeout=60)
    except FileNotFoundError:
        raise OverlayError("git is not installed", hint="install git (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise OverlayError(f"git could not parse {repo}/config within 60s",
                           hint="re-clone the repository") from None
    finally:
        copy.unlink()
    if proc.returncode != 0:
        raise OverlayError(f"{repo}/config is no git config git can read",
                           hint="re-clone the repository")
    settings = {}
    for entry in proc.stdout.decode("utf-8", "replace").split("\0"):
        name, _, value = entry.partition("\n")
        if name:
            settings[name.lower()] = value
    return settings


def object_format(repo: Path, settings: dict[str, str]) -> str:
    """The object format of data repository `repo` (`their_settings`); refused if this
    tool cannot read it."""
    fmt = settings.get("extensions.objectformat", "sha1").lower()
    refs = settings.get("extensions.refstorage", "files").lower()
    if fmt not in ("sha1", "sha256") or refs != "files":
        what = f"objectFormat {fmt}" if refs == "files" else f"refStorage {refs}"
        raise OverlayError(f"{repo} uses {what}, which this tool does not read",
                           hint="clone it anew with git's defaults")
    return fmt


def lend_refs(repo: Path, into: Path) -> dict[str, bytes | None]:
    """Let git in `into` (ours) see `repo`'s refs: its refs/ folder linked, its packed-refs
    and shallow lists copied (the caller puts back what git changed, `return_lists`)."""
    refs = Path(repo) / "refs"
    if refs.is_dir():
        (Path(into) / "refs").symlink_to(refs.resolve(), target_is_directory=True)
    else:
        (Path(into) / "refs").mkdir()
    lent = {}
    for name in ("packed-refs", "shallow"):
        lent[name] = _data_bytes(Path(repo) / name, LIST_CAP)
        if lent[name] is not None:
            (Path(into) / name).write_bytes(lent[name])
    return lent


def return_lists(repo: Path, into: Path, lent: dict[str, bytes | None]) -> None:
    """Put back into `repo` the lists git in `into` changed (replacing, never writing
    through a link)."""
    for name, before in lent.items():
        ours = Path(into) / name
        after = ours.read_bytes() if ours.is_file() else None
        if after == before:
            continue
        if after is None:
            (Path(repo) / name).unlink(missing_ok=True)
            continue
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=repo)
        with os.fdopen(fd, "wb") as f:
            f.write(after)
        os.replace(tmp, Path(repo) / name)


_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def data_view(repo: Path) -> Path:
    """A git directory that sees `repo`'s objects and refs, and nothing else of it.

    A mirror or cache is data: its config (textconv, filter and diff drivers, hooks,
    fsmonitor, pager, proxies), its `info/attributes`, grafts and replace refs must not
    change what git reads or run anything. git 2.39 has no `--attr-source` and always
    reads `$GIT_DIR/info/attributes` and `$GIT_DIR/config`, so every read runs in a view:
    a fresh bare git directory of ours whose only link to `repo` is an alternates entry
    to its objects, with its refs (not refs/replace/) and shallow list copied. Making it
    runs no git in `repo` either: its config is parsed as a file, its HEAD read as one,
    and its refs listed by git in the view through a link to its refs/ folder. One view
    per repository per process; it shows the refs as they were when first asked for.
    """
    global _view_root
    key = _key(repo)
    if key in _views and (_views[key] / "HEAD").is_file():
        return _views[key]
    if any(str(v) == key for v in _views.values()):
        return Path(key)  # already a view
    if _view_root is None:
        _view_root = tempfile.TemporaryDirectory(prefix="overlay-views-")
    view = Path(_key(Path(tempfile.mkdtemp(prefix="view-", dir=_view_root.name))))
    source = Path(key)
    if not (source / "objects").is_dir():
        raise OverlayError(f"{source} is not a git repository", hint="give a clone or bare clone")
    fmt = object_format(source, their_settings(source, view))
    (view / "objects" / "info").mkdir(parents=True)
    (view / "objects" / "info" / "alternates").write_text(str(source / "objects") + "\n")
    (view / "config").write_text(our_config(fmt))
    (view / "HEAD").write_text("ref: refs/heads/main\n")
    _ours.add(str(view))
    lend_refs(source, view)
    listing = git(["for-each-ref", "--format=%(objectname) %(refname)"], git_dir=view,
                  data=True, timeout=VIEW_TIMEOUT).stdout
    if (view / "refs").is_symlink():
        (view / "refs").unlink()
    (view / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    refs = [line for line in listing.splitlines()
            if line and not line.split(" ", 1)[-1].startswith("refs/replace/")]
    names = {line.split(" ", 1)[-1] for line in refs}
    (view / "packed-refs").write_text("".join(line + "\n" for line in refs))
    head = (_data_bytes(source / "HEAD", 4096) or b"").decode("utf-8", "replace").strip()
    if head.startswith("ref:") and head[4:].strip() in names:
        (view / "HEAD").write_text(f"ref: {head[4:].strip()}\n")
    elif _HEX.fullmatch(head):
        (view / "HEAD").write_text(f"{head}\n")
    elif head.startswith("ref: refs/"):  # an unborn branch: unborn in the view too
        (view / "HEAD").write_text("ref: refs/heads/overlay-unborn\n")
    _views[key] = view
    return view


def unview(text: str) -> str:
    """`text` (git's messages) with each view's path written as the repository it shows,
    and the tool's other scratch git folders as `<temporary folder>`: internal paths are
    nobody's business, and the user can find neither."""
    for key, view in list(_views.items()):
        text = text.replace(str(view), key)
    if _view_root is not None:
        text = text.replace(_view_root.name, "<temporary folder>")
    return re.sub(re.escape(tempfile.gettempdir()) + r"/overlay-[A-Za-z]+-[A-Za-z0-9_]+", "<temporary folder>",
                  text)


def forget_view(repo: Path) -> None:
    """The tool wrote to `repo` (a fetch, a ref): its next view copies the refs anew."""
    view = _views.pop(_key(repo), None)
    if view is not None:
        _ours.discard(str(view))
        shutil.rmtree(view, ignore_errors=True)


def fetch_config(url: str) -> tuple[str, ...]:
    """The settings of a fetch from `url`, after the pinned and data ones: git may speak
    that URL's protocol and no other (https, or file for a local path: no git://, ssh or
    remote helper a rewrite could reach), and asks no alternate repository for its refs
    (that would run git in it)."""
    if url.startswith("https://"):
        allowed = ("protocol.file.allow=never", "protocol.https.allow=always")
    elif not url.startswith("-") and (url.startswith("file://") or _local(url)):
        allowed = ("protocol.file.allow=always",)
    else:  # ssh, git://, http, a remote helper, or an option in disguise
        raise OverlayError(f"cannot fetch {redact(url)}: only https URLs and local paths are "
                           "fetched", hint="pin the repository's https URL, or put a clone in "
                                           "the mirror (--mirror)")
    return ("protocol.allow=never", *allowed, "core.alternateRefsCommand=true")


def _local(url: str) -> bool:
    """A path, as git tells it from a URL (no `://`, and no `host:` before any slash)."""
    if "://" in url:
        return False
    colon = url.find(":")
    return colon < 0 or ("/" in url[:colon])
