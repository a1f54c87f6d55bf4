"""`overlay drift`: classify the series against newer upstream commits (thin handler)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from overlay import paths
from overlay.drift.classify import CLASSES
from overlay.drift.targets import (Resolved, carrier_repo, fetch_mirror, fetch_targets, load_patches, parse_pairs,
                                   plan_gate, resolve_ref, target_repo, target_slug)
from overlay.drift.report import DEFAULT_FAIL_ON, DriftReport, junit, markdown, terminal, to_json
from overlay.drift.scan import (Drift, TargetRun, commit_log, stderr_progress, timed_onto,
                                timed_scan)
from overlay.errors import OverlayError
from overlay.series.model import ArchiveSource, Project
from overlay.reporting import table
from overlay.reporting.files import check_report, write_report

HELP = "classify each patch against newer upstream commits (clean/offset/fuzz/merged/...)"


def register(sub) -> None:
    p = sub.add_parser(
        "drift", help=HELP, description=HELP + ". Exit status 1 when a patch's class is in "
        "--fail-on (at REF, or at the head of a scan), 2 on bad input.")
    p.add_argument("--pin", metavar="NAME", help="pin set (default: the one marked default)")
    p.add_argument("--onto", metavar="TARGET=REF[,TARGET=REF]",
                   help="classify the series on these upstream commits")
    p.add_argument("--scan", metavar="TARGET=REF",
                   help="walk first-parent history from the pinned commit to REF and report "
                        "every commit where a patch changes class")
    p.add_argument("--bisect", action="store_true",
                   help="with --scan: only find the first commit where each patch stops "
                        "applying, in O(log n) checks")
    p.add_argument("--fail-on", metavar="CLASSES", default=",".join(DEFAULT_FAIL_ON),
                   help="classes that make the run fail (default: conflict,missing; fuzz "
                        "is a warning unless listed; 'none' never fails)")
    p.add_argument("--fuzz", type=_fuzz_lines, default=0, metavar="N",
                   help="also accept a patch whose hunks apply with up to N context lines "
                        "ignored (class fuzz, a warning); default 0: the rule `overlay apply` "
                        "uses (git am: exact context, at any offset), so what drift passes, "
                        "apply applies")
    p.add_argument("--mirror", type=Path, metavar="DIR",
                   help="directory of upstream clones <owner+name> (default: $OVERLAY_MIRROR)")
    p.add_argument("--fetch", action="store_true",
                   help="first clone or update each checked target's repository in the mirror "
                        "(CI; needs --mirror or OVERLAY_MIRROR)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write a Markdown summary")
    p.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML")
    p.add_argument("--gate", action="store_true",
                   help="also run the contract gate (needs overlay.gate.run_gate)")
    p.set_defaults(func=run)


# ----------------------------------------------------------------------------- input checks


def _fuzz_lines(text: str) -> int:
    if not text.isdigit() or int(text) > 3:
        raise argparse.ArgumentTypeError(f"{text!r} is not 0, 1, 2 or 3")
    return int(text)


def parse_fail_on(text: str) -> tuple[str, ...]:
    if text.strip() == "none":
        return ()
    wanted = tuple(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
    unknown = [c for c in wanted if c not in CLASSES]
    if unknown or not wanted:
        raise OverlayError(f"--fail-on: unknown class {', '.join(unknown) or repr(text)}",
                           hint="use a comma list of " + ", ".join(CLASSES) + ", or 'none'")
    return wanted


# ----------------------------------------------------------------------------- the command


def run(args: argparse.Namespace) -> int:
    if bool(args.onto) == bool(args.scan):
        raise OverlayError("give exactly one of --onto TARGET=REF[,...] or --scan TARGET=REF",
                           hint="overlay drift --scan plugin=main")
    if args.bisect and not args.scan:
        raise OverlayError("--bisect works with --scan", hint="overlay drift --scan plugin=main --bisect")
    fail_on = parse_fail_on(args.fail_on)
    pairs = parse_pairs(args.scan or args.onto, "--scan" if args.scan else "--onto")
    if args.scan and len(pairs) != 1:
        raise OverlayError("--scan takes one TARGET=REF", hint="run one scan per target")
    check_report(args.markdown, "--markdown")
    check_report(args.junit, "--junit")
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    if args.fetch:  # the mirror may not exist yet: fetching creates it
        fetch_targets(pin, [t for t, _ in pairs], fetch_mirror(args.mirror), not args.json)
    mirror = paths.mirror_root(args.mirror)

    # Resolve everything first: bad input fails before any work or any output.
    resolved = []
    for target, ref in pairs:
        if target in pin.target_names and isinstance(pin.target(target).source, ArchiveSource):
            # a release archive: its base is the import commit, upstream's history comes from
            # the mirror of the `history:` repository; drift reads both through one view
            _, base, git_dir = carrier_repo(args.root, pin, target, mirror, stderr_progress(not args.json))
        else:
            git_dir, base = target_repo(args.root, pin, target, mirror)
        resolved.append(Resolved(target, ref, git_dir, base, resolve_ref(git_dir, target, ref)))
    gate_plan = plan_gate(args.root, pin, resolved) if args.gate else None
    loaded = {r.target: load_patches(project, r.target, pin.name) for r in resolved}
    progress = stderr_progress(not args.json)

    runs: list[TargetRun] = []
    for r in resolved:
        patches, diffs = loaded[r.target]
        engine = Drift(r.git_dir, r.base, patches, diffs,
                       slug=target_slug(_history(pin.target(r.target).source)), max_fuzz=args.fuzz)
        try:
            if args.scan:
                commits = commit_log(r.git_dir, r.base, r.head)
                runs.append(timed_scan(engine, r.target, r.ref, r.head, commits, args.bisect,
                                       progress))
            else:
                runs.append(timed_onto(engine, r.target, r.ref, r.head))
        finally:
            engine.close()
    mode = "bisect" if args.bisect else "scan" if args.scan else "onto"
    report = DriftReport(pin.name, mode, tuple(runs), fail_on)
    gate_report = gate_plan.run(pin.name) if gate_plan else None

    if args.markdown:
        write_report(args.markdown, markdown(report) + (gate_markdown(gate_report) if gate_report else ""),
                     "--markdown")
    if args.junit:
        write_report(args.junit, junit(report, gate_suites(gate_report) if gate_report else ()),
                     "--junit")
    if args.json:
        doc = to_json(report)
        if gate_report is not None:
            from overlay.gate.report import to_json as gate_json
            doc["gate"] = json.loads(gate_json(gate_report))
            doc["ok"] = doc["ok"] and gate_report.ok
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(terminal(report, table.terminal_width()))
        if gate_report is not None:
            from overlay.gate.report import text as gate_text
            sys.stdout.write(gate_text(gate_report))
    code = report.exit_code
    if gate_report is not None and not gate_report.ok:
        code = max(code, 1)
    return code


def gate_suites(report) -> tuple:
    """The gate's own JUnit suite (one failing test case per finding; one passing case
    when there is none), to go into drift's JUnit file."""
    from overlay.gate.report import junit_suite

    return (junit_suite(report),)


def gate_markdown(report) -> str:
    lines = ["", f"### Contract gate: {'OK' if report.ok else 'FAIL'}", "",
             f"plugin `{report.plugin}` against core `{report.core}`", ""]
    if report.findings:
        lines += ["| Kind | Where | Message |", "| --- | --- | --- |"]
        lines += [f"| {f.kind} | `{f.location()}` | {f.message.replace('|', '/')} |"
                  for f in report.findings]
    else:
        lines.append("No contract breaks.")
    return "\n".join(lines) + "\n"


def _history(src):
    """The git source whose history drift reads: the pin's own, or an archive's `history:`."""
    return src.history_source if isinstance(src, ArchiveSource) else src
