"""The 910C ledger's plugin switches exist in the plugin it names (real mirror only)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from overlay.evidence import ledger

pytestmark = pytest.mark.mirror
LEDGER = Path(__file__).resolve().parents[2] / "evidence" / "910c-online-tuning"
PLUGIN_COMMIT = "801a6b41d29d23399bd8c9ebc2ea8883e2beefae"  # pins/v0.24.0.yaml, pins/1f486d96.yaml


def test_every_vllm_ascend_switch_in_the_ledger_is_read_by_the_plugin(mirror_dir):
    repo = mirror_dir / "vllm-project+vllm-ascend" / "repo"
    envs = subprocess.run(["git", "--git-dir", str(repo), "show", f"{PLUGIN_COMMIT}:vllm_ascend/envs.py"],
                          check=True, capture_output=True, text=True).stdout
    known = set(re.findall(r'^\s*"(VLLM_ASCEND_[A-Z0-9_]+)"\s*:', envs, re.M))
    named = {k for s in ledger.load_ledger(LEDGER).steps for k in (s.delta.get("env") or {})
             if k.startswith("VLLM_ASCEND_")}
    assert named and named <= known, sorted(named - known)
