"""Run the plugin's CPU unit tests on a composed tree (`make composed-test PIN=v0.25.0`).

1. Needs a mirror (--mirror or $OVERLAY_MIRROR): the composed trees need the pinned
   upstream commits, offline. Without one it stops with an error (nothing ran).
2. Compose the pin set with `overlay apply` (core and plugin).
3. Build (once, then reuse) the test environment outside the repository from
   requirements/composed-test.txt, and install vLLM from the composed core tree
   beside it, once per core tree (tools/overlay/testing/testenv.py).
4. Export the composed plugin tree (git archive, so build/ stays untouched) and run
   its unit tests under tests/ut that the plugin's own CI runs on its CPU runner: the
   files its test_config.yaml `runner_mapping` routes to an NPU runner are left out.
5. Judge the run on what pytest recorded (tools/overlay/testing/testrun.py): it fails when
   pytest stopped before running tests (a conftest that does not import: its real
   error is printed), on any collection error, when fewer tests than the pin set's
   floor were collected, when a series test did not run, and on any failure that is
   not on the known-failures list (requirements/composed-test-known-failures.yaml)
   for this pin set; a list entry that no longer fails fails the run too.
6. Unless --no-baseline: first run the same suite on a reference tree, for comparison
   only (it does not decide the exit status): `--baseline upstream` (the default) is the
   pinned plugin without the series; `--baseline compat` is the pinned plugin with only the
   pin set's compatibility patches (entries with `core-change:`), the reference for a pin
   set ahead of upstream, where the plugin alone does not even import on the newer core.

Exit status: 0 passed, 1 the run failed (see above), 2 setup errors (mirror, compose,
environment). One line per error, no traceback. --json: one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from overlay import reporting
from overlay.commands.options import add_composed_env
from overlay.errors import OverlayError
from overlay.series.model import load_series
from overlay.testing import testenv, testrun

KNOWN_FAILURES = Path("requirements") / "composed-test-known-failures.yaml"  # under the project root


def series_tests(root: Path, target: str, pin: str) -> list[str]:
    # only what the pin set carries (not patches its upstream already has)
    return [t for e in load_series(root).for_target(target, pin) for t in e.tests]


def compat_entries(root: Path, pin: str) -> list:
    """The pin set's compatibility patches: the plugin entries it carries that name a core change."""
    return [e for e in load_series(root).for_target("plugin", pin) if e.provenance.core_change]


def unran_series_tests(report: testrun.RunReport, tests: list[str]) -> list[str]:
    """Series tests (files or node ids) of which no test ran."""
    ran = set(report.outcomes)
    return [t for t in tests if not any(n == t or n.startswith(t + "::") for n in ran)]


