"""`overlay status`: what each pin set carries, in order, with upstream and lock state."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from overlay.series.model import Project
from overlay.views import status as view


def cmd_status(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    statuses = view.status(project, args.pin, args.into)
    if args.json:
        print(json.dumps({"pins": [s.to_json() for s in statuses]}, indent=2))
    else:
        print(view.text(statuses), end="")
    return 0


def register(sub) -> None:
    p = sub.add_parser("status", help="the patches each pin set carries, in order, with their "
                                      "upstream and lock state (reads only; composes nothing)",
                       description="For each pin set (or --pin NAME): its targets' lock state and "
                                   "the patches it carries in order, each with its origin and its "
                                   "upstream state there (carried, merged by which rule, ported, "
                                   "superseded). Reads series.yaml, pins/ and build/ only.")
    p.add_argument("--pin", default=None, metavar="NAME",
                   help="only this pin set (name or unambiguous prefix; default: every pin set)")
    p.add_argument("--into", type=Path, default=None, metavar="DIR",
                   help="where composed trees live (default: <root>/build)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)
