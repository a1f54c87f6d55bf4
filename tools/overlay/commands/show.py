"""`overlay show PATCH`: the review view of one patch."""

from __future__ import annotations

import argparse
import json

from overlay.commands.options import add_view_options, view_inputs
from overlay.views import show as view


def cmd_show(args: argparse.Namespace) -> int:
    given = view_inputs(args)
    shown = view.patch_view(given.project, args.patch, given.pins[0] if given.chosen else None,
                            into=given.into, reports=given.reports)
    if args.json:
        print(json.dumps(shown.to_json(), indent=2))
    else:
        print(view.text(shown), end="")
    return 0


def register(sub) -> None:
    p = sub.add_parser("show", help="one patch as a reviewer reads it: header, provenance, pin sets, "
                                    "drift, tests, mutation check, diff",
                       description="The review view of one patch: its header (DEP-3 fields), "
                                   "provenance with links (upstream PR, upstream commit, core change), "
                                   "the pin sets carrying it and its state there, drift at the newest "
                                   "upstream (reports/drift.json, else 'not measured'), the test files "
                                   "it adds, its mutation-check result (reports/mutation-check.json), "
                                   "then the diff.")
    p.add_argument("patch", metavar="PATCH",
                   help="patch file name, without .patch, or an unambiguous prefix (0003)")
    add_view_options(p, pin_help="only this pin set's state and drift", reports=True)
    p.set_defaults(func=cmd_show)