def register(sub) -> None:
    ap = sub.add_parser("composed-test", help="plugin CPU unit tests on the composed tree (needs a mirror)",
                        description=__doc__.split("\n\n")[0])
    ap.add_argument("--pin", default="v0.23.0", help="pin set to compose and test (default: v0.23.0)")
    add_composed_env(ap)
    ap.add_argument("--known-failures", type=Path, default=None,
                    help="known-failures list (default: requirements/composed-test-known-failures.yaml)")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the run on the reference tree (see --baseline)")
    ap.add_argument("--baseline", choices=("upstream", "compat"), default="upstream",
                    help="reference run: the plugin without the series (upstream, default), or with only "
                         "the pin set's compatibility patches, those with core-change: (compat)")
    ap.add_argument("--json", action="store_true", help="print one JSON document, no progress")
    ap.add_argument("pytest_args", nargs="*",
                    help="extra pytest arguments (after --); a filtered run skips the floor and stale-entry checks")
    ap.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    root = args.root
    if args.known_failures is None:
        args.known_failures = root / KNOWN_FAILURES
    say = (lambda msg: None) if args.json else (lambda msg: print(f"composed-test: {msg}", flush=True))
    echo = None if args.json else testrun.echo_to_terminal
    progress = reporting.progress("composed-test", quiet=args.json)

    if not args.mirror:
        raise OverlayError("needs a mirror: composing the pinned trees needs the upstream commits offline",
                           hint="set OVERLAY_MIRROR or pass --mirror DIR")
    venv = args.venv.resolve()
    if venv == root or root in venv.parents:
        raise OverlayError(f"--venv {venv} is inside the repository",
                           hint="put it outside (it is large and not tracked)")
    known_list = testrun.load_known_failures(args.known_failures, os.path.relpath(args.known_failures, root))
    pin_file = root / "pins" / f"{args.pin}.yaml"
    version = testenv.core_version(pin_file.read_text()) if pin_file.is_file() else None
    full_run = not args.pytest_args

    say(f"composing pin set {args.pin} (overlay apply)")
    targets = testenv.compose(root, args.pin, args.mirror)
    if "core" not in targets or "plugin" not in targets:
        raise OverlayError(f"pin set {args.pin} must have a core and a plugin target", path=f"pins/{args.pin}.yaml")
    core, plugin = targets["core"], targets["plugin"]
    for t in (core, plugin):
        say(f"{t['target']}: base {t['base'][:12]}, {len(t['patches'])} patch(es), tree {t['tree']}")

    env = testenv.select_environment(venv, Path(core["path"]))
    if env.deviation:
        say(f"deviation: {env.deviation}")
    python = testenv.ensure_venv(env.venv, progress, env.requirements)
    core_dir = testenv.ensure_core(python, env.venv, core, version, progress)
    wanted = series_tests(root, "plugin", args.pin)
    with tempfile.TemporaryDirectory(prefix="composed-test-") as tmp:
        scratch = Path(tmp)
        composed = testenv.export_tree(plugin["path"], "HEAD", scratch / "plugin")
        missing = [t for t in wanted if not (composed / t.split("::")[0]).exists()]
        if missing:
            raise OverlayError(f"series.yaml lists tests the composed plugin lacks: {', '.join(missing)}",
                               path="series.yaml")
        baseline = None
        if not args.no_baseline:
            base_tree = testenv.export_tree(plugin["path"], plugin["base"], scratch / "plugin-base")
            if args.baseline == "compat":
                compat = compat_entries(root, args.pin)
                say(f"baseline: plugin {plugin['base'][:12]} with only its {len(compat)} compatibility patch(es)")
                testenv.apply_patches(base_tree, [root / "patches" / e.patch for e in compat])
            else:
                say(f"baseline: plugin {plugin['base'][:12]} without the series")
            (scratch / "base").mkdir()
            baseline = testrun.run_pytest(python, base_tree, core_dir, scratch / "base",
                                          ["-q", "--continue-on-collection-errors", "tests/ut", *testrun.npu_ignores(base_tree),
                                           *args.pytest_args],
                                          echo)
        say(f"with the series: plugin tree {plugin['tree'][:12]}")
        (scratch / "series").mkdir()
        after = testrun.run_pytest(python, composed, core_dir, scratch / "series",
                                   ["-q", "--continue-on-collection-errors", "tests/ut", *testrun.npu_ignores(composed),
                                    *args.pytest_args], echo)

    known = known_list.for_pin(args.pin)
    verdict = testrun.judge(after, known, known_list.floor(args.pin), full_run=full_run)
    problems = list(verdict.problems)
    if full_run and after.collected is not None:
        problems += [f"series test did not run: {t}" for t in unran_series_tests(after, wanted)]

    if args.json:
        print(json.dumps({
            "pin": args.pin, "core_tree": core["tree"], "plugin_tree": plugin["tree"],
            "floor": known_list.floor(args.pin), "full_run": full_run,
            "baseline": baseline.to_json() if baseline else None,
            "baseline_kind": None if args.no_baseline else args.baseline, "series": after.to_json(),
            "known_failures": {n: e.cause for n, e in verdict.known.items()},
            "problems": problems, "ok": not problems,
            "deviations": [env.deviation] if env.deviation else [],
        }, indent=2))
        return 1 if problems else 0
    say(f"core tree {core['tree']}, plugin tree {plugin['tree']}")
    if baseline is not None:
        say(f"{'compatibility patches only' if args.baseline == 'compat' else 'before the series'}: "
            f"{baseline.line()}")
        if baseline.collected is None:
            say(f"  (pytest stopped: {testrun.real_error(baseline.output_tail)})")
    say(f"after the series:  {after.line()}")
    for entry in dict.fromkeys(verdict.known.values()):
        count = sum(e is entry for e in verdict.known.values())
        say(f"known failure ({count} test(s)): {entry.test}, see {os.path.relpath(args.known_failures, root)}")
    for problem in problems:
        say(f"FAILED: {problem}")
    say("passed" if not problems else f"failed: {len(problems)} problem(s)")
    return 1 if problems else 0

