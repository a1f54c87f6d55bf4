"""Contract gate speed: the whole vllm-ascend tree against a whole vLLM core tree.

Trees come from `--core DIR --plugin DIR`, or from a mirror ($OVERLAY_MIRROR): the
plugin at the default pin's commit (`git archive` from the mirror's vllm-ascend
repository) and the core from the mirror's `pypi/vllm-<version>.tar.gz`
(BENCH_CORE_VERSION, default 0.25.0). Each round is a fresh `overlay gate` process
(cold: no parse cache survives), ROUNDS rounds; prints median seconds and files/s.
The goal is well under 30 s on 2 cores. Without trees it says so and exits 0.
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


def _from_mirror(tmp: Path) -> tuple[Path, Path] | None:
    sys.path.insert(0, str(ROOT / "tools"))
    from overlay import paths
    from overlay.model import load_pin

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
        times, doc = [], {}
        for _ in range(ROUNDS):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "overlay", "--root", str(ROOT), "gate",
                                   "--core", str(core), "--plugin", str(plugin), "--json"],
                                  capture_output=True, text=True, cwd=ROOT)
            times.append(time.perf_counter() - start)
            if proc.returncode not in (0, 1):
                print(proc.stderr, file=sys.stderr)
                return proc.returncode
            doc = json.loads(proc.stdout)
        median = statistics.median(times)
        plugin_files = doc["stats"]["plugin_files"]
        core_read = doc["stats"]["core_files_read"]
        core_total = count_py(core)
        print(f"gate: {plugin_files} plugin files scanned, {core_read} of {core_total} core files read, "
              f"{sum(doc['counts'].values())} finding(s)")
        print(f"gate: median {median:.2f}s over {ROUNDS} cold run(s) (min {min(times):.2f}s, "
              f"max {max(times):.2f}s) on {os.cpu_count()} CPU(s); "
              f"{(plugin_files + core_read) / median:.0f} files/s")
        print(f"gate: {median / GOAL_S:.2f}x of the {GOAL_S:.0f}s goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
