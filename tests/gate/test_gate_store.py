"""The gate's index cache (tools/overlay/gate/store.py): keyed by tree ids, fail-closed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gatekit

from overlay.gate import run_gate, store

ROOT = Path(__file__).resolve().parents[2]


def trees(tmp_path):
    core = gatekit.core(tmp_path / "core", new=True, version="0.25.0")
    plugin = gatekit.plugin(tmp_path / "plugin", fixed=False)
    return core, plugin


def test_a_warm_run_answers_from_the_cache_and_any_edit_is_a_miss(tmp_path):
    core, plugin = trees(tmp_path)
    cache = tmp_path / "cache"
    cold = run_gate(core, plugin, store_root=cache)
    assert cold.stats["cached"] is False and list(cache.glob("result-*.pickle"))
    warm = run_gate(core, plugin, store_root=cache)
    assert warm.stats["cached"] is True
    assert [f.to_dict() for f in warm.findings] == [f.to_dict() for f in cold.findings]
    # an edit of one plugin file changes the plugin's tree id: the cached result is not used
    target = plugin / "vllm_ascend/worker/v2/model_runner.py"
    target.write_text(gatekit.plugin_files(True)["vllm_ascend/worker/v2/model_runner.py"].replace("\n    ", "\n"))
    os.utime(target, ns=(1, 1))
    edited = run_gate(core, plugin, store_root=cache)
    assert edited.stats["cached"] is False
    assert len(edited.findings) < len(cold.findings)


def test_a_corrupt_or_foreign_entry_is_a_miss(tmp_path):
    core, plugin = trees(tmp_path)
    cache = tmp_path / "cache"
    run_gate(core, plugin, store_root=cache)
    for entry in cache.glob("result-*.pickle"):
        entry.write_bytes(b"not a pickle")
    again = run_gate(core, plugin, store_root=cache)
    assert again.stats["cached"] is False  # read fail-closed, recomputed
    store.save(cache, "result", "key-a", {"x": 1})
    assert store.load(cache, "result", "key-b") is None  # another key never answers


def test_progress_lines_on_a_terminal_only(tmp_path):
    core, plugin = trees(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"), OVERLAY_CACHE=str(tmp_path / "c"))
    cmd = [sys.executable, "-m", "overlay", "--root", str(ROOT), "gate", "--core", str(core), "--plugin", str(plugin)]
    piped = subprocess.run(cmd + ["--json"], capture_output=True, text=True, env=env)
    assert piped.returncode == 1 and "overlay gate: scanning" not in piped.stderr
    from overlay.commands.gate import _progress
    import argparse
    assert _progress(argparse.Namespace(json=True)) is None


def test_progress_callback_gets_one_line_per_phase(tmp_path):
    core, plugin = trees(tmp_path)
    lines: list[str] = []
    run_gate(core, plugin, progress=lines.append)
    assert [l.split(" ")[0] for l in lines] == ["indexing", "scanning", "checking", "done"]
