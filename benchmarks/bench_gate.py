"""Contract gate speed: the whole vllm-ascend tree against a whole vLLM core tree.

Trees come from `--core DIR --plugin DIR`, or from a mirror ($OVERLAY_MIRROR): the
plugin at the default pin's commit (`git archive` from the mirror's vllm-ascend
repository) and the core from the mirror's `pypi/vllm-<version>.tar.gz`
(BENCH_CORE_VERSION, default 0.25.0). Each round is a fresh `overlay gate` process,
ROUNDS rounds of each, side by side:
- cold: an empty index cache (a fresh OVERLAY_CACHE per round);
- warm: the index cache the cold rounds filled (same trees);
- baseline: the previous release of the gate (BENCH_GATE_BASELINE, a git revision of
  this repository; default 481da23, the last commit before the plugin->core checks),
  run from `git archive` of its tools/ folder: cold, as it has no index cache.
Prints median seconds, files/s and the ratios, against the goals (30 s cold, 10 s warm,
on 2 cores). Without trees it says so and exits 0.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
GOAL_S = 30.0
WARM_GOAL_S = 10.0
BASELINE = os.environ.get("BENCH_GATE_BASELINE", "481da23")


def _from_mirror(tmp: Path) -> tuple[Path, Path] | None:
    sys.path.insert(0, str(ROOT / "tools"))
    from overlay import paths
    from overlay.series.model import load_pin

    mirror = paths.mirror_root(None)
    if mirror is None:
        return None
    pin = load_pin(ROOT, os.environ.get("PIN") or None)
    target = pin.target("plugin")
    repo = paths.find_mirror_repo(mirror, target.source.mirror_name)
    version = os.environ.get("BENCH_CORE_VERSION", "0.25.0")
    sdist = mirror / "pypi" / f"vllm-{version}.tar.gz"
    if repo is None or not sdist.is_file():
        return None
    plugin = tmp / "plugin"
    plugin.mkdir()
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", target.source.commit],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(plugin, filter="data")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / f"vllm-{version}", plugin


def count_py(root: Path) -> int:
    return sum(1 for _ in root.rglob("*.py"))


def _baseline_tools(tmp: Path) -> Path | None:
    """tools/ of the baseline revision, exported (None when the revision is unknown)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE, "tools"], capture_output=True)
    if data.returncode != 0:
        return None
    out = tmp / "baseline"
    out.mkdir()
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(out, filter="data")
    return out / "tools"


def _rounds(core: Path, plugin: Path, env: dict, fresh_cache: Path | None) -> tuple[list[float], dict]:
    times, doc = [], {}
    for i in range(ROUNDS):
        run_env = dict(env)
        if fresh_cache is not None:
            run_env["OVERLAY_CACHE"] = str(fresh_cache / f"round-{i}")
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "overlay", "--root", str(ROOT), "gate",
                               "--core", str(core), "--plugin", str(plugin), "--json"],
                              capture_output=True, text=True, cwd=ROOT, env=run_env)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(proc.returncode)
        doc = json.loads(proc.stdout)
    return times, doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core", type=Path)
    ap.add_argument("--plugin", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as t:
        if args.core and args.plugin:
            core, plugin = args.core, args.plugin
        else:
            found = _from_mirror(Path(t))
            if found is None:
                print("bench_gate: no trees (pass --core/--plugin or set OVERLAY_MIRROR): skipped")
                return 0
            core, plugin = found
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT / "tools")
        cold, doc = _rounds(core, plugin, env, Path(t) / "cold")
        warm_cache = Path(t) / "cold" / "round-0"
        env_warm = dict(env, OVERLAY_CACHE=str(warm_cache))
        warm, _ = _rounds(core, plugin, env_warm, None)
        base_tools = _baseline_tools(Path(t))
        base = None
        if base_tools is not None:
            base, _ = _rounds(core, plugin, dict(env, PYTHONPATH=str(base_tools)), Path(t) / "base")
        plugin_files = doc["stats"]["plugin_files"]
        core_read = doc["stats"]["core_files_read"]
        print(f"gate: {plugin_files} plugin files scanned, {core_read} of {count_py(core)} core files read, "
              f"{sum(doc['counts'].values())} finding(s); {os.cpu_count()} CPU(s), {ROUNDS} round(s) each")
        mc, mw = statistics.median(cold), statistics.median(warm)
        print(f"gate: cold median {mc:.2f}s (min {min(cold):.2f}s, max {max(cold):.2f}s), "
              f"{(plugin_files + core_read) / mc:.0f} files/s; {mc / GOAL_S:.2f}x of the {GOAL_S:.0f}s goal")
        print(f"gate: warm median {mw:.2f}s (min {min(warm):.2f}s, max {max(warm):.2f}s); "
              f"{mw / WARM_GOAL_S:.2f}x of the {WARM_GOAL_S:.0f}s goal; warm/cold {mw / mc:.2f}x")
        if base is not None:
            mb = statistics.median(base)
            print(f"gate: previous release ({BASELINE}) cold median {mb:.2f}s; this cold/previous {mc / mb:.2f}x, "
                  f"this warm/previous {mw / mb:.2f}x")
        else:
            print(f"gate: previous release ({BASELINE}) not in this repository: no baseline figure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
