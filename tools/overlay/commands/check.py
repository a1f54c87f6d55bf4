"""`overlay check`: validate series, patches, provenance and pins."""

from __future__ import annotations

import argparse
import json

from overlay.series import checks, seriesdoc
from overlay.errors import OverlayError
from overlay.series.model import load_all_pins, load_series
from overlay.trees import seriesswap


def cmd_check(args: argparse.Namespace) -> int:
    if not (args.root / "series.yaml").is_file():
        load_series(args.root)  # not a project: its one line, exit 2 (not a finding, exit 1)
    if seriesswap.pending(args.root):  # a refresh was killed mid-swap: finish it first
        with seriesswap.checkout(args.root, "check"):
            pass
    if args.write_docs:
        wrote = _write_docs(args.root)
        if not args.json:
            print(f"check: {'wrote' if wrote else 'unchanged:'} the generated part of {seriesdoc.DOC.as_posix()}")
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


def _write_docs(root) -> bool:
    """Rewrite docs/series.md's generated part; whether the file changed."""
    doc = root / seriesdoc.DOC
    if not doc.is_file():
        raise OverlayError("no docs/series.md to write the generated part into", path=seriesdoc.DOC.as_posix(),
                           hint="run it in the repository root")
    text = doc.read_text(encoding="utf-8")
    new = seriesdoc.with_block(text, seriesdoc.render(load_series(root), load_all_pins(root)))
    if new == text:
        return False
    doc.write_text(new, encoding="utf-8")
    return True


def register(sub) -> None:
    p = sub.add_parser("check", help="validate series, patches, provenance and pins (no upstream needed)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--write-docs", action="store_true",
                   help="first rewrite the generated part of docs/series.md from series.yaml and pins/ "
                        "(make docs)")
    p.set_defaults(func=cmd_check)
