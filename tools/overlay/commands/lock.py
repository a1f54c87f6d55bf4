"""`overlay lock`: record each composed target's tree id in the pin file."""

from __future__ import annotations

import argparse
import json

from overlay.commands.options import add_common, target_names
from overlay.series.model import Project
from overlay.trees import lockfile


def cmd_lock(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    outcome = lockfile.lock_with_siblings(project, pin, targets=target_names(args.targets), into=args.into)
    if args.json:
        print(json.dumps({"pin": pin.name, "trees": outcome.trees,
                          "also_locked": [{"pin": s.pin, "target": s.target, "tree": s.tree,
                                           "was": s.old_tree} for s in outcome.siblings]}, indent=2))
    else:
        for target, tree in outcome.trees.items():
            print(f"locked {pin.name}/{target}: tree {tree}")
        for s in outcome.siblings:
            print(f"locked {s.pin}/{s.target}: tree {s.tree} (was {s.old_tree[:12]}; it pins the same "
                  f"{s.target} source as {pin.name}, so its lock was stale)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("lock", help="record each composed target's tree id in the pin file")
    add_common(p)
    p.set_defaults(func=cmd_lock)
