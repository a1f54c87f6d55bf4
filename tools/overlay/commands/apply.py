"""`overlay apply`: compose the pinned trees with the series (and, with --gate, gate them)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from overlay import paths, reporting
from overlay.commands import gate as gate_cli
from overlay.commands.options import add_common, target_names
from overlay.errors import redact
from overlay.series.model import Project
from overlay.trees import compose


def _stderr_progress(json_mode: bool):
    return reporting.progress("apply", quiet=json_mode, clean=redact)


def _out(json_mode: bool):
    return (lambda _msg: None) if json_mode else (lambda msg: print(msg, flush=True))


def cmd_apply(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    report = _out(args.json)
    if not args.json:
        print(f"composing pin set {pin.name}")
    outcomes = compose.compose(project, pin, targets=target_names(args.targets), into=args.into,
                               mirror=paths.mirror_root(args.mirror), force=args.force,
                               report=report, progress=_stderr_progress(args.json))
    mismatched = [o for o in outcomes if o.tree_mismatch]
    gate_rc = 0
    if args.gate:
        gate_rc = gate_cli.gate_after_apply(args.root, pin.name, args.into, json_mode=args.json)
    if args.json:
        print(json.dumps({
            "pin": pin.name,
            "installed": True,  # the trees are in place even when one mismatches its lock
            "targets": [{
                "target": o.target, "path": str(o.path), "base": o.base, "source": o.how,
                "head": o.head, "tree": o.tree, "locked_tree": o.locked_tree,
                "tree_matches_lock": None if not o.locked_tree else not o.tree_mismatch,
                "patches": [{"patch": p.patch, "status": p.status, "commit": p.commit}
                            for p in o.patches],
            } for o in outcomes],
        }, indent=2))
    else:
        for o in outcomes:
            n = sum(1 for p in o.patches if p.status == "applied")
            lock = ("" if not o.locked_tree else
                    " (matches lock)" if not o.tree_mismatch else "")
            print(f"{o.target}: {o.path} on {paths.branch_name(pin.name)}, base {o.base[:12]} "
                  f"({o.how}), {n} patch(es), tree {o.tree}{lock}")
    for o in mismatched:
        # The new tree is installed on purpose: `overlay lock` records the tree on disk,
        # so refusing to install it would leave no way to lock an intended change.
        print(f"overlay: error: TREE MISMATCH for {o.target}: the newly composed tree {o.tree} is "
              f"now in place at {o.path}, but pins/{pin.name}.yaml records {o.locked_tree} (if the "
              f"series changed on purpose, run `overlay lock --pin {pin.name}`; otherwise your "
              f"inputs differ from the lock)", file=sys.stderr)
    if mismatched:
        return 3
    return gate_rc


def register(sub) -> None:
    p = sub.add_parser("apply", help="compose the pinned trees with the series applied")
    add_common(p)
    p.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                   help="directory of local clones named owner+name (default: $OVERLAY_MIRROR)")
    p.add_argument("--force", action="store_true",
                   help="replace composed trees even if they hold uncommitted edits or extra commits")
    p.add_argument("--gate", action="store_true", help="run the contract gate after composing")
    p.set_defaults(func=cmd_apply)
