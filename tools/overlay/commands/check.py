"""`overlay check`: validate series, patches, provenance and pins."""

from __future__ import annotations

import argparse
import json

from overlay.series import checks
from overlay.series.model import load_series
from overlay.trees import seriesswap


def cmd_check(args: argparse.Namespace) -> int:
    if not (args.root / "series.yaml").is_file():
        load_series(args.root)  # not a project: its one line, exit 2 (not a finding, exit 1)
    if seriesswap.pending(args.root):  # a refresh was killed mid-swap: finish it first
        with seriesswap.checkout(args.root, "check"):
            pass
    findings = checks.run_checks(args.root)
    if args.json:
        print(json.dumps({"ok": not findings,
                          "findings": [f.as_dict() for f in findings]}, indent=2))
    else:
        for f in findings:
            print(f"FAIL {f.one_line()}")
        if findings:
            print(f"check: {len(findings)} problem(s)")
        else:
            print("check: ok (series, patches, provenance and pins are consistent)")
    return 1 if findings else 0


def register(sub) -> None:
    p = sub.add_parser("check", help="validate series, patches, provenance and pins (no upstream needed)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_check)
