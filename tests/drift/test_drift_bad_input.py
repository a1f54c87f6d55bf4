"""Bad input: one error line, a non-zero exit, no traceback, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from overlay.cli import main


def run_cli(capsys, project: Path, *args: str) -> tuple[int, str, str]:
    rc = main(["--root", str(project), "drift", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args, message", [
    (["--onto", "gpu=main"], "unknown target 'gpu'"),
    (["--onto", "plugin=no-such-branch"], "'no-such-branch' is not a commit"),
    (["--scan", "plugin=deadbeef"], "'deadbeef' is not a commit"),
    (["--onto", "plugin"], "'plugin' is not TARGET=REF"),
    (["--onto", "plugin=main,plugin=c1"], "target 'plugin' is given twice"),
    (["--scan", "plugin=main,core=k1"], "--scan takes one TARGET=REF"),
    (["--onto", "plugin=main", "--bisect"], "--bisect works with --scan"),
    ([], "give exactly one of --onto"),
    (["--onto", "plugin=main", "--scan", "plugin=main"], "give exactly one of --onto"),
    (["--onto", "plugin=main", "--fail-on", "conflict,explode"], "unknown class explode"),
    (["--onto", "plugin=main", "--pin", "nope"], "unknown pin 'nope'"),
    (["--onto", "gpu=main", "--fetch"], "unknown target 'gpu'"),
])
def test_bad_arguments_are_one_line(capsys, history, project, args, message):
    before = listing(project)
    rc, out, err = run_cli(capsys, project, "--mirror", str(history.mirror), *args)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("overlay: error: ")
    assert message in err and "Traceback" not in err
    assert listing(project) == before


def test_missing_mirror_directory(capsys, project, tmp_path):
    rc, out, err = run_cli(capsys, project, "--mirror", str(tmp_path / "nowhere"), "--onto", "plugin=main")
    assert rc == 2 and err.count("\n") == 1
    # the wording is paths.mirror_root's when it checks, drift's own otherwise
    assert "mirror" in err and ("does not exist" in err or "not a directory" in err)


def test_mirror_without_the_repository_and_no_cache(capsys, project, tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    rc, _, err = run_cli(capsys, project, "--mirror", str(tmp_path / "empty"), "--onto", "plugin=main")
    assert rc == 2 and err.count("\n") == 1
    assert "no repository for target 'plugin': no acme+plugin under mirror" in err
    assert not (tmp_path / "cache").exists()  # looking did not create a cache
    monkeypatch.delenv("OVERLAY_MIRROR", raising=False)
    rc, _, err = run_cli(capsys, project, "--onto", "plugin=main")
    assert rc == 2 and "no mirror given" in err


def test_pinned_commit_not_in_the_mirror(capsys, history, project, tmp_path):
    pin = project / "pins" / "test.yaml"
    pin.write_text(pin.read_text().replace(history.commits["c0"], "ab" * 20))
    rc, _, err = run_cli(capsys, project, "--mirror", str(history.mirror), "--onto", "plugin=main")
    assert rc == 2 and "the pinned commit abababababab is not in" in err
    assert err.startswith("overlay: error: pins/test.yaml:")


def test_fetch_without_a_mirror(capsys, project):
    rc, out, err = run_cli(capsys, project, "--fetch", "--onto", "plugin=main")
    assert rc == 2 and "--fetch needs a mirror directory" in err and err.count("\n") == 1


def test_fetch_from_an_unreachable_url_is_one_line(capsys, project, tmp_path):
    pin = project / "pins" / "test.yaml"
    pin.write_text(pin.read_text().replace("https://git.example.invalid/acme/plugin",
                                           str(tmp_path / "nothing" / "acme" / "plugin")))
    rc, out, err = run_cli(capsys, project, "--mirror", str(tmp_path / "m"), "--fetch", "--onto",
                           "plugin=main")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "cannot fetch" in err


def test_scan_to_a_commit_before_the_pin(capsys, history, project):
    pin = project / "pins" / "test.yaml"
    pin.write_text(pin.read_text().replace(history.commits["c0"], history.commits["c2"]))
    rc, out, err = run_cli(capsys, project, "--mirror", str(history.mirror), "--scan", "plugin=c1")
    assert rc == 2 and out == "" and "is not after the pinned commit" in err
    assert err.count("\n") == 1


def test_report_file_under_a_file_writes_nothing(capsys, history, project, tmp_path):
    """A missing folder is created (issue 20: test tools do); one that cannot be is refused."""
    (tmp_path / "no").write_text("a file, not a folder")
    rc, out, err = run_cli(capsys, project, "--mirror", str(history.mirror), "--onto", "plugin=main",
                           "--junit", str(tmp_path / "a.xml"), "--markdown", str(tmp_path / "no" / "x.md"))
    assert rc == 2 and out == "" and "cannot create folder" in err and err.count("\n") == 1
    assert not (tmp_path / "a.xml").exists()
