"""`overlay rebase` (thin handler): parse, dispatch to the steps."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay import gitcmd
from overlay.errors import OverlayError, printable
from overlay.rebase import __doc__ as ABOUT
from overlay.rebase.steps import abort, resume, start
from overlay.views import rangediff


def register(sub) -> None:
    p = sub.add_parser("rebase", help="move the series of a pin set onto newer upstream as a new pin set",
                       description=ABOUT.split("\n\n")[0])
    p.add_argument("--pin", metavar="NAME", help="the pin set to move (default: the default one)")
    p.add_argument("--onto", metavar="TARGET=REF", action="append",
                   help="where a target moves (repeatable, or a comma list): the target with "
                        "patches to a git ref, others to a ref or a release archive "
                        "(core=pypi:vllm==0.27.1, sha256 computed from the archive)")
    p.add_argument("--as", dest="new_pin", metavar="NEWPIN",
                   help="name of the new pin set (default: the first 8 hex digits of REF's commit)")
    p.add_argument("--mirror", type=Path, metavar="DIR",
                   help="directory of upstream clones <owner+name> (default: $OVERLAY_MIRROR)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--continue", dest="cont", action="store_true",
                       help="after resolving a conflict (git add), go on")
    group.add_argument("--skip", action="store_true",
                       help="drop the patch that conflicts and go on")
    group.add_argument("--abort", action="store_true",
                       help="give up: remove the new composed tree; pins and series stay as they were")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.root
    resuming = args.cont or args.skip or args.abort
    if resuming and (args.onto or args.pin or args.new_pin):
        raise OverlayError("--continue, --skip and --abort take no --pin, --onto or --as",
                           hint="overlay rebase --continue")
    if args.abort:
        return abort(root, args.json)
    if resuming:
        return resume(root, skip=args.skip, json_mode=args.json, after=_range_diff(root))
    if not args.onto:
        raise OverlayError("give --onto TARGET=REF", hint="overlay rebase --pin NAME --onto plugin=main")
    return start(root, args, after=_range_diff(root))


def _range_diff(root: Path):
    """At the end of a finished rebase: the old pin set against the new one for the rebased
    target, as `overlay range-diff OLD NEW` shows it (its `range_diff` field in --json). The
    rebase is done by then: a range-diff that cannot be made is said, and changes nothing."""
    def after(result: dict, mirror: Path | None) -> tuple[dict, str]:
        old, new = result["pin"], result["new_pin"]
        try:
            diff = rangediff.range_diff(root, old, new, mirror=mirror, targets=[result["target"]])
        except (OverlayError, gitcmd.GitFailed) as exc:
            if isinstance(exc, OverlayError):
                why = exc.one_line()
            else:
                said = (exc.stderr or "").strip().splitlines()
                why = f"git {(exc.args_ or ['?'])[0]} failed" + (f": {printable(said[-1])}" if said else "")
            return ({"range_diff": {"error": why}},
                    f"\nRange-diff `{old}` -> `{new}`: not shown ({why}).\n")
        return ({"range_diff": diff.to_json()},
                f"\nRange-diff (`overlay range-diff {old} {new}`):\n\n~~~~~~\n"
                + rangediff.text(diff) + "~~~~~~\n")
    return after
