"""Upstream overlap: the commits that changed the lines each patch touches, found from
the first-parent diffs of the touched files (no checkout)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

from overlay.cli import main
from overlay.drift.classify import DriftPatch
from overlay.drift.inmem_apply import parse_diff
from overlay.drift.overlap import overlaps, parse_log

TEXT = "".join(f"v{i} = {i}\n" for i in range(1, 41))


def patch(name: str, hunk: str, path: str = "m.py") -> DriftPatch:
    return DriftPatch(name, "plugin", parse_diff(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{hunk}"))


P = patch("0001", "@@ -19,7 +19,7 @@\n v19 = 19\n v20 = 20\n v21 = 21\n-v22 = 22\n+v22 = compute_v22()\n v23 = 23\n v24 = 24\n v25 = 25\n")


def log(*commits: tuple[str, str]) -> list:
    """(sha, unified diff of m.py) -> parse_log input, oldest first."""
    text = "".join(f"commit {sha}\n\ndiff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n{diff}"
                   for sha, diff in commits)
    return parse_log(text)


def test_a_commit_far_from_the_hunk_does_not_overlap_and_moves_it():
    # five lines inserted at the top: the hunk's lines move down by five
    walk = log(("a" * 40, "@@ -1,0 +1,5 @@\n+h1\n+h2\n+h3\n+h4\n+h5\n"),
               ("b" * 40, "@@ -26,3 +26,3 @@\n v21 = 21\n-v22 = 22\n+v22 = 2200\n v23 = 23\n"))
    hits = overlaps([P], {"m.py": "blob"}, walk)
    assert [(h.commit[0], h.hunks, h.resembles, h.same_lines) for h in hits] == [("b", (1,), False, True)]


def test_a_commit_that_makes_the_same_change_resembles_it():
    walk = log(("c" * 40, "@@ -21,3 +21,4 @@\n v21 = 21\n-v22 = 22\n+v22 = compute_v22()\n+v22b = 0\n v23 = 23\n"))
    (hit,) = overlaps([P], {"m.py": "blob"}, walk)
    assert hit.resembles and (hit.shared, hit.of) == (1, 1)


def test_edits_just_outside_the_hunk_do_not_overlap():
    walk = log(("d" * 40, "@@ -17,2 +17,2 @@\n-v17 = 17\n+v17 = 0\n v18 = 18\n"),
               ("e" * 40, "@@ -26,1 +26,1 @@\n-v26 = 26\n+v26 = 0\n"))
    assert overlaps([P], {"m.py": "blob"}, walk) == []


def test_hunks_of_a_later_patch_are_taken_back_through_the_earlier_ones():
    first = patch("0001", "@@ -2,2 +2,4 @@\n v2 = 2\n+x1 = 1\n+x2 = 2\n v3 = 3\n")
    # written on top of 0001: v30 sits at line 32 there, at line 30 upstream
    second = patch("0002", "@@ -31,3 +31,3 @@\n v29 = 29\n-v30 = 30\n+v30 = 3000\n v31 = 31\n")
    walk = log(("f" * 40, "@@ -30,1 +30,1 @@\n-v30 = 30\n+v30 = -30\n"))
    assert [h.patch for h in overlaps([first, second], {"m.py": "blob"}, walk)] == ["0002"]


def test_overlap_in_every_report(capsys, series_history, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(series_history.project, project)
    md, xml = tmp_path / "drift.md", tmp_path / "drift.xml"
    args = ["--root", str(project), "drift", "--mirror", str(series_history.mirror),
            "--scan", "plugin=u5", "--fail-on", "none"]
    assert main(args + ["--json", "--markdown", str(md), "--junit", str(xml)]) == 0
    run, = json.loads(capsys.readouterr().out)["runs"]
    found = {o["patch"][:4]: [(c["pr"], c["upstream_did_this_too"], c["rewrote_the_same_lines"])
                              for c in o["commits"]] for o in run["overlap"]}
    assert found == {"0001": [(203, True, True)],      # upstream made the same change
                     "0002": [(204, False, False)],    # context reworded: overlap, no merge
                     "0003": [(202, False, True)],     # upstream's own version of o_10
                     "0004": [(205, False, True)]}
    assert run["overlap"][0]["commits"][0]["author"] == "Upstream Dev"
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "m: take the overlay change (#203) (Upstream Dev), hunk 1: upstream did this too" in text
    assert "| `0001-m-add-m_05b-and-raise-m_06.patch` | `" in md.read_text()
    assert "upstream did this too |" in md.read_text()
    cases = {c.get("name")[:4]: c for c in ET.parse(xml).getroot().iter("testcase")}
    assert "overlap: " in cases["0002"].find("system-out").text
    did, = ET.parse(xml).getroot().findall("testsuite/properties/property[@name='upstream-did-this-too']")
    assert did.get("value").startswith("0001-") and did.get("value").endswith("#203")


def test_onto_reports_overlap_too(capsys, series_history, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(series_history.project, project)
    assert main(["--root", str(project), "drift", "--mirror", str(series_history.mirror),
                 "--onto", "plugin=u3", "--json", "--fail-on", "none"]) == 0
    run, = json.loads(capsys.readouterr().out)["runs"]
    assert sorted(c["pr"] for o in run["overlap"] for c in o["commits"]) == [202, 203]
