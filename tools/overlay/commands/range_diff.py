"""`overlay range-diff A B`: two versions of the series, patch by patch (git range-diff)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from overlay import paths
from overlay.commands.options import target_names
from overlay.views import rangediff as view


def cmd_range_diff(args: argparse.Namespace) -> int:
    result = view.range_diff(args.root, args.a, args.b, pin_name=args.pin,
                             mirror=paths.mirror_root(args.mirror), into=args.into,
                             creation_factor=args.creation_factor, targets=target_names(args.targets))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(view.text(result), end="")
    return 0


def _percent(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= 1000:
        raise argparse.ArgumentTypeError(f"{value!r} is not a percentage from 0 to 1000")
    return int(value)


def register(sub) -> None:
    p = sub.add_parser("range-diff", help="compare two versions of the series patch by patch "
                                          "(git range-diff over the composed branches)",
                       description="A and B are two pin set names, or two git revisions of this "
                                   "repository. Pin sets: their composed trees in build/ (when they "
                                   "are today's series), else composed aside. Revisions: the series at "
                                   "each is composed aside on one upstream base, the pin set --pin as "
                                   "revision B declares it. Then git range-diff shows, per target, "
                                   "which patches are the same, changed, dropped or added.")
    p.add_argument("a", metavar="A", help="a pin set name or a revision (the old side)")
    p.add_argument("b", metavar="B", help="a pin set name or a revision (the new side)")
    p.add_argument("--pin", default=None, metavar="NAME",
                   help="comparing revisions: the pin set both are composed on (default: the default one)")
    p.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                   help="local mirror of the upstreams (default: $OVERLAY_MIRROR)")
    p.add_argument("--into", type=Path, default=None, metavar="DIR",
                   help="where composed trees live (default: <root>/build)")
    p.add_argument("--targets", default=None, metavar="T1,T2",
                   help="only these targets (default: every target of the pin set)")
    p.add_argument("--creation-factor", type=_percent, default=60, metavar="PERCENT",
                   help="git range-diff's creation factor: how different a patch may become and "
                        "still be paired with its old version (default: 60)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_range_diff)
