"""Foundation commands: apply, check, refresh, lock (thin handlers over the modules)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from overlay import checks, compose, lockfile, paths, refresh, reporting, seriesswap
from overlay.gate import cli as gate_cli
from overlay.errors import OverlayError, redact
from overlay.model import Project, load_series


def _targets(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not names:
        raise OverlayError("--targets needs at least one target name", hint="e.g. --targets plugin")
    return names


def _stderr_progress(json_mode: bool):
    return reporting.progress("apply", quiet=json_mode, clean=redact)


def _out(json_mode: bool):
    return (lambda _msg: None) if json_mode else (lambda msg: print(msg, flush=True))


def cmd_apply(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    report = _out(args.json)
    if not args.json:
        print(f"composing pin set {pin.name}")
    outcomes = compose.compose(project, pin, targets=_targets(args.targets), into=args.into,
                               mirror=paths.mirror_root(args.mirror), force=args.force,
                               report=report, progress=_stderr_progress(args.json))
    mismatched = [o for o in outcomes if o.tree_mismatch]
    gate_rc = 0
    if args.gate:
        gate_rc = gate_cli.gate_after_apply(args.root, pin.name, args.into, json_mode=args.json)
    if args.json:
        print(json.dumps({
            "pin": pin.name,
            "installed": True,  # the trees are in place even when one mismatches its lock
            "targets": [{
                "target": o.target, "path": str(o.path), "base": o.base, "source": o.how,
                "head": o.head, "tree": o.tree, "locked_tree": o.locked_tree,
                "tree_matches_lock": None if not o.locked_tree else not o.tree_mismatch,
                "patches": [{"patch": p.patch, "status": p.status, "commit": p.commit}
                            for p in o.patches],
            } for o in outcomes],
        }, indent=2))
    else:
        for o in outcomes:
            n = sum(1 for p in o.patches if p.status == "applied")
            lock = ("" if not o.locked_tree else
                    " (matches lock)" if not o.tree_mismatch else "")
            print(f"{o.target}: {o.path} on {paths.branch_name(pin.name)}, base {o.base[:12]} "
                  f"({o.how}), {n} patch(es), tree {o.tree}{lock}")
    for o in mismatched:
        # The new tree is installed on purpose: `overlay lock` records the tree on disk,
        # so refusing to install it would leave no way to lock an intended change.
        print(f"overlay: error: TREE MISMATCH for {o.target}: the newly composed tree {o.tree} is "
              f"now in place at {o.path}, but pins/{pin.name}.yaml records {o.locked_tree} (if the "
              f"series changed on purpose, run `overlay lock --pin {pin.name}`; otherwise your "
              f"inputs differ from the lock)", file=sys.stderr)
    if mismatched:
        return 3
    return gate_rc


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


def cmd_refresh(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    result = refresh.refresh(project, pin, targets=_targets(args.targets), into=args.into,
                             mirror=paths.mirror_root(args.mirror))
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        for line in result.lines():
            print(line)
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    outcome = lockfile.lock_with_siblings(project, pin, targets=_targets(args.targets), into=args.into)
    if args.json:
        print(json.dumps({"pin": pin.name, "trees": outcome.trees,
                          "also_locked": [{"pin": s.pin, "target": s.target, "tree": s.tree,
                                           "was": s.old_tree} for s in outcome.siblings]}, indent=2))
    else:
        for target, tree in outcome.trees.items():
            print(f"locked {pin.name}/{target}: tree {tree}")
        for s in outcome.siblings:
            print(f"locked {s.pin}/{s.target}: tree {s.tree} (was {s.old_tree[:12]}; it pins the same "
                  f"{s.target} source as {pin.name}, so its lock was stale)")
    return 0


def register(sub) -> None:
    def common(p: argparse.ArgumentParser, targets: bool = True) -> None:
        p.add_argument("--pin", default=None, metavar="NAME",
                       help="pin set name or unambiguous prefix (default: the default pin set)")
        p.add_argument("--into", type=Path, default=None, metavar="DIR",
                       help="where composed trees live (default: <root>/build)")
        if targets:
            p.add_argument("--targets", default=None, metavar="T1,T2",
                           help="only these targets (default: every target of the pin set)")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("apply", help="compose the pinned trees with the series applied")
    common(p)
    p.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                   help="directory of local clones named owner+name (default: $OVERLAY_MIRROR)")
    p.add_argument("--force", action="store_true",
                   help="replace composed trees even if they hold uncommitted edits or extra commits")
    p.add_argument("--gate", action="store_true", help="run the contract gate after composing")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("check", help="validate series, patches, provenance and pins (no upstream needed)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("refresh", help="regenerate patches/ and series order from the composed branch")
    common(p)
    p.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                   help="upstream mirror, to notice a branch rebased onto newer upstream (default: $OVERLAY_MIRROR)")
    p.set_defaults(func=cmd_refresh)

    p = sub.add_parser("lock", help="record each composed target's tree id in the pin file")
    common(p)
    p.set_defaults(func=cmd_lock)
