"""Drift's provenance rule on a fixture history (tests/drift/provenance_history.py):
`merged (upstream-commit)` ahead of the text rules, a backport with two upstream commits of
which only one has landed, a scan that reports the transition where the last one landed,
and upstream's own version of a superseded experiment; `overlay check` verifies the
commits against the mirror, and the form without one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from overlay.cli import main
from tests.drift.provenance_history import build


@pytest.fixture(scope="session")
def history(tmp_path_factory):
    return build(tmp_path_factory.mktemp("provenance"))


@pytest.fixture
def project(history, tmp_path) -> Path:
    dest = tmp_path / "project"
    shutil.copytree(history.project, dest)
    return dest


def drift(capsys, history, project, *args) -> tuple[int, dict]:
    rc = main(["--root", str(project), "drift", "--pin", "base", "--mirror", str(history.mirror),
               "--json", *args])
    out, err = capsys.readouterr()
    assert err == "", err
    return rc, json.loads(out)


def verdicts(doc) -> dict[str, dict]:
    return {v["patch"][:4]: v for v in doc["runs"][0]["verdicts"]}


def test_an_ancestor_upstream_commit_merges_a_backport_whose_text_differs(capsys, history, project):
    _, doc = drift(capsys, history, project, "--onto", "plugin=p5")
    v = verdicts(doc)
    # 0001's text conflicts at p5 (upstream wrote its own version), yet its upstream-commit
    # p1 is an ancestor: provenance decides, ahead of the text rules
    assert (v["0001"]["class"], v["0001"]["rule"]) == ("merged", "upstream-commit")
    assert v["0001"]["upstream_commits"] == {"merged": [history.commits["p1"]], "missing": []}
    assert (v["0002"]["class"], v["0002"]["rule"]) == ("merged", "upstream-commit")
    assert v["0004"]["class"] == "clean" and "upstream_commits" not in v["0004"]
    # without the field, the same text is a conflict
    series = project / "series.yaml"
    series.write_text(series.read_text().replace(f"    upstream-commit: {history.commits['p1']}\n", ""))
    _, doc = drift(capsys, history, project, "--onto", "plugin=p5")
    assert verdicts(doc)["0001"]["class"] == "conflict"


def test_two_upstream_commits_only_one_merged_names_the_missing_one(capsys, history, project):
    _, doc = drift(capsys, history, project, "--onto", "plugin=p3")
    v = verdicts(doc)["0002"]
    assert v["class"] == "conflict"  # the text rules decide
    assert v["upstream_commits"] == {"merged": [history.commits["p2"]],
                                     "missing": [history.commits["p4"]]}
    assert f"{history.commits['p4'][:12]} not yet" in v["detail"]


def test_scan_reports_the_transition_where_the_last_upstream_commit_landed(capsys, history, project):
    _, doc = drift(capsys, history, project, "--scan", "plugin=p5")
    hist = {h["patch"][:4]: h["transitions"] for h in doc["runs"][0]["history"]}
    merged = {p: [(t["to"], t.get("verdict", {}).get("rule"), t["commit"]) for t in ts
                  if t["to"] == "merged"] for p, ts in hist.items()}
    assert merged["0001"] == [("merged", "upstream-commit", history.commits["p1"])]
    assert merged["0002"] == [("merged", "upstream-commit", history.commits["p4"])]  # not p2
    # bisect finds the same commits
    _, doc = drift(capsys, history, project, "--scan", "plugin=p5", "--bisect")
    found = {b["patch"][:4]: b for b in doc["runs"][0]["bisect"]}
    assert found["0002"]["commit"] == history.commits["p2"]  # it stops applying at p2
    assert found["0002"]["verdict"]["class"] == "conflict"


def test_upstreams_own_version_of_a_superseded_patch_is_named(capsys, history, project):
    _, doc = drift(capsys, history, project, "--onto", "plugin=p5")
    v = verdicts(doc)["0003"]
    assert v["superseded_by"] == {"pr": "acme/plugin#305", "commit": history.commits["p5"]}
    assert "superseded by upstream's own version acme/plugin#305" in v["detail"]
    _, doc = drift(capsys, history, project, "--onto", "plugin=p4")
    assert "superseded_by" not in verdicts(doc)["0003"]  # not there yet


def check(capsys, project, mirror=None, monkeypatch=None) -> tuple[int, str]:
    if mirror is not None:
        monkeypatch.setenv("OVERLAY_MIRROR", str(mirror))
    rc = main(["--root", str(project), "check"])
    out, err = capsys.readouterr()
    return rc, out + err


def test_check_verifies_each_upstream_commit_against_the_mirror(capsys, history, project, monkeypatch):
    rc, out = check(capsys, project, history.mirror, monkeypatch)
    assert rc == 0, out
    series = project / "series.yaml"
    text = series.read_text()
    # 0001 names p3 (#304), which is not the PR its `upstream:` names (#301)
    series.write_text(text.replace(f"upstream-commit: {history.commits['p1']}",
                                   f"upstream-commit: {history.commits['p3']}"))
    rc, out = check(capsys, project, history.mirror, monkeypatch)
    assert rc == 1 and "carries PR #304, not the one the entry names (acme/plugin#301)" in out
    series.write_text(text.replace(f"commit: {history.commits['p5']}", "commit: " + "ab" * 20))
    rc, out = check(capsys, project, history.mirror, monkeypatch)
    assert rc == 1 and "superseded-by abababababab is not a commit of acme/plugin" in out
    monkeypatch.delenv("OVERLAY_MIRROR")
    rc, out = check(capsys, project)  # without a mirror: the form only
    assert rc == 0, out


@pytest.mark.parametrize("old, new, message", [
    ("upstream-commit: {p1}", "upstream-commit: abc123", "'abc123' is not a full 40-hex commit id"),
    ("      pr: acme/plugin#305", "      pr: '#305'", "'#305' is not owner/name#N"),
    ("      commit: {p5}\n", "", "field 'commit' of 'superseded-by' of series entry 3: missing"),
    ("    forwarded: not yet", "    forwarded: not yet\n    only-pins: ['../x']", "'../x' is not a pin set name"),
])
def test_a_bad_provenance_field_is_one_line(capsys, history, project, old, new, message):
    series = project / "series.yaml"
    old = old.format(**history.commits)
    assert old in series.read_text()
    series.write_text(series.read_text().replace(old, new))
    rc = main(["--root", str(project), "check"])
    out, err = capsys.readouterr()
    assert rc != 0 and message in out + err and "Traceback" not in out + err


def _named(project: Path, history, ids: list[str]) -> None:
    """Entry 0002 names `ids` as its upstream commits (in place of p2, p4)."""
    series = project / "series.yaml"
    old = f"upstream-commit: [{history.commits['p2']}, {history.commits['p4']}]"
    assert old in series.read_text()
    series.write_text(series.read_text().replace(old, f"upstream-commit: [{', '.join(ids)}]"))


def test_an_entry_naming_more_upstream_commits_than_a_backport_ever_carries_is_one_line(
        capsys, history, project):
    # a series.yaml under the size cap can still name ~21,000 ids in one entry
    _named(project, history, [f"ab{i:038x}" for i in range(1, 66)])
    rc = main(["--root", str(project), "drift", "--pin", "base", "--mirror", str(history.mirror),
               "--onto", "plugin=p5"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400, err
    assert "series.yaml" in err and "65 upstream commits" in err and "at most 64" in err
    rc = main(["--root", str(project), "check"])
    out, err = capsys.readouterr()
    assert rc == 1 and "65 upstream commits" in out and len(out.splitlines()) == 2, out


def _git_processes(mp) -> list:
    """Every git process started from now on (run or Popen), as its argument list."""
    import subprocess

    started: list = []
    real_run, real_popen = subprocess.run, subprocess.Popen

    def run(cmd, *a, **k):
        if cmd and cmd[0] == "git":
            started.append(cmd)
        return real_run(cmd, *a, **k)

    class Popen(real_popen):
        def __init__(self, cmd, *a, **k):
            if cmd and cmd[0] == "git":
                started.append(cmd)
            super().__init__(cmd, *a, **k)

    mp.setattr(subprocess, "run", run)
    mp.setattr(subprocess, "Popen", Popen)
    return started


@pytest.mark.parametrize("command", [["drift", "--onto", "plugin=p5"], ["drift", "--scan", "plugin=p5"],
                                     ["drift", "--scan", "plugin=p5", "--bisect"], ["check"]])
def test_the_git_processes_do_not_grow_with_the_upstream_commits_an_entry_names(
        capsys, history, project, monkeypatch, command):
    """50 ids cost as many git processes as 10: one batch, not one process per id."""
    from overlay import gitcmd

    monkeypatch.setenv("OVERLAY_MIRROR", str(history.mirror))
    drift_args = ["--pin", "base", "--mirror", str(history.mirror), "--json"] if command[0] == "drift" else []
    series = project / "series.yaml"
    text = series.read_text()
    counts = {}
    for n in (10, 50):
        series.write_text(text)
        _named(project, history, [history.commits["p2"], history.commits["p4"]]
               + [f"ab{i:038x}" for i in range(1, n - 1)])
        gitcmd._views.clear()  # each run reads the mirror afresh, as a new process does
        with pytest.MonkeyPatch.context() as mp:
            started = _git_processes(mp)
            main(["--root", str(project), command[0], *drift_args, *command[1:]])
        out, err = capsys.readouterr()
        assert "Traceback" not in err and "error" not in err, err
        counts[n] = len(started)
    assert counts[50] == counts[10], counts
