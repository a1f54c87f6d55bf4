"""The Makefile's first-run venv build says what it is doing (issue 13 item 11)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Stands in for python: `-m venv DIR` makes DIR/bin/python, a copy of itself; `-m pip ...`
# prints what pip was asked, as pip would print its per-package lines.
FAKE_PYTHON = """#!/bin/sh
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
echo "fake-pip: $*"
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_first_venv_build_announces_each_slow_step_and_lets_pip_report(tmp_path):
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    venv = tmp_path / "venv"
    proc = subprocess.run(["make", "--no-print-directory", f"PYTHON={fake}", f"VENV={venv}",
                           f"{venv}/.installed"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    steps = [i for i, line in enumerate(lines) if line.startswith("make: [")]
    assert [lines[i].split("]")[0] for i in steps] == ["make: [1/2", "make: [2/2"]
    pip = next(line for line in lines if line.startswith("fake-pip: "))
    assert steps[1] < lines.index(pip)  # announced before the slow step runs
    assert " -q" not in pip and "--progress-bar on" in pip  # pip's own progress is shown
    assert lines[-1] == f"make: {venv} is ready" and (venv / ".installed").is_file()
