"""`overlay gate`: thin command-line handler over overlay.gate."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
import re
import sys
from pathlib import Path

from overlay import paths, reporting
from overlay.reporting import table
from overlay.errors import OverlayError
from overlay.gate import report as render
from overlay.gate import run_gate
from overlay.gate.allowlist import load as load_allowlist
from overlay.gate.findings import SEVERITIES
from overlay.reporting.files import write_report

EXIT_FINDINGS = 1


def register(sub) -> None:
    p = sub.add_parser(
        "gate", help="check the plugin against core's API statically (imports, overrides, replacements)",
        description="Contract gate: every name the plugin imports from core exists there, and every "
                    "plugin override or monkeypatched replacement of a core callable accepts what "
                    "core passes to it. Findings are errors (core reaches the break), warnings or info; "
                    "exit 0: no errors; 1: errors (see --fail-on); 2: bad input.")
    trees = p.add_argument_group("trees (either --pin, or --core and --plugin)")
    trees.add_argument("--pin", default=None, metavar="NAME",
                       help="gate the composed trees of this pin set (build/<pin>/core and /plugin); "
                            "the default pin set when no trees are named")
    trees.add_argument("--into", type=Path, default=None, metavar="DIR",
                       help="where composed trees live (default: <root>/build)")
    trees.add_argument("--core", type=Path, default=None, metavar="DIR", help="a core source tree")
    trees.add_argument("--plugin", type=Path, default=None, metavar="DIR", help="a plugin source tree")
    p.add_argument("--allowlist", type=Path, default=None, metavar="FILE",
                   help="accepted findings (reason + expiry each); default: <root>/gate-allowlist.yaml if present")
    p.add_argument("--core-version", default=None, metavar="X.Y.Z",
                   help="core release version for vllm_version_is() when the tree does not record it")
    p.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="lowest severity that makes the exit status 1 (default: error)")
    p.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    p.add_argument("--junit", type=Path, default=None, metavar="FILE", help="also write a JUnit XML report")
    p.add_argument("-v", "--verbose", action="store_true", help="show symbols and accepted findings")
    p.add_argument("--bisect", default=None, metavar="core=GOOD..BAD",
                   help="find the first core commit whose API breaks the plugin (exit 1 when one is found)")
    p.add_argument("--core-repo", type=Path, default=None, metavar="GITDIR",
                   help="core git repository for --bisect: a bare repository or a work tree "
                        "(default: the pin's core source, via mirror/cache)")
    p.add_argument("--core-prefix", default="", metavar="PATH",
                   help="folder inside the core repository that holds the package (default: its root)")
    p.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                   help="local upstream mirror (default: $OVERLAY_MIRROR)")
    p.add_argument("--against", default=None, metavar="vllm==X,...",
                   help="forward view: gate the plugin against each of these core releases (source "
                        "archives from the mirror's pypi/, the cache or the package index) and print "
                        "one line per release; the pin's own core (or --core) is the base line")
    p.add_argument("--compose", action="store_true",
                   help="first compose the pin set from the series as it is in the work tree (what "
                        "a commit holds: pre-commit stashes what is not staged) into "
                        ".overlay/gate-compose/, and gate that, not build/ (the pre-commit hook)")
    p.add_argument("--baseline", choices=("declared",), default=None,
                   help="count only new findings: those that upstream's own plugin at the pin (without "
                        "the series), gated against the core release it declares, does not already have "
                        "(needs --pin; the mirror or cache for the upstream trees)")
    p.add_argument("--engine", choices=("hand", "checker", "both"), default="hand",
                   help="hand: the gate's own checks (default); checker: the type checker (mypy, the `gate` "
                        "extra) run against the declared core and this one, new diagnostics only, each a "
                        "forecast warning unless the hand gate agrees; both: the two combined (agreement is "
                        "an error)")
    p.add_argument("--declared-core", type=Path, default=None, metavar="DIR",
                   help="for --engine checker|both: the core tree the plugin declares (default: the release "
                        "named by the plugin's .github/vllm-release-tag.commit, from the mirror or cache)")
    p.set_defaults(func=cmd_gate)


def _allowlist(args: argparse.Namespace):
    """(allowlist or None, whether it was named on the command line)."""
    if args.allowlist is not None:
        if not args.allowlist.is_file():
            raise OverlayError("allowlist not found", path=str(args.allowlist))
        return load_allowlist(args.allowlist), True
    default = default_allowlist(Path(args.root))
    return (load_allowlist(default) if default is not None else None), False


def project_root(root: Path) -> Path | None:
    """The overlay project whose allowlist applies: `root` when it is one (found upward
    from the working directory, or --root/OVERLAY_ROOT), else the project this tool is
    installed from. The same command then gives the same answer from any folder."""
    for candidate in (root, Path(__file__).resolve().parents[3]):
        if (candidate / "series.yaml").is_file():
            return candidate
    return None


def default_allowlist(root: Path) -> Path | None:
    project = project_root(root)
    path = project / "gate-allowlist.yaml" if project is not None else None
    return path if path is not None and path.is_file() else None


# PEP 440 release versions as vLLM publishes them: 0.25.0, 0.11.0rc1, 0.9.2.dev3+g1a2b, v0.23.0
VERSION = re.compile(r"v?\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[0-9A-Za-z.]+)?")


def _core_version(value: str | None) -> str | None:
    if value is not None and not VERSION.fullmatch(value.strip()):
        raise OverlayError(f"bad --core-version '{value}'", hint="give a release version such as 0.25.0")
    return value.strip() if value is not None else None


def _pin_name(root: Path, wanted: str) -> str:
    from overlay.series.model import resolve_pin_name
    return resolve_pin_name(root, wanted)


def _trees(args: argparse.Namespace) -> tuple[Path | None, Path, str | None]:
    """(core dir or None for bisect, plugin dir, pin name)."""
    if args.pin and (args.core or args.plugin):
        raise OverlayError("give either --pin or --core/--plugin, not both")
    if args.pin or (args.core is None and args.plugin is None):
        pin = _pin_name(args.root, args.pin)  # no trees named: the default pin set
        core = paths.composed_dir(args.root, pin, "core", args.into)
        plugin = paths.composed_dir(args.root, pin, "plugin", args.into)
        for path, role in ((core, "core"), (plugin, "plugin")):
            if not path.is_dir() and not (role == "core" and args.bisect):
                raise OverlayError(f"no composed {role} tree for pin set {pin}", path=str(path),
                                   hint=f"run `overlay apply --pin {pin}` first")
        return core, plugin, pin
    if args.plugin is None or (args.core is None and not args.bisect):
        raise OverlayError("nothing to gate", hint="use --pin NAME, or --core DIR --plugin DIR")
    return args.core, args.plugin, None


def _emit(report, args: argparse.Namespace) -> int:
    if args.junit is not None:
        write_report(args.junit, render.to_junit(report), "--junit")
    sys.stdout.write(render.to_json(report) if args.json else render.text(report, args.verbose))
    return 0 if report.ok else EXIT_FINDINGS


def _progress(args: argparse.Namespace):
    """One line per phase on a terminal (stderr); nothing with --json or when piped."""
    return reporting.progress("gate", quiet=args.json)


def _store(args: argparse.Namespace) -> Path:
    return paths.cache_dir(Path(args.root)) / "gate"


def _compose_first(args: argparse.Namespace) -> None:
    """`--compose`: the pin set composed from the work tree's series into a folder of the
    gate's own (replaced each time), which the gate then reads instead of build/."""
    from overlay.series.model import Project
    from overlay.trees import compose

    if args.core or args.plugin or args.into:
        raise OverlayError("--compose composes the pin set itself: give --pin, not trees or --into")
    project = Project.load(Path(args.root))
    pin = project.pin(args.pin)
    args.pin, args.into = pin.name, Path(args.root) / ".overlay" / "gate-compose"
    compose.compose(project, pin, targets=None, into=args.into, mirror=paths.mirror_root(args.mirror),
                    force=True, report=lambda _line: None, progress=_progress(args))


