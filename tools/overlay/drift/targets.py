"""What drift runs on: the target repositories (mirror or cache), refs, the series as drift
reads it, and what `--gate` checks. Used by `overlay drift`, `overlay rebase` and the
drift benchmark."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from overlay import gitcmd, paths
from overlay.drift.classify import DriftPatch
from overlay.drift.inmem_apply import parse_diff
from overlay.drift.mirror import fetch_heads, mirror_repo, stderr_note
from overlay.errors import OverlayError
from overlay.series.model import GitSource, PinSet, Project
from overlay.series.model import ArchiveSource
from overlay.trees import compose, runlock, sources


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


def import_release(root: Path, src: ArchiveSource, archive: Path, progress) -> str:
    """The import commit of a release archive in the object cache (made once)."""
    with runlock.cache(paths.cache_dir(root), f"importing {archive.name}", progress):
        return sources.obtain_archive_commit(root, src, archive, progress)


def with_objects(view: Path, repo: Path) -> Path:
    """A data view of `view`'s repository that also sees `repo`'s objects (an archive
    import has no history in the mirror: drift reads both through one git directory)."""
    alternates = view / "objects" / "info" / "alternates"
    line = str((repo / "objects").resolve())
    have = alternates.read_text().splitlines() if alternates.is_file() else []
    if line not in have:
        alternates.write_text("".join(f"{x}\n" for x in [*have, line]))
    return view


def carrier_repo(root: Path, pin, target: str, mirror: Path | None, progress) -> tuple[Path, str, Path]:
    """(the repository whose history holds the carrier's pinned base, the base commit, a
    data view of it for drift). A carrier pinned to an archive has no history: its base is
    the import commit in the object cache."""
    src = pin.target(target).source
    if isinstance(src, GitSource):
        git_dir, base = target_repo(root, pin, target, mirror)
        return git_dir, base, gitcmd.data_view(git_dir)
    archive = ((sources.find_archive(mirror / "pypi", src) if mirror else None)
               or sources.find_archive(paths.cache_dir(root) / "archives", src))
    cache = sources.cache_repo(root, src.mirror_name)
    ref = sources.archive_ref(src)
    base = gitcmd.resolve(cache, ref)
    if base is None:
        if archive is None:
            archive = sources.download_archive(src, paths.cache_dir(root) / "archives", progress)
        base = import_release(root, src, archive, progress)
    history = src.history_source
    git_dir = paths.find_mirror_repo(mirror, history.mirror_name) if mirror and history else None
    view = gitcmd.data_view(git_dir) if git_dir is not None else gitcmd.data_view(cache)
    return (git_dir or cache), base, with_objects(view, cache)


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
    if head is None and (git_dir / "shallow").is_file():
        # No mirror: only the tool's object cache, which holds the pinned snapshots alone
        # (shallow fetches). Upstream history is what is missing, not anything of the cache.
        name = git_dir.name.removesuffix(".git")
        raise OverlayError(f"target '{target}': '{ref}' is not known here: without a mirror only "
                           "the pinned commit is at hand, and drift needs upstream's history",
                           hint=f"give a mirror holding {name}: OVERLAY_MIRROR=DIR or --mirror DIR "
                                "(--fetch clones it there)")
    if head is None:
        raise OverlayError(f"target '{target}': '{ref}' is not a commit in {git_dir}",
                           hint="give a branch, tag or commit id that exists there "
                                "(fetch it into the mirror first)")
    return head


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


def new_gate_findings(report, baseline_report) -> list:
    """The report's findings that the baseline's report does not hold (overlay.gate)."""
    from overlay import gate

    return gate.new_findings(report.failing, baseline_report.failing)


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
