"""`overlay refresh`: regenerate patches/ and the series order from the composed branch."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from overlay import paths
from overlay.commands.options import add_common, target_names
from overlay.series.model import Project
from overlay.trees import refresh
from overlay.views import rangediff


def cmd_refresh(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    before = rangediff.composed_heads(args.root, pin, target_names(args.targets), args.into)
    result = refresh.refresh(project, pin, targets=target_names(args.targets), into=args.into,
                             mirror=paths.mirror_root(args.mirror))
    changed = rangediff.since(pin.name, before)  # the branch before -> after, as range-diff says it
    if args.json:
        print(json.dumps({**result.as_dict(), "range_diff": changed.to_json()}, indent=2))
    else:
        lines = result.lines()
        for line in lines[:-1]:
            print(line)
        if changed.targets:  # each patch's change (the summary `overlay range-diff` prints)
            print(rangediff.text(changed), end="")
        print(lines[-1])  # the totals line stays last
    return 0


def register(sub) -> None:
    p = sub.add_parser("refresh", help="regenerate patches/ and series order from the composed branch")
    add_common(p)
    p.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                   help="upstream mirror, to notice a branch rebased onto newer upstream (default: $OVERLAY_MIRROR)")
    p.set_defaults(func=cmd_refresh)