def cmd_gate(args: argparse.Namespace) -> int:
    args.core_version = _core_version(args.core_version)
    if args.engine != "hand":
        from overlay.gate import checker
        checker.require()  # one line before any work when it is not installed
        if args.against is not None or args.bisect:
            raise OverlayError(f"--engine {args.engine} does not combine with --against or --bisect",
                               hint="gate one core at a time (--core/--plugin or --pin), or use --engine hand")
    if args.against is not None:
        return _cmd_forward(args)
    if args.compose:
        _compose_first(args)
    core, plugin, pin = _trees(args)
    allow, named = _allowlist(args)
    if args.bisect:
        return _cmd_bisect(args, plugin, pin, allow)
    assert core is not None
    # The project's default allowlist is about its pin sets: on other trees an entry
    # that matches nothing is expected, not stale.
    report = run_gate(core, plugin, allow, pin, core_version=args.core_version,
                      note_unused=named or pin is not None, store_root=_store(args), progress=_progress(args))
    report = replace(report, fail_on=args.fail_on)
    if args.baseline == "declared":
        if pin is None:
            raise OverlayError("--baseline declared needs --pin (the pin's upstream plugin is the baseline)")
        report = _against_declared(args, report, core, pin, allow)
    if args.engine != "hand":
        report = _with_checker(args, report, core, plugin)
    return _emit(report, args)


