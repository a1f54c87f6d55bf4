"""A campaign on a 2-node local Ray cluster vs the serial `bench ab`, side by side in one run.

The same fake-server protocol (tests/evidence: an OpenAI-compatible server that sleeps
FAKE_STARTUP_S before listening, as a real one loads weights and captures graphs, and a
client writing `vllm bench serve`'s schema) runs serially, then as a campaign on a local
cluster of two nodes with one `NPU` card each, each into its own results folder. The
cluster is started before the timed campaign (a real one is already up). Prints both
wall times and their ratio; the goal is at most 0.6. Nothing is asserted.

Ray runs in a network namespace of its own (loopback only): the script re-executes
itself under `unshare -n` when it is not in one. Run: python benchmarks/bench_cluster.py
[--starts 4] [--startup-s 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "evidence"))

import ray_cluster  # noqa: E402
from evhelpers import fake_protocol  # noqa: E402

GOAL = 0.6
FLAG = "OVERLAY_BENCH_CLUSTER_NETNS"


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench_cluster: {' '.join(argv[:6])} ... failed: {p.stderr.strip()[-400:]}")
    data = json.loads(p.stdout)
    if data.get("remaining") or not data.get("ran"):
        raise SystemExit(f"bench_cluster: nothing (or not everything) ran: {data}")
    return time.perf_counter() - t0


def project(base: Path, name: str, starts: int, startup_s: float) -> tuple[Path, Path]:
    root = base / name
    root.mkdir()
    (root / "series.yaml").write_text("series: []\n")
    return root, fake_protocol(root / "ab", starts=starts, startup_s=startup_s, cpus=False)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=4)
    ap.add_argument("--startup-s", type=float, default=8.0)  # a real start takes minutes
    args = ap.parse_args()
    why = ray_cluster.netns_available()
    if why:
        print(f"bench_cluster: skipped: {why}")
        return 0
    if os.environ.get(FLAG) != "1":
        proc = ray_cluster.in_netns([sys.executable, __file__, *sys.argv[1:]], env={FLAG: "1"}, timeout=1800)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr[-2000:] if proc.returncode else "")
        return proc.returncode
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        base = Path(tmp)
        cmd = [sys.executable, "-m", "overlay"]
        root, proto = project(base, "serial", args.starts, args.startup_s)
        serial = timed(cmd + ["--root", str(root), "bench", "ab", "--protocol", str(proto), "--json"])
        with ray_cluster.local_cluster(nodes=2, cards=1) as address:
            root, proto = project(base, "cluster", args.starts, args.startup_s)
            clustered = timed(cmd + ["--root", str(root), "bench", "ab", "--protocol", str(proto),
                                     "--cluster", address, "--json"])
    runs = 2 * args.starts
    print(f"campaign: {runs} runs (2 variants x {args.starts} starts, fake server start-up {args.startup_s:g}s)")
    print(f"  serial bench ab            {serial:7.1f} s")
    print(f"  2-node local Ray cluster   {clustered:7.1f} s")
    ratio = clustered / serial
    print(f"  ratio cluster/serial       {ratio:7.2f}x  (goal <= {GOAL})  {'ok' if ratio <= GOAL else 'ABOVE GOAL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
