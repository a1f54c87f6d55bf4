"""One local 2-node Ray cluster, every campaign scenario the tests check, one JSON report.

Run inside a network namespace of its own (ray_cluster.in_netns): Ray there binds to
loopback only. Starting a cluster costs seconds, so the scenarios share one; each gets
its own project and results folder. Usage: cluster_session.py OUT_DIR [SCENARIO ...]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ray_cluster  # noqa: E402
from conftest import fake_servers  # noqa: E402
from evhelpers import fake_protocol, free_port, ladder_protocol  # noqa: E402

ALL = ("normal", "ladder", "fault", "cards", "interrupt", "driver-killed", "unreachable")


def project(out: Path, name: str, **kw) -> tuple[Path, Path]:
    root = out / name
    root.mkdir(parents=True)
    (root / "series.yaml").write_text("series: []\n")
    extra = kw.pop("extra", "")
    proto = fake_protocol(root / "ab", cpus=False, **kw)
    if extra:
        proto.write_text(proto.read_text() + extra)
    return root, proto


def cli(root: Path, proto: Path, address: str, *more: str) -> list[str]:
    return [sys.executable, "-m", "overlay", "--root", str(root), "bench", "ab", "--protocol", str(proto),
            "--cluster", address, "--json", *more]


def finish(argv: list[str], timeout: float = 240) -> dict:
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return {"rc": p.returncode, "out": p.stdout, "err": p.stderr, "seconds": time.monotonic() - t0}


def partial_meta(results: Path) -> list[dict]:
    out = []
    for d in sorted((results / "runs").glob("*.partial")) if (results / "runs").is_dir() else []:
        try:
            out.append(json.loads((d / "run.json").read_text()))
        except (OSError, ValueError):
            pass
    return out


def wait_for(cond, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    return None


def servers_gone(before: set[int], timeout: float = 20.0) -> list[int]:
    """fake_server.py processes left after the grace period (none is the pass)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = sorted(fake_servers() - before)
        if not left:
            return []
        time.sleep(0.2)
    left = sorted(fake_servers() - before)
    for pid in left:  # never leave them running, whatever the verdict
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def workers_alive(results: Path) -> list[int]:
    """Ray workers that ran blocks into these results and still live (each block records
    its worker's pid and start time in cluster/pids/<run>/node.json)."""
    from overlay.evidence import campaign, orchestrate  # noqa: PLC0415

    alive = []
    for f in sorted((results / campaign.PIDS).glob("*/node.json")):
        try:
            node = json.loads(f.read_text())
            pid, started = int(node["worker_pid"]), int(node["worker_started"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if orchestrate._alive(pid, started):
            alive.append(pid)
    return sorted(set(alive))


def running_with_server(results: Path):
    return next((m for m in partial_meta(results) if m.get("server_pid") and m.get("placement")), None)


def main() -> int:
    out = Path(sys.argv[1])
    wanted = sys.argv[2:] or list(ALL)
    report: dict = {}
    before = fake_servers()
    with ray_cluster.local_cluster(nodes=2, cards=1) as address:
        report["address"] = address
        if "normal" in wanted:
            root, proto = project(out, "normal", starts=2, startup_s=0.5)
            report["normal"] = {**finish(cli(root, proto, address)), "results": str(root / "ab"),
                                "left": servers_gone(before)}
        if "ladder" in wanted:
            root = out / "ladder"
            root.mkdir()
            (root / "series.yaml").write_text("series: []\n")
            # 30 -> 15 -> 30 ms per token: at 3 -> 1.5 ms a loaded host's wake-up delay (ms
            # per token) swamped the effect and the 4-pair interval came out neutral
            proto = ladder_protocol(root / "ab", itls=(30.0, 15.0, 30.0), starts=4, startup_s=0.2)
            report["ladder"] = {**finish(cli(root, proto, address)), "results": str(root / "ab"),
                                "left": servers_gone(before)}
        if "fault" in wanted:
            root, proto = project(out, "fault", starts=2, startup_s=1.5)
            drv = subprocess.Popen(cli(root, proto, address), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
            victim = wait_for(lambda: running_with_server(root / "ab"))
            if victim:
                os.kill(victim["placement"]["worker_pid"], signal.SIGKILL)
            o, e = drv.communicate(timeout=240)
            report["fault"] = {"rc": drv.returncode, "out": o, "err": e, "killed_run": victim and victim["run"],
                               "results": str(root / "ab"), "left": servers_gone(before)}
        if "cards" in wanted:
            root, proto = project(out, "cards", starts=2, extra="cards: {resource: NPU, per-run: 2}\n")
            report["cards"] = {**finish(cli(root, proto, address)), "results": str(root / "ab")}
        if "interrupt" in wanted:
            root, proto = project(out, "interrupt", starts=2, startup_s=1.0)
            drv = subprocess.Popen(cli(root, proto, address), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
            seen = wait_for(lambda: running_with_server(root / "ab"))
            drv.send_signal(signal.SIGINT)
            o, e = drv.communicate(timeout=120)
            report["interrupt"] = {"rc": drv.returncode, "out": o, "err": e, "seen": bool(seen),
                                   "results": str(root / "ab"), "left": servers_gone(before)}
        if "driver-killed" in wanted:
            root, proto = project(out, "driver-killed", starts=3, startup_s=1.0)
            drv = subprocess.Popen(cli(root, proto, address), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            wait_for(lambda: (root / "ab" / "runs").is_dir() and any(
                p.is_dir() and not p.name.endswith(".partial") for p in (root / "ab" / "runs").iterdir()))
            drv.kill()
            drv.wait()
            left_after_kill = servers_gone(before, timeout=30)
            # Ray ends a dead driver's workers asynchronously: until they are gone one of
            # them may still finish its run (stop the server, rename the partial folder),
            # so the runs complete "before" are those on disk once no such worker lives.
            workers_left = [] if wait_for(lambda: not workers_alive(root / "ab"), timeout=60) \
                else workers_alive(root / "ab")
            complete_before = sorted(p.name for p in (root / "ab" / "runs").iterdir()
                                     if not p.name.endswith(".partial"))
            resumed = finish(cli(root, proto, address))
            report["driver-killed"] = {**resumed, "complete_before": complete_before,
                                       "left_after_kill": left_after_kill,
                                       "workers_left_after_kill": workers_left,
                                       "results": str(root / "ab"),
                                       "left": servers_gone(before)}
    if "unreachable" in wanted:
        root, proto = project(out, "unreachable", starts=2)
        report["unreachable"] = finish(cli(root, proto, f"127.0.0.1:{free_port()}"))
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
