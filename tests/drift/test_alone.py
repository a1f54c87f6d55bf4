"""A blocked patch also gets a class alone: checked as if the failed patches before
it were dropped (hunks moved to where they sit without them)."""

from __future__ import annotations

import json
import shutil

from overlay.cli import main
from overlay.drift.classify import DriftPatch, classify_series
from overlay.drift.inmem_apply import parse_diff

TEXT = "".join(f"v{i} = {i}\n" for i in range(1, 31))


def patch(name: str, hunk: str) -> DriftPatch:
    return DriftPatch(name, "plugin", parse_diff(f"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n{hunk}"))


# 0001 adds two lines after v5; 0002, written on top of it, changes v20 (line 22 then).
P1 = patch("0001", "@@ -4,5 +4,7 @@\n v4 = 4\n v5 = 5\n+extra_1 = 1\n+extra_2 = 2\n v6 = 6\n v7 = 7\n v8 = 8\n")
P2 = patch("0002", "@@ -19,7 +19,7 @@\n v17 = 17\n v18 = 18\n v19 = 19\n-v20 = 20\n+v20 = 2000\n v21 = 21\n v22 = 22\n v23 = 23\n")


def run(text: str, *patches: DriftPatch, max_fuzz: int = 0):
    return {v.patch: v for v in classify_series(patches, {"m.py": "k"}, {"k": text}.__getitem__,
                                                max_fuzz=max_fuzz)}


def test_blocked_patch_is_classified_alone_where_it_would_sit_without_the_failed_one():
    got = run(TEXT.replace("v6 = 6\n", "v6 = 66\n"), P1, P2)  # upstream breaks 0001
    assert got["0001"].cls == "conflict"
    blocked = got["0002"]
    assert (blocked.cls, blocked.blocked_by) == ("blocked", "0001")
    # clean, not offset: its hunk moved back by the two lines 0001 would have added
    assert (blocked.alone, blocked.alone_rule) == ("clean", None)
    assert blocked.to_json()["alone"]["class"] == "clean"


def test_alone_conflict_and_alone_merged():
    broken = TEXT.replace("v6 = 6\n", "v6 = 66\n")
    context_changed = broken.replace("v23 = 23\n", "v23 = 0\n")
    assert run(context_changed, P1, P2)["0002"].alone == "conflict"  # apply's rule: no fuzz
    assert run(context_changed, P1, P2, max_fuzz=2)["0002"].alone == "fuzz"
    assert run(broken.replace("v20 = 20\n", "v20 = -1\n"), P1, P2)["0002"].alone == "conflict"
    merged = run(broken.replace("v20 = 20\n", "v20 = 2000\n"), P1, P2)["0002"]
    assert (merged.cls, merged.alone, merged.alone_rule) == ("blocked", "merged", "reverse")


def test_patches_that_apply_have_no_alone_class():
    got = run(TEXT, P1, P2)
    assert got["0002"].cls == "clean" and got["0002"].alone is None
    assert "alone" not in got["0002"].to_json()


def test_scan_reports_transitions_of_the_class_alone(capsys, series_history, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(series_history.project, project)
    args = ["--root", str(project), "drift", "--mirror", str(series_history.mirror),
            "--scan", "plugin=u5"]
    assert main(args + ["--json"]) == 1
    run_, = json.loads(capsys.readouterr().out)["runs"]
    history = {h["patch"][:4]: h for h in run_["history"]}
    changes = [(t["from"], t.get("from_alone"), t["to"], t["verdict"].get("alone", {}).get("class"),
                t["pr"]) for t in history["0004"]["transitions"]]
    assert changes == [("clean", None, "blocked", "clean", 202),
                       ("blocked", "clean", "blocked", "conflict", 205)]
    assert main(args) == 1
    text = capsys.readouterr().out
    assert "blocked (alone: clean) -> blocked (alone: conflict) at " in text
