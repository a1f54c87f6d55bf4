"""`overlay evidence-e2e`: bench ab + analyze on the real vLLM engine, on CPU (overlay.evidence.e2e)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from overlay.evidence import e2e


def register(sub) -> None:
    ap = sub.add_parser("evidence-e2e", help="bench ab + analyze on the real vLLM CPU engine (opt-in, ~20 min)",
                        description=e2e.__doc__.split("\n")[0])
    ap.add_argument("--env", type=Path, default=Path(os.environ.get("OVERLAY_E2E_ENV", e2e.DEFAULT_ENV)),
                    help="engine environment (outside the repository)")
    ap.add_argument("--protocol", type=Path, default=e2e.DEFAULT_PROTOCOL,
                    help="the protocol to run (default: %(default)s)")
    ap.add_argument("--results", type=Path, default=e2e.WORK / "results",
                    help="results folder (the packet's own folder to record its runs)")
    # also accepted after the subcommand, as the module took it; default: overlay --root
    ap.add_argument("--root", type=Path, default=argparse.SUPPRESS, help="project root (the same as `overlay --root`)")
    ap.add_argument("--cluster", metavar="ADDRESS|local",
                    help="run the protocol as a Ray campaign (`bench ab --cluster`); with `local`, a "
                         "local Ray instance offering --local-cards cards")
    ap.add_argument("--local-cards", type=int, default=2, metavar="N",
                    help="with --cluster local: cards of the protocol's resource (default 2)")
    ap.add_argument("--json", action="store_true", help="bench ab's and analyze's results as JSON")
    ap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    step = e2e.Step(args.json)
    env = e2e.ensure_env(args.env.expanduser().resolve(), step)
    (root / e2e.WORK).mkdir(parents=True, exist_ok=True)
    e2e.ensure_model(env, root, step)
    # The client (and anything vLLM starts without the variant's env) also keeps its
    # cache in the work folder and never reaches for a model hub.
    run_env = {**os.environ, "PATH": f"{env / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               "HF_HUB_OFFLINE": "1", "VLLM_CACHE_ROOT": str(root / e2e.WORK / "vllm-cache")}
    overlay = [sys.executable, "-m", "overlay", "--root", str(root)]
    results = args.results if args.results.is_absolute() else root / args.results
    bench = step.run("overlay bench ab", lambda: subprocess.call(
        overlay + ["bench", "ab", "--protocol", str(args.protocol), "--results", str(results)]
        + (["--cluster", args.cluster] if args.cluster else [])
        + (["--local-cards", str(args.local_cards)] if args.cluster == "local" else [])
        + (["--json"] if args.json else []), cwd=root, env=run_env,
        stdout=subprocess.DEVNULL if args.json else None))
    if bench != 0:
        return bench
    out = results / "analysis"
    analysis = step.run("overlay evidence analyze", lambda: subprocess.call(
        overlay + ["evidence", "analyze", str(args.protocol), "--results", str(results), "--out", str(out)],
        cwd=root, env=run_env, stdout=subprocess.DEVNULL if args.json else None))
    if analysis != 0:
        return analysis
    data = json.loads((out / "analysis.json").read_text(encoding="utf-8"))
    decisions = {c["name"]: c["decision"] for c in data["claims"]}
    total = round(time.monotonic() - step.t0, 1)
    if args.json:
        print(json.dumps({"decisions": decisions, "wall_s": total, "steps_s": step.times,
                          "results": str(results)}, indent=2))
    else:
        print(f"evidence-e2e: {', '.join(f'{k} {v}' for k, v in decisions.items())}; "
              f"wall time {total:.0f}s ({', '.join(f'{k} {v:.0f}s' for k, v in step.times.items())})")
    return 0
