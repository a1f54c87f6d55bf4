"""`overlay smoke`: the CPU start-up smoke of a composed pin set."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from overlay import testenv
from overlay.errors import OverlayError


def register(sub) -> None:
    p = sub.add_parser(
        "smoke", help="walk the composed plugin's start-up path on a CPU (torch_npu stubbed)",
        description="Compose the pin set, then, in the composed CPU test environment, load the plugin "
                    "the way vLLM does and walk its start-up path step by step: platform and patch "
                    "loading, the scheduler call EngineCore.step makes, and core's own calls into the "
                    "plugin on the MRV2 path. One line per step. Exit 0: every step passed; 1: a step "
                    "failed or nothing ran; 2: bad input or setup.")
    p.add_argument("--pin", required=True, metavar="NAME", help="pin set to compose and walk (needs a core tree)")
    p.add_argument("--mirror", default=None, metavar="DIR", help="mirror directory (default: $OVERLAY_MIRROR)")
    p.add_argument("--venv", type=Path, default=None, metavar="DIR",
                   help="composed test environment (default: $OVERLAY_COMPOSED_VENV or "
                        "~/.cache/overlay/composed-test-venv)")
    p.add_argument("--baseline", action="store_true",
                   help="also walk the pinned plugin without the series (its failures do not change the exit code)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout, no progress")
    p.set_defaults(func=cmd_smoke)


def cmd_smoke(args: argparse.Namespace) -> int:
    from overlay.smoke.run import run_smoke

    mirror = args.mirror or os.environ.get("OVERLAY_MIRROR")
    if not mirror:
        raise OverlayError("the smoke composes the pinned trees and needs the upstream commits offline",
                           hint="set OVERLAY_MIRROR or pass --mirror DIR")
    venv = (args.venv or testenv.default_venv()).resolve()
    if venv == args.root or args.root in venv.parents:
        raise OverlayError(f"--venv {venv} is inside the repository", hint="put it outside (it is large)")
    quiet = args.json
    say = (lambda msg: None) if quiet else (lambda msg: print(f"smoke: {msg}", file=sys.stderr, flush=True))
    echo = None if quiet else (lambda line: print(line, flush=True))
    walks = run_smoke(args.root, args.pin, mirror, venv, baseline=args.baseline,
                      progress=None if quiet else say, echo=echo)
    target = walks[0]
    if args.json:
        print(json.dumps({"ok": target.ok, "pin": args.pin, "walks": [w.to_json() for w in walks]}, indent=2))
    else:
        for w in walks:
            print(w.summary())
        if not target.steps:
            print(f"smoke: error: the walk on {args.pin} ran no step: {target.error or 'no message'}",
                  file=sys.stderr)
    return 0 if target.ok else 1
