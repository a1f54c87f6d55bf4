"""`overlay status`: what each pin set carries, in order, with upstream and lock state."""

from __future__ import annotations

import argparse
import json

from overlay.commands.options import add_view_options, view_inputs
from overlay.views import status as view


def cmd_status(args: argparse.Namespace) -> int:
    given = view_inputs(args)
    statuses = view.status(given.project, given.pins, given.into)
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
    add_view_options(p, pin_help="only this pin set (name or unambiguous prefix; default: every pin set)")
    p.set_defaults(func=cmd_status)
