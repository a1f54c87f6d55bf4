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


# ---- issue 20 item 1: no value a user or a workflow passes is shell (or make) syntax ----

INJECTION = "plugin=main; echo INJECTED; false #"

# Stands in for the venv's overlay: records its argv, one JSON list per call.
FAKE_OVERLAY = """#!/bin/sh
exec "{python}" -c 'import json, sys; open(sys.argv[1], "a").write(json.dumps(sys.argv[2:]) + "\\n")' "{log}" "$@"
"""


@pytest.fixture
def fake_venv(tmp_path):
    import json
    import sys

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.jsonl"
    overlay = venv / "bin" / "overlay"
    overlay.write_text(FAKE_OVERLAY.format(python=sys.executable, log=log))
    overlay.chmod(0o755)
    for stamp in (".installed", ".installed-test", ".installed-evidence", ".installed-gate", ".installed-cluster"):
        (venv / stamp).touch()  # newer than pyproject.toml: make builds nothing

    def make(*args: str, env: dict | None = None):
        import os
        proc = subprocess.run(["make", "--no-print-directory", f"VENV={venv}", *args], cwd=ROOT,
                              capture_output=True, text=True, env={**os.environ, **(env or {})})
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return proc, calls

    return make


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("how", ["environment", "command line"])
def test_makefile_refuses_the_injection_input(fake_venv, tmp_path, how):
    var = f"DRIFT_ONTO={INJECTION}"
    proc, calls = (fake_venv("drift-ci", f"MIRROR={tmp_path}", env={"DRIFT_ONTO": INJECTION})
                   if how == "environment" else fake_venv("drift-ci", f"MIRROR={tmp_path}", var))
    assert proc.returncode == 2 and "INJECTED" not in proc.stdout + proc.stderr
    assert "make: DRIFT_ONTO refused: use TARGET=REF[,TARGET=REF]" in proc.stderr
    assert calls == []  # refused before anything ran


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_makefile_values_reach_the_tool_as_single_words_never_as_syntax(fake_venv, tmp_path):
    marker = tmp_path / "make-ran-it"
    mirror = tmp_path / "a mirror; echo INJECTED"
    proc, calls = fake_venv("drift-ci", f"MIRROR={mirror}", f"REPORTS={tmp_path}/rep 'x'",
                            "ARGS=--json a;echo $(shell touch " + str(marker) + ")",
                            "DRIFT_ONTO=plugin=v1.0~1", "OFFLINE=1")
    assert proc.returncode == 0, proc.stderr
    assert "INJECTED" not in proc.stdout.replace(str(mirror), "")
    assert not marker.exists()  # make expanded no $(shell ...) from a value
    scan, onto = calls
    assert scan[:5] == ["drift", "--mirror", str(mirror), "--scan", "plugin=main"]
    assert f"{tmp_path}/rep 'x'/drift-scan.md" in scan
    assert onto[onto.index("--onto") + 1] == "plugin=v1.0~1"
    assert onto[-5:] == ["--json", "a;echo", "$(shell", "touch", f"{marker})"]  # ARGS: words, quoted
    # the same make, a $(shell ...) in the pin name: refused, and make did not run it either
    proc, _ = fake_venv("apply", f"PIN=$(shell touch {marker})")
    assert proc.returncode == 2 and "make: PIN refused" in proc.stderr and not marker.exists()


# ---- issue 22 item 2: every target that runs tool code is an `overlay` subcommand ----

@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target, extra, expected", [
    ("composed-test", [], ["composed-test", "--pin", "v0.23.0"]),
    ("mutation-check", ["PIN=v0.27.1"], ["mutation-check", "--pin", "v0.27.1"]),
    ("gate-eval", ["OVERLAY_MIRROR=/nowhere", "ARGS=--only x"], ["gate-eval", "--only", "x"]),
    ("mirror", ["OVERLAY_MIRROR=/a mirror", "ARGS=--check --json"],
     ["mirror", "--mirror", "/a mirror", "--check", "--json"]),
    ("evidence-e2e", ["E2E_ENV=/env", "E2E_RESULTS=out"],
     ["evidence-e2e", "--env", "/env", "--protocol", "evidence/cpu-engine-smoke/protocol.yaml",
      "--results", "out"]),
    ("smoke", [], ["smoke", "--pin", "v0.25.0"]),
    ("check", [], ["check"]),
    ("bench", [], ["bench", "suite", "compose", "drift", "gate", "forward", "rebase", "evidence", "cluster"]),
    ("bench-drift", ["ARGS=--quick x"], ["bench", "suite", "drift", "--arg=--quick", "--arg=x"]),
])
def test_tool_targets_are_aliases_of_overlay_subcommands(fake_venv, target, extra, expected):
    proc, calls = fake_venv(target, *extra)
    assert proc.returncode == 0, proc.stderr
    assert calls == [expected]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_mirror_without_a_mirror_says_what_to_set(fake_venv):
    proc, calls = fake_venv("mirror", "OVERLAY_MIRROR=", "MIRROR=")
    assert proc.returncode == 2 and calls == []
    assert "make mirror: set OVERLAY_MIRROR=DIR" in proc.stderr


def test_no_target_runs_a_script_of_its_own():
    """Recipes run `$(OVERLAY) ...`; python itself only for the venv and pytest."""
    recipes = [line.strip() for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("\t")]
    python = [r for r in recipes if r.startswith("$(PY) ")]
    assert python and all(r.startswith(("$(PY) -m pip install", "$(PY) -m pytest")) for r in python), python
    assert not (ROOT / "scripts").exists()