def _with_checker(args: argparse.Namespace, report, core: Path, plugin: Path):
    """The report with the checker engine's findings (`--engine checker|both`)."""
    from overlay.gate import add_checker
    from overlay.gate.conditions import core_version
    from overlay.gate.index import TreeIndex
    from overlay.gate.source import DirSource
    from overlay.trees import baseline_trees

    if args.declared_core is not None:
        declared_dir = args.declared_core
        if not declared_dir.is_dir():
            raise OverlayError("declared core tree not found", path=str(declared_dir))
        declared = core_version(TreeIndex(DirSource(declared_dir.resolve()), {}))
    else:
        declared = baseline_trees.declared_release(Path(plugin))
        if declared is None:
            raise OverlayError("the plugin declares no core release (.github/vllm-release-tag.commit, Dockerfile VLLM_TAG)",
                               path=str(plugin), hint="name the declared core with --declared-core DIR")
        from overlay.trees import sources
        declared_dir = sources.release_tree(Path(args.root), paths.mirror_root(args.mirror), "vllm", declared,
                                            _progress(args))
    return add_checker(report, core, plugin, declared_dir, declared, args.engine, _progress(args))


def _against_declared(args: argparse.Namespace, report, core: Path, pin: str, allow):
    """The report without the findings upstream's own pairing already has: the pin's
    plugin as upstream ships it, against the core release it declares."""
    from overlay.gate.baseline import new_findings
    from overlay.trees import baseline_trees

    mirror = paths.mirror_root(args.mirror)
    with baseline_trees.declared_pairing(Path(args.root), pin, core, mirror, _progress(args)) as (plugin_dir, core_dir, said):
        base = run_gate(core_dir, plugin_dir, allow, pin, note_unused=False, store_root=_store(args),
                        progress=_progress(args))
    base = replace(base, fail_on=args.fail_on)
    new = {id(f) for f in new_findings(report.failing, base.failing)}
    kept = tuple(f for f in report.findings if f not in report.failing or id(f) in new)
    dropped = len(report.findings) - len(kept)
    return replace(report, findings=kept,
                   notes=report.notes + (f"baseline: {said}; {dropped} finding(s) it already has are not counted",))


