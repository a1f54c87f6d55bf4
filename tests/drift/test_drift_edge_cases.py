"""Issue 13, item 9: drift edge cases a hostile or unusual input exposed.

- a patch with two `diff --git` sections for one file is `clean` at its own pin
  (each section applies to the text the one before it produced, as `git apply` does);
- a patch with a `..` path gets the same unsafe-path error `overlay check` gives;
- a mirror holding a non-git folder of the right name says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from overlay.cli import main
from tests.drift.conftest import git
from tests.drift.test_drift_bad_input import listing, run_cli


def _one_patch_project(project: Path, mail: str) -> None:
    """The fixture project with its series replaced by one plugin patch."""
    shutil.rmtree(project / "patches")
    (project / "patches").mkdir()
    (project / "patches" / "0001-two-sections.patch").write_text(mail)
    (project / "series.yaml").write_text(
        "series:\n  - patch: 0001-two-sections.patch\n    target: plugin\n    origin: local\n")


def test_two_sections_for_one_file_are_clean_at_the_pin(capsys, history, project, tmp_path):
    # Two commits on pkg/a.py, one adding lines near the top; their diffs, joined, are
    # one patch whose second section's line numbers count the first section's lines.
    work = tmp_path / "work"
    git(["clone", "-q", str(history.plugin), str(work)], tmp_path)
    git(["checkout", "-q", history.commits["c0"]], work)
    a = work / "pkg" / "a.py"
    a.write_text(a.read_text().replace("a_03 = 3\n", "a_03 = 3\nextra_1 = 1\nextra_2 = 2\n"))
    git(["commit", "-q", "-am", "first"], work, 1)
    a.write_text(a.read_text().replace("a_30 = 30\n", "a_30 = 3000\n"))
    git(["commit", "-q", "-am", "second"], work, 2)
    first = git(["diff", "HEAD~2", "HEAD~1"], work)
    second = git(["diff", "HEAD~1", "HEAD"], work)
    mail = ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            "From: Dev <dev@example.org>\nDate: Mon, 1 Jun 2026 00:00:00 +0000\n"
            "Subject: [PATCH] a: two edits in two sections\n\n---\n"
            f"{first}\n{second}\n--\n2.40.0\n")
    _one_patch_project(project, mail)
    rc, out, err = run_cli(capsys, project, "--mirror", str(history.mirror), "--onto",
                           f"plugin={history.commits['c0']}", "--json")
    assert rc == 0, err
    (verdict,) = json.loads(out)["runs"][0]["verdicts"]
    assert verdict["class"] == "clean", verdict
    # and the second section is not lost: after c6 reworked a_20 only, both still apply
    rc, out, err = run_cli(capsys, project, "--mirror", str(history.mirror), "--onto",
                           f"plugin={history.commits['c1']}", "--json")
    (verdict,) = json.loads(out)["runs"][0]["verdicts"]
    assert verdict["class"] == "clean", verdict


def test_dotdot_path_gets_the_unsafe_path_message_check_gives(capsys, history, project):
    patch = sorted((project / "patches").glob("0003-*.patch"))[0]
    patch.write_text(patch.read_text().replace("a/pkg/b.py", "a/../b.py")
                     .replace("b/pkg/b.py", "b/../b.py"))
    before = listing(project)
    rc, out, err = run_cli(capsys, project, "--mirror", str(history.mirror), "--onto", "plugin=main")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"patches/{patch.name}" in err
    assert "unsafe patch: path '../b.py' escapes the tree with '..'" in err
    assert "report it" not in err
    assert listing(project) == before
    # the same words as `overlay check`
    assert main(["--root", str(project), "check"]) == 1
    assert "unsafe patch: path '../b.py' escapes the tree with '..'" in capsys.readouterr().out


def test_non_git_folder_of_the_right_name_says_so(capsys, project, tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    mirror = tmp_path / "mirror"
    (mirror / "acme+plugin").mkdir(parents=True)
    (mirror / "acme+plugin" / "notes.txt").write_text("not a repository\n")
    rc, out, err = run_cli(capsys, project, "--mirror", str(mirror), "--onto", "plugin=main")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "is not a git repository" in err and "acme+plugin" in err
    assert "does not exist" not in err and "no acme+plugin under" not in err
