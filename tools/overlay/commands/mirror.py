"""`overlay mirror` (`make mirror`): rebuild the mirror's pypi/ from benchmarks/mirror.yaml.

What `overlay gate-eval` and the mirror-marked tests read from `<mirror>/pypi/`, made again
byte for byte: release files from the package index pip is configured with, sdists made
from a wheel's .py files, and `git archive`s of the plugin snapshots the user brings to
`<mirror>/OWNER+NAME/repo` (overlay.trees.pypi_mirror). `--check` only verifies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from overlay import paths
from overlay.errors import OverlayError
from overlay.reporting.progress import progress
from overlay.trees import pypi_mirror


def register(sub) -> None:
    ap = sub.add_parser("mirror", help="rebuild (or --check) the mirror's pypi/ from benchmarks/mirror.yaml",
                        description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", type=Path, default=None,
                    help="the upstream mirror whose pypi/ is made (default: $OVERLAY_MIRROR)")
    ap.add_argument("--manifest", type=Path, default=None,
                    help=f"the manifest (default: {pypi_mirror.MANIFEST} under the project root)")
    ap.add_argument("--check", action="store_true",
                    help="verify every file's sha256 only; download and write nothing")
    ap.add_argument("--jobs", type=int, default=4, metavar="N", help="files made at once (default: 4)")
    ap.add_argument("--json", action="store_true", help="a summary as JSON, per file its source and status")
    ap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    mirror = paths.mirror_root(args.mirror)
    if mirror is None:
        raise OverlayError("overlay mirror needs the upstream mirror it fills",
                           hint="set OVERLAY_MIRROR=DIR (or --mirror DIR); it holds the git snapshots, "
                                "pypi/ is made there")
    if args.jobs < 1:
        raise OverlayError("--jobs must be at least 1")
    manifest = args.manifest if args.manifest is not None else args.root / pypi_mirror.MANIFEST
    try:
        shown = str(manifest.resolve().relative_to(args.root))
    except ValueError:
        shown = str(manifest)
    entries = pypi_mirror.load_manifest(manifest, shown)
    say = progress("mirror", quiet=args.json)
    outcome = pypi_mirror.run(mirror, entries, check=args.check, shown=shown, jobs=args.jobs, progress=say)
    if args.json:
        print(json.dumps({
            "mirror": str(mirror), "manifest": shown, "check": outcome.check, "ok": outcome.ok,
            "counts": {s: outcome.count(s) for s in pypi_mirror.STATUSES},
            "files": [{"name": r.entry.name, "source": r.entry.source, "status": r.status,
                       "detail": r.detail or None} for r in outcome.results],
            "extra": outcome.extra,
        }, indent=2))
    else:
        for r in outcome.results:
            if r.status == "failed":
                print(f"FAILED {r.entry.name}: {r.detail}")
        for name in outcome.extra:
            print(f"note: pypi/{name} is not in {shown}; left as it is (gate-eval reads every "
                  "pypi/vllm-*.tar.gz: remove what does not belong)", file=sys.stderr)
        done = ("verified" if outcome.check else "made, {kept} kept").format(kept=outcome.count("kept"))
        counted = outcome.count("verified") if outcome.check else outcome.count("made")
        print(f"{outcome.pypi}: {len(outcome.results)} files in {shown}: {counted} {done}, "
              f"{outcome.count('failed')} failed")
    return 0 if outcome.ok else 1
