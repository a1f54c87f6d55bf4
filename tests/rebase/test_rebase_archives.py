"""Issue 30 items 1-3: a plugin release archive as the carrier's target, and core alone.

The synthetic upstream of tests/drift/series_history.py is released as an sdist at u3
(`acme-plugin==1.1`, a tar of the tree: no history). A rebase from the git pin set onto
that archive has no shared history to decide provenance by ancestry, so content decides:
0001, whose change u3 carries, is dropped by `reverse`; 0003 conflicts as at u3. The
pin file names the archive by sha256 and the history it was cut from, and composes to
its lock from the files alone. Then core moves alone (the carrier stays at its archive).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from overlay.cli import main
from overlay.series.model import ArchiveSource, Project
from tests.drift.series_history import build
from fixtures import make_sdist
from tests.rebase.test_rebase import resolve_o_py, snapshot


def _sdist_of(repo: Path, rev: str, folder: Path, name: str, version: str, extra=None) -> Path:
    """A release archive of `repo` at `rev`: its files under NAME-VERSION/, no history."""
    listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], cwd=repo, check=True,
                             capture_output=True, text=True).stdout.split()
    files = {p: subprocess.run(["git", "show", f"{rev}:{p}"], cwd=repo, check=True,
                               capture_output=True).stdout for p in listing}
    files.update(extra or {})
    return make_sdist(folder, f"{name.replace('-', '_')}-{version}", files)


def _core_sdist(folder: Path, version: str) -> Path:
    return make_sdist(folder, f"core-{version}", {"vllm/__init__.py": f"__version__ = '{version}'\n"})


@pytest.fixture(scope="module")
def _history(tmp_path_factory):
    return build(tmp_path_factory.mktemp("rebase-archives"))


@pytest.fixture
def project(_history, tmp_path, monkeypatch) -> Path:
    dest = tmp_path / "project"
    shutil.copytree(_history.project, dest)
    mirror = tmp_path / "mirror"
    shutil.copytree(_history.mirror, mirror, symlinks=True)
    pypi = mirror / "pypi"
    _sdist_of(_history.upstream, _history.commits["u3"], pypi, "acme-plugin", "1.1",
              {".github/vllm-release-tag.commit": b"v2.0\n"})
    for version in ("1.0", "2.0"):
        _core_sdist(pypi, version)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(mirror))
    return dest


def rebase(capsys, project: Path, *args: str):
    rc = main(["--root", str(project), "rebase", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_git_pin_set_onto_a_plugin_release_archive(capsys, project):
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=pypi:acme-plugin==1.1",
                          "--as", "r11")
    assert rc == 1 and "CONFLICT: 0003-o-ours-at-o_10.patch" in out, (out, err)
    resolve_o_py(project / "build" / "r11" / "plugin")
    rc, out, err = rebase(capsys, project, "--continue", "--json")
    assert rc == 0, (out, err)
    result = json.loads(out)
    outcome = {p["patch"][:4]: (p["outcome"], p["drift"]) for p in result["patches"]}
    assert outcome["0001"] == ("dropped", "merged (reverse)")  # by content: no shared history
    assert outcome["0003"][0] == "conflicted"
    pin = Project.load(project).pin("r11")
    src = pin.target("plugin").source
    assert isinstance(src, ArchiveSource) and src.requirement == "acme-plugin==1.1"
    archive = Path(str(project.parent / "mirror" / "pypi" / "acme_plugin-1.1.tar.gz"))
    assert src.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert src.history == "https://git.example.invalid/acme/plugin"
    entry = {e.patch[:4]: e for e in Project.load(project).series.entries}
    assert entry["0001"].provenance.record_at("r11").rule == "reverse"
    assert (project / "pins" / "base.yaml").read_bytes() == before["pins/base.yaml"]
    # the new pin set composes from the files alone, to the locked tree
    shutil.rmtree(project / "build")
    assert main(["--root", str(project), "apply", "--pin", "r11", "--json"]) == 0
    applied = json.loads(capsys.readouterr().out)["targets"][0]
    assert applied["tree_matches_lock"] is True
    # 0003 was rewritten for r11: its own entry (0005); base keeps its version, and
    # 0004's bytes make the same tree at r11, so one entry serves both
    assert [p["patch"][:4] for p in applied["patches"]] == ["0002", "0005", "0004"]


def _with_core(project: Path, version: str) -> None:
    pin = project / "pins" / "base.yaml"
    digest = hashlib.sha256((project.parent / "mirror" / "pypi" / f"core-{version}.tar.gz").read_bytes()).hexdigest()
    pin.write_text(pin.read_text() + f"  core:\n    pypi: core=={version}\n    sha256: {digest}\n")


def test_core_moves_alone_and_the_carrier_stays(capsys, project):
    _with_core(project, "1.0")
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "core=pypi:core==2.0", "--as", "c2",
                          "--json")
    result = json.loads(out)
    # The synthetic plugin holds no Python package, so the gate cannot run against the
    # composed core: not proven, so not ok (fail closed); everything else went through.
    assert rc == 1 and result["check"] == [] and result["gate"]["ran"] is False, (result["gate"], err)
    assert "no Python package" in result["gate"]["why"]
    assert {p["outcome"] for p in result["patches"]} == {"kept"}
    pin = Project.load(project).pin("c2")
    assert pin.target("core").source.version == "2.0"
    old = Project.load(project).pin("base")
    assert pin.target("plugin").source == old.target("plugin").source
    assert snapshot(project)["pins/base.yaml"] == before["pins/base.yaml"]
    assert snapshot(project)["series.yaml"] == before["series.yaml"]


def test_moving_nothing_is_refused(capsys, project):
    _with_core(project, "1.0")
    rc, _, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u0", "--as", "same")
    assert rc == 2 and "nothing to move" in err


def test_every_other_pin_set_still_composes_to_its_lock_byte_for_byte(capsys, project):
    """Issue 30 item 4: a rebase that rewrites shared patches leaves the old pin set's
    pin file, records and composed tree as they were."""
    assert main(["--root", str(project), "apply", "--pin", "base", "--json"]) == 0
    assert main(["--root", str(project), "lock", "--pin", "base"]) == 0
    capsys.readouterr()
    before = snapshot(project)
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=pypi:acme-plugin==1.1", "--as", "r11")
    resolve_o_py(project / "build" / "r11" / "plugin")
    rc, out, err = rebase(capsys, project, "--continue")
    assert rc == 0, (out, err)
    after = snapshot(project)
    assert after["pins/base.yaml"] == before["pins/base.yaml"]
    for name, data in before.items():
        if name.startswith("patches/"):
            assert after[name] == data, name  # base's patch files, byte for byte
    base = {e.patch: e for e in Project.load(project).series.entries if e.carried_at("base")}
    assert sorted(base) == sorted(n[len("patches/"):] for n in before if n.startswith("patches/"))
    shutil.rmtree(project / "build")
    assert main(["--root", str(project), "apply", "--pin", "base", "--json"]) == 0
    applied = json.loads(capsys.readouterr().out)["targets"][0]
    assert applied["tree_matches_lock"] is True


def test_a_raw_git_am_abort_is_not_recorded_as_upstream_carrying_the_patches(capsys, project):
    """Issue 30: after a raw `git am --skip`/`--abort` the patches are missing from the
    branch, and rebase used to record `3-way-empty: upstream already has it`. Only
    upstream's content may say so: they do not reverse-apply, so it refuses, and nothing
    is written."""
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=pypi:acme-plugin==1.1", "--as", "r11")
    work = project / "build" / "r11" / "plugin"
    subprocess.run(["git", "am", "--abort"], cwd=work, check=True, capture_output=True)
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--continue")
    assert rc == 2 and "is not on the rebased branch" in err and "does not reverse-apply" in err, (out, err)
    assert snapshot(project) == before and not (project / "pins" / "r11.yaml").exists()
    assert (project / ".overlay" / "rebase.json").exists()  # still resumable or abortable


def test_drift_reads_an_archive_pin_sets_history(capsys, project):
    """The live pin set is an archive (v0.30.0): drift, and so the nightly job, must check it
    against upstream's history (its `history:` repository), not refuse it."""
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=pypi:acme-plugin==1.1", "--as", "r11")
    resolve_o_py(project / "build" / "r11" / "plugin")
    assert rebase(capsys, project, "--continue", "--json")[0] == 0
    rc = main(["--root", str(project), "drift", "--pin", "r11", "--onto", "plugin=main", "--json"])
    out, err = capsys.readouterr()
    assert rc in (0, 1) and "no git history" not in err, err
    (run,) = json.loads(out)["runs"]
    assert run["target"] == "plugin" and run["verdicts"], run
