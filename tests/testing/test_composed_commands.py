"""`overlay composed-test` and `overlay mutation-check`: bad input is one line and exit 2;
with a real mirror and the composed-test environment, short real runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`overlay NAME ARGS` from the project root, as `make NAME` runs it."""
    return subprocess.run([sys.executable, "-m", "overlay", name, *args], capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=1800, cwd=ROOT)


@pytest.mark.parametrize("name", ["composed-test", "mutation-check"])
def test_without_a_mirror_nothing_runs_and_that_is_an_error(name):
    proc = script(name, "--pin", "v0.25.0")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("overlay: error: needs a mirror: composing the pinned trees needs the upstream "
                           "commits offline (set OVERLAY_MIRROR or pass --mirror DIR)\n")


@pytest.mark.parametrize("name", ["composed-test", "mutation-check"])
def test_a_venv_inside_the_repository_is_refused(name, tmp_path):
    proc = script(name, "--mirror", str(tmp_path), "--venv", str(ROOT / "build" / "venv"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "is inside the repository (put it outside" in proc.stderr


def test_composed_test_refuses_a_bad_known_failures_list_before_composing(tmp_path):
    bad = tmp_path / "known.yaml"
    bad.write_text("floor: {default: 10}\nknown-failures:\n  - test: tests/ut/a.py\n    pins: [v0.25.0]\n"
                   "    cause: flaky\n")
    proc = script("composed-test", "--mirror", str(tmp_path), "--known-failures", str(bad))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "known.yaml:5: tests/ut/a.py: give the cause in a sentence" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_mutation_check_refuses_an_unknown_patch(tmp_path):
    proc = script("mutation-check", "--mirror", str(tmp_path), "--patch", "0099-nope.patch")
    assert proc.returncode == 2
    assert proc.stderr == ("overlay: error: series.yaml: no plugin patch named 0099-nope.patch in the "
                           "series (give a patch file name, e.g. 0003-...patch)\n")


# ----------------------------------------------------------------------------- real runs

def _real_env(mirror: Path) -> dict:
    from overlay.testing import testenv

    if not (testenv.default_venv() / testenv.REQUIREMENTS_STAMP).is_file():
        pytest.skip("the composed-test environment is not built (make composed-test builds it once)")
    return dict(os.environ, OVERLAY_MIRROR=str(mirror))


@pytest.mark.mirror
def test_real_composed_test_filtered_run_on_v0_23_0(mirror_dir):
    proc = script("composed-test", "--pin", "v0.23.0", "--no-baseline", "--json", "--", "-k", "host_seq_lens",
                  env=_real_env(mirror_dir))
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0, doc["problems"]
    assert doc["series"]["passed"] >= 18 and doc["series"]["failed"] == 0 and not doc["full_run"]


@pytest.mark.mirror
def test_real_mutation_check_kills_patch_0004_on_v0_25_0(mirror_dir):
    proc = script("mutation-check", "--pin", "v0.25.0", "--patch", "0004-mrv2-reshape-kv-cache-config.patch",
                  "--json", env=_real_env(mirror_dir))
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and [r["status"] for r in doc["results"]] == ["killed"]
    assert "kv_cache_config" in doc["results"][0]["mutants"][0]["detail"]
