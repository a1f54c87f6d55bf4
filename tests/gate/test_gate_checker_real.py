"""The checker engine on the real trees (needs OVERLAY_MIRROR and mypy): plugin
182b75ea84 (pin set v0.27.1's plugin) declares vLLM 0.27.1; against 0.29.0 the checker
finds the `KVCacheTensor.shared_by` reads the hand gate misses (issue 27), and agrees with
the hand gate on the constructor calls. Slow: two mypy runs over the whole plugin."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from overlay import paths
from overlay.gate import add_checker, checker, run_gate
from overlay.series.model import load_pin

pytestmark = [pytest.mark.mirror,
              pytest.mark.skipif(checker.installed() is None, reason="mypy (the `gate` extra) is not installed")]

ROOT = Path(__file__).resolve().parents[2]


def test_shared_by_reads_are_forecast_and_its_constructor_calls_are_errors_of_both(tmp_path, mirror_dir):
    mirror = mirror_dir
    target = load_pin(ROOT, "v0.27.1").target("plugin")
    repo = paths.find_mirror_repo(mirror, target.source.mirror_name)
    if repo is None:
        pytest.skip("the mirror has no vllm-ascend repository")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    data = subprocess.run(["git", "--git-dir", str(repo), "archive", target.source.commit],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(plugin, filter="data")
    cores = {}
    for version in ("0.27.1", "0.29.0"):
        sdist = mirror / "pypi" / f"vllm-{version}.tar.gz"
        if not sdist.is_file():
            pytest.skip(f"the mirror has no vllm {version} source archive")
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp_path, filter="data")
        cores[version] = tmp_path / f"vllm-{version}"
    hand = run_gate(cores["0.29.0"], plugin)
    report = add_checker(hand, cores["0.29.0"], plugin, cores["0.27.1"], "0.27.1")
    reads = [f for f in report.findings if f.engine == "checker" and f.severity == "warning"
             and '"KVCacheTensor" has no attribute "shared_by"' in f.message]
    assert len(reads) >= 20
    assert any(f.engine == "both" and f.severity == "error" and "KVCacheTensor" in f.symbol
               for f in report.findings)
    assert not any(f.severity == "error" and f.engine == "checker" for f in report.findings)
