"""`overlay drift`: classify the series against newer upstream commits (thin handler)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from overlay import compose, gitcmd, paths
from overlay.drift.classify import CLASSES, DriftPatch
from overlay.drift.inmem_apply import parse_diff
from overlay.drift.mirror import fetch_heads, mirror_repo, stderr_note
from overlay.drift.report import DEFAULT_FAIL_ON, DriftReport, junit, markdown, terminal, to_json
from overlay.drift.scan import (Drift, TargetRun, commit_log, stderr_progress, timed_onto,
                                timed_scan)
from overlay.errors import OverlayError
from overlay.model import GitSource, PinSet, Project
from overlay.reporting import table

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


def parse_fail_on(text: str) -> tuple[str, ...]:
    if text.strip() == "none":
        return ()
    wanted = tuple(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
    unknown = [c for c in wanted if c not in CLASSES]
    if unknown or not wanted:
        raise OverlayError(f"--fail-on: unknown class {', '.join(unknown) or repr(text)}",
                           hint="use a comma list of " + ", ".join(CLASSES) + ", or 'none'")
    return wanted


def parse_pairs(text: str, option: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        target, sep, ref = item.strip().partition("=")
        if not sep or not target.strip() or not ref.strip():
            raise OverlayError(f"{option}: '{item.strip()}' is not TARGET=REF",
                               hint=f"write e.g. {option} plugin=main")
        if any(t == target.strip() for t, _ in pairs):
            raise OverlayError(f"{option}: target '{target.strip()}' is given twice")
        pairs.append((target.strip(), ref.strip()))
    return pairs


@dataclass(frozen=True)
class Resolved:
    target: str
    ref: str
    git_dir: Path
    base: str
    head: str


def target_repo(root: Path, pin: PinSet, name: str, mirror: Path | None) -> tuple[Path, str]:
    """The git directory holding target `name`'s history, and its pinned commit."""
    try:
        target = pin.target(name)
    except KeyError:
        raise OverlayError(f"unknown target '{name}'", path=f"pins/{pin.name}.yaml",
                           hint="targets of this pin set: " + ", ".join(pin.target_names)) from None
    src = target.source
    if not isinstance(src, GitSource):
        raise OverlayError(f"target '{name}' is pinned to a source archive ({src.describe()}): "
                           "it has no git history to check drift against",
                           path=f"pins/{pin.name}.yaml", line=target.line,
                           hint="use a pin set whose target is a git commit")
    repo = None
    if mirror is not None:
        if not mirror.is_dir():
            raise OverlayError(f"mirror directory {mirror} does not exist",
                               hint="pass --mirror DIR (or OVERLAY_MIRROR) naming a directory "
                                    "of <owner+name> clones")
        repo = mirror_repo(mirror, src.mirror_name)
    if repo is None:
        cached = paths.cache_dir(root) / "git" / f"{src.mirror_name}.git"
        if (cached / "HEAD").is_file():
            repo = cached
    if repo is None:
        where = f"no {src.mirror_name} under mirror {mirror}" if mirror else "no mirror given"
        raise OverlayError(f"no repository for target '{name}': {where}, none in the cache",
                           hint=f"clone {src.url} to <mirror>/{src.mirror_name} and pass --mirror "
                                "or OVERLAY_MIRROR")
    if not gitcmd.has_commit(repo, src.commit):
        raise OverlayError(f"target '{name}': the pinned commit {src.commit[:12]} is not in {repo}",
                           path=f"pins/{pin.name}.yaml", line=target.line,
                           hint="update the mirror (git fetch in it)")
    return repo, src.commit


def fetch_mirror(explicit: Path | None) -> Path | None:
    """The mirror `--fetch` fills: --mirror, else $OVERLAY_MIRROR, even if not there yet
    (`paths.mirror_root` only names an existing one)."""
    where = explicit if explicit is not None else os.environ.get("OVERLAY_MIRROR")
    if not where:
        return None
    where = Path(where).resolve()
    if where.exists() and not where.is_dir():
        raise OverlayError(f"mirror {where} is not a directory", hint="give a folder to fill")
    return where


def fetch_targets(pin: PinSet, names: list[str], mirror: Path | None, verbose: bool) -> None:
    if mirror is None:
        raise OverlayError("--fetch needs a mirror directory to fill",
                           hint="pass --mirror DIR or set OVERLAY_MIRROR")
    for name in names:
        try:
            target = pin.target(name)
        except KeyError:
            raise OverlayError(f"unknown target '{name}'", path=f"pins/{pin.name}.yaml",
                               hint="targets of this pin set: " + ", ".join(pin.target_names)) from None
        if isinstance(target.source, GitSource):
            fetch_heads(mirror, name, target.source, stderr_note(verbose))


def resolve_ref(git_dir: Path, target: str, ref: str) -> str:
    head = gitcmd.resolve(git_dir, ref)
    if head is None:
        raise OverlayError(f"target '{target}': '{ref}' is not a commit in {git_dir}",
                           hint="give a branch, tag or commit id that exists there "
                                "(fetch it into the mirror first)")
    return head


