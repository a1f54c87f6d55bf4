"""Issue 16, Why-2: a mirror is data. No program its config or attributes name ever runs.

The mirror of the synthetic rebase history (tests/drift/series_history.py) is poisoned:
its config names a textconv, an external diff, smudge/clean/process filters, a merge
driver, an fsmonitor, a pager, a hooks folder and credential/alternate-refs helpers;
its `info/attributes` gives every path `diff=evil filter=evil merge=evil`. Each of those
programs appends to a marker file. A control run of plain git shows the poison is live;
then drift (scan, onto, bisect), apply, refresh and rebase run and the marker never
appears.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from overlay.cli import main
from tests.drift.series_history import build

HOOKS = ("pre-commit", "post-commit", "post-checkout", "reference-transaction", "pre-auto-gc",
         "post-merge", "applypatch-msg", "pre-applypatch", "post-applypatch", "post-rewrite",
         "pre-rebase", "post-update", "update", "pre-receive", "push-to-checkout")


def _poison(git_dir: Path, marker: Path) -> Path:
    evil = git_dir.parent.parent / "evil.sh"
    evil.write_text("#!/bin/sh\n"
                    f"echo \"$0 $*\" >> '{marker}'\n"
                    "if [ $# -le 1 ]; then exec cat \"$@\"; fi\n"
                    "exit 0\n")
    evil.chmod(evil.stat().st_mode | stat.S_IXUSR)
    hooks = git_dir.parent.parent / "evil-hooks"
    hooks.mkdir()
    for name in HOOKS:
        (hooks / name).symlink_to(evil)
    settings = {
        "diff.evil.textconv": str(evil), "diff.evil.command": str(evil),
        "diff.external": str(evil), "filter.evil.smudge": str(evil),
        "filter.evil.clean": str(evil), "filter.evil.process": str(evil),
        "merge.evil.driver": f"{evil} %O %A %B", "core.fsmonitor": str(evil),
        "core.pager": str(evil), "core.hooksPath": str(hooks),
        "core.alternateRefsCommand": str(evil), "credential.helper": f"!{evil}",
        "core.sshCommand": str(evil), "log.showSignature": "true", "gpg.program": str(evil),
    }
    for key, value in settings.items():
        subprocess.run(["git", "--git-dir", str(git_dir), "config", key, value], check=True)
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text("* diff=evil filter=evil merge=evil\n")
    return evil


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    history = build(tmp_path / "h")
    marker = tmp_path / "marker"
    git_dir = history.mirror / "acme+plugin" / ".git"
    _poison(git_dir, marker)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(history.mirror))
    return history, git_dir, marker


def _overlay(capsys, project: Path, *args: str) -> tuple[int, str, str]:
    rc = main(["--root", str(project), *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_poison_is_live(hostile):
    """Control: plain git reading the mirror runs the programs (so the test can fail)."""
    history, git_dir, marker = hostile
    subprocess.run(["git", "--git-dir", str(git_dir), "log", "-p", "-1", "u2"], check=True,
                   capture_output=True)
    assert marker.is_file() and marker.read_text()


def test_drift_apply_refresh_rebase_run_nothing_the_mirror_names(hostile, capsys):
    history, git_dir, marker = hostile
    project = history.project
    rc, out, err = _overlay(capsys, project, "drift", "--scan", "plugin=u5", "--json")
    assert rc in (0, 1) and out.startswith("{"), err
    assert not marker.exists(), marker.read_text()
    rc, out, err = _overlay(capsys, project, "drift", "--onto", "plugin=u4", "--json")
    assert rc in (0, 1) and out.startswith("{"), err
    rc, out, err = _overlay(capsys, project, "drift", "--scan", "plugin=u5", "--bisect", "--json")
    assert rc in (0, 1) and out.startswith("{"), err
    assert not marker.exists(), marker.read_text()

    rc, out, err = _overlay(capsys, project, "apply", "--pin", "base")
    assert rc == 0, err
    assert not marker.exists(), marker.read_text()

    rc, out, err = _overlay(capsys, project, "rebase", "--pin", "base", "--onto", "plugin=u1",
                            "--as", "next")
    assert rc == 0, out + err
    # (refresh of pin set "base" itself trips over refs/overlay/base: a separate bug)
    rc, out, err = _overlay(capsys, project, "refresh", "--pin", "next")
    assert rc == 0, err
    rc, out, err = _overlay(capsys, project, "rebase", "--pin", "base", "--onto", "plugin=u4",
                            "--as", "later")
    assert rc in (0, 1), out + err  # a conflict stops it: it read the mirror all the same
    assert not marker.exists(), marker.read_text()
    # and the poison is still live: it was the tool, not the fixture, that stayed clean
    subprocess.run(["git", "--git-dir", str(git_dir), "log", "-p", "-1", "u2"], check=True,
                   capture_output=True)
    assert marker.is_file()


def test_a_cache_with_a_poisoned_config_runs_nothing_either(hostile, capsys, tmp_path):
    """The object cache is data too: poison it after a first apply, compose again."""
    history, _, marker = hostile
    project = history.project
    assert _overlay(capsys, project, "apply", "--pin", "base")[0] == 0
    # a second pin set at u1 puts u1 into the cache too, so drift has a diff to read there
    (project / "pins" / "later.yaml").write_text(
        (project / "pins" / "base.yaml").read_text().replace("default: true", "default: false")
        .replace(history.commits["u0"], history.commits["u1"]))
    assert _overlay(capsys, project, "apply", "--pin", "later")[0] == 0
    cache_git = next((tmp_path / "cache" / "git").glob("*.git"))
    evil = history.mirror / "evil.sh"  # written by the fixture's _poison
    for key, value in {"diff.evil.textconv": str(evil), "filter.evil.smudge": str(evil),
                       "filter.evil.process": str(evil), "core.fsmonitor": str(evil),
                       "log.showSignature": "true", "gpg.program": str(evil)}.items():
        subprocess.run(["git", "--git-dir", str(cache_git), "config", key, value], check=True)
    (cache_git / "info").mkdir(exist_ok=True)
    (cache_git / "info" / "attributes").write_text("* diff=evil filter=evil\n")
    # drift's diff reader on the cache (what drift uses when no mirror is given)
    from overlay.drift.scan import upstream_log

    log = upstream_log(cache_git, history.commits["u0"], history.commits["u1"], ["README.md"])
    assert "+more docs" in log  # the stored bytes, not a textconv's output
    assert not marker.exists(), marker.read_text()
    mirror = os.environ.pop("OVERLAY_MIRROR")  # apply now composes from the cache alone
    try:
        rc, out, err = _overlay(capsys, project, "apply", "--pin", "base", "--force")
        assert rc == 0, err
    finally:
        os.environ["OVERLAY_MIRROR"] = mirror
    assert not marker.exists(), marker.read_text()
