"""Composition on the real pins, from a real upstream mirror (OVERLAY_MIRROR).

Skipped when OVERLAY_MIRROR is unset (CI has no mirror). The mirror must hold
vllm-project+vllm-ascend (and pypi/vllm-0.23.0.tar.gz for the v0.23.0 pin set, or the
package index must be reachable).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_COMMIT = "801a6b41d29d23399bd8c9ebc2ea8883e2beefae"

pytestmark = pytest.mark.mirror


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _apply(run, monkeypatch, mirror, cache, into, *args):
    monkeypatch.setenv("OVERLAY_CACHE", str(cache))
    return run("apply", "--mirror", mirror, "--into", into, *args, root=ROOT)


@pytest.mark.parametrize("pin", ["1f486d96", "a30addc7"])
def test_plugin_composes_at_pinned_commit(run, monkeypatch, cache, tmp_path, pin, mirror_dir):
    code, out, err = _apply(run, monkeypatch, mirror_dir, cache, tmp_path, "--pin", pin, "--targets", "plugin")
    assert code == 0, err
    plugin = tmp_path / pin / "plugin"
    assert git(plugin, "rev-parse", "refs/overlay/base") == PLUGIN_COMMIT
    assert (plugin / ".github" / "vllm-main-verified.commit").read_text().strip() == \
        "a30addc7548a9a8b9b3323a7bc3eb7d7c4895d1c"
    assert "FAILED" not in out


def test_core_without_mirror_is_one_line_with_both_ways_forward(run, monkeypatch, cache, tmp_path, mirror_dir):
    code, out, err = _apply(run, monkeypatch, mirror_dir, cache, tmp_path, "--pin", "1f486d96")
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "target 'core' is unreachable" in err and "vllm-project+vllm" in err and "--targets" in err
    assert not (tmp_path / "1f486d96").exists()


def test_release_pin_composes_both_targets(run, monkeypatch, cache, tmp_path, mirror_dir):
    code, out, err = _apply(run, monkeypatch, mirror_dir, cache, tmp_path, "--pin", "v0.23.0")
    assert code in (0, 3), err  # 3: tree mismatch against the lock is reported, not hidden
    core = tmp_path / "v0.23.0" / "core"
    assert (core / "vllm" / "__init__.py").is_file()
    assert "FAILED" not in out
