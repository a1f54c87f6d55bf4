"""Issue 29: git's raw output (`remote: Counting objects`, its progress) and the tool's
internal scratch paths (views of mirrors, fetch folders) never reach the user."""

from __future__ import annotations

import subprocess
import tempfile

from overlay import gitcmd
import importlib

progress_mod = importlib.import_module("overlay.reporting.progress")


def test_a_fetch_on_a_terminal_shows_our_line_not_gits(world, capfd, monkeypatch):
    from overlay.cli import main

    monkeypatch.setattr(progress_mod, "is_terminal", lambda stream: True)
    from overlay import reporting
    monkeypatch.setattr(reporting, "is_terminal", lambda stream: True)
    code = main(["--root", str(world.project), "apply"])  # no mirror: fetched from the pinned URL
    captured = capfd.readouterr()
    assert code == 0, captured.err
    shown = captured.err + captured.out
    assert "fetching" in shown  # the tool's own progress line
    for raw in ("remote:", "Counting objects", "Enumerating objects", "Receiving objects"):
        assert raw not in shown, raw


def test_gits_messages_name_the_repository_not_its_view(tmp_path):
    repo = tmp_path / "mirror.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    view = gitcmd.data_view(repo)
    assert str(view) != str(repo.resolve())
    said = gitcmd.unview(f"fatal: cannot lock ref in {view}/refs/heads/x")
    assert said == f"fatal: cannot lock ref in {repo.resolve()}/refs/heads/x"
    scratch = f"{tempfile.gettempdir()}/overlay-fetch-abc123_x/git"
    assert gitcmd.unview(f"error: {scratch}: bad") == "error: <temporary folder>/git: bad"
    proc = gitcmd.git(["--git-dir", str(view / "nowhere"), "rev-parse", "HEAD"], check=False)
    assert str(view) not in proc.stderr
