"""Issue 29: make passes the tool's exit codes through (`.ci/make`), OVERLAY_MIRROR is the
one mirror variable, each target installs only what it needs (versions from the lock), and
the package's metadata and hints are valid for a user installing from a checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# Stands in for the venv's overlay: exits with $FAKE_STATUS.
FAKE_OVERLAY = """#!/bin/sh
echo "overlay $*"
exit "${FAKE_STATUS:-0}"
"""


@pytest.fixture
def venv(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    overlay = venv / "bin" / "overlay"
    overlay.write_text(FAKE_OVERLAY)
    overlay.chmod(0o755)
    for stamp in (".installed", ".installed-test", ".installed-evidence", ".installed-cluster"):
        (venv / stamp).touch()
    return venv


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MAKE", "MFLAGS", "OVERLAY_")) and k != "MIRROR"}
    env.update(extra)
    return env


@needs_make
@pytest.mark.parametrize("status", [1, 3])
def test_ci_make_passes_the_tools_exit_status_through(venv, status):
    plain = subprocess.run(["make", "-s", f"VENV={venv}", "apply"], cwd=ROOT, capture_output=True,
                           text=True, env=_env(FAKE_STATUS=str(status)))
    assert plain.returncode == 2  # make's own
    wrapped = subprocess.run([str(ROOT / ".ci" / "make"), "-s", f"VENV={venv}", "apply"], cwd=ROOT,
                             capture_output=True, text=True, env=_env(FAKE_STATUS=str(status)))
    assert wrapped.returncode == status, wrapped.stderr
    ok = subprocess.run([str(ROOT / ".ci" / "make"), "-s", f"VENV={venv}", "check"], cwd=ROOT,
                        capture_output=True, text=True, env=_env())
    assert ok.returncode == 0 and ok.stdout == "overlay check\n"
    refused = subprocess.run([str(ROOT / ".ci" / "make"), "-s", f"VENV={venv}", "apply", "PIN=a b"],
                             cwd=ROOT, capture_output=True, text=True, env=_env())
    assert refused.returncode == 2 and "PIN refused" in refused.stderr  # make's own refusal


def test_ci_and_workflows_run_make_through_the_wrapper():
    assert ".ci/make test" in (ROOT / ".ci" / "run").read_text()
    for wf in (ROOT / ".github" / "workflows").glob("*.yml"):
        runs = re.findall(r"run: (make\b.*)", wf.read_text())
        assert not runs, f"{wf.name}: {runs} (make exits 2 for every failure: use .ci/make)"


@needs_make
def test_overlay_mirror_is_the_one_mirror_variable(venv, tmp_path):
    def drift_ci(*args, **env):
        return subprocess.run(["make", "-s", f"VENV={venv}", "drift-ci", "OFFLINE=1",
                               f"REPORTS={tmp_path}/r", *args], cwd=ROOT, capture_output=True,
                              text=True, env=_env(**env))

    proc = drift_ci()
    assert proc.returncode == 2 and "set OVERLAY_MIRROR=DIR" in proc.stderr
    assert "MIRROR=DIR" not in proc.stderr.replace("OVERLAY_MIRROR=DIR", "")
    for how in (drift_ci(OVERLAY_MIRROR="/m1"), drift_ci("OVERLAY_MIRROR=/m1"), drift_ci("MIRROR=/m1")):
        assert how.returncode == 0, how.stderr
        assert how.stdout.count("--mirror /m1") == 2
    helptext = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "OVERLAY_MIRROR=DIR" in helptext and not re.search(r"(?<!OVERLAY_)MIRROR=", helptext)


@needs_make
@pytest.mark.parametrize("target, wanted, unwanted", [
    ("check", [" -e ."], ["[test]", "[evidence]", "[cluster]"]),
    ("apply", [" -e ."], ["[test]", "[evidence]", "[cluster]"]),
    ("gate", [" -e ."], ["[test]", "[evidence]", "[cluster]"]),
    ("test", ["'.[test]'", "'.[evidence]'"], ["[cluster]"]),
    ("evidence", ["'.[evidence]'"], ["[test]", "[cluster]"]),
    ("test-cluster", ["'.[test]'", "'.[cluster]'"], []),
])
def test_each_target_installs_only_what_it_needs_from_the_lock(tmp_path, target, wanted, unwanted):
    proc = subprocess.run(["make", "-n", f"VENV={tmp_path}/fresh", target], cwd=ROOT,
                          capture_output=True, text=True, env=_env())
    pips = [line for line in proc.stdout.splitlines() if "-m pip install" in line]
    assert pips and all("-c constraints.txt" in line for line in pips), proc.stdout
    text = "\n".join(pips)
    assert all(w in text for w in wanted), text
    assert not any(u in text for u in unwanted), text


def test_the_lock_pins_every_dependency_of_the_tool():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    pinned = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][^ ;]*)(?: ; python_version == \"\d+\.\d+\")?", line)
        assert m, line
        pinned[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    deps = list(project["dependencies"]) + [d for ds in project["optional-dependencies"].values() for d in ds]
    for dep in deps:
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", dep).group()).lower()
        if name == "tomli":
            continue  # Python 3.10 only; the lock is resolved on 3.11
        assert name in pinned, f"{dep} is not in constraints.txt"
    assert "hypothesis" in project["optional-dependencies"]["test"][-1] or any(
        d.startswith("hypothesis") for d in project["optional-dependencies"]["test"])
    readme = (ROOT / "README.md").read_text()
    assert "make constraints" in readme  # the update path


def test_license_and_metadata_for_a_user_of_a_checkout():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"} and project["readme"] == "README.md"
    assert project["urls"]
    for url in project["urls"].values():
        # the project's own places (its upstreams' repositories), never a package index
        assert url.startswith("https://") and urlparse(url).hostname == "github.com", url
    assert "shtab" in " ".join(project["dependencies"])


def test_no_hint_names_a_package_index_install_of_the_tool():
    from overlay import DISTRIBUTION

    for path in [*(ROOT / "tools").rglob("*.py"), ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        text = path.read_text()
        assert f"pip install '{DISTRIBUTION}" not in text and f"pip install {DISTRIBUTION}" not in text, path
        assert "pip install '.[" not in text, f"{path}: a checkout installs with -e"
