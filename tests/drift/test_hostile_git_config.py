"""Issue 26, case 2: git never runs in a mirror's or the cache's own configuration.

Each case plants one key (with what it needs to be reached) in the mirror or in the
object cache, pointing at a program that appends to a marker file: `core.gitProxy`
(behind an `insteadOf` to git://), `url.<x>.insteadOf` (to a remote helper that the
repository's own alias runs), `remote.<url>.uploadpack`, `core.sshCommand` (behind an
`insteadOf` to ssh://), `core.fsmonitor`, hooks (the hooks folder and
`core.hooksPath`), a textconv driver and smudge/clean/process filters (with
`info/attributes` and a `.gitattributes`). A control runs plain git the way the key is
meant to be reached and sees the marker, so each case can fail; then the real commands
run (drift --fetch, apply, drift, rebase for a mirror; apply and drift for a cache,
which a CI cache restore may have written) and work, and the marker never appears.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from overlay import gitcmd
from overlay.cli import main
from tests.drift.series_history import URL, build

KEYS = ("core.gitProxy", "url.insteadOf", "remote.uploadpack", "core.sshCommand",
        "core.fsmonitor", "hooks", "textconv", "filters")
HOOKS = ("reference-transaction", "post-checkout", "post-merge", "pre-commit", "post-commit",
         "pre-auto-gc", "post-rewrite", "applypatch-msg", "pre-applypatch", "post-applypatch",
         "post-update", "update", "pre-receive", "push-to-checkout", "fsmonitor-watchman")
PREFIXES = ("file://", "/")  # what insteadOf rewrites: every URL and local path fetched


def _plain_git(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    return subprocess.run(["git", *args], env=env, capture_output=True, text=True, timeout=60,
                          **kwargs)


def _evil(folder: Path, marker: Path) -> tuple[Path, Path]:
    evil = folder / "evil.sh"
    evil.write_text("#!/bin/sh\n"
                    f"echo \"$0 $*\" >> '{marker}'\n"
                    "if [ $# -eq 0 ]; then exec cat; fi\n"
                    "if [ $# -eq 1 ] && [ -f \"$1\" ]; then exec cat \"$1\"; fi\n"
                    "exit 0\n")
    evil.chmod(evil.stat().st_mode | stat.S_IXUSR)
    hooks = folder / "evil-hooks"
    hooks.mkdir()
    for name in HOOKS:
        (hooks / name).symlink_to(evil)
    return evil, hooks


def _plant(git_dir: Path, key: str, evil: Path, hooks: Path, urls: list[str]) -> None:
    """Plant `key` in `git_dir` (and what it needs to be reached); `urls`: the URLs the
    tool fetches with this repository as the fetching side (uploadpack is per URL)."""
    settings: list[tuple[str, str]] = []
    if key == "core.gitProxy":
        settings += [("url.git://evil.invalid/.insteadOf", p) for p in PREFIXES]
        settings += [("core.gitProxy", str(evil))]
    elif key == "url.insteadOf":
        settings += [("url.evil::x.insteadOf", p) for p in PREFIXES]
        settings += [("alias.remote-evil", f"!{evil}")]
    elif key == "remote.uploadpack":
        settings += [(f"remote.{url}.uploadpack", str(evil)) for url in urls]
    elif key == "core.sshCommand":
        settings += [("url.ssh://evil.invalid/x.insteadOf", p) for p in PREFIXES]
        settings += [("core.sshCommand", str(evil))]
    elif key == "core.fsmonitor":
        settings += [("core.fsmonitor", str(evil))]
    elif key == "hooks":
        settings += [("core.hooksPath", str(hooks))]
        (git_dir / "hooks").mkdir(exist_ok=True)
        for name in HOOKS:
            (git_dir / "hooks" / name).unlink(missing_ok=True)
            (git_dir / "hooks" / name).symlink_to(hooks / name)
    elif key == "textconv":
        settings += [("diff.evil.textconv", str(evil)), ("diff.evil.command", str(evil))]
    elif key == "filters":
        settings += [("filter.evil.smudge", str(evil)), ("filter.evil.clean", str(evil)),
                     ("filter.evil.process", str(evil)), ("filter.evil.required", "true")]
    for name, value in settings:
        subprocess.run(["git", "--git-dir", str(git_dir), "config", "--add", name, value],
                       check=True)
    if key in ("textconv", "filters"):
        (git_dir / "info").mkdir(exist_ok=True)
        (git_dir / "info" / "attributes").write_text("* diff=evil filter=evil\n")
        if git_dir.name == ".git":  # a work-tree clone reads the work tree's attributes too
            (git_dir.parent / ".gitattributes").write_text("* diff=evil filter=evil\n")


def _control(git_dir: Path, key: str, url: str, tmp: Path) -> None:
    """Plain git, the way `key` is reached: it runs the planted program."""
    if key in ("core.gitProxy", "url.insteadOf", "remote.uploadpack", "core.sshCommand"):
        _plain_git(["--git-dir", str(git_dir), "fetch", url, "HEAD"])
    elif key == "core.fsmonitor":
        if git_dir.name == ".git":
            _plain_git(["status"], cwd=git_dir.parent)
        else:
            _plain_git(["--git-dir", str(git_dir), "--work-tree", str(tmp), "status"])
    elif key == "hooks":
        head = _plain_git(["--git-dir", str(git_dir), "rev-parse", "HEAD"]).stdout.strip()
        _plain_git(["--git-dir", str(git_dir), "update-ref", "refs/control/x", head])
        _plain_git(["--git-dir", str(git_dir), "update-ref", "-d", "refs/control/x"])
    elif key == "textconv":
        _plain_git(["--git-dir", str(git_dir), "log", "-p", "-2", "HEAD"])
    elif key == "filters":
        _plain_git(["--git-dir", str(git_dir), "hash-object", "--stdin", "--path=x.py"],
                   input="x = 1\n")


def _overlay(capsys, project: Path, *args: str) -> tuple[int, str, str]:
    rc = main(["--root", str(project), *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def world(tmp_path, monkeypatch):
    history = build(tmp_path / "h")
    marker = tmp_path / "marker"
    evil, hooks = _evil(tmp_path, marker)
    # the upstream drift --fetch fetches from: a bare copy with one more branch
    upstream = tmp_path / "upstream" / "acme" / "plugin"
    _plain_git(["clone", "-q", "--bare", str(history.upstream), str(upstream)])
    _plain_git(["--git-dir", str(upstream), "branch", "later", history.commits["u5"]])
    url = "file://" + str(upstream)
    pin = history.project / "pins" / "base.yaml"
    pin.write_text(pin.read_text().replace(URL, url))
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(history.mirror))
    return history, marker, evil, hooks, url


def _marker_text(marker: Path) -> str:
    return marker.read_text() if marker.exists() else ""


@pytest.mark.parametrize("key", KEYS)
def test_a_key_planted_in_the_mirror_never_runs(world, key, capsys, tmp_path):
    history, marker, evil, hooks, url = world
    project = history.project
    mirror_git = history.mirror / "acme+plugin" / ".git"
    _plant(mirror_git, key, evil, hooks, [url])
    _control(mirror_git, key, url, tmp_path)
    assert marker.exists(), f"control: plain git did not reach {key}"
    marker.unlink()

    rc, out, err = _overlay(capsys, project, "drift", "--fetch", "--onto", "plugin=origin/later",
                            "--json")
    assert not marker.exists(), _marker_text(marker)
    assert rc in (0, 1) and out.startswith("{"), err
    assert json.loads(out)["runs"], out  # the fetched branch arrived and was compared

    rc, out, err = _overlay(capsys, project, "apply", "--pin", "base")
    assert rc == 0, err
    rc, out, err = _overlay(capsys, project, "drift", "--scan", "plugin=u5", "--json")
    assert rc in (0, 1) and out.startswith("{"), err
    rc, out, err = _overlay(capsys, project, "rebase", "--pin", "base", "--onto", "plugin=u1",
                            "--as", "next")
    assert rc == 0, out + err
    assert not marker.exists(), _marker_text(marker)


@pytest.mark.parametrize("key", KEYS)
def test_a_key_planted_in_the_cache_never_runs(world, key, capsys, tmp_path):
    """The cache may come from a CI cache restore: its config is not ours until rewritten."""
    history, marker, evil, hooks, url = world
    project = history.project
    cache_git = tmp_path / "cache" / "git" / "acme+plugin.git"
    _plain_git(["init", "-q", "--bare", "--initial-branch=main", str(cache_git)])
    mirror_git = history.mirror / "acme+plugin" / ".git"
    view = gitcmd.data_view(mirror_git)  # what the fetch into the cache fetches from
    _plant(cache_git, key, evil, hooks, ["file://" + str(view), str(view)])
    control = tmp_path / "control.git"
    shutil.copytree(cache_git, control, symlinks=True)
    _plain_git(["--git-dir", str(control), "fetch", "-q", str(mirror_git),
                "main:refs/heads/main"])
    _control(control, key, "file://" + str(view), tmp_path)
    assert marker.exists(), f"control: plain git did not reach {key}"
    marker.unlink()

    rc, out, err = _overlay(capsys, project, "apply", "--pin", "base")
    assert not marker.exists(), _marker_text(marker)
    assert rc == 0, err
    os.environ.pop("OVERLAY_MIRROR")  # drift now reads the cache alone
    rc, out, err = _overlay(capsys, project, "drift", "--onto",
                            f"plugin={history.commits['u0']}", "--json")
    assert rc in (0, 1) and out.startswith("{"), err
    rc, out, err = _overlay(capsys, project, "apply", "--pin", "base", "--force")
    assert rc == 0, err
    assert not marker.exists(), _marker_text(marker)


def test_a_link_in_the_mirrors_refs_is_refused_not_written_through(world, capsys, tmp_path):
    """drift --fetch writes the mirror's refs: a refs/ folder that links elsewhere (here
    refs/remotes, to a folder outside) stops it with one line, and nothing lands there."""
    history, marker, evil, hooks, url = world
    mirror_git = history.mirror / "acme+plugin" / ".git"
    outside = tmp_path / "outside"
    outside.mkdir()
    (mirror_git / "refs" / "remotes").mkdir(exist_ok=True)
    shutil.rmtree(mirror_git / "refs" / "remotes")
    (mirror_git / "refs" / "remotes").symlink_to(outside)
    rc, out, err = _overlay(capsys, history.project, "drift", "--fetch", "--onto",
                            "plugin=origin/later")
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert "refs/remotes is a symbolic link" in err
    assert list(outside.iterdir()) == []


def test_the_fetch_from_a_directory_of_ours_updates_and_prunes_the_mirrors_refs(world, capsys):
    """The mirror's refs change as a fetch in it would change them: a new branch arrives,
    one deleted upstream goes, also when it sat in packed-refs (the copy goes back)."""
    history, marker, evil, hooks, url = world
    mirror_git = history.mirror / "acme+plugin" / ".git"
    upstream = Path(url[len("file://"):])
    rc, out, err = _overlay(capsys, history.project, "drift", "--fetch", "--onto",
                            "plugin=origin/later", "--json")
    assert rc in (0, 1), err
    _plain_git(["--git-dir", str(mirror_git), "pack-refs", "--all"])
    assert "refs/remotes/origin/later" in (mirror_git / "packed-refs").read_text()
    _plain_git(["--git-dir", str(upstream), "branch", "-D", "later"])
    _plain_git(["--git-dir", str(upstream), "branch", "newer", history.commits["u3"]])
    rc, out, err = _overlay(capsys, history.project, "drift", "--fetch", "--onto",
                            "plugin=origin/newer", "--json")
    assert rc in (0, 1) and out.startswith("{"), err
    refs = _plain_git(["--git-dir", str(mirror_git), "for-each-ref", "--format=%(refname)",
                       "refs/remotes/"]).stdout.split()
    assert "refs/remotes/origin/newer" in refs and "refs/remotes/origin/later" not in refs
    assert "refs/remotes/origin/later" not in (mirror_git / "packed-refs").read_text()
    assert not marker.exists()
