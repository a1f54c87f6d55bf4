"""Which core commit broke us: bisect core history with the gate as the test.

Each step gates the plugin against one core commit read straight from the object
database: `ls-tree` for the listing, then only the files the plugin's imports,
overrides and replacements lead to, through one long-lived `git cat-file --batch`.
Nothing is checked out or built. Parsed files are shared between steps by blob id,
so a step after the first mostly re-reads what changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from overlay import gitcmd
from overlay.errors import OverlayError
from overlay.gate.allowlist import Allowlist
from overlay.gate.allowlist import apply as apply_allowlist
from overlay.gate.engine import Cache, gate_sources, top_packages
from overlay.gate.findings import Finding
from overlay.gate.source import CatFile, GitTreeSource, TreeSource

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    commit: str
    broken: bool
    new_findings: int
    core_files_read: int
    seconds: float


@dataclass(frozen=True)
class BisectResult:
    good: str
    bad: str
    first_bad: str | None  # None when BAD has nothing GOOD does not have
    subject: str
    findings: tuple[Finding, ...]  # what the first bad commit breaks (absent at GOOD)
    steps: tuple[Step, ...]
    candidates: int  # commits between GOOD (excluded) and BAD (included), first-parent
    seconds: float
    # breaks at BAD that the first bad commit did not introduce: later commits broke
    # more, found by bisecting again from the first bad commit
    later: tuple[Finding, ...] = ()

    def to_dict(self) -> dict:
        return {"good": self.good, "bad": self.bad, "first_bad": self.first_bad,
                "subject": self.subject, "candidates": self.candidates,
                "seconds": round(self.seconds, 3),
                "findings": [f.to_dict() for f in self.findings],
                "later_findings": [f.to_dict() for f in self.later],
                "steps": [{"commit": s.commit, "broken": s.broken, "new_findings": s.new_findings,
                           "core_files_read": s.core_files_read, "seconds": round(s.seconds, 3)}
                          for s in self.steps]}


def parse_range(spec: str) -> tuple[str, str]:
    """`core=GOOD..BAD` (or `GOOD..BAD`) -> (GOOD, BAD)."""
    target, eq, rng = spec.partition("=")
    if not eq:
        target, rng = "core", spec
    if target != "core":
        raise OverlayError(f"can only bisect the core target, not '{target}'",
                           hint="use --bisect core=GOOD..BAD")
    good, sep, bad = rng.partition("..")
    if not sep or not good or not bad or bad.startswith("."):
        raise OverlayError(f"bad bisect range '{spec}'", hint="use --bisect core=GOOD..BAD")
    return good, bad


def _key(f: Finding) -> tuple[str, str, str]:
    return (f.kind, f.symbol, f.plugin_path)


def bisect_core(git_dir: Path, good: str, bad: str, plugin: TreeSource, *,
                prefix: str = "", allowlist: Allowlist | None = None, pin: str | None = None,
                version: str | None = None, progress: Progress | None = None) -> BisectResult:
    started = time.perf_counter()
    if not ((git_dir / "objects").is_dir() or (git_dir / "commondir").is_file()):
        raise OverlayError("not a git directory", path=str(git_dir),
                           hint="pass the core repository's git directory (--core-repo)")
    good_sha = gitcmd.resolve(git_dir, good)
    bad_sha = gitcmd.resolve(git_dir, bad)
    for name, sha in ((good, good_sha), (bad, bad_sha)):
        if sha is None:
            raise OverlayError(f"unknown core revision '{name}'", path=str(git_dir),
                               hint="use a commit, tag or branch present in that repository")
    assert good_sha is not None and bad_sha is not None
    if gitcmd.git(["merge-base", "--is-ancestor", "--end-of-options", good_sha, bad_sha],
                  git_dir=git_dir, check=False, data=True).returncode != 0:
        raise OverlayError(f"{good} is not an ancestor of {bad}", path=str(git_dir),
                           hint="swap them, or pick a GOOD commit on BAD's history")
    listing = gitcmd.out(["rev-list", "--first-parent", "--reverse", "--end-of-options",
                          f"{good_sha}..{bad_sha}"],
                         git_dir=git_dir, data=True)
    commits = listing.split()
    if not commits:
        raise OverlayError(f"no commits in {good}..{bad}", path=str(git_dir),
                           hint="GOOD must be an ancestor of BAD")
    cache = Cache()
    plugin_packages = top_packages(plugin)
    steps: list[Step] = []

    with CatFile(git_dir) as cat:
        def run(commit: str) -> tuple[tuple[Finding, ...], int, float]:
            src = GitTreeSource(cat, commit, prefix)
            raw = gate_sources(src, plugin, version=version, cache=cache,
                               plugin_packages=plugin_packages)
            reported, _, _ = apply_allowlist(raw.findings, allowlist, pin)
            # a commit is bad when it adds an error (what fails the gate), not a warning
            return tuple(f for f in reported if f.severity == "error"), len(raw.core_files_read), raw.seconds

        baseline, files, secs = run(good_sha)
        steps.append(Step(good_sha, False, 0, files, secs))
        known = {_key(f) for f in baseline}

        def test(commit: str) -> tuple[bool, tuple[Finding, ...]]:
            found, files, secs = run(commit)
            new = tuple(f for f in found if _key(f) not in known)
            steps.append(Step(commit, bool(new), len(new), files, secs))
            if progress:
                progress(f"{commit[:12]}: {'broken' if new else 'good'} ({len(new)} new finding(s))")
            return bool(new), new

        bad_broken, bad_new = test(bad_sha)
        if not bad_broken:
            return BisectResult(good_sha, bad_sha, None, "", (), tuple(steps), len(commits),
                                time.perf_counter() - started)
        lo, hi = 0, len(commits) - 1  # commits[hi] is known broken
        first_new = bad_new
        while lo < hi:
            mid = (lo + hi) // 2
            broken, new = test(commits[mid])
            if broken:
                hi, first_new = mid, new
            else:
                lo = mid + 1
        first = commits[hi]
    subject = gitcmd.out(["log", "-1", "--format=%s", "--end-of-options", first], git_dir=git_dir,
                         data=True)
    introduced = {_key(f) for f in first_new}
    later = tuple(f for f in bad_new if _key(f) not in introduced)
    return BisectResult(good_sha, bad_sha, first, subject, first_new, tuple(steps), len(commits),
                        time.perf_counter() - started, later)


def render(result: BisectResult) -> str:
    lines = [f"bisect: {result.candidates} core commit(s) in {result.good[:12]}..{result.bad[:12]}, "
             f"{len(result.steps)} gate run(s), {result.seconds:.1f}s"]
    if result.first_bad is None:
        lines.append("BAD has no contract break that GOOD does not have: nothing to bisect")
        return "\n".join(lines) + "\n"
    lines.append(f"first bad core commit: {result.first_bad} {result.subject}")
    for f in result.findings:
        lines.append(f"  {f.kind}: {f.location()}: {f.message}")
    if result.later:
        first = result.first_bad[:12]
        lines.append(f"{len(result.later)} more finding(s) appear later (at BAD, not introduced by {first}): "
                     f"run --bisect again from {first}: --bisect core={first}..{result.bad[:12]}")
        for f in result.later:
            lines.append(f"  later: {f.kind}: {f.location()}")
    return "\n".join(lines) + "\n"
