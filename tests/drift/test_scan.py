"""`overlay drift` on the synthetic history: every class, every transition, bisect, reports."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from overlay.cli import main


def drift(capsys, project: Path, mirror: Path, *args: str) -> tuple[int, str, str]:
    # The history walks every class, fuzz included: opt in to it (apply's rule, the
    # default, calls 0001 at c4 a conflict: tests/drift/test_apply_agreement.py).
    rc = main(["--root", str(project), "drift", "--mirror", str(mirror), "--fuzz", "2", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def by_prefix(items, key="patch"):
    return {item[key][:4]: item for item in items}


EXPECTED = {  # patch -> [(from, to, commit label)], along the first-parent walk
    "0001": [("clean", "offset", "c2"), ("offset", "fuzz", "c4"), ("fuzz", "conflict", "c6")],
    "0002": [("clean", "offset", "c2"), ("offset", "blocked", "c6")],
    "0003": [("clean", "merged", "c7")],
    "0004": [("clean", "missing", "c9")],
    "0005": [("clean", "merged", "c10")],
    "0006": [("clean", "merged", "c11"), ("merged", "merged", "c12")],  # reverse, then patch-id
    "0007": [("clean", "merged", "c13")],
}


@pytest.fixture
def scan(capsys, history, project):
    rc, out, err = drift(capsys, project, history.mirror, "--scan", "plugin=main", "--json")
    assert err == ""
    return rc, json.loads(out)


def test_scan_reports_every_transition_with_commit_date_subject_and_pr(scan, history):
    rc, doc = scan
    assert rc == 1  # a conflict and a missing patch at the head
    run, = doc["runs"]
    assert run["commits"] == 14  # first parents only: the side-branch commit is not walked
    label = {sha: name for name, sha in history.commits.items()}
    hist = by_prefix(run["history"])
    assert set(hist) == set(EXPECTED)
    for patch, want in EXPECTED.items():
        got = [(t["from"], t["to"], label[t["commit"]]) for t in hist[patch]["transitions"]]
        assert got == want, patch
        assert hist[patch]["at_pin"]["class"] == "clean"
    t = hist["0003"]["transitions"][0]
    assert t["subject"] == "[BugFix] b: fix b_10 (#107)" and t["pr"] == 107
    assert t["date"].startswith("2026-07-01T")
    assert all(history.side != t["commit"] for h in hist.values() for t in h["transitions"])


def test_scan_details_say_which_rule_fired(scan, history):
    _, doc = scan
    run, = doc["runs"]
    head = by_prefix(run["verdicts"])
    assert head["0003"]["rule"] == "reverse"
    assert head["0005"]["rule"] == "likely" and "likely merged" in head["0005"]["detail"]
    # merged upstream at c11 (reverse-applies there), then upstream edited the neighbours:
    # only the patch-id still proves it
    assert head["0006"]["rule"] == "patch-id"
    assert head["0006"]["upstream_commit"] == history.commits["c11"]
    hist = by_prefix(run["history"])
    assert hist["0006"]["transitions"][0]["verdict"]["rule"] == "reverse"
    # the rule that proves it changed at c12: a transition of its own, not a silent change
    rule_change = hist["0006"]["transitions"][1]
    assert (rule_change["from_rule"], rule_change["verdict"]["rule"]) == ("reverse", "patch-id")
    assert rule_change["commit"] == history.commits["c12"]
    assert head["0007"]["rule"] == "reverse"
    assert head["0002"]["blocked_by"].startswith("0001")
    assert head["0004"]["moved_to"] == {"pkg/c.py": "pkg/core/c_impl.py"}
    assert "renamed to pkg/core/c_impl.py" in head["0004"]["detail"]
    fuzz = hist["0001"]["transitions"][1]["verdict"]
    assert fuzz["class"] == "fuzz" and fuzz["fuzz"] == 1
    assert hist["0001"]["transitions"][0]["verdict"]["shift"] == 5


def test_conflict_notes_where_the_declared_upstream_change_landed(scan, history, capsys, project):
    _, doc = scan
    run, = doc["runs"]
    head = by_prefix(run["verdicts"])
    assert head["0001"]["landed"] == history.commits["c6"]
    assert "landed at " + history.commits["c6"][:12] + " (#106)" in head["0001"]["detail"]
    assert "landed" not in head["0004"]  # other/fork#109 is not acme/plugin's #109
    hist = by_prefix(run["history"])
    assert "landed" not in hist["0001"]["transitions"][1]["verdict"]  # at c4: not yet
    rc, out, _ = drift(capsys, project, history.mirror, "--onto", "plugin=c9", "--json")
    onto = by_prefix(json.loads(out)["runs"][0]["verdicts"])
    assert onto["0001"]["landed"] == history.commits["c6"]


def test_bisect_agrees_with_the_linear_scan(capsys, history, project, scan):
    _, linear = scan
    rc, out, _ = drift(capsys, project, history.mirror, "--scan", "plugin=main", "--bisect", "--json")
    assert rc == 1
    run, = json.loads(out)["runs"]
    n = run["commits"]
    hist = by_prefix(linear["runs"][0]["history"])
    for patch, found in by_prefix(run["bisect"]).items():
        first_break = next(t for t in hist[patch]["transitions"]
                           if t["to"] not in ("clean", "offset", "fuzz"))
        assert found["status"] == "found"
        assert (found["commit"], found["from"], found["to"]) == \
            (first_break["commit"], first_break["from"], first_break["to"]), patch
        assert found["verdict"] == first_break["verdict"]
        assert found["checks"] <= 2 + math.ceil(math.log2(n))


def test_terminal_shows_a_change_of_merged_rule(capsys, history, project):
    rc, out, _ = drift(capsys, project, history.mirror, "--scan", "plugin=main")
    line = next(x for x in out.splitlines() if "merged (reverse) -> merged (patch-id)" in x)
    assert history.commits["c12"][:12] in line and "(#112)" in line


def test_bisect_reports_patches_that_still_apply(capsys, history, project):
    rc, out, _ = drift(capsys, project, history.mirror, "--scan", "plugin=c3", "--bisect", "--json")
    run, = json.loads(out)["runs"]
    assert rc == 0
    assert {b["status"] for b in run["bisect"]} == {"applies-at-head"}


def test_onto_two_targets_terminal_table(capsys, history, project):
    rc, out, err = drift(capsys, project, history.mirror, "--onto", "plugin=c4,core=k1")
    assert rc == 0, out  # fuzz is only a warning
    assert "0001-a-raise-a_20.patch" in out and "fuzz" in out
    assert "0101-core-raise-x_03.patch  clean" in out
    assert out.rstrip().splitlines()[-1].startswith("OK: warnings: 0001-a-raise-a_20.patch fuzz")
    rc, out, _ = drift(capsys, project, history.mirror, "--onto", "plugin=c4", "--fail-on",
                       "conflict,missing,fuzz")
    assert rc == 1 and "FAIL: 0001-a-raise-a_20.patch fuzz on plugin@c4" in out


def test_fail_on_policy(capsys, history, project):
    assert drift(capsys, project, history.mirror, "--onto", "plugin=main")[0] == 1
    assert drift(capsys, project, history.mirror, "--onto", "plugin=main", "--fail-on", "none")[0] == 0
    assert drift(capsys, project, history.mirror, "--onto", "plugin=c8", "--fail-on", "missing")[0] == 0
    assert drift(capsys, project, history.mirror, "--onto", "plugin=c9", "--fail-on", "missing")[0] == 1


def test_markdown_and_junit_reports(capsys, history, project, tmp_path):
    md, xml = tmp_path / "drift.md", tmp_path / "drift.xml"
    rc, out, _ = drift(capsys, project, history.mirror, "--scan", "plugin=main", "--markdown",
                       str(md), "--junit", str(xml), "--json")
    assert rc == 1
    json.loads(out)  # --json keeps stdout machine-readable even with the other reports
    text = md.read_text()
    assert text.startswith("## Patch drift: pin `test` (scan): FAIL")
    assert "| `0001-a-raise-a_20.patch` | conflict **(fails)** |" in text
    assert "| `0003-b-fix-b_10-backport-of-107.patch` | clean → merged (reverse) |" in text
    assert "| #107 | [BugFix] b: fix b_10 (#107) |" in text
    assert "| merged (reverse) → merged (patch-id) | `" + history.commits["c12"][:12] in text
    suite, = ET.parse(xml).getroot()
    assert suite.get("name") == "drift.scan.plugin@main"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("7", "2", "1")
    cases = {c.get("name")[:4]: c for c in suite.iter("testcase")}
    assert cases["0001"].find("failure").get("type") == "conflict"
    assert cases["0002"].find("skipped") is not None
    assert cases["0003"].find("failure") is None
    assert "merged (reverse)" in cases["0003"].find("system-out").text


def test_junit_fuzz_is_a_warning_not_a_failure(capsys, history, project, tmp_path):
    xml = tmp_path / "j.xml"
    rc, _, _ = drift(capsys, project, history.mirror, "--onto", "plugin=c4", "--junit", str(xml))
    assert rc == 0
    case = next(c for c in ET.parse(xml).getroot().iter("testcase") if c.get("name").startswith("0001"))
    assert case.find("failure") is None
    assert case.find("system-out").text.startswith("warning: fuzz")


def test_scan_without_commits_reports_the_pin(capsys, history, project):
    rc, out, _ = drift(capsys, project, history.mirror, "--scan", "plugin=c0", "--json")
    run, = json.loads(out)["runs"]
    assert rc == 0 and run["commits"] == 0
    assert {v["class"] for v in run["verdicts"]} == {"clean"}


def test_cache_repository_is_used_without_a_mirror(capsys, history, project, monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    (cache / "git").mkdir(parents=True)
    import shutil
    shutil.copytree(history.plugin, cache / "git" / "acme+plugin.git")
    monkeypatch.setenv("OVERLAY_CACHE", str(cache))
    rc = main(["--root", str(project), "drift", "--onto", "plugin=c2", "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0
    assert {v["class"] for v in json.loads(out)["runs"][0]["verdicts"]} == {"offset", "clean"}


def test_gate_checks_the_composed_plugin_against_core_at_the_ref(capsys, history, project):
    plugin = project / "build" / "test" / "plugin" / "plug"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("from core.x import x_01, x_99\n")
    rc, out, _ = drift(capsys, project, history.mirror, "--onto", "core=k1,plugin=c1", "--gate",
                       "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["ok"] is False
    assert all(v["class"] in ("clean", "offset") for r in doc["runs"] for v in r["verdicts"])
    finding, = doc["gate"]["findings"]
    assert finding["kind"] == "import" and "x_99" in finding["message"]
    (plugin / "__init__.py").write_text("from core.x import x_01\n")
    rc, out, _ = drift(capsys, project, history.mirror, "--onto", "core=k1,plugin=c1", "--gate")
    assert rc == 0 and "OK: no contract breaks" in out


def test_gate_findings_are_in_the_junit_file(capsys, history, project, tmp_path):
    plugin = project / "build" / "test" / "plugin" / "plug"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("from core.x import x_01, x_99\n")
    xml = tmp_path / "drift.xml"
    rc, _, _ = drift(capsys, project, history.mirror, "--onto", "core=k1,plugin=c1", "--gate",
                     "--junit", str(xml))
    assert rc == 1
    suites = {s.get("name"): s for s in ET.parse(xml).getroot()}
    assert {"drift.onto.core@k1", "drift.onto.plugin@c1"} < set(suites)
    gate, = [s for name, s in suites.items() if not name.startswith("drift.")]
    assert gate.get("failures") == "1"
    case, = gate.iter("testcase")
    assert case.find("failure").get("type") == "import" and "x_99" in case.find("failure").text
    (plugin / "__init__.py").write_text("from core.x import x_01\n")
    rc, _, _ = drift(capsys, project, history.mirror, "--onto", "core=k1,plugin=c1", "--gate",
                     "--junit", str(xml))
    gate, = [s for s in ET.parse(xml).getroot() if not s.get("name").startswith("drift.")]
    assert rc == 0 and gate.get("failures") == "0" and gate.get("tests") == "1"  # the gate ran


def test_fetch_clones_then_updates_the_mirror(capsys, history, project, tmp_path):
    import subprocess
    upstream = tmp_path / "upstream" / "acme" / "plugin"
    subprocess.run(["git", "clone", "-q", "--bare", str(history.plugin), str(upstream)], check=True)
    pin = project / "pins" / "test.yaml"
    pin.write_text(pin.read_text().replace("https://git.example.invalid/acme/plugin", str(upstream)))
    mirror = tmp_path / "fresh-mirror"
    rc, out, _ = drift(capsys, project, mirror, "--fetch", "--onto", "plugin=c2", "--json")
    assert rc == 0 and (mirror / "acme+plugin" / "HEAD").is_file()
    assert {v["class"] for v in json.loads(out)["runs"][0]["verdicts"]} == {"offset", "clean"}
    subprocess.run(["git", "--git-dir", str(upstream), "branch", "later", "c6"], check=True)
    rc, out, _ = drift(capsys, project, mirror, "--fetch", "--onto", "plugin=later", "--json")
    assert rc == 1  # the new branch arrived with the fetch: 0001 conflicts there


# ----------------------------------------------------------------------------- a long history


def _long_history(root: Path, length: int, offset_at: int, break_at: int) -> tuple[Path, Path]:
    """`length` first-parent commits in one git fast-import; f.txt shifts, then breaks."""
    import subprocess
    lines = [f"line {i}\n" for i in range(1, 21)]
    stream = []
    for i in range(length + 1):
        if i == offset_at:
            lines = ["header\n"] + lines
        if i == break_at:
            lines = [x.replace("line 10\n", "line ten\n") for x in lines]
        files = ""
        if i in (0, offset_at, break_at):
            body = "".join(lines).encode()
            files = f"M 644 inline f.txt\ndata {len(body)}\n{body.decode()}\n"
        if i == 0:
            g = b"g 1\ng 2\ng 3\n"
            files += f"M 644 inline g.txt\ndata {len(g)}\n{g.decode()}\n"
        msg = f"commit {i} (#{1000 + i})"
        stream.append(f"commit refs/heads/main\nmark :{i + 1}\n"
                      f"committer Dev <dev@example.org> {1_780_000_000 + 60 * i} +0000\n"
                      f"data {len(msg)}\n{msg}\n{files}\n")
    mirror = root / "mirror"
    repo = mirror / "acme+plugin"
    repo.mkdir(parents=True)
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": __import__("os").environ["PATH"]}
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True, env=env)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input="".join(stream).encode(),
                   check=True, env=env)
    first = subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=repo, env=env,
                           capture_output=True, text=True, check=True).stdout.split()[0]
    project = root / "project"
    (project / "patches").mkdir(parents=True)
    (project / "pins").mkdir()
    (project / "pins" / "long.yaml").write_text(
        f"default: true\ntargets:\n  plugin:\n    repo: https://git.example.invalid/acme/plugin\n"
        f"    commit: {first}\n")
    head = "From: Patch Author <pa@example.org>\nDate: Wed, 1 Jul 2026 10:00:00 +0000\n"
    (project / "patches" / "0001-f.patch").write_text(
        head + "Subject: [PATCH] f: change line 10\n\nWhy: a test.\n---\n"
        "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n@@ -7,7 +7,7 @@\n"
        " line 7\n line 8\n line 9\n-line 10\n+line 10 patched\n line 11\n line 12\n line 13\n")
    (project / "patches" / "0002-g.patch").write_text(
        head + "Subject: [PATCH] g: change g 2\n\nWhy: a test.\n---\n"
        "diff --git a/g.txt b/g.txt\n--- a/g.txt\n+++ b/g.txt\n@@ -1,3 +1,3 @@\n"
        " g 1\n-g 2\n+g two\n g 3\n")
    (project / "series.yaml").write_text(
        "series:\n  - patch: 0001-f.patch\n    target: plugin\n    origin: local\n"
        "  - patch: 0002-g.patch\n    target: plugin\n    origin: local\n")
    return project, mirror


def test_bisect_on_a_long_history_is_logarithmic(capsys, tmp_path):
    project, mirror = _long_history(tmp_path, 300, 90, 173)
    rc, out, _ = drift(capsys, project, mirror, "--scan", "plugin=main", "--json")
    linear, = json.loads(out)["runs"]
    transitions = [(t["from"], t["to"], t["index"], t["pr"]) for t in linear["history"][0]["transitions"]]
    assert transitions == [("clean", "offset", 90, 1090), ("offset", "conflict", 173, 1173)]
    assert linear["history"][1]["transitions"] == []
    rc, out, _ = drift(capsys, project, mirror, "--scan", "plugin=main", "--bisect", "--json")
    run, = json.loads(out)["runs"]
    f, g = run["bisect"]
    assert (f["status"], f["index"], f["from"], f["to"], f["pr"]) == ("found", 173, "offset", "conflict", 1173)
    assert g["status"] == "applies-at-head"
    assert f["checks"] <= 2 + math.ceil(math.log2(300))
    assert run["snapshots"] <= 3 + math.ceil(math.log2(300))
    assert linear["snapshots"] == 3  # pin, c90, c173: the walk re-classifies only where a touched blob changed
