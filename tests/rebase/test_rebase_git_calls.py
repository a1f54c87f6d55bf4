"""A rebase's own cost outside the gate: repeated work that plain git would not do
(issue 30 item 9). The tests count git processes and patch parses; they never time them.

- what each upstream commit changed (drift's provenance residue) is read for every
  patch and commit in one `git diff-tree --stdin`, not one process per commit;
- a patch mail is parsed once per process however many pin sets read the series.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys

import pytest
import unidiff

from overlay import gitcmd
from overlay.cli import main
from overlay.drift import scan
from overlay.gitcmd import GitFailed
from overlay.series import patchfile


@pytest.fixture(scope="session")
def _history(tmp_path_factory):
    from tests.drift.provenance_history import build as build_provenance

    return build_provenance(tmp_path_factory.mktemp("rebase-git-calls"), residue=True)


def _counting_git(monkeypatch) -> collections.Counter:
    seen: collections.Counter = collections.Counter()
    real = gitcmd.git

    def git(args, **kwargs):
        seen[args[0]] += 1
        return real(args, **kwargs)

    monkeypatch.setattr(gitcmd, "git", git)
    return seen


def _counting_parses(monkeypatch) -> collections.Counter:
    parsed: collections.Counter = collections.Counter()
    real = unidiff.PatchSet

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, data, *args, **kwargs):
            # reading a mail (through patchfile.patch_set), not a hunk's own use; up to three
            # frames up, as Python 3.11+ may put an `__init__` shim frame between
            if any("parse_patch" in sys._getframe(k).f_code.co_name for k in (1, 2, 3)):
                parsed[data if isinstance(data, str) else repr(data)] += 1
            super().__init__(data, *args, **kwargs)

    monkeypatch.setattr(patchfile.unidiff, "PatchSet", Counted)
    return parsed


def test_a_provenance_rebase_reads_every_upstream_commit_in_one_git_process(capsys, _history, tmp_path,
                                                                            monkeypatch):
    project = tmp_path / "project"
    shutil.copytree(_history.project, project)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(_history.mirror))
    calls = _counting_git(monkeypatch)
    rc = main(["--root", str(project), "rebase", "--pin", "base", "--onto", "plugin=p5",
               "--onto", "core=pypi:core==1.1", "--as", "next"])
    out, err = capsys.readouterr()
    line = next(x for x in out.splitlines() if x.startswith("  0001"))
    # what the residue test (test_rebase.py) sees, with the commits read in one batch
    assert "only in part: a.py hunk 1/1" in line and "the residue, e.py hunk 1/1, is kept" in line, out + err
    assert calls["diff-tree"] == 1, calls


def _commit(repo, *files: str, message: str = "c") -> str:
    for f in files:
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / f).write_text(f + message + "\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                    "-m", message], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def _one_by_one(repo, commit: str) -> set[str]:
    """The oracle: `git diff-tree` on the one commit, as drift ran it before."""
    out = subprocess.run(["git", "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--root", commit],
                         cwd=repo, check=True, capture_output=True, text=True).stdout
    return {n for n in out.split("\0") if n}


def test_changed_paths_answers_each_commit_as_its_own_diff_tree_would(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    root = _commit(repo, "a.py", "pkg/b.py", message="root")
    empty = _commit(repo, message="empty")
    named = _commit(repo, root[:0] + "pkg/" + root, "c.py", message="a file named like a commit id")
    more = _commit(repo, "a.py", "d/e/f.py", message="more")
    commits = [more, root, empty, named, root]
    calls = _counting_git(monkeypatch)
    found = scan.changed_paths(repo / ".git", commits)
    assert calls["diff-tree"] == 1
    assert found == {c: _one_by_one(repo, c) for c in commits}
    assert found[empty] == set() and found[root] == {"a.py", "pkg/b.py"}
    with pytest.raises(GitFailed):
        scan.changed_paths(repo / ".git", [more, "0" * 40])


def test_a_patch_is_parsed_once_per_text_and_again_when_it_changes(tmp_path, monkeypatch):
    """A rebase reads the series for every pin set (drift, compose, the other pin sets'
    check): each mail is parsed once; an edited file is its new text."""
    from tests.fixtures import make_world

    world = make_world(tmp_path / "w")
    mail = world.patch_file("0001-plugin-lora-args.patch")
    parsed = _counting_parses(monkeypatch)
    first = patchfile.read_patch(mail, "patches/" + mail.name)
    for _ in range(3):
        assert patchfile.read_patch(mail, "patches/" + mail.name) == first
    assert sum(parsed.values()) == 1
    mail.write_text(mail.read_text().replace("Subject: [PATCH]", "Subject: [PATCH] edited:"))
    again = patchfile.read_patch(mail, "patches/" + mail.name)
    assert again.subject.startswith("edited:") and again.files == first.files
    assert patchfile.read_patch(mail, "patches/" + mail.name) == again
    assert sum(parsed.values()) == 2
    with pytest.raises(Exception):  # a bad mail is still refused every time, never remembered
        bad = tmp_path / "bad.patch"
        bad.write_text("")
        patchfile.read_patch(bad, "patches/bad.patch")