def check_output(path: Path | None, option: str) -> None:
    if path is None:
        return
    if path.is_dir():
        raise OverlayError(f"{option} {path} is a directory", hint="give a file name")
    try:  # as test tools do: a report's folder is created (reports/ in CI)
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OverlayError(f"{option}: cannot create folder {path.parent}: {exc.strerror or exc}",
                           hint="write elsewhere") from None


def load_patches(project: Project, target: str,
                 pin: str | None = None) -> tuple[tuple[DriftPatch, ...], dict[str, str]]:
    """The target's series as drift reads it (what pin set `pin` carries), vetted as
    `apply` and `check` vet it (an unsafe path is refused with their words, before git
    ever sees it)."""
    entries = project.series.for_target(target, pin)
    patches = []
    diffs = {}
    for entry, mail in zip(entries, compose.load_patches(project, entries)):
        shown = f"patches/{entry.patch}"
        refs = entry.provenance.upstream + ((entry.provenance.applied_upstream,)
                                            if entry.provenance.applied_upstream else ())
        prov = entry.provenance
        superseded = ((prov.superseded_by_commit, prov.superseded_by_pr)
                      if prov.superseded_by_commit and prov.superseded_by_pr else None)
        patches.append(DriftPatch(entry.patch, target, parse_diff(mail.diff, shown), mail.subject,
                                  refs, prov.upstream_commits, superseded))
        diffs[entry.patch] = mail.diff
    return tuple(patches), diffs


def target_slug(source) -> str:
    """`owner/name` of a git target, as series.yaml writes upstream references."""
    return source.mirror_name.replace("+", "/") if isinstance(source, GitSource) else ""


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    check_output(args.markdown, "--markdown")
    check_output(args.junit, "--junit")
    project = Project.load(args.root)
    pin = project.pin(args.pin)
    if args.fetch:  # the mirror may not exist yet: fetching creates it
        fetch_targets(pin, [t for t, _ in pairs], fetch_mirror(args.mirror), not args.json)
    mirror = paths.mirror_root(args.mirror)

    # Resolve everything first: bad input fails before any work or any output.
    resolved = []
    for target, ref in pairs:
        git_dir, base = target_repo(args.root, pin, target, mirror)
        resolved.append(Resolved(target, ref, git_dir, base, resolve_ref(git_dir, target, ref)))
    gate_plan = plan_gate(args.root, pin, resolved) if args.gate else None
    loaded = {r.target: load_patches(project, r.target, pin.name) for r in resolved}
    progress = stderr_progress(not args.json)

    runs: list[TargetRun] = []
    for r in resolved:
        patches, diffs = loaded[r.target]
        engine = Drift(r.git_dir, r.base, patches, diffs,
                       slug=target_slug(pin.target(r.target).source))
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
        write_atomic(args.markdown, markdown(report) + (gate_markdown(gate_report) if gate_report else ""))
    if args.junit:
        write_atomic(args.junit, junit(report, gate_suites(gate_report) if gate_report else ()))
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


@dataclass(frozen=True)
class GatePlan:
    """What `--gate` checks: the composed plugin tree against core at the drift ref
    when the run includes core (read from git, no checkout), else against the pin
    set's composed core tree."""

    plugin_dir: Path
    core_dir: Path | None = None  # composed core tree
    core_git_dir: Path | None = None  # or core at a commit of its repository
    core_commit: str | None = None
    allowlist: Path | None = None

    def run(self, pin: str):
        from overlay import gate  # the contract gate engineer's library entry points

        allow = self.allowlist if self.allowlist and self.allowlist.is_file() else None
        if self.core_git_dir is not None:
            return gate.run_gate_on_commit(self.core_git_dir, self.core_commit, self.plugin_dir,
                                           allow, pin)
        return gate.run_gate(self.core_dir, self.plugin_dir, allow, pin)


def plan_gate(root: Path, pin: PinSet, resolved: list[Resolved]) -> GatePlan:
    plugin_dir = paths.composed_dir(root, pin.name, "plugin")
    if not plugin_dir.is_dir():
        raise OverlayError(f"--gate needs the composed plugin tree {plugin_dir}",
                           hint=f"compose it first: overlay apply --pin {pin.name}")
    allowlist = root / "gate-allowlist.yaml"
    core = next((r for r in resolved if r.target == "core"), None)
    if core is not None:
        return GatePlan(plugin_dir, None, core.git_dir, core.head, allowlist)
    core_dir = paths.composed_dir(root, pin.name, "core")
    if not core_dir.is_dir():
        raise OverlayError(f"--gate needs the composed core tree {core_dir}, or core in --onto",
                           hint=f"overlay apply --pin {pin.name}, or add core=REF to --onto")
    return GatePlan(plugin_dir, core_dir, allowlist=allowlist)
