"""Contract gate: catch core/plugin API mismatches statically, before any hardware.

Library entry point for other subsystems (`overlay apply --gate`, `overlay drift --gate`):

    from overlay.gate import run_gate
    report = run_gate(core_dir, plugin_dir, allowlist=None, pin=None)
    report.ok          # True when nothing (unaccepted) was found
    report.findings    # tuple[Finding] with kind, plugin/core file:line, message

May import: the foundation, overlay.series, overlay.trees and
overlay.testing; no other subsystem. The command is overlay.commands.gate.
"""

from __future__ import annotations

from pathlib import Path

from overlay.errors import OverlayError
from overlay.gate.baseline import new_findings
from overlay.gate.allowlist import Allowlist
from overlay.gate.allowlist import apply as apply_allowlist
from overlay.gate.allowlist import load as load_allowlist
from overlay.gate.engine import Cache, RawResult, gate_sources, top_packages
from overlay.gate.findings import Finding, GateReport, Suppressed
from overlay.gate.source import DirSource, TreeSource

__all__ = ["run_gate", "run_gate_on_commit", "add_checker", "report_from", "new_findings", "GateReport", "Finding", "Suppressed", "Allowlist",
           "load_allowlist"]


def _tree(path: Path, role: str) -> DirSource:
    if not Path(path).is_dir():
        raise OverlayError(f"{role} tree not found", path=str(path),
                           hint=f"pass an existing directory (--{role} DIR) or compose it first (overlay apply)")
    src = DirSource(Path(path).resolve())
    if not top_packages(src):
        raise OverlayError(f"no Python package in the {role} tree", path=str(path),
                           hint="point at the repository root, which holds the package directory")
    return src


def report_from(raw: RawResult, core: TreeSource, plugin: TreeSource,
                allowlist: Allowlist | None, pin: str | None, note_unused: bool = True) -> GateReport:
    reported, suppressed, notes = apply_allowlist(raw.findings, allowlist, pin, note_unused=note_unused)
    stats = {"plugin_files": raw.plugin_files, "core_files_read": len(raw.core_files_read),
             "seconds": round(raw.seconds, 3), "cached": raw.cached}
    return GateReport(core=core.label(), plugin=plugin.label(), core_version=raw.core_version,
                      findings=reported, suppressed=suppressed, notes=raw.notes + notes, stats=stats,
                      loaded=getattr(raw, "loaded", None))


def run_gate(core_dir: Path, plugin_dir: Path, allowlist: Path | Allowlist | None = None,
             pin: str | None = None, *, core_version: str | None = None,
             note_unused: bool = True, store_root: Path | None = None, progress=None,
             cache: Cache | None = None) -> GateReport:
    """Gate the plugin tree at `plugin_dir` against the core tree at `core_dir`.

    `allowlist`: a file path or a loaded Allowlist (accepted findings); `pin`: the pin
    set being gated (allowlist entries may be limited to pins); `core_version`: the
    core release version for `vllm_version_is(...)` conditions when the tree does not
    say (a git checkout has no generated `_version.py`); `note_unused`: add a note for
    allowlist entries that matched nothing; `store_root`: the on-disk index cache
    (the CLI passes `<cache>/gate`); `progress`: a callable for one line per phase;
    `cache`: an in-process Cache shared between runs (the forward view passes one for
    all its cores). Raises OverlayError for bad input (also a
    core tree that holds no package the plugin imports); findings never raise.
    """
    core = _tree(Path(core_dir), "core")
    plugin = _tree(Path(plugin_dir), "plugin")
    allow = load_allowlist(Path(allowlist)) if isinstance(allowlist, (str, Path)) else allowlist
    raw = gate_sources(core, plugin, version=core_version, cache=cache or Cache(), store_root=store_root,
                       progress=progress)
    return report_from(raw, core, plugin, allow, pin, note_unused)


