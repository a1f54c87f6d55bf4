"""`overlay site DIR`: the series dashboard as static HTML."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from overlay.commands.options import add_view_options, view_inputs
from overlay.views import site as view


def cmd_site(args: argparse.Namespace) -> int:
    given = view_inputs(args)
    out = args.dir.resolve()
    pages = view.write_site(given.project, out, pins=given.pins, into=given.into,
                           reports=given.reports)
    if args.json:
        print(json.dumps({"dir": str(out), "pages": pages}, indent=2))
    else:
        print(f"wrote {len(pages)} pages into {out} (open index.html)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("site", help="write the series dashboard as a static HTML site",
                       description="A static site (no script): index.html with the pin-set x patch "
                                   "matrix (as `overlay status`), one page per patch (as `overlay "
                                   "show`), forward.html (docs/forward/*.json: the forward matrix and "
                                   "the gate findings per release) and evidence.html (the evidence "
                                   "decisions with their plots). DIR must be new, empty, or a site "
                                   "written before; nothing is deleted.")
    p.add_argument("dir", type=Path, metavar="DIR", help="the folder to write the site into")
    add_view_options(p, reports=True)
    p.set_defaults(func=cmd_site)
