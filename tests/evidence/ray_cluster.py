"""A local Ray cluster of several nodes on this machine, for the campaign tests and bench.

Ray binds to the host's address and probes a public one to find its IP unless it runs
in a network namespace of its own, so everything here runs inside `unshare -n` with only
loopback up (`in_netns`). The cluster is one head plus extra raylets, each offering its
own `NPU` cards, all on 127.0.0.1, in a temporary folder of their own; `stop` ends only
the raylets this cluster started (`ray stop` would end every Ray session on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_IMPORT_WARNING": "1", "RAY_AUTH_MODE": "disabled"}


def netns_available() -> str | None:
    """Why a cluster cannot be started here, or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "the cluster extra is not installed (pip install -e '.[cluster]', or make test-cluster)"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare and ip are needed to give Ray a network namespace of its own"
    probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True)
    if probe.returncode != 0:
        return "cannot create a network namespace here: " + probe.stderr.decode().strip()[:100]
    return None


def in_netns(argv: list[str], *, env: dict | None = None, timeout: float = 600,
             cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run argv in a fresh network namespace with loopback up."""
    script = "ip link set lo up && exec \"$@\""
    full = {**os.environ, **ENV, **(env or {})}
    return subprocess.run(["unshare", "-n", "sh", "-c", script, "sh", *argv], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], temp: str) -> None:
    out = subprocess.run([RAY, "start", *args, "--node-ip-address", "127.0.0.1", "--disable-usage-stats",
                          "--object-store-memory", str(80 * 1024 * 1024)],
                         env={**os.environ, **ENV}, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError("ray start failed: " + (out.stderr or out.stdout)[-500:])


def _raylet_pids(temp: str) -> list[int]:
    """Processes whose command line names this cluster's temporary folder."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if temp.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@contextmanager
def local_cluster(nodes: int = 2, cards: int = 1, resource: str = "NPU"):
    """Yield the head's address; inside a network namespace only (see in_netns)."""
    temp = tempfile.mkdtemp(prefix="ovl-ray-", dir="/tmp")  # short: Ray's socket paths are capped
    port = _free_port()
    res = json.dumps({resource: cards})
    try:
        _start(["--head", "--port", str(port), "--num-cpus", "1", "--resources", res,
                "--include-dashboard", "false", "--temp-dir", temp], temp)
        for _ in range(nodes - 1):
            _start(["--address", f"127.0.0.1:{port}", "--num-cpus", "1", "--resources", res], temp)
        yield f"127.0.0.1:{port}"
    finally:
        stop(temp)


def stop(temp: str) -> None:
    pids = _raylet_pids(temp)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and
                                                   "Z" not in _state(p) for p in pids):
            time.sleep(0.2)
    shutil.rmtree(temp, ignore_errors=True)


def _state(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        return raw[raw.rindex(")") + 2:].split()[0]
    except (OSError, ValueError):
        return "Z"