def _cmd_forward(args: argparse.Namespace) -> int:
    """The forward view: a forecast, so it exits 0 whatever it finds (2 on bad input)."""
    from overlay.gate import forward
    from overlay.gate.engine import Cache, collector_paused

    releases = forward.parse_against(args.against)
    if args.bisect:
        raise OverlayError("--against and --bisect do not combine")
    if args.plugin is not None and args.pin is None:
        plugin, base, pin = args.plugin, args.core, None
    else:
        base, plugin, pin = _trees(args)
    allow, _ = _allowlist(args)
    progress = _progress(args)
    mirror = paths.mirror_root(args.mirror)
    cache = Cache()
    rows = []
    cores = ([("base", base)] if base is not None else []) + \
        [(f"{v}", None) for _, v in releases]
    with collector_paused():  # one pause for all the releases sharing `cache`
        for (label, core_dir), spec in zip(cores, ([None] if base is not None else []) + releases):
            if core_dir is None:
                name, version = spec  # type: ignore[misc]
                core_dir = forward.release_tree(Path(args.root), mirror, name, version, progress)
            if progress:
                progress(f"forward view: {label}")
            report = run_gate(core_dir, plugin, allow, pin, core_version=None, note_unused=False,
                              store_root=_store(args), progress=progress, cache=cache)
            shown = report.core_version or label if label == "base" else label
            rows.append(forward.row(shown, report, base=label == "base"))
    if args.json:
        sys.stdout.write(json.dumps({"plugin": str(plugin), "releases": [r.to_dict() for r in rows]},
                                    indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(forward.render(str(plugin), rows, table.terminal_width()))
    return 0


def git_dir_of(path: Path) -> Path:
    """The git directory for --core-repo: a bare repository, or a work tree's `.git`
    (a folder, or a file `gitdir: ...` as in linked work trees and submodules)."""
    dot = path / ".git"
    if dot.is_dir():
        return dot.resolve()
    if dot.is_file():
        text = dot.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            return (path / text[len("gitdir:"):].strip()).resolve()
    return path.resolve()


def _core_repo(args: argparse.Namespace, pin: str | None) -> Path:
    if args.core_repo is not None:
        return git_dir_of(args.core_repo)
    if pin is None:
        raise OverlayError("--bisect needs the core's git history",
                           hint="pass --core-repo GITDIR, or --pin NAME to use the pin's core source")
    from overlay.trees import sources
    from overlay.series.model import GitSource, load_pin
    target = load_pin(args.root, pin).target("core")
    if not isinstance(target.source, GitSource):
        raise OverlayError(f"pin set {pin}'s core is a source archive, which has no history to bisect",
                           hint="pass --core-repo GITDIR with the core's git history")
    return sources.obtain(args.root, target, paths.mirror_root(args.mirror)).git_dir


def _cmd_bisect(args: argparse.Namespace, plugin: Path, pin: str | None, allow) -> int:
    from overlay.gate.bisect import bisect_core, parse_range
    from overlay.gate.bisect import render as render_bisect
    from overlay.gate.source import DirSource

    good, bad = parse_range(args.bisect)
    if not Path(plugin).is_dir():
        raise OverlayError("plugin tree not found", path=str(plugin))
    git_dir = _core_repo(args, pin)
    progress = _progress(args)
    result = bisect_core(git_dir, good, bad, DirSource(Path(plugin).resolve()),
                         prefix=args.core_prefix, allowlist=allow, pin=pin,
                         version=args.core_version, progress=progress)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_bisect(result))
    return 0 if result.first_bad is None else EXIT_FINDINGS


def gate_after_apply(root: Path, pin: str, into: Path | None, *, json_mode: bool = False) -> int:
    """Run the gate on freshly composed trees (`overlay apply --gate`); returns the exit code.

    With `json_mode` stdout belongs to the caller's JSON document: the gate then says
    nothing there and writes a one-line summary to stderr only when it finds something.
    """
    core = paths.composed_dir(root, pin, "core", into)
    plugin = paths.composed_dir(root, pin, "plugin", into)
    default = default_allowlist(Path(root))
    allow = load_allowlist(default) if default is not None else None
    report = run_gate(core, plugin, allow, pin, progress=reporting.progress("gate", quiet=json_mode))
    if json_mode:
        if not report.ok:
            print(f"overlay: gate: {len(report.failing)} contract break(s); run `overlay gate --pin {pin}`",
                  file=sys.stderr)
    else:
        sys.stdout.write(render.text(report))
    return 0 if report.ok else EXIT_FINDINGS
