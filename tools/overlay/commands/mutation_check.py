"""Mutation check of the series (`make mutation-check PIN=v0.25.0`, needs a mirror).

For each plugin patch of the series: revert that patch's non-test change in the composed
tree (on top of the whole series; its tests stay), run that patch's tests (series.yaml
`tests:`) in the composed-test environment, and require them to fail. The tests must
pass on the unmutated tree first. Prints killed/survived per patch.

Exit status: 0 every mutant killed, 1 a mutant survived (or could not be judged: tests
failing unmutated, a revert that conflicts, a patch without tests), 2 setup errors.
--json: one JSON document on stdout, no progress.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from overlay import reporting
from overlay.commands.composed_test import KNOWN_FAILURES
from overlay.commands.options import add_composed_env
from overlay.errors import OverlayError
from overlay.series.model import load_series
from overlay.testing import mutation, testenv, testrun


def register(sub) -> None:
    ap = sub.add_parser("mutation-check", help="revert each patch's change: its tests must fail (needs a mirror)",
                        description=__doc__.split("\n\n")[0])
    ap.add_argument("--pin", default="v0.25.0", help="pin set to compose and check (default: v0.25.0)")
    add_composed_env(ap)
    ap.add_argument("--patch", action="append", default=[],
                    help="check only this patch (file name; repeatable)")
    ap.add_argument("--json", action="store_true", help="print one JSON document, no progress")
    ap.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    root = args.root
    say = (lambda msg: None) if args.json else (lambda msg: print(f"mutation-check: {msg}", flush=True))

    if not args.mirror:
        raise OverlayError("needs a mirror: composing the pinned trees needs the upstream commits offline",
                           hint="set OVERLAY_MIRROR or pass --mirror DIR")
    venv = args.venv.resolve()
    if venv == root or root in venv.parents:
        raise OverlayError(f"--venv {venv} is inside the repository", hint="put it outside")
    series = load_series(root)
    entries = series.for_target("plugin", args.pin)  # what this pin set carries
    unknown = sorted(set(args.patch) - {e.patch for e in entries})
    if unknown:
        raise OverlayError(f"no plugin patch named {', '.join(unknown)} in the series", path="series.yaml",
                           hint="give a patch file name, e.g. 0003-...patch")
    skipped = [e.patch for e in series.entries if e.target != "plugin" and e.carried_at(args.pin)]
    pin_file = root / "pins" / f"{args.pin}.yaml"
    version = testenv.core_version(pin_file.read_text()) if pin_file.is_file() else None

    say(f"composing pin set {args.pin} (overlay apply)")
    targets = testenv.compose(root, args.pin, args.mirror)
    if "core" not in targets or "plugin" not in targets:
        raise OverlayError(f"pin set {args.pin} must have a core and a plugin target", path=f"pins/{args.pin}.yaml")
    core, plugin = targets["core"], targets["plugin"]
    commits = {p["patch"]: p.get("commit") for p in plugin["patches"]}
    wanted = [e for e in entries if not args.patch or e.patch in args.patch]
    missing = [e.patch for e in wanted if not commits.get(e.patch)]
    if missing:
        raise OverlayError(f"the composed plugin has no commit for {', '.join(missing)}",
                           hint=f"re-run `overlay apply --pin {args.pin}`")
    patches = [mutation.PatchUnderTest(e.patch, commits[e.patch], e.tests) for e in wanted]

    progress = reporting.progress("mutation-check", quiet=args.json)
    env = testenv.select_environment(venv, Path(core["path"]))
    if env.deviation:
        say(f"deviation: {env.deviation}")
    python = testenv.ensure_venv(env.venv, progress, env.requirements)
    core_dir = testenv.ensure_core(python, env.venv, core, version, progress)
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as tmp:
        runs = Path(tmp)

        def run_tests(tree: Path, tests: tuple[str, ...]) -> testrun.RunReport:
            scratch = Path(tempfile.mkdtemp(dir=runs))
            return testrun.run_pytest(python, tree, core_dir, scratch, ["-q", *tests], echo=None)

        known_file = root / KNOWN_FAILURES
        known = (testrun.load_known_failures(known_file, str(KNOWN_FAILURES)).for_pin(args.pin)
                 if known_file.is_file() else ())
        results = mutation.check(Path(plugin["path"]), plugin["head"], patches, run_tests, say, runs, known)

    code = mutation.exit_code(results)
    if args.json:
        print(json.dumps({"pin": args.pin, "core_tree": core["tree"], "plugin_tree": plugin["tree"],
                          "deviations": [env.deviation] if env.deviation else [],
                          "results": [{"patch": r.patch, "status": r.status, "detail": r.detail,
                                       "mutants": [{"reverted": list(m.reverted), "status": m.status,
                                                    "detail": m.detail} for m in r.mutants]}
                                      for r in results],
                          "not_checked": skipped, "ok": code == 0}, indent=2))
        return code
    say(f"pin set {args.pin}: core tree {core['tree'][:12]}, plugin tree {plugin['tree'][:12]}")
    for r in results:
        say(f"{r.patch}: {r.status.upper()}" + ("" if r.mutants else f" ({r.detail})"))
        for m in r.mutants:
            say(f"    {m.line()}")
    for name in skipped:
        say(f"{name}: not checked (a core patch; the composed-test suite covers the plugin)")
    counts = {s: sum(r.status == s for r in results) for s in dict.fromkeys(r.status for r in results)}
    say(", ".join(f"{n} {s}" for s, n in counts.items()) + ("" if code == 0 else " -> FAILED"))
    return code

