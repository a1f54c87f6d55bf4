"""The real plugin history (needs OVERLAY_MIRROR holding vllm-project+vllm-ascend).

A backport of an upstream fix, written at test time from the mirror (nothing of
upstream is committed here), must turn from clean to merged exactly at the commit
that landed it, by the linear walk and by bisection alike.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from overlay.cli import main
from overlay.paths import find_mirror_repo

REAL_MIRROR = os.environ.get("OVERLAY_MIRROR")  # read before the autouse fixture clears it
REPO_ROOT = Path(__file__).resolve().parents[2]
FIX = "7e5cfda32ac0"  # [BugFix] fix vllm use v2 but vllm-ascend use v1 (#11389)
FIX_FILE = "vllm_ascend/platform.py"


@pytest.mark.mirror
def test_backport_turns_merged_where_upstream_landed_it(tmp_path, capsys):
    mirror = Path(REAL_MIRROR or "")
    repo = find_mirror_repo(mirror, "vllm-project+vllm-ascend")
    if repo is None:
        pytest.fail(f"OVERLAY_MIRROR={mirror} has no vllm-project+vllm-ascend")
    project = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "pins", project / "pins")
    (project / "patches").mkdir()
    mail = subprocess.run(["git", "--git-dir", str(repo), "format-patch", "-1", "--stdout", FIX,
                           "--", FIX_FILE], capture_output=True, text=True, check=True).stdout
    (project / "patches" / "0001-backport-11389.patch").write_text(mail)
    (project / "series.yaml").write_text(
        "series:\n  - patch: 0001-backport-11389.patch\n    target: plugin\n    origin: backport\n")
    base = ["--root", str(project), "drift", "--pin", "1f486d96", "--mirror", str(mirror),
            "--scan", "plugin=main", "--json"]
    assert main(base) == 0
    run, = json.loads(capsys.readouterr().out)["runs"]
    assert run["commits"] > 100
    (history,) = run["history"]
    first = history["transitions"][0]
    assert (history["at_pin"]["class"], first["to"], first["pr"]) == ("clean", "merged", 11389)
    assert first["commit"].startswith(FIX) and first["verdict"]["rule"] == "reverse"
    assert main(base + ["--bisect"]) == 0
    bisect, = json.loads(capsys.readouterr().out)["runs"][0]["bisect"]
    assert (bisect["commit"], bisect["to"]) == (first["commit"], "merged")


@pytest.mark.mirror
def test_series_scan_sees_blocked_patches_alone_and_upstream_overlap(capsys):
    """Issues 12 and 18 on the real history, with this repository's own series: the
    backports before 0005 are carried upstream by provenance from the commits they cite
    (merged patches block nothing), so 0005 is checked in series all along: it applies
    until #12731 (fuzz, where git apply, which has no fuzz, already fails), conflicts from
    #13005, and from #13382 on it is superseded by upstream's own version; 0006 is merged
    only where the last of its two upstream commits (#12019) landed; 0001's overlap names
    #10935, the upstream change it backports."""
    mirror = Path(REAL_MIRROR or "")
    if find_mirror_repo(mirror, "vllm-project+vllm-ascend") is None:
        pytest.fail(f"OVERLAY_MIRROR={mirror} has no vllm-project+vllm-ascend")
    assert main(["--root", str(REPO_ROOT), "drift", "--pin", "1f486d96", "--mirror", str(mirror),
                 "--scan", "plugin=182b75ea", "--json", "--fail-on", "none", "--fuzz", "2"]) == 0
    run, = json.loads(capsys.readouterr().out)["runs"]
    history = {h["patch"][:4]: h for h in run["history"]}
    steps = {p: [(t["to"], t["verdict"].get("rule"), t["commit"][:8], t["pr"]) for t in h["transitions"]]
             for p, h in history.items()}
    assert steps["0001"] == [("merged", "upstream-commit", "8c28b0eb", 10935)]
    assert steps["0006"] == [("conflict", None, "8c28b0eb", 10935),
                             ("merged", "upstream-commit", "15818534", 12019)]
    assert [s[2:] for s in steps["0005"]] == [("cd76505e", 10454), ("0838ce8d", 12731),
                                              ("c9e95ba3", 13005), ("baed9356", 13382)]
    assert [s[0] for s in steps["0005"]] == ["offset", "fuzz", "conflict", "conflict"]
    superseded = history["0005"]["transitions"][-1]["verdict"]["superseded_by"]
    assert superseded == {"pr": "vllm-project/vllm-ascend#13382",
                          "commit": "baed93569b03a1e96a1f8aa6680d5a9567df7b31"}
    overlap = {o["patch"][:4]: {c["commit"][:8]: c for c in o["commits"]} for o in run["overlap"]}
    assert overlap["0005"]["baed9356"]["upstream_did_this_too"]
    assert overlap["0005"]["baed9356"]["pr"] == 13382
    assert overlap["0001"]["8c28b0eb"]["upstream_did_this_too"]
    assert overlap["0001"]["8c28b0eb"]["pr"] == 10935
