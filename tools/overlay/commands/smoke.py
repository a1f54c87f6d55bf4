"""`overlay smoke`: the CPU start-up smoke of a composed pin set."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from overlay import reporting
from overlay.testing import testenv
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
    p.add_argument("--write-counters", type=Path, default=None, metavar="DIR",
                   help="write the decode steps' device counts as profiler-statistics CSVs, with "
                        "measured.yaml (whose code, which trees), into DIR, e.g. "
                        "evidence/mrv2-metadata-barrier/counters (only when every step passed)")
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
    echo = None if quiet else (lambda line: print(line, flush=True))
    walks, targets, deviation = run_smoke(args.root, args.pin, mirror, venv, baseline=args.baseline,
                               progress=reporting.progress("smoke", quiet=quiet), echo=echo)
    target = walks[0]
    written: list[str] = []
    if args.write_counters is not None and target.ok:
        written = write_counters(args.write_counters, target, args.pin, targets, args.root)
    if args.json:
        print(json.dumps({"ok": target.ok, "pin": args.pin, "walks": [w.to_json() for w in walks],
                          "deviations": [deviation] if deviation else [],
                          "counters_written": written}, indent=2))
    else:
        if deviation:
            print(f"smoke: deviation: {deviation}")
        for w in walks:
            print(w.summary())
        if written:
            print(f"smoke: wrote {', '.join(written)}")
        elif args.write_counters is not None:
            print(f"overlay: error: smoke: no counters written to {args.write_counters}: not every step passed",
                  file=sys.stderr)
        if not target.steps:
            print(f"overlay: error: smoke: the walk on {args.pin} ran no step: {target.error or 'no message'}",
                  file=sys.stderr)
    return 0 if target.ok else 1


def write_counters(folder: Path, walk, pin: str, targets: dict[str, dict], root: Path) -> list[str]:
    """The counters files of a passed walk, into `folder` (created); their paths."""
    import datetime

    from overlay.smoke.counters import NotCounted, counter_files

    try:  # the command as it is run from the repository (no path of this machine)
        shown = folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        shown = "DIR"
    command = f"overlay smoke --pin {pin} --write-counters {shown}"
    try:
        files = counter_files(walk, pin, targets, datetime.date.today().isoformat(), command)
    except NotCounted as exc:
        raise OverlayError(f"the walk on {pin} counted no decode steps: {exc}",
                           hint="run the smoke without --write-counters to see the step") from None
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [str(folder / name) for name in files]