def add_checker(report: GateReport, core_dir: Path, plugin_dir: Path, declared_dir: Path,
                declared_version: str | None, engine: str = "both", progress=None,
                cache: Cache | None = None) -> GateReport:
    """`report` (the hand gate's, on these trees) with the checker engine's findings:
    the plugin type-checked against the declared core (`declared_dir`, release
    `declared_version`) and against `core_dir`; only new diagnostics count. `engine`:
    "both" keeps the hand gate's findings too, "checker" only what the checker found
    (confirmed or not). See engines.py for how they combine. A forecast is confirmed
    (an error) only with the hand gate's evidence that its line runs (liveness.judge_sites,
    which indexes both trees again unless `cache` holds them from the hand run)."""
    from dataclasses import replace

    from overlay.gate import checker, engines
    from overlay.gate.liveness import judge_sites

    version = checker.require()
    plugin = _tree(Path(plugin_dir), "plugin")
    _tree(Path(core_dir), "core")
    _tree(Path(declared_dir), "declared core")
    packages = top_packages(plugin)
    core = top_packages(DirSource(Path(core_dir).resolve())) - packages
    new = checker.check(Path(core_dir), plugin, packages, report.core_version, progress, core)
    old = checker.check(Path(declared_dir), plugin, packages, declared_version, progress, core)
    fresh = checker.new_diagnostics(new.diagnostics, old.diagnostics)
    found = engines.to_findings(fresh, report.core_version or str(core_dir))
    shapes = engines.PluginShapes(plugin, checker.plugin_files(plugin, packages))
    runs = judge_sites(DirSource(Path(core_dir).resolve()), plugin, engines.confirm_sites(found, shapes),
                       version=report.core_version, cache=cache, progress=progress,
                       names=engines.quoted_names(found), missing=engines.missing_on(found),
                       called=engines.called_on(found))
    combined = engines.combine(report.findings, found, shapes, report.loaded, keep_hand_only=engine == "both",
                               runs=runs)
    stats = dict(report.stats, checker=f"{checker.CHECKER} {version}", checker_seconds=round(new.seconds + old.seconds, 3),
                 checker_new=len(fresh), checker_declared=declared_version, clusters=len(engines.clusters(combined)),
                 checker_confirmed=sum(1 for f in combined if f.engine == "checker" and f.severity == "error"))
    notes = report.notes + tuple(f"plugin file {path} does not parse: the checker left it out"
                                 for path in new.unparsed)
    if version != checker.PIN:
        notes += (f"the checker is {checker.CHECKER} {version}, not the pinned {checker.PIN}: its messages may differ",)
    if declared_version and declared_version == report.core_version:
        notes += (f"the core under test is the declared release {declared_version}: the checker finds nothing new",)
    return replace(report, findings=tuple(combined), stats=stats, notes=notes)


def run_gate_on_commit(core_git_dir: Path, commit: str, plugin_dir: Path,
                       allowlist: Path | Allowlist | None = None, pin: str | None = None, *,
                       prefix: str = "", core_version: str | None = None) -> GateReport:
    """Gate `plugin_dir` against core as of `commit` in the git directory `core_git_dir`,
    read from the object database (no checkout). `prefix`: the folder holding the
    package inside that repository, if not its root. For `overlay drift --gate`."""
    from overlay import gitcmd
    from overlay.gate.source import CatFile, GitTreeSource

    plugin = _tree(Path(plugin_dir), "plugin")
    sha = gitcmd.resolve(Path(core_git_dir), commit)
    if sha is None:
        raise OverlayError(f"unknown core revision '{commit}'", path=str(core_git_dir))
    allow = load_allowlist(Path(allowlist)) if isinstance(allowlist, (str, Path)) else allowlist
    with CatFile(Path(core_git_dir)) as cat:
        core = GitTreeSource(cat, sha, prefix)
        raw = gate_sources(core, plugin, version=core_version, cache=Cache())
        return report_from(raw, core, plugin, allow, pin)
