"""Issue 13, item 14: `make drift-ci` must work offline from the mirror as it is.

The fixture pin sets name hosts under `.invalid`, which no resolver answers: a
fetch fails there as it fails on a machine without network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def make_drift_ci(project: Path, mirror: Path, reports: Path, *extra: str) -> subprocess.CompletedProcess:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the Makefile is the documented entry point)")
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env.update({"OVERLAY_ROOT": str(project), "GIT_TERMINAL_PROMPT": "0"})
    env.pop("OVERLAY_MIRROR", None)
    # -o: never (re)build the virtual environment from inside a test run
    return subprocess.run(["make", "-s", "-C", str(REPO_ROOT), "-o", f"{venv}/.installed",
                           "drift-ci", f"VENV={venv}", f"MIRROR={mirror}", "PIN=test",
                           f"REPORTS={reports}", "DRIFT_SCAN=plugin=c5", "DRIFT_ONTO=plugin=c3",
                           *extra], env=env, capture_output=True, text=True, timeout=120)


def test_offline_drift_ci_uses_the_mirror_as_it_is(history, project, tmp_path):
    before = {p.name: p.stat().st_mtime_ns for p in (history.mirror / "acme+plugin" / ".git").iterdir()}
    proc = make_drift_ci(project, history.mirror, tmp_path / "reports", "OFFLINE=1")
    assert proc.returncode == 0, proc.stderr
    assert "cannot fetch" not in proc.stderr
    assert (tmp_path / "reports" / "drift.xml").is_file()
    assert "0001-a-raise-a_20.patch" in (tmp_path / "reports" / "drift.md").read_text()
    after = {p.name: p.stat().st_mtime_ns for p in (history.mirror / "acme+plugin" / ".git").iterdir()}
    assert after == before  # nothing fetched into the mirror


def test_online_drift_ci_fetches_first(history, project, tmp_path):
    proc = make_drift_ci(project, history.mirror, tmp_path / "reports")
    assert proc.returncode != 0
    assert "cannot fetch https://git.example.invalid/acme/plugin" in proc.stderr
