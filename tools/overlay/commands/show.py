"""`overlay show PATCH`: the review view of one patch."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from overlay.series.model import Project
from overlay.views import show as view


def cmd_show(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    shown = view.patch_view(project, args.patch, args.pin, into=args.into, reports=args.reports)
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
    p.add_argument("--pin", default=None, metavar="NAME", help="only this pin set's state and drift")
    p.add_argument("--into", type=Path, default=None, metavar="DIR",
                   help="where composed trees live (default: <root>/build)")
    p.add_argument("--reports", type=Path, default=None, metavar="DIR",
                   help="where saved drift/mutation-check --json reports are (default: <root>/reports)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_show)
