"""Running git with a pinned, user-independent configuration.

Byte-stable patches and reproducible composition must not depend on whoever runs
them: global and system config are ignored, and the settings that change what
`format-patch`, `am` or `diff` produce are pinned explicitly (Electron learned each
of these one bug at a time: signatures, renames, prefixes, bracketed subjects).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from overlay.errors import OverlayError

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


def command(git_dir: Path | None = None, data: bool = False) -> list[str]:
    """`git` with the pinned settings (and the data settings when `data`), before the
    subcommand: for callers that start git themselves (long-lived pipes)."""
    cmd = ["git"]
    if git_dir is not None:
        cmd += ["--git-dir", str(git_dir)]
    for setting in PINNED_CONFIG + (DATA_CONFIG if data else ()):
        cmd += ["-c", setting]
    return cmd


def data_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return isolated_env({**DATA_ENV, **(extra or {})})


def git(args: Sequence[str], *, cwd: Path | None = None, git_dir: Path | None = None,
        input: str | bytes | None = None, env: dict[str, str] | None = None,
        check: bool = True, text: bool = True, timeout: float | None = None,
        capture: bool = True, data: bool = False) -> subprocess.CompletedProcess:
    """Run one git command with the pinned configuration (`data`: the repository is a
    mirror or the cache, see DATA_CONFIG)."""
    cmd = command(git_dir, data) + list(args)
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
    proc = git(["cat-file", "-e", f"{sha}^{{commit}}"], git_dir=git_dir, check=False, data=True)
    return proc.returncode == 0


def resolve(git_dir: Path, rev: str) -> str | None:
    proc = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
               git_dir=git_dir, check=False, data=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


# ----------------------------------------------------------------------------- data views

_views: dict[str, Path] = {}
_view_root: tempfile.TemporaryDirectory | None = None


def data_view(repo: Path) -> Path:
    """A git directory that sees `repo`'s objects and refs, and nothing else of it.

    A mirror or cache is data: its config (textconv, filter and diff drivers, hooks,
    fsmonitor, pager), its `info/attributes`, grafts and replace refs must not change
    what git reads or run anything. git 2.39 has no `--attr-source` and always reads
    `$GIT_DIR/info/attributes` and `$GIT_DIR/config`, so every read runs in a view: a
    fresh bare git directory of ours whose only link to `repo` is an alternates entry
    to its objects, with its refs (not refs/replace/) and shallow list copied. One view
    per repository per process; it shows the refs as they were when first asked for.
    """
    global _view_root
    key = str(Path(repo).resolve())
    if key in _views and (_views[key] / "HEAD").is_file():
        return _views[key]
    if any(str(v) == key for v in _views.values()):
        return Path(key)  # already a view
    if _view_root is None:
        _view_root = tempfile.TemporaryDirectory(prefix="overlay-views-")
    view = Path(tempfile.mkdtemp(prefix="view-", dir=_view_root.name))
    source = Path(key)
    listing = git(["for-each-ref", "--format=%(objectname) %(refname)"], git_dir=source,
                  data=True).stdout
    refs = [line for line in listing.splitlines()
            if line and not line.split(" ", 1)[-1].startswith("refs/replace/")]
    head = git(["symbolic-ref", "-q", "HEAD"], git_dir=source, check=False, data=True)
    fmt = git(["rev-parse", "--show-object-format"], git_dir=source, check=False,
              data=True).stdout.strip() or "sha1"
    (view / "objects" / "info").mkdir(parents=True)
    (view / "refs" / "heads").mkdir(parents=True)
    (view / "objects" / "info" / "alternates").write_text(str(source / "objects") + "\n")
    (view / "packed-refs").write_text("".join(line + "\n" for line in refs))
    if head.returncode == 0 and head.stdout.strip().startswith("refs/"):
        (view / "HEAD").write_text(f"ref: {head.stdout.strip()}\n")
    else:
        detached = git(["rev-parse", "--verify", "--quiet", "HEAD"], git_dir=source,
                       check=False, data=True).stdout.strip()
        (view / "HEAD").write_text(f"{detached}\n" if detached else "ref: refs/heads/main\n")
    if (source / "shallow").is_file():
        shutil.copyfile(source / "shallow", view / "shallow")
    config = "[core]\n\trepositoryformatversion = {v}\n\tbare = true\n".format(
        v=0 if fmt == "sha1" else 1)
    if fmt != "sha1":
        config += f"[extensions]\n\tobjectFormat = {fmt}\n"
    (view / "config").write_text(config)
    _views[key] = view
    return view


def forget_view(repo: Path) -> None:
    """The tool wrote to `repo` (a fetch, a ref): its next view copies the refs anew."""
    view = _views.pop(str(Path(repo).resolve()), None)
    if view is not None:
        shutil.rmtree(view, ignore_errors=True)
